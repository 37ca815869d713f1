//! `syscall`: time per system call, from entry to exit of the same thread.
//!
//! Events: raw_syscalls:sys_enter/sys_exit, or where those are absent the per-call
//! syscalls:sys_enter_NAME/sys_exit_NAME. Pairs: per thread, an entry with the next exit
//! of the same system call number. Key: the call's name (`--by name`, default) or the
//! thread (`--by tid`). Flag column: `errors`, exits with a negative return value.
//! Calls that never return (exit, exit_group) stay open and are counted as such.
//! Tasks that started during the recording are named from the events that tell their
//! names, where recorded ([`super::task_names`]).

use kstate_format::{FieldRef, Trace};

use crate::analyzer::{need, Analyzer, Info, Kind, Missing, Out, Sample, Tasks, Traits, Unit};
use crate::fxmap::FxMap;
use crate::pair::{Open, Pairs};
use crate::slices::Sliced;
use kstate_format::stream::merge::Event;

use super::task_names::TaskNames;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    None,
    /// raw_syscalls: the number is in the record.
    RawEnter,
    RawExit,
    /// syscalls:sys_enter_NAME / sys_exit_NAME: the number is `__syscall_nr`.
    Enter,
    Exit,
    /// An event that names a task ([`TaskNames`]).
    Names,
}

pub struct Syscall {
    by_tid: bool,
    roles: Vec<Role>,
    /// `id` (raw) or `__syscall_nr` of each event id.
    nr: Vec<FieldRef>,
    /// `ret` of each exit event id.
    ret: Vec<FieldRef>,
    names: &'static [&'static str],
    /// Names of syscalls:sys_enter_NAME events by event id, and by number once a record
    /// told the number.
    id_names: FxMap<u32, String>,
    learned: FxMap<u64, String>,
    pairs: Pairs<i32, i64>,
    task_names: TaskNames,
    /// In a time slice after the first: each thread's first event there.
    heads: Option<Box<Heads>>,
}

/// What a thread's first event in a time slice did, for the join with the calls the
/// earlier slices left open ([`Sliced::stitch`]).
#[derive(Debug, Clone, Copy)]
enum Head {
    /// An entry: it replaces a call left open (counted unmatched, as one pass does).
    Enter,
    /// An exit, counted unmatched here; it ends a call left open with the same number.
    Exit { nr: i64, ret: i64, ts: u64 },
}

#[derive(Debug)]
struct Heads {
    /// The thread of the event before: most events follow one of the same thread.
    last: i32,
    seen: crate::fxmap::FxSet<i32>,
    first: Vec<(i32, Head)>,
}

impl Heads {
    /// Whether this is `tid`'s first event in the slice.
    #[inline]
    fn first(&mut self, tid: i32) -> bool {
        if tid == self.last {
            return false;
        }
        self.last = tid;
        self.seen.insert(tid)
    }
}

/// The system call table of the traced machine, if kstate has it.
pub fn table(trace: &Trace) -> &'static [&'static str] {
    let arch_x86_64 = match &trace.uname {
        Some(u) => u.contains("x86_64"),
        // Raw captures do not say; they are read where they were recorded.
        None => cfg!(target_arch = "x86_64"),
    };
    if arch_x86_64 {
        super::syscall_x86_64::X86_64
    } else {
        &[]
    }
}

impl Analyzer for Syscall {
    const INFO: Info = Info {
        name: "syscall",
        about: "time per system call (entry to exit of the same thread)",
        needs:
            "raw_syscalls:sys_enter + raw_syscalls:sys_exit (or syscalls:sys_enter_*/sys_exit_*)",
        preset: "syscall",
        by: &[
            ("name", "system call name"),
            ("tid", "calling thread (comm-tid)"),
        ],
        flag_column: Some("errors"),
        value: "duration",
        unit: Unit::Ns,
        traits: Traits {
            window_local: true,
            ..Traits::DEFAULT
        },
        run: crate::slices::drive_sliced::<Syscall>,
        live: Some(crate::analyzer::live::<Syscall>),
    };

    fn bind(trace: &Trace, by: &str) -> Result<(Self, Vec<u32>), Missing> {
        let n = trace.events.id_limit();
        let mut s = Syscall {
            by_tid: by == "tid",
            roles: vec![Role::None; n],
            nr: vec![FieldRef::from(&dummy_field()); n],
            ret: vec![FieldRef::from(&dummy_field()); n],
            names: table(trace),
            id_names: FxMap::default(),
            learned: FxMap::default(),
            pairs: Pairs::default(),
            task_names: TaskNames::bind(trace),
            heads: None,
        };
        let mut ids = Vec::new();
        let mut missing = Vec::new();
        let raw = (
            need(trace, "raw_syscalls:sys_enter", &mut missing),
            need(trace, "raw_syscalls:sys_exit", &mut missing),
        );
        if let (Some(en), Some(ex)) = raw {
            if let (Some(id_en), Some(id_ex), Some(ret)) =
                (en.field("id"), ex.field("id"), ex.field("ret"))
            {
                s.roles[en.id as usize] = Role::RawEnter;
                s.roles[ex.id as usize] = Role::RawExit;
                s.nr[en.id as usize] = id_en.into();
                s.nr[ex.id as usize] = id_ex.into();
                s.ret[ex.id as usize] = ret.into();
                ids.extend([en.id, ex.id]);
                s.bind_names(&mut ids);
                return Ok((s, ids));
            }
        }
        for ev in trace.events.iter().filter(|e| e.system == "syscalls") {
            let Some(nr) = ev.field("__syscall_nr") else {
                continue;
            };
            if let Some(name) = ev.name.strip_prefix("sys_enter_") {
                s.roles[ev.id as usize] = Role::Enter;
                s.nr[ev.id as usize] = nr.into();
                // The number is only in records; remember the name per event id for now.
                s.id_names.insert(ev.id, name.to_string());
                ids.push(ev.id);
            } else if ev.name.starts_with("sys_exit_") {
                if let Some(ret) = ev.field("ret") {
                    s.roles[ev.id as usize] = Role::Exit;
                    s.nr[ev.id as usize] = nr.into();
                    s.ret[ev.id as usize] = ret.into();
                    ids.push(ev.id);
                }
            }
        }
        if ids.is_empty() {
            return Err(Missing::events(missing));
        }
        s.bind_names(&mut ids);
        Ok((s, ids))
    }

    fn measures(&self, id: u32) -> bool {
        self.roles.get(id as usize) != Some(&Role::Names)
    }

    #[inline(always)]
    fn event(&mut self, ev: &Event<'_>, out: &mut Out) {
        let id = ev.id as usize;
        let Some(&role) = self.roles.get(id) else {
            return;
        };
        let tid = ev.pid();
        match role {
            Role::RawEnter | Role::Enter => {
                let nr = self.nr[id].get_i64(ev.payload, ev.endian).unwrap_or(-1);
                if role == Role::Enter && !self.learned.contains_key(&(nr as u64)) {
                    if let Some(name) = self.id_names.get(&ev.id).cloned() {
                        self.learned.insert(nr as u64, name);
                    }
                }
                if let Some(h) = &mut self.heads {
                    if h.first(tid) {
                        h.first.push((tid, Head::Enter));
                    }
                }
                self.pairs.begin(tid, ev.cpu, nr, out);
            }
            Role::RawExit | Role::Exit => {
                let nr = self.nr[id].get_i64(ev.payload, ev.endian).unwrap_or(-1);
                if let Some(h) = &mut self.heads {
                    if h.first(tid) {
                        let ret = self.ret[id].get_i64(ev.payload, ev.endian).unwrap_or(0);
                        let ts = ev.ts;
                        h.first.push((tid, Head::Exit { nr, ret, ts }));
                    }
                }
                match self.pairs.end(tid) {
                    Some(o) if o.v == nr => {
                        let ret = self.ret[id].get_i64(ev.payload, ev.endian).unwrap_or(0);
                        out.pair(o.mark, self.sample(tid, nr, &o, ret, ev.ts));
                    }
                    _ => out.unmatched(),
                }
            }
            Role::Names => self.task_names.event(ev, out),
            Role::None => {}
        }
    }

    fn finish(&mut self, _out: &mut Out) -> u64 {
        self.pairs.len() as u64
    }

    fn open_in(&self, from: u64, to: u64) -> bool {
        self.pairs.open_in(from, to)
    }

    fn key_name(&self, key: u64, tasks: &Tasks) -> String {
        if self.by_tid {
            return tasks.label(key as u32 as i32);
        }
        if let Some(n) = self.learned.get(&key) {
            return n.clone();
        }
        match self.names.get(key as usize) {
            Some(n) if !n.is_empty() => n.to_string(),
            _ => format!("sys_{}", key as i64),
        }
    }
}

impl Syscall {
    /// Delivers the events that name tasks too.
    fn bind_names(&mut self, ids: &mut Vec<u32>) {
        for id in self.task_names.ids() {
            if let Some(r) = self.roles.get_mut(id as usize) {
                *r = Role::Names;
                ids.push(id);
            }
        }
    }

    /// The sample of a call that entered at `o` and exited with `ret` at `ts`.
    fn sample(&self, tid: i32, nr: i64, o: &Open<i64>, ret: i64, ts: u64) -> Sample {
        Sample {
            start: o.start,
            value: ts.saturating_sub(o.start),
            key: if self.by_tid {
                tid as u32 as u64
            } else {
                nr as u64
            },
            tid,
            cpu: o.cpu,
            flag: ret < 0,
            kind: Kind::Dur,
        }
    }
}

impl Sliced for Syscall {
    fn record_heads(&mut self) {
        self.heads = Some(Box::new(Heads {
            last: i32::MIN,
            seen: Default::default(),
            first: Vec::new(),
        }));
    }

    fn stitch(&mut self, mut next: Self, out: &mut Out) {
        let heads = next.heads.take().map_or(Vec::new(), |h| h.first);
        for (tid, head) in heads {
            let Some(o) = self.pairs.end(tid) else {
                continue;
            };
            match head {
                Head::Enter => out.unmatched(),
                Head::Exit { nr, ret, ts } if o.v == nr => {
                    // `next` counted this exit unmatched, not knowing its entry.
                    out.counts.unmatched -= 1;
                    let s = self.sample(tid, nr, &o, ret, ts);
                    out.pair(o.mark, s);
                }
                // Unmatched in one pass too, and counted so by `next`.
                Head::Exit { .. } => {}
            }
        }
        // Every call `next` holds open began in its slice, so after its thread's first
        // event there: that event closed or replaced what `self` held for the thread.
        for (tid, o) in next.pairs.take_all() {
            self.pairs.put(tid, o);
        }
        for (nr, name) in next.learned {
            self.learned.entry(nr).or_insert(name);
        }
    }
}

fn dummy_field() -> kstate_format::Field {
    kstate_format::Field {
        name: String::new(),
        type_name: String::new(),
        offset: 0,
        size: 0,
        signed: false,
        kind: kstate_format::FieldKind::Int,
    }
}

#[cfg(test)]
mod tests {
    /// The checked-in table matches this machine's kernel headers, where installed.
    #[test]
    fn table_matches_unistd_64_h() {
        let path = "/usr/include/x86_64-linux-gnu/asm/unistd_64.h";
        let Ok(text) = std::fs::read_to_string(path) else {
            eprintln!("{path} not installed; nothing to compare");
            return;
        };
        let mut n = 0;
        for line in text.lines() {
            let mut w = line.split_whitespace();
            if w.next() != Some("#define") {
                continue;
            }
            let (Some(name), Some(nr)) = (w.next(), w.next()) else {
                continue;
            };
            let (Some(name), Ok(nr)) = (name.strip_prefix("__NR_"), nr.parse::<usize>()) else {
                continue;
            };
            assert_eq!(
                super::super::syscall_x86_64::X86_64.get(nr),
                Some(&name),
                "{nr}"
            );
            n += 1;
        }
        assert!(n > 300, "only {n} system calls in {path}");
    }
}
