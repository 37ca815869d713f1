//! `softirq`: soft-interrupt handler time and raise-to-run delay, per vector.
//!
//! Events: irq:softirq_raise, irq:softirq_entry, irq:softirq_exit (field `vec`).
//!
//! Two views, chosen with `--by` (both keyed by the vector's name, HI, TIMER, NET_TX, ...,
//! read from the events' print fmt `__print_symbolic` table, else the kernel's table):
//! - `handler` (default): softirq_entry to softirq_exit of the same vector on the same CPU
//!   — how long the handler ran. Softirqs do not nest on a CPU, so one is open per CPU;
//!   an exit of another vector, or an entry while one is open, is unmatched.
//! - `delay`: softirq_raise to the next softirq_entry of that vector on the same CPU — how
//!   long a raised softirq waited to run. A softirq runs on the CPU that raised it, so
//!   pairs are per (CPU, vector); a second raise before the entry merges into the first
//!   (the pending bit was already set: the wait counts from the first raise). An entry
//!   with no raise (raised before the trace began) is unmatched.
//!
//! The task column is the task the softirq interrupted (or ksoftirqd).

use kstate_format::{EventFormat, FieldRef, Trace};

use crate::analyzer::{need, Analyzer, Info, Kind, Missing, Out, Sample, Tasks, Traits, Unit};
use crate::pair::Pairs;
use kstate_format::stream::merge::Event;

/// The kernel's `softirq_to_name` (include/linux/interrupt.h), used when the print fmt
/// has no table.
const VECTORS: [&str; 10] = [
    "HI", "TIMER", "NET_TX", "NET_RX", "BLOCK", "IRQ_POLL", "TASKLET", "SCHED", "HRTIMER", "RCU",
];

/// `{ N, "NAME" }` pairs of the `__print_symbolic(REC->FIELD, ...)` in a print fmt.
pub fn print_symbolic(print_fmt: &str, field: &str) -> Vec<(u64, String)> {
    let pat = format!("__print_symbolic(REC->{field},");
    let Some(at) = print_fmt.find(&pat) else {
        return Vec::new();
    };
    let mut rest = &print_fmt[at + pat.len()..];
    let mut out = Vec::new();
    while let Some(open) = rest.find('{') {
        // Stop at the end of this __print_symbolic call.
        if rest[..open].contains(')') {
            break;
        }
        let Some(close) = rest[open..].find('}') else {
            break;
        };
        let item = &rest[open + 1..open + close];
        rest = &rest[open + close + 1..];
        let Some((num, name)) = item.split_once(',') else {
            continue;
        };
        let num = num.trim();
        let v = match num.strip_prefix("0x") {
            Some(h) => u64::from_str_radix(h, 16).ok(),
            None => num.parse().ok(),
        };
        let name = name.trim().trim_matches('"');
        if let Some(v) = v {
            out.push((v, name.to_string()));
        }
    }
    out
}

/// Names of softirq vectors from `ev`'s print fmt, or the kernel's table.
pub fn vector_names(ev: &EventFormat) -> Vec<String> {
    let table = print_symbolic(&ev.print_fmt, "vec");
    let mut names: Vec<String> = VECTORS.iter().map(|s| s.to_string()).collect();
    for (v, n) in table {
        if v < 64 {
            let v = v as usize;
            if v >= names.len() {
                names.resize(v + 1, String::new());
            }
            names[v] = n;
        }
    }
    names
}

/// Reads as `None`.
pub(crate) const NO_FIELD: FieldRef = FieldRef {
    offset: 0,
    size: 0,
    signed: false,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    None,
    Raise,
    Entry,
    Exit,
}

pub struct Softirq {
    delay: bool,
    roles: Vec<Role>,
    vec: Vec<FieldRef>,
    names: Vec<String>,
    /// Handler view: open entry per CPU (value: vector).
    running: Pairs<u32, u64>,
    /// Delay view: open raise per (CPU, vector).
    raised: Pairs<(u32, u64), ()>,
}

impl Analyzer for Softirq {
    const INFO: Info = Info {
        name: "softirq",
        about: "soft-interrupt handler time, or raise-to-run delay (--by delay), per vector",
        needs: "irq:softirq_entry + irq:softirq_exit (handler); irq:softirq_raise + irq:softirq_entry (delay)",
        preset: "softirq",
        by: &[
            ("handler", "vector; value: handler time, entry to exit"),
            ("delay", "vector; value: raise-to-entry delay on the raising CPU"),
        ],
        flag_column: None,
        value: "duration",
        unit: Unit::Ns,
        traits: Traits::DEFAULT,
        run: crate::piped::drive_piped::<Softirq>,
        live: Some(crate::analyzer::live::<Softirq>),
    };

    fn bind(trace: &Trace, by: &str) -> Result<(Self, Vec<u32>), Missing> {
        let delay = by == "delay";
        let mut missing = Vec::new();
        let wanted: &[(&str, Role)] = if delay {
            &[
                ("irq:softirq_raise", Role::Raise),
                ("irq:softirq_entry", Role::Entry),
            ]
        } else {
            &[
                ("irq:softirq_entry", Role::Entry),
                ("irq:softirq_exit", Role::Exit),
            ]
        };
        let n = trace.events.id_limit();
        let mut s = Softirq {
            delay,
            roles: vec![Role::None; n],
            vec: vec![NO_FIELD; n],
            names: VECTORS.iter().map(|s| s.to_string()).collect(),
            running: Pairs::default(),
            raised: Pairs::default(),
        };
        let mut ids = Vec::new();
        for (spec, role) in wanted {
            let Some(ev) = need(trace, spec, &mut missing) else {
                continue;
            };
            let Some(f) = ev.field("vec") else {
                missing.push(format!("{spec} (field vec)"));
                continue;
            };
            s.roles[ev.id as usize] = *role;
            s.vec[ev.id as usize] = f.into();
            if *role == Role::Entry {
                s.names = vector_names(ev);
            }
            ids.push(ev.id);
        }
        if !missing.is_empty() {
            return Err(Missing::events(missing));
        }
        Ok((s, ids))
    }

    #[inline]
    fn event(&mut self, ev: &Event<'_>, out: &mut Out) {
        let id = ev.id as usize;
        let Some(&role) = self.roles.get(id) else {
            return;
        };
        let Some(vec) = self.vec[id].get_u64(ev.payload, ev.endian) else {
            return;
        };
        let cpu = ev.cpu;
        match role {
            Role::Raise => self.raised.begin_first((cpu, vec), cpu, (), out),
            Role::Entry if self.delay => match self.raised.end((cpu, vec)) {
                Some(o) => out.pair(
                    o.mark,
                    Sample {
                        start: o.start,
                        value: ev.ts.saturating_sub(o.start),
                        key: vec,
                        tid: ev.pid(),
                        cpu,
                        flag: false,
                        kind: Kind::Dur,
                    },
                ),
                None => out.unmatched(),
            },
            Role::Entry => self.running.begin(cpu, cpu, vec, out),
            Role::Exit => match self.running.end(cpu) {
                Some(o) if o.v == vec => out.pair(
                    o.mark,
                    Sample {
                        start: o.start,
                        value: ev.ts.saturating_sub(o.start),
                        key: vec,
                        tid: ev.pid(),
                        cpu,
                        flag: false,
                        kind: Kind::Dur,
                    },
                ),
                _ => out.unmatched(),
            },
            Role::None => {}
        }
    }

    fn finish(&mut self, _out: &mut Out) -> u64 {
        (self.running.len() + self.raised.len()) as u64
    }

    fn key_name(&self, key: u64, _tasks: &Tasks) -> String {
        match self.names.get(key as usize) {
            Some(n) if !n.is_empty() => n.clone(),
            _ => format!("vec {key}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symbolic_table_from_print_fmt() {
        let pf = r#""vec=%u [action=%s]", REC->vec, __print_symbolic(REC->vec, { 0, "HI" }, { 1, "TIMER" }, { 9, "RCU" }), REC->x"#;
        let t = print_symbolic(pf, "vec");
        assert_eq!(
            t,
            vec![
                (0, "HI".to_string()),
                (1, "TIMER".to_string()),
                (9, "RCU".to_string())
            ]
        );
        assert!(print_symbolic(pf, "other").is_empty());
    }
}
