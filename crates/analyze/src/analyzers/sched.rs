//! What the scheduler analyzers share: sched_switch / sched_wakeup fields resolved once,
//! and the decoding of `prev_state` as the kernel's own print format spells it.

use kstate_format::{EventFormat, FieldRef, Trace};

use crate::analyzer::{need, Out};
use crate::fxmap::{FxMap, FxSet};
use kstate_format::stream::merge::Event;

/// sched_switch, resolved.
#[derive(Debug, Clone, Copy)]
pub struct Switch {
    pub id: u32,
    pub prev_pid: FieldRef,
    pub prev_state: FieldRef,
    pub next_pid: FieldRef,
    pub prev_comm: (usize, usize),
    pub next_comm: (usize, usize),
}

/// sched_wakeup / sched_wakeup_new, resolved.
#[derive(Debug, Clone, Copy)]
pub struct Wakeup {
    pub id: u32,
    pub pid: FieldRef,
    /// Missing in some old kernels; then the wakee goes to the waking CPU.
    pub target_cpu: Option<FieldRef>,
    pub comm: (usize, usize),
}

impl Wakeup {
    /// The CPU the wakee is queued on: `target_cpu`, or the waking CPU where the kernel has
    /// no such field. None for a damaged event (reported through `out`).
    pub fn target(&self, ev: &Event<'_>, out: &mut Out) -> Option<u32> {
        match self
            .target_cpu
            .and_then(|f| f.get_u64(ev.payload, ev.endian))
        {
            None => Some(ev.cpu),
            Some(c) => out.cpu_field("sched_wakeup target_cpu", c),
        }
    }
}

fn comm_field(ev: &EventFormat, name: &str) -> Option<(usize, usize)> {
    ev.field(name).map(|f| (f.offset, f.size))
}

pub fn switch(trace: &Trace, missing: &mut Vec<String>) -> Option<Switch> {
    let ev = need(trace, "sched:sched_switch", missing)?;
    let f = |n: &str| ev.field(n).map(FieldRef::from);
    Some(Switch {
        id: ev.id,
        prev_pid: f("prev_pid")?,
        prev_state: f("prev_state")?,
        next_pid: f("next_pid")?,
        prev_comm: comm_field(ev, "prev_comm")?,
        next_comm: comm_field(ev, "next_comm")?,
    })
}

/// sched_wakeup and (where recorded) sched_wakeup_new.
pub fn wakeups(trace: &Trace, missing: &mut Vec<String>) -> Vec<Wakeup> {
    let mut v = Vec::new();
    let mut absent = Vec::new();
    for name in ["sched:sched_wakeup", "sched:sched_wakeup_new"] {
        let Some(ev) = need(trace, name, &mut absent) else {
            continue;
        };
        let (Some(pid), Some(comm)) = (ev.field("pid"), comm_field(ev, "comm")) else {
            continue;
        };
        v.push(Wakeup {
            id: ev.id,
            pid: pid.into(),
            target_cpu: ev.field("target_cpu").map(FieldRef::from),
            comm,
        });
    }
    if v.is_empty() {
        missing.push("sched:sched_wakeup".into());
    }
    v
}

#[inline]
pub fn bytes(payload: &[u8], (off, len): (usize, usize)) -> &[u8] {
    payload.get(off..off + len).unwrap_or(&[])
}

/// How `prev_state` reads, from sched_switch's print fmt:
/// `prev_state & MASK ? __print_flags(prev_state & MASK, "|", {1, "S"}, ...) : "R"`,
/// then `prev_state & PREEMPT ? "+" : ""`. The values of the bits changed across kernel
/// versions (TASK_REPORT_MAX is 0x100 in 6.x, 2048 or 4096 in 4.x), so they are read
/// from the file, not assumed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateNames {
    pub mask: u64,
    pub preempt: u64,
    pub flags: Vec<(u64, String)>,
}

impl StateNames {
    pub fn from_print_fmt(fmt: &str) -> StateNames {
        let mut flags = Vec::new();
        let mut mask = None;
        if let Some(at) = fmt.find("__print_flags(") {
            let rest = &fmt[at + "__print_flags(".len()..];
            if let Some(expr) = rest.split_once(',').map(|x| x.0) {
                mask = expr
                    .trim()
                    .strip_prefix("REC->prev_state")
                    .and_then(|e| e.trim().strip_prefix('&'))
                    .and_then(eval);
            }
            // `{ 0x00000001, "S" }` pairs up to the closing parenthesis of the call.
            let mut s = rest;
            while let Some(open) = s.find('{') {
                let Some(close) = s[open..].find('}') else {
                    break;
                };
                let inner = &s[open + 1..open + close];
                if let Some((v, name)) = inner.split_once(',') {
                    if let Some(v) = eval(v) {
                        flags.push((v, name.trim().trim_matches('"').to_string()));
                    }
                }
                s = &s[open + close + 1..];
                if s.trim_start().starts_with(')') {
                    break;
                }
            }
        }
        if flags.is_empty() {
            flags = [
                (1, "S"),
                (2, "D"),
                (4, "T"),
                (8, "t"),
                (16, "X"),
                (32, "Z"),
                (64, "P"),
                (128, "I"),
            ]
            .iter()
            .map(|&(v, n)| (v, n.to_string()))
            .collect();
        }
        let max_flag = flags.iter().map(|f| f.0).max().unwrap_or(128);
        let mask = mask.unwrap_or(max_flag * 2 - 1);
        // `REC->prev_state & EXPR ? "+"`.
        let preempt = fmt
            .find("? \"+\"")
            .and_then(|end| {
                let head = &fmt[..end];
                let at = head.rfind("REC->prev_state")?;
                head[at + "REC->prev_state".len()..]
                    .trim()
                    .strip_prefix('&')
                    .and_then(eval)
            })
            .unwrap_or(mask + 1);
        StateNames {
            mask,
            preempt,
            flags,
        }
    }

    /// The bits a key keeps: state bits and the preemption marker.
    pub fn key_bits(&self) -> u64 {
        self.mask | self.preempt
    }

    /// Whether a task switched out in state `s` is still runnable (preempted).
    #[inline]
    pub fn is_runnable(&self, s: u64) -> bool {
        s & self.mask == 0
    }

    /// `S`, `D`, `R+`, `D|K`: what `trace-cmd report` prints.
    pub fn name(&self, s: u64) -> String {
        let bits = s & self.mask;
        let mut out = String::new();
        if bits == 0 {
            out.push('R');
        } else {
            let mut left = bits;
            for (v, n) in &self.flags {
                if *v != 0 && bits & v == *v {
                    if !out.is_empty() {
                        out.push('|');
                    }
                    out.push_str(n);
                    left &= !v;
                }
            }
            if left != 0 {
                if !out.is_empty() {
                    out.push('|');
                }
                out.push_str(&format!("0x{left:x}"));
            }
        }
        if s & self.preempt != 0 {
            out.push('+');
        }
        out
    }
}

/// Evaluates the constant expressions of print fmts: integers (decimal, 0x hex) with
/// `|`, `+`, `-`, `<<` and parentheses, left to right within a precedence level.
pub fn eval(s: &str) -> Option<u64> {
    let toks = tokens(s)?;
    let mut p = 0;
    let v = or_expr(&toks, &mut p)?;
    (p == toks.len()).then_some(v)
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Num(u64),
    Op(&'static str),
}

fn tokens(s: &str) -> Option<Vec<Tok>> {
    let b = s.as_bytes();
    let mut i = 0;
    let mut v = Vec::new();
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() {
            i += 1;
        } else if c.is_ascii_digit() {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric()) {
                i += 1;
            }
            let t = s[start..i].trim_end_matches(['u', 'U', 'l', 'L']);
            let n = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
                Some(h) => u64::from_str_radix(h, 16).ok()?,
                None => t.parse().ok()?,
            };
            v.push(Tok::Num(n));
        } else if s[i..].starts_with("<<") {
            v.push(Tok::Op("<<"));
            i += 2;
        } else {
            v.push(Tok::Op(match c {
                b'|' => "|",
                b'+' => "+",
                b'-' => "-",
                b'(' => "(",
                b')' => ")",
                _ => return None,
            }));
            i += 1;
        }
    }
    Some(v)
}

fn or_expr(t: &[Tok], p: &mut usize) -> Option<u64> {
    let mut v = shift_expr(t, p)?;
    while t.get(*p) == Some(&Tok::Op("|")) {
        *p += 1;
        v |= shift_expr(t, p)?;
    }
    Some(v)
}

fn shift_expr(t: &[Tok], p: &mut usize) -> Option<u64> {
    let mut v = add_expr(t, p)?;
    while t.get(*p) == Some(&Tok::Op("<<")) {
        *p += 1;
        v = v.checked_shl(add_expr(t, p)? as u32)?;
    }
    Some(v)
}

fn add_expr(t: &[Tok], p: &mut usize) -> Option<u64> {
    let mut v = atom(t, p)?;
    loop {
        match t.get(*p) {
            Some(Tok::Op("+")) => {
                *p += 1;
                v = v.wrapping_add(atom(t, p)?);
            }
            Some(Tok::Op("-")) => {
                *p += 1;
                v = v.wrapping_sub(atom(t, p)?);
            }
            _ => return Some(v),
        }
    }
}

fn atom(t: &[Tok], p: &mut usize) -> Option<u64> {
    match t.get(*p)? {
        Tok::Num(n) => {
            *p += 1;
            Some(*n)
        }
        Tok::Op("(") => {
            *p += 1;
            let v = or_expr(t, p)?;
            if t.get(*p) != Some(&Tok::Op(")")) {
                return None;
            }
            *p += 1;
            Some(v)
        }
        _ => None,
    }
}

/// Infers the sched_switch a kernel failed to trace when a CPU left idle.
///
/// Some kernels do not emit sched_switch on a CPU's way out of idle (seen on 6.18 in a
/// KVM guest: CPU 1 switches *to* idle in the trace but never *from* it, and `perf
/// script` shows the same). A task woken onto such a CPU then runs without ever being
/// switched in, and every analyzer pairing switch-out with switch-in loses or stretches
/// the interval. The tracker notices the gap: a task seen running on a CPU (switched out
/// there, or making its own events) that no traced switch put on it, although it was
/// woken onto that CPU, was switched in without a trace. It ran from its wake-up, or
/// from the CPU's last traced switch if that came later — an idle CPU runs what it is
/// woken for at once, so the error is the CPU's exit latency from idle (microseconds).
/// A traced task is always switched in by a traced switch on kernels without the quirk
/// (in a recording filtered to some tasks, too: the switch to a task in the filter is
/// kept), so there the tracker never fires.
#[derive(Debug, Default)]
pub struct IdleExits {
    /// Per CPU: the task the last traced switch put on it, and when.
    current: Vec<Option<(i32, u64)>>,
    /// Tasks woken and not yet seen running: the CPU they were woken onto, and when.
    woken: FxMap<i32, (u32, u64)>,
    /// Switch-ins inferred so far.
    pub inferred: u64,
}

impl IdleExits {
    fn cpu(&mut self, cpu: u32) -> usize {
        let c = cpu as usize;
        if c >= self.current.len() {
            self.current.resize(c + 1, None);
        }
        c
    }

    /// A sched_wakeup(_new) of `pid` onto `cpu` at `ts`. A second wake-up before the
    /// task ran does not move its start.
    pub fn wakeup(&mut self, cpu: u32, pid: i32, ts: u64) {
        if pid != 0 {
            self.woken.entry(pid).or_insert((cpu, ts));
        }
    }

    /// `tid` is seen running on `cpu` (an event of its own there). Returns when it was
    /// switched in if that switch is missing from the trace.
    pub fn running(&mut self, cpu: u32, tid: i32) -> Option<u64> {
        let c = self.cpu(cpu);
        let at = missed_switch_in(cpu, tid, self.current[c], || self.woken.get(&tid).copied())?;
        self.woken.remove(&tid);
        self.current[c] = Some((tid, at));
        self.inferred += 1;
        Some(at)
    }

    /// A sched_switch on `cpu` at `ts` from `prev` to `next`. Returns when `prev` was
    /// switched in, when the trace lacks that switch; apply it before this switch.
    pub fn switch(&mut self, cpu: u32, prev: i32, next: i32, ts: u64) -> Option<u64> {
        let inferred = self.running(cpu, prev);
        self.switched(cpu, prev, next, ts);
        inferred
    }

    /// What a switch leaves, whatever it inferred: `next` on the CPU, neither task waiting
    /// on a wake-up.
    fn switched(&mut self, cpu: u32, prev: i32, next: i32, ts: u64) {
        if !self.woken.is_empty() {
            self.woken.remove(&prev);
            self.woken.remove(&next);
        }
        let c = self.cpu(cpu);
        self.current[c] = Some((next, ts));
    }

    /// [`IdleExits::switch`] in a time slice after the first ([`crate::slices`]), which
    /// this tracker began empty; `prev_first` says it is `prev`'s first switch in the
    /// slice. Whether `prev` was switched in without a trace reads the CPU's task, known
    /// from the CPU's first switch in the slice on, and the wake-up `prev` waits on, which
    /// up to `prev`'s first switch may be one from before the slice. Where the answer
    /// reads what the slice does not know, it is left to the join: `Err` with what the
    /// slice saw ([`IdleExits::join_switch`]). The state after the switch is the one
    /// pass's either way. (For trackers told only switches and wake-ups: an inference of
    /// [`IdleExits::running`] between them would need the same care.)
    pub fn switch_in_slice(
        &mut self,
        cpu: u32,
        prev: i32,
        next: i32,
        ts: u64,
        prev_first: bool,
    ) -> Result<Option<u64>, SwitchHead> {
        let c = self.cpu(cpu);
        if prev == 0 || (self.current[c].is_some() && !prev_first) {
            return Ok(self.switch(cpu, prev, next, ts));
        }
        let head = SwitchHead {
            cpu,
            prev,
            first: prev_first,
            current: self.current[c],
            woken: self.woken.get(&prev).copied(),
        };
        self.switched(cpu, prev, next, ts);
        Err(head)
    }

    /// Joins a switch the later slice left undecided ([`IdleExits::switch_in_slice`]) with
    /// the state this tracker holds at the slice's start: returns when the switch's
    /// `prev` was switched in without a trace, counted as [`IdleExits::running`] counts.
    pub fn join_switch(&mut self, h: &SwitchHead) -> Option<u64> {
        // No switch on the CPU in the slice before this one: the CPU's task is ours.
        let current = h
            .current
            .or_else(|| self.current.get(h.cpu as usize).copied().flatten());
        // Before `prev`'s first switch in the slice, a wake-up we hold came first (a
        // second one does not move it); the switch spends it.
        let woken = match h.first {
            true => self.woken.remove(&h.prev).or(h.woken),
            false => h.woken,
        };
        let at = missed_switch_in(h.cpu, h.prev, current, || woken)?;
        self.inferred += 1;
        Some(at)
    }

    /// Joins the first switch of the later slice that puts `tid` on a CPU: it spends the
    /// wake-up we hold for `tid`.
    pub fn join_switch_in(&mut self, tid: i32) {
        self.woken.remove(&tid);
    }

    /// Takes over the state of `next`, the tracker of the following time slice, once
    /// its undecided switches are joined ([`IdleExits::join_switch`],
    /// [`IdleExits::join_switch_in`]): its CPUs' tasks where it saw a switch, its
    /// wake-ups where we hold none (a thread it saw switch spent ours in the join).
    pub fn join(&mut self, next: IdleExits) {
        for (cpu, cur) in next.current.into_iter().enumerate() {
            if cur.is_some() {
                let c = self.cpu(cpu as u32);
                self.current[c] = cur;
            }
        }
        for (tid, w) in next.woken {
            self.woken.entry(tid).or_insert(w);
        }
        self.inferred += next.inferred;
    }
}

/// A switch whose inference a time slice left to the join
/// ([`IdleExits::switch_in_slice`]): what the slice saw.
#[derive(Debug, Clone, Copy)]
pub struct SwitchHead {
    pub cpu: u32,
    pub prev: i32,
    /// `prev`'s first switch in the slice.
    pub first: bool,
    /// The CPU's task; `None`: the CPU's first switch in the slice.
    current: Option<(i32, u64)>,
    /// The wake-up `prev` waited on in the slice.
    woken: Option<(u32, u64)>,
}

/// The threads a time slice after the first ([`crate::slices`]) has seen switch so far:
/// up to its first switch there, what a thread's state is may read what the slices
/// before left; from then on it is the slice's own.
#[derive(Debug, Default)]
pub struct Switched {
    seen: FxSet<i32>,
    /// Some of them, by thread id modulo its length: most switches are between a few
    /// threads, which this finds without hashing.
    recent: [i32; 8],
}

impl Switched {
    /// Whether this is the first switch of `tid` (not 0: idle is no thread) in the
    /// slice; from now on it is seen.
    #[inline]
    pub fn first(&mut self, tid: i32) -> bool {
        let slot = &mut self.recent[tid as u32 as usize % self.recent.len()];
        if *slot == tid {
            return false;
        }
        *slot = tid;
        self.seen.insert(tid)
    }

    /// Whether `tid` (not 0) has switched in the slice.
    #[inline]
    pub fn seen(&self, tid: i32) -> bool {
        self.recent[tid as u32 as usize % self.recent.len()] == tid || self.seen.contains(&tid)
    }
}

/// When `tid`, seen running on `cpu`, was switched in without a trace: not if it is the
/// task the CPU's last traced switch put on it (`current`); else if it waits on a wake-up
/// onto this CPU (`woken`, asked only then), from the later of that wake-up and the CPU's
/// last traced switch.
#[inline]
fn missed_switch_in(
    cpu: u32,
    tid: i32,
    current: Option<(i32, u64)>,
    woken: impl FnOnce() -> Option<(u32, u64)>,
) -> Option<u64> {
    if tid == 0 || matches!(current, Some((t, _)) if t == tid) {
        return None;
    }
    let (on, woke) = woken()?;
    (on == cpu).then(|| woke.max(current.map_or(0, |x| x.1)))
}

#[cfg(test)]
mod tests {
    use super::*;

    const V4_4096: &str = r#""prev_comm=%s prev_pid=%d prev_prio=%d prev_state=%s%s ==> next_comm=%s next_pid=%d next_prio=%d", REC->prev_comm, REC->prev_pid, REC->prev_prio, REC->prev_state & (4096-1) ? __print_flags(REC->prev_state & (4096-1), "|", { 1, "S"} , { 2, "D" }, { 4, "T" }, { 8, "t" }, { 16, "Z" }, { 32, "X" }, { 64, "x" }, { 128, "K" }, { 256, "W" }, { 512, "P" }, { 1024, "N" }) : "R", REC->prev_state & 4096 ? "+" : "", REC->next_comm, REC->next_pid, REC->next_prio"#;
    const V6: &str = r#""prev_comm=%s prev_pid=%d prev_prio=%d prev_state=%s%s ==> next_comm=%s next_pid=%d next_prio=%d", REC->prev_comm, REC->prev_pid, REC->prev_prio, (REC->prev_state & ((((0x00000000 | 0x00000001 | 0x00000002 | 0x00000004 | 0x00000008 | 0x00000010 | 0x00000020 | 0x00000040) + 1) << 1) - 1)) ? __print_flags(REC->prev_state & ((((0x00000000 | 0x00000001 | 0x00000002 | 0x00000004 | 0x00000008 | 0x00000010 | 0x00000020 | 0x00000040) + 1) << 1) - 1), "|", { 0x00000001, "S" }, { 0x00000002, "D" }, { 0x00000004, "T" }, { 0x00000008, "t" }, { 0x00000010, "X" }, { 0x00000020, "Z" }, { 0x00000040, "P" }, { 0x00000080, "I" }) : "R", REC->prev_state & (((0x00000000 | 0x00000001 | 0x00000002 | 0x00000004 | 0x00000008 | 0x00000010 | 0x00000020 | 0x00000040) + 1) << 1) ? "+" : "", REC->next_comm, REC->next_pid, REC->next_prio"#;

    #[test]
    fn states_of_4x_kernels() {
        let s = StateNames::from_print_fmt(V4_4096);
        assert_eq!((s.mask, s.preempt, s.flags.len()), (4095, 4096, 11));
        assert_eq!(s.name(0), "R");
        assert_eq!(s.name(4096), "R+");
        assert_eq!(s.name(1), "S");
        assert_eq!(s.name(130), "D|K");
        assert!(s.is_runnable(4096) && !s.is_runnable(2));
    }

    #[test]
    fn states_of_6x_kernels() {
        let s = StateNames::from_print_fmt(V6);
        assert_eq!((s.mask, s.preempt, s.flags.len()), (0xff, 0x100, 8));
        assert_eq!(s.name(0x100), "R+");
        assert_eq!(s.name(0x80), "I");
        assert_eq!(s.name(2), "D");
    }

    #[test]
    fn this_kernels_sched_switch() {
        let p = "/sys/kernel/tracing/events/sched/sched_switch/format";
        let Ok(text) = std::fs::read_to_string(p) else {
            return;
        };
        let f = EventFormat::parse(text.as_bytes(), "sched", 8).unwrap();
        let s = StateNames::from_print_fmt(&f.print_fmt);
        assert_eq!(s.name(1), "S");
        assert_eq!(s.name(2), "D");
        assert!(s.preempt > s.mask);
    }

    #[test]
    fn expressions() {
        assert_eq!(eval("(4096-1)"), Some(4095));
        assert_eq!(eval("((1|2)+1)<<1"), Some(8));
        assert_eq!(eval("0x10UL"), Some(16));
        assert_eq!(eval("1 +"), None);
        assert_eq!(eval("x"), None);
    }
}

#[cfg(test)]
mod idle_exit_tests {
    use super::IdleExits;

    #[test]
    fn a_missed_switch_from_idle_is_inferred_at_the_wake_up() {
        let mut t = IdleExits::default();
        t.switch(1, 42, 0, 500); // CPU 1 goes idle
        t.wakeup(1, 7, 1_000);
        // No switch 0 -> 7; 7 is switched out: it ran from its wake-up.
        assert_eq!(t.switch(1, 7, 0, 3_000), Some(1_000));
        assert_eq!(t.inferred, 1);
        // Its own event after a wake-up says the same.
        t.wakeup(1, 9, 4_000);
        assert_eq!(t.running(1, 9), Some(4_000));
        assert_eq!(t.running(1, 9), None);
        assert_eq!(t.inferred, 2);
    }

    #[test]
    fn a_switch_traced_after_the_wake_up_bounds_the_start() {
        // In a recording filtered to task 7, the switch from 7 to an unfiltered task is
        // kept but that task's own switch to idle is not.
        let mut t = IdleExits::default();
        t.wakeup(1, 7, 1_000);
        t.switch(1, 42, 8, 2_000);
        // 8 was not 7: 7 cannot have run before 2_000.
        assert_eq!(t.switch(1, 7, 8, 3_000), Some(2_000));
    }

    #[test]
    fn a_traced_switch_in_leaves_nothing_to_infer() {
        let mut t = IdleExits::default();
        t.switch(0, 42, 0, 10);
        t.wakeup(0, 7, 1_000);
        assert_eq!(t.switch(0, 0, 7, 1_100), None);
        assert_eq!(t.switch(0, 7, 0, 1_200), None);
        // Woken onto another CPU than the one it is seen on (migrated): no guess.
        t.wakeup(1, 5, 2_000);
        assert_eq!(t.switch(0, 5, 0, 2_500), None);
        assert_eq!(t.inferred, 0);
    }
}
