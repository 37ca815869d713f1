//! The event handlers trace-cmd's default plugins install (libtraceevent's plugin_sched_switch,
//! plugin_kmem, plugin_hrtimer, plugin_function, plugin_futex, plugin_tlb, plugin_mac80211,
//! plugin_kvm in `kvm`, and trace-cmd's own function graph handlers in `fgraph`): for these
//! events `trace-cmd report` prints the plugin's text, not the kernel's print fmt.

use crate::bytes::Endian;
use crate::event_format::{EventFormat, Field};
use crate::print_fmt::{cfmt, kvm, TextFormatter};

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
    KvmExit,
    KvmEntry,
    KvmEmulateInsn,
    KvmNestedVmexit,
    KvmNestedVmexitInject,
    KvmMmuGetPage,
    /// The kvmmmu page events that print the page's role.
    KvmMmuRole,
    TlbFlush,
    /// ftrace's `kernel_stack`: one `=> function (address)` line per frame.
    KernelStack,
    RawData,
    /// ftrace's `func_repeats`: the function line, the count and the last call's time.
    FuncRepeats,
    GraphEntry,
    GraphExit,
    /// mac80211's `drv_bss_info_changed`.
    BssInfoChanged,
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
            ("kvm", "kvm_exit") => Plugin::KvmExit,
            ("kvm", "kvm_entry") => Plugin::KvmEntry,
            ("kvm", "kvm_emulate_insn") => Plugin::KvmEmulateInsn,
            ("kvm", "kvm_nested_vmexit") => Plugin::KvmNestedVmexit,
            ("kvm", "kvm_nested_vmexit_inject") => Plugin::KvmNestedVmexitInject,
            ("kvmmmu", "kvm_mmu_get_page") => Plugin::KvmMmuGetPage,
            (
                "kvmmmu",
                "kvm_mmu_sync_page"
                | "kvm_mmu_unsync_page"
                | "kvm_mmu_zap_page"
                | "kvm_mmu_prepare_zap_page",
            ) => Plugin::KvmMmuRole,
            ("tlb", "tlb_flush") => Plugin::TlbFlush,
            ("ftrace", "kernel_stack") => Plugin::KernelStack,
            ("ftrace", "raw_data") => Plugin::RawData,
            ("ftrace", "func_repeats") => Plugin::FuncRepeats,
            ("ftrace", "funcgraph_entry") => Plugin::GraphEntry,
            ("ftrace", "funcgraph_exit") => Plugin::GraphExit,
            ("mac80211", "drv_bss_info_changed") => Plugin::BssInfoChanged,
            _ => return None,
        })
    }
}

/// A handler's outcome as libtraceevent takes it: printed, or (it returned non-zero, having
/// perhaps written something) the print fmt follows.
pub(super) fn handled(o: Option<()>) -> Printed {
    o.map_or(Printed::ThenPrintFmt, |()| Printed::All)
}

/// The event's own field `name` (libtraceevent's `tep_find_field`).
pub(super) fn own_field<'f>(fmt: &'f EventFormat, name: &str) -> Option<&'f Field> {
    fmt.fields.iter().find(|f| f.name == name)
}

/// A field's number as libtraceevent's `get_field_val` reads it: unsigned, 1, 2, 4 or 8
/// bytes (0 past the record's end). None when the field is missing or of another size,
/// having written, with `err`, what libtraceevent writes then.
fn field_num(
    f: Option<&Field>,
    name: &str,
    p: &[u8],
    e: Endian,
    err: bool,
    out: &mut Vec<u8>,
) -> Option<u64> {
    let Some(f) = f else {
        if err {
            out.extend_from_slice(format!("<CANT FIND FIELD {name}>").as_bytes());
        }
        return None;
    };
    if !matches!(f.size, 1 | 2 | 4 | 8) {
        if err {
            out.extend_from_slice(format!(" {name}=INVALID").as_bytes());
        }
        return None;
    }
    Some(e.uint(p, f.offset, f.size).unwrap_or(0))
}

/// `tep_get_field_val`: the event's own field.
pub(super) fn get_field(
    fmt: &EventFormat,
    name: &str,
    p: &[u8],
    e: Endian,
    err: bool,
    out: &mut Vec<u8>,
) -> Option<u64> {
    field_num(own_field(fmt, name), name, p, e, err, out)
}

/// `tep_get_common_field_val`: a common field (`err` set).
pub(super) fn common_field(
    fmt: &EventFormat,
    name: &str,
    p: &[u8],
    e: Endian,
    out: &mut Vec<u8>,
) -> Option<u64> {
    field_num(
        fmt.common.iter().find(|f| f.name == name),
        name,
        p,
        e,
        true,
        out,
    )
}

/// `tep_print_num_field`: `write` the field's value, or with `err` say it is missing.
pub(super) fn print_num_field(
    fmt: &EventFormat,
    name: &str,
    p: &[u8],
    e: Endian,
    err: bool,
    out: &mut Vec<u8>,
    write: impl FnOnce(u64, &mut Vec<u8>),
) {
    let f = own_field(fmt, name).filter(|f| matches!(f.size, 1 | 2 | 4 | 8));
    match f {
        Some(f) => write(e.uint(p, f.offset, f.size).unwrap_or(0), out),
        None if err => out.extend_from_slice(format!("CAN'T FIND FIELD \"{name}\"").as_bytes()),
        None => {}
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
    /// Runs `p` on the record of `fmt` at `ts` (ns) on `cpu`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn run_plugin(
        &mut self,
        p: Plugin,
        fmt: &EventFormat,
        ts: u64,
        cpu: u32,
        payload: &[u8],
        e: Endian,
        out: &mut Vec<u8>,
    ) -> Printed {
        match p {
            Plugin::SchedSwitch => self.sched_switch(fmt, payload, e, out),
            Plugin::SchedWakeup => self.sched_wakeup(fmt, payload, e, out),
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
            Plugin::KvmExit => kvm::kvm_exit(fmt, payload, e, out),
            Plugin::KvmEntry => kvm::kvm_entry(fmt, payload, e, out),
            Plugin::KvmEmulateInsn => kvm::kvm_emulate_insn(fmt, payload, e, out),
            Plugin::KvmNestedVmexit => kvm::kvm_nested_vmexit(fmt, payload, e, out),
            Plugin::KvmNestedVmexitInject => kvm::kvm_nested_vmexit_inject(fmt, payload, e, out),
            Plugin::KvmMmuGetPage => kvm::kvm_mmu_get_page(fmt, payload, e, out),
            Plugin::KvmMmuRole => kvm::kvm_mmu_role(fmt, payload, e, out),
            Plugin::TlbFlush => tlb_flush(fmt, payload, e, out),
            Plugin::KernelStack => self.kernel_stack(fmt, payload, e, out),
            Plugin::RawData => raw_data(fmt, payload, e, out),
            Plugin::FuncRepeats => self.func_repeats(fmt, ts, cpu, payload, e, out),
            Plugin::GraphEntry => self.graph_entry(fmt, payload, e, out),
            Plugin::GraphExit => self.graph_exit(fmt, payload, e, out),
            Plugin::BssInfoChanged => bss_info_changed(fmt, payload, e, out),
        }
    }

    /// plugin_function's `kernel_stack`: `<stack trace >`, then a line per frame up to the
    /// record's end or an address of -1.
    fn kernel_stack(
        &mut self,
        fmt: &EventFormat,
        p: &[u8],
        e: Endian,
        out: &mut Vec<u8>,
    ) -> Printed {
        let Some(f) = field(fmt, "caller") else {
            out.extend_from_slice(b"<CANT FIND FIELD caller>");
            return Printed::All;
        };
        out.extend_from_slice(b"<stack trace >\n");
        let long = self.trace.long_size;
        let mut at = f.offset;
        while at < p.len() {
            // A last word the record cuts short reads as zeros beyond it.
            let mut word = [0u8; 8];
            let n = long.min(p.len() - at);
            word[..n].copy_from_slice(&p[at..at + n]);
            let addr = e.uint(&word, 0, long).unwrap_or(0);
            if (long == 8 && addr == u64::MAX) || addr as u32 == u32::MAX {
                break;
            }
            out.extend_from_slice(b"=> ");
            match self.syms.funcs().find(addr) {
                Some((name, _)) => {
                    out.extend_from_slice(name);
                    out.extend_from_slice(b" (");
                    cfmt::write_hex(addr, out);
                    out.extend_from_slice(b")\n");
                }
                None => {
                    cfmt::write_hex(addr, out);
                    out.push(b'\n');
                }
            }
            at += long;
        }
        Printed::All
    }

    /// plugin_function's `func_repeats`: the function as `function` prints it, then
    /// ` (count: N  last_ts: TIME)`, the time of the last repeat as the line's time prints.
    fn func_repeats(
        &mut self,
        fmt: &EventFormat,
        ts: u64,
        cpu: u32,
        p: &[u8],
        e: Endian,
        out: &mut Vec<u8>,
    ) -> Printed {
        if self.function(fmt, cpu, p, e, out).is_none() {
            return Printed::Failed;
        }
        let mut vals = [0u64; 3];
        for (v, name) in vals
            .iter_mut()
            .zip(["count", "top_delta_ts", "bottom_delta_ts"])
        {
            match get_field(fmt, name, p, e, true, out) {
                Some(x) => *v = x,
                None => {
                    out.push(b'!');
                    return Printed::ThenPrintFmt;
                }
            }
        }
        let [count, top, bottom] = vals;
        out.extend_from_slice(b" (count: ");
        lld(count, out);
        out.extend_from_slice(b"  last_ts: ");
        let last = ts.wrapping_sub(top << 32 | bottom);
        self.write_time_value(last, out);
        out.push(b')');
        Printed::All
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

    /// plugin_sched_switch's `sched_switch`: `prev:pid [prio] STATE ==> next:pid [prio]`,
    /// saying which field it cannot find.
    fn sched_switch(
        &mut self,
        fmt: &EventFormat,
        p: &[u8],
        e: Endian,
        out: &mut Vec<u8>,
    ) -> Printed {
        let Some(prev_pid) = get_field(fmt, "prev_pid", p, e, true, out) else {
            out.push(b'!');
            return Printed::ThenPrintFmt;
        };
        if let Some(f) = field(fmt, "prev_comm") {
            self.comm_field(f, prev_pid, p, out);
            out.push(b':');
        }
        lld(prev_pid, out);
        out.push(b' ');
        if let Some(prio) = get_field(fmt, "prev_prio", p, e, true, out) {
            out.push(b'[');
            int(prio, out);
            out.extend_from_slice(b"] ");
        }
        if let Some(state) = get_field(fmt, "prev_state", p, e, true, out) {
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
        let Some(next_pid) = get_field(fmt, "next_pid", p, e, true, out) else {
            out.push(b'!');
            return Printed::ThenPrintFmt;
        };
        if let Some(f) = field(fmt, "next_comm") {
            self.comm_field(f, next_pid, p, out);
            out.push(b':');
        }
        lld(next_pid, out);
        if let Some(prio) = get_field(fmt, "next_prio", p, e, true, out) {
            out.extend_from_slice(b" [");
            int(prio, out);
            out.push(b']');
        }
        Printed::All
    }

    /// plugin_sched_switch's `sched_wakeup(_new)`: `comm:pid [prio]`, and `success=`
    /// and `CPU:` where the event has them.
    fn sched_wakeup(
        &mut self,
        fmt: &EventFormat,
        p: &[u8],
        e: Endian,
        out: &mut Vec<u8>,
    ) -> Printed {
        let Some(pid) = get_field(fmt, "pid", p, e, true, out) else {
            out.push(b'!');
            return Printed::ThenPrintFmt;
        };
        if let Some(f) = field(fmt, "comm") {
            self.comm_field(f, pid, p, out);
            out.push(b':');
        }
        lld(pid, out);
        if let Some(prio) = get_field(fmt, "prio", p, e, true, out) {
            out.extend_from_slice(b" [");
            lld(prio, out);
            out.push(b']');
        }
        if let Some(s) = get_field(fmt, "success", p, e, false, out) {
            out.extend_from_slice(b" success=");
            lld(s, out);
        }
        if let Some(c) = get_field(fmt, "target_cpu", p, e, false, out) {
            out.extend_from_slice(b" CPU:");
            cfmt::write_dec_padded(c, 3, true, out);
        }
        Printed::All
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

/// plugin_tlb: `pages=N reason=WHY (N)`.
fn tlb_flush(fmt: &EventFormat, p: &[u8], e: Endian, out: &mut Vec<u8>) -> Printed {
    out.extend_from_slice(b"pages=");
    print_num_field(fmt, "pages", p, e, true, out, lld);
    let Some(reason) = get_field(fmt, "reason", p, e, true, out) else {
        return Printed::ThenPrintFmt;
    };
    out.extend_from_slice(b" reason=");
    out.extend_from_slice(match reason {
        0 => &b"flush on task switch"[..],
        1 => b"remote shootdown",
        2 => b"local shootdown",
        3 => b"local mm shootdown",
        _ => b"",
    });
    out.extend_from_slice(b" (");
    lld(reason, out);
    out.push(b')');
    Printed::All
}

/// plugin_function's `raw_data`: `# ID` and the buffer's bytes to the record's end.
fn raw_data(fmt: &EventFormat, p: &[u8], e: Endian, out: &mut Vec<u8>) -> Printed {
    let Some(id) = get_field(fmt, "id", p, e, true, out) else {
        out.push(b'!');
        return Printed::ThenPrintFmt;
    };
    out.extend_from_slice(b"# ");
    cfmt::write_hex(id, out);
    let Some(f) = field(fmt, "buf") else {
        out.extend_from_slice(b"<CANT FIND FIELD buf>");
        return Printed::All;
    };
    for b in p.get(f.offset..).unwrap_or_default() {
        out.extend_from_slice(format!(" {b:02x}").as_bytes());
    }
    Printed::All
}

/// plugin_mac80211's `drv_bss_info_changed`: the device and interface, then the BSS
/// settings on three further lines indented 65 columns (a field the event lacks is left out).
fn bss_info_changed(fmt: &EventFormat, p: &[u8], e: Endian, out: &mut Vec<u8>) -> Printed {
    let string = |name: &str, out: &mut Vec<u8>| {
        let Some(f) = own_field(fmt, name) else {
            out.extend_from_slice(format!("NOTFOUND:{name}").as_bytes());
            return;
        };
        let (off, len) = if f.type_name.starts_with("__data_loc") {
            match e.uint(p, f.offset, f.size.min(4)) {
                Some(v) if matches!(f.size, 1 | 2 | 4 | 8) => {
                    ((v & 0xffff) as usize, (v >> 16 & 0xffff) as usize)
                }
                _ => {
                    out.extend_from_slice(b"invalid_data_loc");
                    return;
                }
            }
        } else {
            (f.offset, f.size)
        };
        let bytes = p
            .get(off..off.saturating_add(len).min(p.len()))
            .unwrap_or_default();
        out.extend_from_slice(cfmt::until_nul(bytes));
    };
    let num = |name: &'static str, hex: bool, out: &mut Vec<u8>| {
        print_num_field(fmt, name, p, e, false, out, |v, out| {
            out.extend_from_slice(name.as_bytes());
            out.push(b':');
            let v = v as u32;
            if !hex {
                lld(v as i32 as i64 as u64, out);
            } else if v == 0 {
                out.push(b'0');
            } else {
                out.extend_from_slice(b"0x");
                cfmt::write_hex(v as u64, out);
            }
        });
    };
    let newline = |out: &mut Vec<u8>| {
        out.push(b'\n');
        out.resize(out.len() + 65, b' ');
    };
    string("wiphy_name", out);
    out.extend_from_slice(b" vif:");
    string("vif_name", out);
    print_num_field(fmt, "vif_type", p, e, true, out, |v, out| {
        out.push(b'(');
        lld(v as i32 as i64 as u64, out);
        out.push(b')');
    });
    newline(out);
    for name in ["assoc", "aid", "cts", "shortpre", "shortslot", "dtimper"] {
        num(name, false, out);
        out.push(b' ');
    }
    newline(out);
    num("bcnint", false, out);
    out.push(b' ');
    num("assoc_cap", true, out);
    out.push(b' ');
    num("basic_rates", true, out);
    out.push(b' ');
    num("enable_beacon", false, out);
    newline(out);
    num("ht_operation_mode", false, out);
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
