//! `irq`: hard-interrupt handler time.
//!
//! Events: irq:irq_handler_entry (`irq`, `name`) and irq:irq_handler_exit (`irq`, `ret`).
//! Pairs: per CPU, an entry with the next exit of the same irq (hard-interrupt handlers
//! run with interrupts off and do not nest; an entry while one is open, or an exit of
//! another irq, is unmatched). One entry/exit pair is one handler: a shared irq line with
//! two handlers gives two pairs, one per handler name.
//!
//! Key: `irq N NAME` (`--by irq`, default; the name is the handler's, from the entry
//! event) or the CPU (`--by cpu`). Flag column `unhandled`: the handler returned IRQ_NONE
//! (`ret` 0: the interrupt was not its device's).

use kstate_format::{Field, FieldRef, Trace};

use super::softirq::NO_FIELD;
use crate::analyzer::{need, Analyzer, Info, Kind, Missing, Out, Sample, Tasks, Traits, Unit};
use crate::fxmap::FxMap;
use crate::pair::Pairs;
use kstate_format::stream::merge::Event;

/// A handler name and its key.
type Handler = (Box<[u8]>, u64);

pub struct Irq {
    by_cpu: bool,
    entry: u32,
    exit: u32,
    entry_irq: FieldRef,
    name: Field,
    exit_irq: FieldRef,
    ret: FieldRef,
    /// (irq, handler name) -> key, and back.
    index: FxMap<i64, Vec<Handler>>,
    keys: Vec<(i64, String)>,
    /// Open handler per CPU: (irq, key).
    open: Pairs<u32, (i64, u64)>,
}

impl Irq {
    fn intern(&mut self, irq: i64, name: &[u8]) -> u64 {
        let list = self.index.entry(irq).or_default();
        if let Some((_, k)) = list.iter().find(|(n, _)| &**n == name) {
            return *k;
        }
        let k = self.keys.len() as u64;
        list.push((name.into(), k));
        self.keys
            .push((irq, String::from_utf8_lossy(name).into_owned()));
        k
    }
}

impl Analyzer for Irq {
    const INFO: Info = Info {
        name: "irq",
        about: "hard-interrupt handler time per irq and handler",
        needs: "irq:irq_handler_entry + irq:irq_handler_exit",
        preset: "softirq",
        by: &[
            ("irq", "irq number and handler name (irq N NAME)"),
            ("cpu", "CPU the handler ran on"),
        ],
        flag_column: Some("unhandled"),
        value: "duration",
        unit: Unit::Ns,
        traits: Traits::DEFAULT,
        run: crate::piped::drive_piped::<Irq>,
        live: Some(crate::analyzer::live::<Irq>),
    };

    fn bind(trace: &Trace, by: &str) -> Result<(Self, Vec<u32>), Missing> {
        let mut missing = Vec::new();
        let en = need(trace, "irq:irq_handler_entry", &mut missing);
        let ex = need(trace, "irq:irq_handler_exit", &mut missing);
        let (Some(en), Some(ex)) = (en, ex) else {
            return Err(Missing::events(missing));
        };
        let (Some(entry_irq), Some(name), Some(exit_irq)) =
            (en.field("irq"), en.field("name"), ex.field("irq"))
        else {
            return Err(Missing::events(vec![
                "irq:irq_handler_entry/exit with fields irq and name".into(),
            ]));
        };
        let s = Irq {
            by_cpu: by == "cpu",
            entry: en.id,
            exit: ex.id,
            entry_irq: entry_irq.into(),
            name: name.clone(),
            exit_irq: exit_irq.into(),
            ret: ex.field("ret").map_or(NO_FIELD, FieldRef::from),
            index: FxMap::default(),
            keys: Vec::new(),
            open: Pairs::default(),
        };
        Ok((s, vec![en.id, ex.id]))
    }

    #[inline]
    fn event(&mut self, ev: &Event<'_>, out: &mut Out) {
        let cpu = ev.cpu;
        if ev.id == self.entry {
            let Some(irq) = self.entry_irq.get_i64(ev.payload, ev.endian) else {
                return;
            };
            let key = if self.by_cpu {
                cpu as u64
            } else {
                let name = self.name.data(ev.payload, ev.endian).unwrap_or(b"");
                let name = match name.iter().position(|&b| b == 0) {
                    Some(n) => &name[..n],
                    None => name,
                };
                self.intern(irq, name)
            };
            self.open.begin(cpu, cpu, (irq, key), out);
        } else if ev.id == self.exit {
            let irq = self.exit_irq.get_i64(ev.payload, ev.endian);
            match self.open.end(cpu) {
                Some(o) if Some(o.v.0) == irq => {
                    let ret = self.ret.get_i64(ev.payload, ev.endian).unwrap_or(1);
                    out.pair(
                        o.mark,
                        Sample {
                            start: o.start,
                            value: ev.ts.saturating_sub(o.start),
                            key: o.v.1,
                            tid: ev.pid(),
                            cpu,
                            flag: ret == 0,
                            kind: Kind::Dur,
                        },
                    );
                }
                _ => out.unmatched(),
            }
        }
    }

    fn finish(&mut self, _out: &mut Out) -> u64 {
        self.open.len() as u64
    }

    fn key_name(&self, key: u64, _tasks: &Tasks) -> String {
        if self.by_cpu {
            return format!("cpu{key}");
        }
        match self.keys.get(key as usize) {
            Some((irq, name)) => format!("irq {irq} {name}"),
            None => format!("key {key}"),
        }
    }
}
