//! The event handlers trace-cmd's default plugins install (libtraceevent's plugin_sched_switch,
//! plugin_kmem, plugin_hrtimer, plugin_function, plugin_futex): for these events `trace-cmd
//! report` prints the plugin's text, not the kernel's print fmt.

use crate::bytes::Endian;
use crate::event_format::{EventFormat, Field};
use crate::print_fmt::{cfmt, TextFormatter};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plugin {
    SchedSwitch,
    SchedWakeup,
    /// kmem allocation events: `(func+0xoff) ` for the call site, then the print fmt.
    KmemCallSite,
    HrtimerStart,
    HrtimerExpireEntry,
    Function,
    /// `sys_enter_futex`: the operation by name and only the arguments it uses.
    Futex,
}

/// What a plugin printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Printed {
    /// The whole message.
    All,
    /// Its part; the event's print fmt follows (libtraceevent's handler returned 1).
    ThenPrintFmt,
    /// Nothing faithful: a field it needs is missing (the event then prints raw).
    Failed,
}

impl From<Option<()>> for Printed {
    fn from(o: Option<()>) -> Printed {
        o.map_or(Printed::Failed, |()| Printed::All)
    }
}

impl Plugin {
    pub fn for_event(system: &str, name: &str) -> Option<Plugin> {
        Some(match (system, name) {
            ("sched", "sched_switch") => Plugin::SchedSwitch,
            ("sched", "sched_wakeup" | "sched_wakeup_new") => Plugin::SchedWakeup,
            (
                "kmem",
                "kfree"
                | "kmalloc"
                | "kmalloc_node"
                | "kmem_cache_alloc"
                | "kmem_cache_alloc_node"
                | "kmem_cache_free",
            ) => Plugin::KmemCallSite,
            ("timer", "hrtimer_start") => Plugin::HrtimerStart,
            ("timer", "hrtimer_expire_entry") => Plugin::HrtimerExpireEntry,
            ("ftrace", "function") => Plugin::Function,
            ("syscalls", "sys_enter_futex") => Plugin::Futex,
            _ => return None,
        })
    }

    /// Whether the event's print fmt may follow the plugin's text (and so is compiled).
    pub fn then_print_fmt(self) -> bool {
        matches!(self, Plugin::KmemCallSite | Plugin::Futex)
    }
}

/// libtraceevent's `tep_get_field_val`: any field by name, read unsigned (sizes 1, 2, 4, 8).
fn val(fmt: &EventFormat, name: &str, payload: &[u8], e: Endian) -> Option<u64> {
    let f = field(fmt, name)?;
    if !matches!(f.size, 1 | 2 | 4 | 8) {
        return None;
    }
    e.uint(payload, f.offset, f.size)
}

fn field<'f>(fmt: &'f EventFormat, name: &str) -> Option<&'f Field> {
    fmt.common
        .iter()
        .chain(fmt.fields.iter())
        .find(|f| f.name == name)
}

fn lld(v: u64, out: &mut Vec<u8>) {
    let v = v as i64;
    if v < 0 {
        out.push(b'-');
    }
    cfmt::write_dec(v.unsigned_abs(), out);
}

fn int(v: u64, out: &mut Vec<u8>) {
    lld(v as i32 as i64 as u64, out)
}

impl TextFormatter<'_> {
    /// Runs `p`.
    pub(super) fn run_plugin(
        &mut self,
        p: Plugin,
        fmt: &EventFormat,
        cpu: u32,
        payload: &[u8],
        e: Endian,
        out: &mut Vec<u8>,
    ) -> Printed {
        match p {
            Plugin::SchedSwitch => self.sched_switch(fmt, payload, e, out).into(),
            Plugin::SchedWakeup => self.sched_wakeup(fmt, payload, e, out).into(),
            Plugin::KmemCallSite => {
                if let Some(v) = val(fmt, "call_site", payload, e) {
                    if let Some((name, start)) = self.syms.funcs().find(v) {
                        out.push(b'(');
                        out.extend_from_slice(name);
                        out.extend_from_slice(b"+0x");
                        cfmt::write_hex(v.wrapping_sub(start) as u32 as u64, out);
                        out.extend_from_slice(b") ");
                    }
                }
                Printed::ThenPrintFmt
            }
            Plugin::HrtimerStart | Plugin::HrtimerExpireEntry => {
                self.hrtimer(p, fmt, payload, e, out).into()
            }
            Plugin::Function => self.function(fmt, cpu, payload, e, out).into(),
            Plugin::Futex => futex(fmt, payload, e, out),
        }
    }

    /// Prints a comm field (`%.*s` of its declared size) and remembers it for `pid` when the
    /// trace has no name for that pid yet (libtraceevent's `tep_register_comm`).
    fn comm_field(&mut self, f: &Field, pid: u64, payload: &[u8], out: &mut Vec<u8>) {
        let bytes = payload
            .get(f.offset..f.offset.saturating_add(f.size).min(payload.len()))
            .unwrap_or_default();
        let comm = cfmt::until_nul(bytes);
        out.extend_from_slice(comm);
        let pid = pid as i32;
        if pid != 0 && !self.trace.comms.contains_key(&pid) && !self.learnt_comms.contains_key(&pid)
        {
            self.learnt_comms
                .insert(pid, String::from_utf8_lossy(comm).into());
            // A cached COMM-PID column may show this pid as "<...>".
            self.pid_columns.clear();
        }
    }

    fn sched_switch(
        &mut self,
        fmt: &EventFormat,
        payload: &[u8],
        e: Endian,
        out: &mut Vec<u8>,
    ) -> Option<()> {
        let prev_pid = val(fmt, "prev_pid", payload, e)?;
        if let Some(f) = field(fmt, "prev_comm") {
            self.comm_field(f, prev_pid, payload, out);
            out.push(b':');
        }
        lld(prev_pid, out);
        out.push(b' ');
        if let Some(prio) = val(fmt, "prev_prio", payload, e) {
            out.push(b'[');
            int(prio, out);
            out.extend_from_slice(b"] ");
        }
        if let Some(state) = val(fmt, "prev_state", payload, e) {
            let state = state as i32;
            let mut found = false;
            for (i, c) in b"SDTtZXxW".iter().enumerate() {
                if state & (1 << i) != 0 {
                    if found {
                        out.push(b'|');
                    }
                    found = true;
                    out.push(*c);
                }
            }
            if !found {
                out.push(b'R');
            }
        }
        out.extend_from_slice(b" ==> ");
        let next_pid = val(fmt, "next_pid", payload, e)?;
        if let Some(f) = field(fmt, "next_comm") {
            self.comm_field(f, next_pid, payload, out);
            out.push(b':');
        }
        lld(next_pid, out);
        if let Some(prio) = val(fmt, "next_prio", payload, e) {
            out.extend_from_slice(b" [");
            int(prio, out);
            out.push(b']');
        }
        Some(())
    }

    fn sched_wakeup(
        &mut self,
        fmt: &EventFormat,
        payload: &[u8],
        e: Endian,
        out: &mut Vec<u8>,
    ) -> Option<()> {
        let pid = val(fmt, "pid", payload, e)?;
        if let Some(f) = field(fmt, "comm") {
            self.comm_field(f, pid, payload, out);
            out.push(b':');
        }
        lld(pid, out);
        if let Some(prio) = val(fmt, "prio", payload, e) {
            out.extend_from_slice(b" [");
            lld(prio, out);
            out.push(b']');
        }
        if let Some(s) = val(fmt, "success", payload, e) {
            out.extend_from_slice(b" success=");
            lld(s, out);
        }
        if let Some(c) = val(fmt, "target_cpu", payload, e) {
            out.extend_from_slice(b" CPU:");
            cfmt::write_dec_padded(c, 3, true, out);
        }
        Some(())
    }

    fn hrtimer(
        &mut self,
        p: Plugin,
        fmt: &EventFormat,
        payload: &[u8],
        e: Endian,
        out: &mut Vec<u8>,
    ) -> Option<()> {
        out.extend_from_slice(b"hrtimer=0x");
        let t = val(fmt, "timer", payload, e).or_else(|| val(fmt, "hrtimer", payload, e))?;
        cfmt::write_hex(t, out);
        if p == Plugin::HrtimerExpireEntry {
            out.extend_from_slice(b" now=");
            cfmt::write_dec(val(fmt, "now", payload, e)?, out);
        }
        if let Some(f) = val(fmt, "function", payload, e) {
            out.extend_from_slice(b" function=");
            match self.syms.funcs().find(f) {
                // libtraceevent prints the symbol's start minus the address.
                Some((name, start)) => {
                    out.extend_from_slice(name);
                    out.extend_from_slice(b"/0x");
                    cfmt::write_hex(start.wrapping_sub(f), out);
                }
                None => {
                    out.extend_from_slice(b"0x");
                    let at = out.len();
                    cfmt::write_hex(f, out);
                    let n = out.len() - at;
                    if n < 8 {
                        out.splice(at..at, std::iter::repeat_n(b'0', 8 - n));
                    }
                }
            }
        }
        if p == Plugin::HrtimerStart {
            out.extend_from_slice(b" expires=");
            cfmt::write_dec(val(fmt, "expires", payload, e)?, out);
            out.extend_from_slice(b" softexpires=");
            cfmt::write_dec(val(fmt, "softexpires", payload, e)?, out);
        }
        Some(())
    }

    /// `function`: the function's name, indented three spaces per level of a call stack the
    /// plugin infers per CPU from (parent, function) pairs.
    fn function(
        &mut self,
        fmt: &EventFormat,
        cpu: u32,
        payload: &[u8],
        e: Endian,
        out: &mut Vec<u8>,
    ) -> Option<()> {
        let ip = val(fmt, "ip", payload, e)?;
        let parent_ip = val(fmt, "parent_ip", payload, e)?;
        let funcs = self.syms.funcs();
        let func = funcs.find(ip).map(|f| f.0);
        let parent = funcs.find(parent_ip).map(|f| f.0);
        let mut index = 0;
        if let Some(parent) = parent {
            let cpu = cpu as usize;
            if cpu < 4096 {
                if self.fstack.len() <= cpu {
                    self.fstack.resize_with(cpu + 1, Vec::new);
                }
                index = add_and_get_index(&mut self.fstack[cpu], parent, func);
            }
        }
        out.resize(out.len() + index * 3, b' ');
        match func {
            Some(name) => out.extend_from_slice(name),
            None => {
                out.extend_from_slice(b"0x");
                cfmt::write_hex(ip, out);
            }
        }
        Some(())
    }
}

/// The futex commands (`op & FUTEX_CMD_MASK`) as plugin_futex names them, and how it prints
/// `val`, `utime` (`val2` for the commands that take a count there), `uaddr2` and `val3`:
/// `x` as `0x%08llx`, `u` as `%llu`, `-` not at all.
const FUTEX_OPS: [(&str, &[u8; 4]); 13] = [
    ("FUTEX_WAIT", b"xx--"),
    ("FUTEX_WAKE", b"u---"),
    ("FUTEX_FD", b"u---"),
    ("FUTEX_REQUEUE", b"uux-"),
    ("FUTEX_CMP_REQUEUE", b"uuxx"),
    ("FUTEX_WAKE_OP", b"uuxx"),
    ("FUTEX_LOCK_PI", b"-x--"),
    ("FUTEX_UNLOCK_PI", b"----"),
    ("FUTEX_TRYLOCK_PI", b"----"),
    ("FUTEX_WAIT_BITSET", b"xx-x"),
    ("FUTEX_WAKE_BITSET", b"u--x"),
    ("FUTEX_WAIT_REQUEUE_PI", b"xxxx"),
    ("FUTEX_CMP_REQUEUE_PI", b"uuxx"),
];

const FUTEX_PRIVATE_FLAG: u64 = 128;
const FUTEX_CLOCK_REALTIME: u64 = 256;

/// `sys_enter_futex` as plugin_futex prints it: `op=NAME|FLAGS uaddr=0x... val=...`. A
/// command it does not know prints nothing of its own: the print fmt follows.
fn futex(fmt: &EventFormat, payload: &[u8], e: Endian, out: &mut Vec<u8>) -> Printed {
    let mut v = [0u64; 6];
    for (v, name) in v
        .iter_mut()
        .zip(["uaddr", "op", "val", "utime", "uaddr2", "val3"])
    {
        match val(fmt, name, payload, e) {
            Some(x) => *v = x,
            None => return Printed::Failed,
        }
    }
    let [uaddr, op, rest @ ..] = v;
    let cmd = op & !(FUTEX_PRIVATE_FLAG | FUTEX_CLOCK_REALTIME);
    let Some((name, how)) = FUTEX_OPS.get(cmd as usize) else {
        return Printed::ThenPrintFmt;
    };
    out.extend_from_slice(b"op=");
    out.extend_from_slice(name.as_bytes());
    if op & FUTEX_PRIVATE_FLAG != 0 {
        out.extend_from_slice(b"|FUTEX_PRIVATE_FLAG");
    }
    if op & FUTEX_CLOCK_REALTIME != 0 {
        out.extend_from_slice(b"|FUTEX_CLOCK_REALTIME");
    }
    out.extend_from_slice(b" uaddr=");
    hex08(uaddr, out);
    for ((&how, v), label) in how
        .iter()
        .zip(rest)
        .zip([" val=", " utime=", " uaddr2=", " val3="])
    {
        // The second argument is a timeout where it is printed in hex, else a count.
        let label = if how == b'u' && label == " utime=" {
            " val2="
        } else {
            label
        };
        match how {
            b'x' => {
                out.extend_from_slice(label.as_bytes());
                hex08(v, out);
            }
            b'u' => {
                out.extend_from_slice(label.as_bytes());
                cfmt::write_dec(v, out);
            }
            _ => {}
        }
    }
    Printed::All
}

/// C's `0x%08llx`.
fn hex08(v: u64, out: &mut Vec<u8>) {
    out.extend_from_slice(b"0x");
    let digits = (64 - (v | 1).leading_zeros()).div_ceil(4) as usize;
    out.resize(out.len() + 8usize.saturating_sub(digits), b'0');
    cfmt::write_hex(v, out);
}

/// The plugin's stack: find `parent`; the child goes right after it (entries beyond stay, as
/// in libtraceevent); if the parent is not on the stack it starts a new one.
fn add_and_get_index(
    stack: &mut Vec<Option<Box<[u8]>>>,
    parent: &[u8],
    child: Option<&[u8]>,
) -> usize {
    fn put(stack: &mut Vec<Option<Box<[u8]>>>, pos: usize, v: Option<&[u8]>) {
        let Some(v) = v else { return };
        if pos >= stack.len() {
            stack.resize(stack.len() + 10, None);
        }
        stack[pos] = Some(v.into());
    }
    let mut i = 0;
    while i < stack.len() {
        let Some(s) = &stack[i] else { break };
        if **s == *parent {
            put(stack, i + 1, child);
            return i;
        }
        i += 1;
    }
    put(stack, 0, Some(parent));
    put(stack, 1, child);
    0
}
