//! Events as text, the way `trace-cmd report` prints them: each event's `print fmt:`
//! evaluated against the record (libtraceevent's rules), the plugins trace-cmd loads by
//! default for `sched_switch`, `sched_wakeup`, kmem and hrtimer events and `function`,
//! `bprint` through the trace's printk formats, and the `comm-pid [cpu] time: name:` line.
//!
//! A print fmt is parsed once, the first time its event is printed. Printing writes into the
//! caller's buffer and allocates only for `bprint` formats not seen before.
//!
//! Where a format uses something this module does not evaluate, [`TextFormatter::write_line`]
//! prints the event's raw fields instead (as `trace-cmd report -R` would) and counts the
//! event in [`TextFormatter::unsupported`], so a caller can say so: never a guessed message.

pub mod cfmt;
mod eval;
mod fgraph;
mod kvm;
mod ops;
pub use ops::MAX_DEPTH;
pub mod parse;
mod plugins;
mod print_funcs;
mod program;
pub mod symbols;

use std::cell::{Cell, OnceCell};
use std::collections::{BTreeMap, HashMap};

use crate::bytes::Endian;
use crate::event_format::EventFormat;
use crate::page::Lost;
use crate::trace::Trace;
use crate::value::PrintSpec;

use eval::{Arg, Eval};
use parse::{Ctx, Expr, FmtError, Piece};
use program::Program;
use symbols::{FuncMap, PrintkMap};

/// The trace's kernel symbols and printk formats, parsed on first use.
#[derive(Debug, Default)]
pub struct Symbols {
    kallsyms: Option<Vec<u8>>,
    printk_text: Option<Vec<u8>>,
    funcs: OnceCell<FuncMap>,
    printk: OnceCell<PrintkMap>,
}

impl Symbols {
    pub fn new(kallsyms: Option<&[u8]>, printk: Option<&[u8]>) -> Symbols {
        Symbols {
            kallsyms: kallsyms.map(<[u8]>::to_vec),
            printk_text: printk.map(<[u8]>::to_vec),
            ..Symbols::default()
        }
    }

    pub fn funcs(&self) -> &FuncMap {
        self.funcs
            .get_or_init(|| FuncMap::parse(self.kallsyms.as_deref().unwrap_or_default()))
    }

    pub fn printk(&self) -> &PrintkMap {
        self.printk
            .get_or_init(|| PrintkMap::parse(self.printk_text.as_deref().unwrap_or_default()))
    }
}

/// How one event type prints, decided the first time it is met.
enum Slot {
    Unseen,
    /// A print fmt, compiled.
    Program(Program),
    /// A trace-cmd plugin prints it (and perhaps the print fmt after it, for kmem).
    Plugin(plugins::Plugin, Option<Program>),
    /// ftrace's `bprint`: the format comes from the record.
    Bprint,
    /// Printed as raw fields; the reason is kept for messages.
    Unsupported(String),
    /// Refused as damaged (nested too deep to evaluate safely): printed as raw fields, and
    /// an error for the caller ([`TextFormatter::format_errors`]).
    Refused(String),
}

/// A `bprint` format: its text (read again to decode each record's arguments) and pieces.
type BprintFormat = (Vec<u8>, Vec<Piece>);

/// How timestamps print: trace-cmd's default microseconds, `-t` nanoseconds, or the raw
/// counter for clocks that do not count nanoseconds (x86-tsc, counter).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeFormat {
    Micros,
    Nanos,
    Raw,
}

/// Prints the events of one trace as `trace-cmd report` does.
pub struct TextFormatter<'t> {
    trace: &'t Trace,
    syms: Symbols,
    slots: Vec<Slot>,
    /// Raw-field conversions per event id, for the fallback (computed when first needed).
    raw_specs: HashMap<u32, Vec<Option<PrintSpec>>>,
    /// Comms the sched plugins learnt from events, for pids the saved cmdlines lack.
    learnt_comms: HashMap<i32, Box<str>>,
    /// Pids whose `COMM-PID` column was made from `learnt_comms` (or as `<...>`) since
    /// [`TextFormatter::start_slice`]: what a slice's lines owe to what came before it.
    looked_up: Vec<i32>,
    /// Formatting slices: `looked_up` is kept.
    slicing: bool,
    /// Per printk format address: the format text and its pieces.
    bprint_formats: HashMap<u64, Result<BprintFormat, String>>,
    /// Per CPU, the function plugin's call stack of names (for its indentation).
    fstack: Vec<Vec<Option<Box<[u8]>>>>,
    /// The function graph events, and the return an entry's line folds in.
    graph: fgraph::Graph,
    time: TimeFormat,
    /// Per CPU, the last pid's `COMM-PID [CPU]` columns, ready to copy (a CPU's events
    /// mostly repeat its last pid).
    pid_columns: Vec<Option<(i32, cfmt::Column)>>,
    /// The last timestamp's ` SECONDS.` column (whole seconds change rarely).
    secs_column: Option<(u64, cfmt::Column)>,
    /// Per event id, ` NAME: ` and its padding.
    name_columns: Vec<Option<cfmt::Column>>,
    /// Where [`TextFormatter::write_line`] writes the lines of its fast path.
    line_room: Box<[u8; cfmt::LINE_ROOM]>,
    unsupported: BTreeMap<String, (u64, String)>,
    /// Formats refused as damaged, per `system:name`.
    format_errors: BTreeMap<String, crate::Error>,
}

/// What formatting a slice of a trace from scratch learnt and relied on
/// ([`TextFormatter::end_slice`]).
#[derive(Debug, Default)]
pub struct SliceState {
    learnt: Vec<(i32, Box<str>)>,
    looked_up: Vec<i32>,
    unsupported: BTreeMap<String, (u64, String)>,
    format_errors: BTreeMap<String, crate::Error>,
}

/// The ids of the trace's marker events: ftrace's `print` (trace_marker writes), `bprint`
/// and `bputs` (trace_printk), whose messages are what an application or the kernel wrote.
pub fn marker_ids(trace: &Trace) -> Vec<u32> {
    ["print", "bprint", "bputs"]
        .iter()
        .filter_map(|n| trace.events.find(&format!("ftrace:{n}")).map(|e| e.id))
        .collect()
}

/// The line `trace-cmd report` prints before the events.
pub fn report_header(trace: &Trace) -> String {
    format!("cpus={}\n", trace.cpu_count)
}

impl<'t> TextFormatter<'t> {
    pub fn new(trace: &'t Trace, nanoseconds: bool) -> TextFormatter<'t> {
        // trace-cmd prints a counter clock's raw counts, unless a TSC2NSEC option maps them
        // to ns: in v7 the options, TRACECLOCK before TSC2NSEC, decide last; a v6 file's
        // trace_clock text comes after its options and decides.
        let v7_mapped = trace.clock_map.mult != 0
            && matches!(
                trace.container,
                crate::Container::TraceDat { version: 7, .. }
            );
        let raw_clock = matches!(trace.clock.as_deref(), Some("x86-tsc" | "counter")) && !v7_mapped;
        TextFormatter {
            trace,
            syms: Symbols::new(trace.kallsyms.as_deref(), trace.printk_formats.as_deref()),
            slots: Vec::new(),
            raw_specs: HashMap::new(),
            learnt_comms: HashMap::new(),
            looked_up: Vec::new(),
            slicing: false,
            bprint_formats: HashMap::new(),
            fstack: Vec::new(),
            graph: fgraph::Graph::of(trace),
            time: if raw_clock {
                TimeFormat::Raw
            } else if nanoseconds {
                TimeFormat::Nanos
            } else {
                TimeFormat::Micros
            },
            unsupported: BTreeMap::new(),
            format_errors: BTreeMap::new(),
            pid_columns: Vec::new(),
            secs_column: None,
            name_columns: Vec::new(),
            line_room: Box::new([0; cfmt::LINE_ROOM]),
        }
    }

    /// Events printed as raw fields because their format uses something not evaluated, by
    /// `system:event`: how many, and why.
    pub fn unsupported(&self) -> &BTreeMap<String, (u64, String)> {
        &self.unsupported
    }

    /// Event formats refused as damaged (a print fmt nested too deep to evaluate): each
    /// an error naming the file, the format's offset and the event. Their events were
    /// printed as raw fields.
    pub fn format_errors(&self) -> impl Iterator<Item = &crate::Error> {
        self.format_errors.values()
    }

    /// Forgets what earlier events taught (comms learnt from sched events), to format a
    /// slice of a trace as if it began there; [`TextFormatter::end_slice`] then says what
    /// its lines owe to that knowledge. (The function plugin's per-CPU call stacks are not
    /// replayed: a slice with `ftrace:function` events is not formatted apart.)
    pub fn start_slice(&mut self) {
        self.learnt_comms.clear();
        self.looked_up.clear();
        self.pid_columns.clear();
        self.slicing = true;
    }

    /// What the slice since [`TextFormatter::start_slice`] learnt (pid and comm), and the
    /// pids whose `COMM-PID` column depended on learnt comms (or their absence); with the
    /// counts of events printed as raw fields, which are taken.
    pub fn end_slice(&mut self) -> SliceState {
        SliceState {
            learnt: std::mem::take(&mut self.learnt_comms).into_iter().collect(),
            looked_up: std::mem::take(&mut self.looked_up),
            unsupported: std::mem::take(&mut self.unsupported),
            format_errors: std::mem::take(&mut self.format_errors),
        }
    }

    /// Whether a slice formatted from scratch printed what this formatter, which has read
    /// everything before the slice, would have: none of the pids whose column depended on
    /// learnt comms has one learnt here.
    pub fn slice_agrees(&self, s: &SliceState) -> bool {
        s.looked_up
            .iter()
            .all(|p| !self.learnt_comms.contains_key(p))
    }

    /// Takes in a slice formatted elsewhere, as if this formatter had printed it: its
    /// learnt comms (where this one has none yet) and its raw-field counts.
    pub fn absorb_slice(&mut self, s: SliceState) {
        for (pid, comm) in s.learnt {
            if let std::collections::hash_map::Entry::Vacant(v) = self.learnt_comms.entry(pid) {
                v.insert(comm);
                self.pid_columns.clear();
            }
        }
        for (name, (n, why)) in s.unsupported {
            self.unsupported.entry(name).or_insert((0, why)).0 += n;
        }
        for (name, e) in s.format_errors {
            self.format_errors.entry(name).or_insert(e);
        }
    }

    /// The command name trace-cmd shows for `pid`.
    pub fn comm(&self, pid: i32) -> &str {
        if pid == 0 {
            return "<idle>";
        }
        if let Some(c) = self.trace.comms.get(&pid) {
            return c;
        }
        self.learnt_comms.get(&pid).map_or("<...>", |c| c)
    }

    /// Appends one event as `trace-cmd report` prints it, newline included, preceded by
    /// trace-cmd's line for events lost just before it. `ts` is in nanoseconds.
    #[allow(clippy::too_many_arguments)]
    pub fn write_line(
        &mut self,
        out: &mut Vec<u8>,
        ts: u64,
        cpu: u32,
        id: u32,
        payload: &[u8],
        endian: Endian,
        lost: Lost,
    ) {
        match lost {
            Lost::Count(n) => {
                out.extend_from_slice(b"CPU:");
                cfmt::write_dec(cpu as u64, out);
                out.extend_from_slice(b" [");
                cfmt::write_dec(n, out);
                out.extend_from_slice(b" EVENTS DROPPED]\n");
            }
            Lost::Unknown => {
                out.extend_from_slice(b"CPU:");
                cfmt::write_dec(cpu as u64, out);
                out.extend_from_slice(b" [EVENTS DROPPED]\n");
            }
            Lost::None => {}
        }
        if self.write_line_fast(out, ts, cpu, id, payload, endian) {
            return;
        }
        let start = out.len();
        out.reserve(256);
        if self.trace.events.get(id).is_none() {
            // What trace-cmd prints for a record whose event the trace has no format for.
            out.extend_from_slice(b"[UNKNOWN EVENT][UNKNOWN EVENT] (NULL):");
            out.resize(out.len() + 15, b' ');
            out.extend_from_slice(b"[UNKNOWN EVENT]\n");
            self.unsupported
                .entry(format!("event id {id}"))
                .or_insert_with(|| (0, "no format in the trace".to_string()))
                .0 += 1;
            return;
        }
        let pid = endian.uint(payload, 4, 4).unwrap_or(0) as u32 as i32;
        let c = cpu as usize;
        if c >= self.pid_columns.len() && c < 4096 {
            self.pid_columns.resize(c + 1, None);
        }
        match self.pid_columns.get(c) {
            Some(Some((p, col))) if *p == pid => col.push(out),
            _ => {
                let col = self.pid_column(pid, cpu);
                if self.slicing && pid != 0 && !self.trace.comms.contains_key(&pid) {
                    self.looked_up.push(pid);
                }
                col.push(out);
                if let Some(slot) = self.pid_columns.get_mut(c) {
                    *slot = Some((pid, col));
                }
            }
        }
        self.write_time(ts, out);
        let idx = id as usize;
        if idx >= self.name_columns.len() {
            self.name_columns.resize(idx + 1, None);
        }
        let name_col = self.name_columns[idx].get_or_insert_with(|| {
            let name = self.trace.events.get(id).map_or("", |f| f.name.as_str());
            let mut col = Vec::with_capacity(24);
            col.push(b' ');
            col.extend_from_slice(name.as_bytes());
            col.extend_from_slice(b": ");
            col.resize(col.len() + 20usize.saturating_sub(name.len()), b' ');
            cfmt::Column::new(&col)
        });
        name_col.push(out);
        let info_start = out.len();
        if !self.write_message(out, ts, cpu, id, payload, endian) {
            out.truncate(info_start);
            self.write_raw(out, id, payload, endian);
        }
        if out.len() > start && out.last() == Some(&b'\n') {
            out.pop();
        }
        out.push(b'\n');
    }

    /// The line of [`TextFormatter::write_line`] when its columns are cached (the same pid
    /// on this CPU, the same second, an event seen before) and its message is a simple
    /// program: one [`cfmt::Cursor`] pass and one copy. False, having written nothing, for
    /// any other line.
    #[inline]
    fn write_line_fast(
        &mut self,
        out: &mut Vec<u8>,
        ts: u64,
        cpu: u32,
        id: u32,
        payload: &[u8],
        endian: Endian,
    ) -> bool {
        if self.time != TimeFormat::Micros {
            return false;
        }
        let idx = id as usize;
        let (Some(Slot::Program(program)), Some(Some(name_col))) =
            (self.slots.get(idx), self.name_columns.get(idx))
        else {
            return false;
        };
        let Some(max_len) = program.simple_max_len() else {
            return false;
        };
        let pid = endian.uint(payload, 4, 4).unwrap_or(0) as u32 as i32;
        let Some(Some((p, pid_col))) = self.pid_columns.get(cpu as usize) else {
            return false;
        };
        let t = ts.saturating_add(500) / 1000;
        let Some((secs, secs_col)) = &self.secs_column else {
            return false;
        };
        if *p != pid || *secs != t / 1_000_000 {
            return false;
        }
        // The columns, the microseconds and ':', the message and the newline, and the
        // 32 bytes a cursor's write may store past the end.
        let longest = pid_col.len() + secs_col.len() + 7 + name_col.len() + max_len + 1;
        if longest + 32 > cfmt::LINE_ROOM {
            return false;
        }
        let mut line = cfmt::Cursor::new(&mut self.line_room);
        line.column(pid_col);
        line.column(secs_col);
        line.frac6((t % 1_000_000) as u32);
        line.byte(b':');
        line.column(name_col);
        program.run_cursor(payload, endian, &mut line);
        // trace-cmd prints one line however the message ends.
        line.strip(b'\n');
        line.byte(b'\n');
        out.extend_from_slice(line.written());
        true
    }

    /// `COMM-PID [CPU]`: the command name right-aligned in 16 columns, the pid left-aligned
    /// in 5, the CPU zero-padded to 3 digits.
    fn pid_column(&self, pid: i32, cpu: u32) -> cfmt::Column {
        let mut col = Vec::with_capacity(32);
        let comm = self.comm(pid);
        col.resize(16usize.saturating_sub(comm.len()), b' ');
        col.extend_from_slice(comm.as_bytes());
        col.push(b'-');
        let pid_start = col.len();
        if pid < 0 {
            col.push(b'-');
        }
        cfmt::write_dec(pid.unsigned_abs() as u64, &mut col);
        let n = col.len() - pid_start;
        col.resize(col.len() + 5usize.saturating_sub(n), b' ');
        col.extend_from_slice(b" [");
        cfmt::write_dec_padded(cpu as u64, 3, true, &mut col);
        col.push(b']');
        cfmt::Column::new(&col)
    }

    /// Appends ` SECONDS.`, padded to 5 columns, from the last line's copy when unchanged.
    #[inline]
    fn write_secs(&mut self, secs: u64, out: &mut Vec<u8>) {
        match &self.secs_column {
            Some((s, col)) if *s == secs => col.push(out),
            _ => {
                let mut col = Vec::with_capacity(24);
                col.push(b' ');
                cfmt::write_dec_padded(secs, 5, false, &mut col);
                col.push(b'.');
                let col = cfmt::Column::new(&col);
                col.push(out);
                self.secs_column = Some((secs, col));
            }
        }
    }

    /// A time as libtraceevent's `print_event_time` writes it with the line's format (no
    /// leading space: `%5llu.%06llu`, `%5llu.%09llu`, or `%12llu` for raw counts).
    pub(super) fn write_time_value(&self, ts: u64, out: &mut Vec<u8>) {
        match self.time {
            TimeFormat::Micros => {
                let t = ts.saturating_add(500) / 1000;
                cfmt::write_dec_padded(t / 1_000_000, 5, false, out);
                out.push(b'.');
                cfmt::write_frac6((t % 1_000_000) as u32, out);
            }
            TimeFormat::Nanos => {
                cfmt::write_dec_padded(ts / 1_000_000_000, 5, false, out);
                out.push(b'.');
                cfmt::write_dec_padded(ts % 1_000_000_000, 9, true, out);
            }
            TimeFormat::Raw => cfmt::write_dec_padded(ts, 12, false, out),
        }
    }

    fn write_time(&mut self, ts: u64, out: &mut Vec<u8>) {
        match self.time {
            TimeFormat::Micros => {
                let t = ts.saturating_add(500) / 1000;
                self.write_secs(t / 1_000_000, out);
                cfmt::write_frac6((t % 1_000_000) as u32, out);
            }
            TimeFormat::Nanos => {
                self.write_secs(ts / 1_000_000_000, out);
                cfmt::write_dec_padded(ts % 1_000_000_000, 9, true, out);
            }
            TimeFormat::Raw => cfmt::write_dec_padded(ts, 12, false, out),
        }
        out.push(b':');
    }

    /// The event's raw fields, ` name=value` each, as trace-cmd's raw view prints them.
    fn write_raw(&mut self, out: &mut Vec<u8>, id: u32, payload: &[u8], endian: Endian) {
        let Some(fmt) = self.trace.events.get(id) else {
            return;
        };
        let specs = self
            .raw_specs
            .entry(id)
            .or_insert_with(|| fmt.print_specs());
        for (i, f) in fmt.fields.iter().enumerate() {
            if i > 0 {
                out.push(b' ');
            }
            f.write_raw_text(
                payload,
                endian,
                self.trace.long_size,
                specs.get(i).and_then(Option::as_ref),
                out,
            );
        }
    }

    /// Appends the event's message (what follows `name:` in trace-cmd's line). False when
    /// the event's format uses something not evaluated; the caller then shows raw fields
    /// (and the event is counted in [`TextFormatter::unsupported`]).
    pub fn write_message(
        &mut self,
        out: &mut Vec<u8>,
        ts: u64,
        cpu: u32,
        id: u32,
        payload: &[u8],
        endian: Endian,
    ) -> bool {
        let trace = self.trace;
        let Some(fmt) = trace.events.get(id) else {
            return false;
        };
        let idx = id as usize;
        if idx >= self.slots.len() {
            self.slots.resize_with(idx + 1, || Slot::Unseen);
        }
        if matches!(self.slots[idx], Slot::Unseen) {
            self.slots[idx] = self.compile(fmt);
            if let Slot::Refused(why) = &self.slots[idx] {
                let at = match fmt.at {
                    Some(crate::event_format::FormatAt::File(at)) => at,
                    Some(crate::event_format::FormatAt::Section { section, .. }) => section,
                    None => 0,
                };
                let place = match fmt.at {
                    Some(a @ crate::event_format::FormatAt::Section { .. }) => {
                        format!(" (its format is at {a})")
                    }
                    _ => String::new(),
                };
                let e = crate::Error::corrupt(
                    at,
                    format!(
                        "event {}:{}: {why}{place}; its events are printed as raw fields",
                        fmt.system, fmt.name
                    ),
                )
                .in_file(&trace.path);
                self.format_errors
                    .insert(format!("{}:{}", fmt.system, fmt.name), e);
            }
        }
        let start = out.len();
        let plugin = match &self.slots[idx] {
            Slot::Plugin(p, _) => Some(*p),
            _ => None,
        };
        let mut ok = true;
        let mut then_print_fmt = true;
        if let Some(p) = plugin {
            match self.run_plugin(p, fmt, ts, cpu, payload, endian, out) {
                plugins::Printed::All => then_print_fmt = false,
                plugins::Printed::ThenPrintFmt => {}
                plugins::Printed::Failed => ok = false,
            }
        }
        ok &= match &self.slots[idx] {
            _ if !then_print_fmt => true,
            Slot::Program(p) | Slot::Plugin(_, Some(p)) => {
                p.print(&self.eval(payload, endian), out)
            }
            Slot::Plugin(_, None) => true,
            Slot::Bprint => self.write_bprint(fmt, payload, endian, out),
            Slot::Unsupported(_) | Slot::Refused(_) | Slot::Unseen => false,
        };
        if !ok {
            out.truncate(start);
            let why = match &self.slots[idx] {
                Slot::Unsupported(why) | Slot::Refused(why) => why.as_str(),
                _ => "a value its format does not print faithfully",
            };
            self.unsupported
                .entry(format!("{}:{}", fmt.system, fmt.name))
                .or_insert_with(|| (0, why.to_string()))
                .0 += 1;
        } else if let Some(nul) = out[start..].iter().position(|&c| c == 0) {
            // trace-cmd prints its line as a C string: it ends at a NUL character (`%c` of
            // 0, a plugin's text).
            out.truncate(start + nul);
        }
        ok
    }

    /// A trace marker's text for timelines: the message without trace-cmd's line break, and
    /// for `print` (trace_marker writes) without the `tracing_mark_write: ` the kernel's
    /// format puts first; `bprint`/`bputs` keep the kernel function that wrote them. False
    /// when the event cannot be printed faithfully.
    pub fn write_marker(
        &mut self,
        out: &mut Vec<u8>,
        cpu: u32,
        id: u32,
        payload: &[u8],
        endian: Endian,
    ) -> bool {
        let start = out.len();
        if !self.write_message(out, 0, cpu, id, payload, endian) {
            return false;
        }
        if out.last() == Some(&b'\n') {
            out.pop();
        }
        let is_print = self
            .trace
            .events
            .get(id)
            .is_some_and(|f| f.system == "ftrace" && f.name == "print");
        if is_print {
            if let Some(p) = out[start..].windows(2).position(|w| w == b": ") {
                out.drain(start..start + p + 2);
            }
        }
        true
    }

    fn eval<'a>(&'a self, payload: &'a [u8], endian: Endian) -> Eval<'a> {
        Eval {
            payload,
            endian,
            long_size: self.trace.long_size,
            syms: &self.syms,
            unsupported: Cell::new(false),
        }
    }

    fn compile(&self, fmt: &EventFormat) -> Slot {
        if fmt.system == "ftrace" && fmt.name == "bprint" {
            return Slot::Bprint;
        }
        let plugin = plugins::Plugin::for_event(&fmt.system, &fmt.name);
        if let Some(p) = plugin {
            // The print fmt follows what a handler printed when it returns non-zero.
            return Slot::Plugin(
                p,
                self.parse(fmt)
                    .ok()
                    .map(|(pieces, args)| Program::new(pieces, args)),
            );
        }
        match self.parse(fmt) {
            Ok((pieces, args)) => {
                let program = Program::new(pieces, args);
                match plugin {
                    Some(p) => Slot::Plugin(p, Some(program)),
                    None => Slot::Program(program),
                }
            }
            Err(e @ FmtError::TooDeep { .. }) => Slot::Refused(e.to_string()),
            Err(e) => Slot::Unsupported(e.to_string()),
        }
    }

    fn parse(&self, fmt: &EventFormat) -> Result<(Vec<Piece>, Vec<Expr>), FmtError> {
        let funcs = &self.syms;
        let mut symbol = |name: &[u8]| funcs.funcs().address_of(name);
        let mut ctx = Ctx {
            long_size: self.trace.long_size,
            symbol: &mut symbol,
        };
        let pf = parse::parse_print_fmt(fmt, &mut ctx)?;
        let pieces =
            parse::parse_pieces(&pf.format, pf.args.len()).map_err(FmtError::Unsupported)?;
        Ok((pieces, pf.args))
    }

    /// `bprint`: the format is the printk format the record's `fmt` address names, and the
    /// arguments are packed in its `buf` as the kernel's `vbin_printf` stores them.
    fn write_bprint(
        &mut self,
        fmt: &EventFormat,
        payload: &[u8],
        endian: Endian,
        out: &mut Vec<u8>,
    ) -> bool {
        let (Some(fmt_field), Some(ip_field), Some(buf_field)) =
            (fmt.field("fmt"), fmt.field("ip"), fmt.field("buf"))
        else {
            return false;
        };
        let long_size = self.trace.long_size;
        let read = |f: &crate::event_format::Field| {
            if matches!(f.size, 1 | 2 | 4 | 8) {
                endian.uint(payload, f.offset, f.size)
            } else {
                Some(0)
            }
        };
        let (Some(addr), Some(ip)) = (read(fmt_field), read(ip_field)) else {
            return false;
        };
        if !self.bprint_formats.contains_key(&addr) {
            let mut text = b"%ps: ".to_vec();
            match self.syms.printk().get(addr) {
                Some(f) => text.extend_from_slice(f),
                None => {
                    text.extend_from_slice(b"(NO FORMAT FOUND at ");
                    cfmt::write_hex(addr, &mut text);
                    text.extend_from_slice(b")\\n");
                }
            }
            let parsed = parse::parse_pieces(&text, usize::MAX).map(|p| (text, p));
            self.bprint_formats.insert(addr, parsed);
        }
        let Some(Ok((text, pieces))) = self.bprint_formats.get(&addr) else {
            return false;
        };
        let ev = self.eval(payload, endian);
        let mut args: Vec<Arg> = vec![Arg::Num(ip)];
        if !bprint_args(
            text,
            payload,
            buf_field.offset,
            long_size,
            endian,
            &mut args,
        ) {
            return false;
        }
        let needed = pieces_args(pieces);
        if needed > args.len() {
            return false;
        }
        ev.print(pieces, args.as_slice(), out);
        !ev.unsupported.get()
    }
}

/// One record's message from its event format alone, parsing and compiling the print fmt
/// each call (for tests and fuzzing; [`TextFormatter`] does so once per event type) and
/// printing it through the compiled program as `dump` does. `Ok(false)`: the evaluation met
/// something it does not print faithfully.
pub fn format_once(
    ev: &EventFormat,
    syms: &Symbols,
    long_size: usize,
    payload: &[u8],
    endian: Endian,
    out: &mut Vec<u8>,
) -> Result<bool, String> {
    let mut symbol = |name: &[u8]| syms.funcs().address_of(name);
    let mut ctx = Ctx {
        long_size,
        symbol: &mut symbol,
    };
    let pf = parse::parse_print_fmt(ev, &mut ctx).map_err(|e| e.to_string())?;
    let pieces = parse::parse_pieces(&pf.format, pf.args.len())?;
    let program = Program::new(pieces, pf.args);
    let ev = Eval {
        payload,
        endian,
        long_size,
        syms,
        unsupported: Cell::new(false),
    };
    let start = out.len();
    let ok = program.print(&ev, out);
    // The cursor path of `dump`'s lines prints the same message.
    if let Some(max_len) = program.simple_max_len() {
        if max_len + 32 <= cfmt::LINE_ROOM {
            let mut room = [0; cfmt::LINE_ROOM];
            let mut line = cfmt::Cursor::new(&mut room);
            program.run_cursor(payload, endian, &mut line);
            assert_eq!(line.written(), &out[start..], "cursor and Vec paths differ");
        }
    }
    Ok(ok)
}

/// A `bprint` message from its printk format text (without the `%ps: ` prefix), the
/// record, and where its argument buffer starts (for tests and fuzzing).
#[allow(clippy::too_many_arguments)]
pub fn format_bprint_once(
    printk: &[u8],
    ip: u64,
    syms: &Symbols,
    long_size: usize,
    payload: &[u8],
    buf: usize,
    endian: Endian,
    out: &mut Vec<u8>,
) -> Result<bool, String> {
    let mut text = b"%ps: ".to_vec();
    text.extend_from_slice(printk);
    let pieces = parse::parse_pieces(&text, usize::MAX)?;
    let ev = Eval {
        payload,
        endian,
        long_size,
        syms,
        unsupported: Cell::new(false),
    };
    let mut args: Vec<Arg> = vec![Arg::Num(ip)];
    if !bprint_args(&text, payload, buf, long_size, endian, &mut args)
        || pieces_args(&pieces) > args.len()
    {
        return Ok(false);
    }
    ev.print(&pieces, args.as_slice(), out);
    Ok(!ev.unsupported.get())
}

/// How many arguments the pieces use (one past the highest index).
fn pieces_args(pieces: &[Piece]) -> usize {
    pieces
        .iter()
        .filter_map(|p| match p {
            Piece::Lit(_) => None,
            Piece::Num { arg, star, .. }
            | Piece::Str { arg, star, .. }
            | Piece::Ptr { arg, star, .. } => Some((*arg).max(star.unwrap_or(0)) + 1),
        })
        .max()
        .unwrap_or(0)
}

/// Decodes `bprint`'s binary arguments as libtraceevent's `make_bprint_args` does: walking
/// the format after its `%ps: ` prefix, each integer conversion takes 4 bytes (`l` and `z`:
/// the trace's long, `ll`: 8) at the next 4-byte boundary, each `%s` a NUL-terminated string.
/// False when the buffer is shorter than the format needs.
fn bprint_args<'a>(
    fmt: &[u8],
    payload: &'a [u8],
    buf: usize,
    long_size: usize,
    endian: Endian,
    args: &mut Vec<Arg<'a>>,
) -> bool {
    let at = |i: usize| fmt.get(i).copied().unwrap_or(0);
    let mut p = 5;
    let mut b = buf;
    while b < payload.len() && p < fmt.len() {
        if fmt[p] == b'%' {
            let mut ls = 0usize;
            loop {
                p += 1;
                let c = at(p);
                let mut string = false;
                match c {
                    b'l' => {
                        ls += 1;
                        continue;
                    }
                    b'L' => {
                        ls = 2;
                        continue;
                    }
                    b'0'..=b'9' | b'.' | b'#' | b'+' => continue,
                    b'z' | b'Z' => {
                        ls = 1;
                        continue;
                    }
                    b'p' => {
                        ls = 1;
                        if at(p + 1).is_ascii_alphanumeric() {
                            p += 1;
                            let special = match at(p) {
                                b's' | b'S' | b'x' => true,
                                b'f' | b'F' => at(p + 1) != b'w',
                                _ => false,
                            };
                            if !special
                                && payload.get(b).is_some_and(|&c| (0x20..0x7f).contains(&c))
                            {
                                string = true;
                            }
                        }
                    }
                    b'd' | b'u' | b'i' | b'x' | b'X' | b'o' | b'*' => {}
                    b's' => string = true,
                    _ => break,
                }
                if string {
                    let rest = payload.get(b..).unwrap_or_default();
                    let Some(n) = rest.iter().position(|&c| c == 0) else {
                        return false;
                    };
                    args.push(Arg::BStr(&rest[..n]));
                    b += n + 1;
                    break;
                }
                let vsize = if c != b'*' {
                    match ls {
                        0 => 4,
                        1 => long_size,
                        2 => 8,
                        n => n,
                    }
                } else {
                    4
                };
                b = (b + 3) & !3;
                let Some(end) = b.checked_add(vsize).filter(|&e| e <= payload.len()) else {
                    return false;
                };
                let v = if matches!(vsize, 1 | 2 | 4 | 8) {
                    endian.uint(payload, b, vsize).unwrap_or(0)
                } else {
                    0
                };
                b = end;
                args.push(Arg::Num(v));
                if c == b'*' {
                    continue;
                }
                break;
            }
        }
        p += 1;
    }
    true
}
