//! The function graph tracer's events as trace-cmd prints them (its own handlers in
//! trace-ftrace.c, not a plugin): `funcgraph_entry` as `func() {`, or, when the record after
//! it in the file's time order is its return (same pid, same function), as the one line
//! `func();` with the call's duration, that return then not printed on its own;
//! `funcgraph_exit` as `}` with the duration. Durations carry trace-cmd's overhead marks
//! (`+` over 10 us, `!` 100 us, `#` 1 ms, `$` 1 s).

use crate::bytes::Endian;
use crate::event_format::EventFormat;
use crate::print_fmt::plugins::{common_field, get_field, Printed};
use crate::print_fmt::{cfmt, TextFormatter};

/// `print_graph_overhead`: two columns marking a long call (None: no duration).
fn overhead(duration: Option<u64>, out: &mut Vec<u8>) {
    out.extend_from_slice(match duration {
        Some(d) if d > 1_000_000_000 => b"$ ",
        Some(d) if d > 1_000_000 => b"# ",
        Some(d) if d > 100_000 => b"! ",
        Some(d) if d > 10_000 => b"+ ",
        _ => b"  ",
    });
}

/// `print_graph_duration`: microseconds with three decimals while they fit 7 columns,
/// ` us `, padding to 7, and the `|` column.
fn duration(d: u64, out: &mut Vec<u8>) {
    let start = out.len();
    cfmt::write_dec(d / 1000, out);
    if out.len() - start < 7 {
        out.push(b'.');
        cfmt::write_dec_padded(d % 1000, 3, true, out);
    }
    let len = out.len() - start;
    out.extend_from_slice(b" us ");
    out.resize(out.len() + 7usize.saturating_sub(len), b' ');
    out.extend_from_slice(b"|  ");
}

/// Two spaces per level of `depth`, as trace-cmd counts them (an int).
fn indent(depth: u64, out: &mut Vec<u8>) {
    let n = (depth.wrapping_mul(2) as i32).max(0) as usize;
    out.resize(out.len() + n, b' ');
}

impl TextFormatter<'_> {
    /// The function's name, or its address in hex.
    fn graph_func(&self, addr: u64, out: &mut Vec<u8>) {
        match self.syms.funcs().find(addr) {
            Some((name, _)) => out.extend_from_slice(name),
            None => cfmt::write_hex(addr, out),
        }
    }

    /// Whether `next` (the record after the funcgraph_entry `entry` in the file's time
    /// order) is its return: then it belongs on the entry's line, and is not printed alone.
    pub fn is_leaf_return(&self, entry: &[u8], next_id: u32, next: &[u8], e: Endian) -> bool {
        let (Some(ent), Some(ret)) = (self.graph.entry, self.graph.exit) else {
            return false;
        };
        if next_id != ret {
            return false;
        }
        let (Some(ent), Some(ret)) = (self.trace.events.get(ent), self.trace.events.get(ret))
        else {
            return false;
        };
        let mut sink = Vec::new();
        let pid = |fmt: &EventFormat, p: &[u8], sink: &mut Vec<u8>| {
            common_field(fmt, "common_pid", p, e, sink)
        };
        let (Some(a), Some(b)) = (pid(ent, entry, &mut sink), pid(ret, next, &mut sink)) else {
            return false;
        };
        // trace-cmd compares the entry's pid as an int with the return's as read.
        if a as u32 as i32 as i64 as u64 != b {
            return false;
        }
        let f1 = get_field(ent, "func", entry, e, false, &mut sink);
        let f2 = get_field(ret, "func", next, e, false, &mut sink);
        f1.is_some() && f1 == f2
    }

    /// The return record the next funcgraph_entry line folds in (None: a nested entry).
    pub fn set_leaf_return(&mut self, ret: Option<&[u8]>) {
        self.graph.leaf.clear();
        self.graph.has_leaf = ret.is_some();
        if let Some(r) = ret {
            self.graph.leaf.extend_from_slice(r);
        }
    }

    /// Whether records of `id` need the record after them to print: funcgraph_entry's.
    pub fn needs_next(&self, id: u32) -> bool {
        self.graph.entry == Some(id) && self.graph.exit.is_some()
    }

    pub(super) fn graph_entry(
        &mut self,
        fmt: &EventFormat,
        p: &[u8],
        e: Endian,
        out: &mut Vec<u8>,
    ) -> Printed {
        let leaf = std::mem::take(&mut self.graph.has_leaf);
        let Some(ret) = self.graph.exit.and_then(|id| self.trace.events.get(id)) else {
            return Printed::ThenPrintFmt;
        };
        let bang = |out: &mut Vec<u8>| {
            out.push(b'!');
            Printed::ThenPrintFmt
        };
        if common_field(fmt, "common_pid", p, e, out).is_none() {
            return bang(out);
        }
        let Some(func) = get_field(fmt, "func", p, e, true, out) else {
            return bang(out);
        };
        if leaf {
            let r = std::mem::take(&mut self.graph.leaf);
            let times = (
                get_field(ret, "rettime", &r, e, true, out),
                get_field(ret, "calltime", &r, e, true, out),
            );
            self.graph.leaf = r;
            let (Some(rettime), Some(calltime)) = times else {
                return bang(out);
            };
            let d = rettime.wrapping_sub(calltime);
            overhead(Some(d), out);
            duration(d, out);
            let Some(depth) = get_field(fmt, "depth", p, e, true, out) else {
                return bang(out);
            };
            indent(depth, out);
            self.graph_func(func, out);
            out.extend_from_slice(b"();");
        } else {
            overhead(None, out);
            out.extend_from_slice(b"           |  ");
            let Some(depth) = get_field(fmt, "depth", p, e, true, out) else {
                return bang(out);
            };
            indent(depth, out);
            self.graph_func(func, out);
            out.extend_from_slice(b"() {");
        }
        Printed::All
    }

    pub(super) fn graph_exit(
        &mut self,
        fmt: &EventFormat,
        p: &[u8],
        e: Endian,
        out: &mut Vec<u8>,
    ) -> Printed {
        if self.graph.exit.is_none() {
            return Printed::ThenPrintFmt;
        }
        let run = |out: &mut Vec<u8>| -> Option<()> {
            let rettime = get_field(fmt, "rettime", p, e, true, out)?;
            let calltime = get_field(fmt, "calltime", p, e, true, out)?;
            let d = rettime.wrapping_sub(calltime);
            overhead(Some(d), out);
            duration(d, out);
            indent(get_field(fmt, "depth", p, e, true, out)?, out);
            out.push(b'}');
            Some(())
        };
        match run(out) {
            Some(()) => Printed::All,
            None => {
                out.push(b'!');
                Printed::ThenPrintFmt
            }
        }
    }
}

/// The ids of the function graph events, and the return folded into the entry being printed.
#[derive(Debug, Default)]
pub(super) struct Graph {
    pub entry: Option<u32>,
    pub exit: Option<u32>,
    pub leaf: Vec<u8>,
    pub has_leaf: bool,
}

impl Graph {
    pub fn of(trace: &crate::trace::Trace) -> Graph {
        Graph {
            entry: trace.events.find("ftrace:funcgraph_entry").map(|f| f.id),
            exit: trace.events.find("ftrace:funcgraph_exit").map(|f| f.id),
            ..Graph::default()
        }
    }
}
