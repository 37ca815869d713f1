//! `vmscan`: page-reclaim episodes and how long they took.
//!
//! Events (each pair where recorded; at least one is needed):
//! - vmscan:mm_vmscan_direct_reclaim_begin/end: a task reclaiming pages itself because
//!   an allocation found too little free memory (family `direct`), paired per thread;
//! - vmscan:mm_vmscan_memcg_reclaim_begin/end: a task reclaiming inside its memory
//!   cgroup because the cgroup reached its limit (family `memcg`), paired per thread;
//! - vmscan:mm_vmscan_kswapd_wake/sleep: kswapd of a NUMA node balancing from its wake-up
//!   to going back to sleep (family `kswapd`, key `kswapd N`, N = node), paired per node;
//!   a wake-up while kswapd is already awake does not restart the episode.
//!
//! Key: the family and the reclaiming task's command (`--by comm`, default:
//! `direct dd`, `memcg dd`) or the task (`--by pid`: `direct dd-1234`); kswapd episodes
//! are always `kswapd N`. Value: the episode's duration. Flag column `empty`: episodes
//! that reclaimed no page (from `nr_reclaimed` of the end event). `--stat` adds the
//! pages reclaimed per key.

use kstate_format::{FieldRef, Trace};

use crate::analyzer::{
    Analyzer, Cell, Info, Kind, Missing, Out, Sample, Table, Tasks, Traits, Unit,
};
use crate::fxmap::FxMap;
use crate::pair::Pairs;
use kstate_format::stream::merge::Event;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
enum Family {
    Direct = 1,
    Memcg = 2,
    Kswapd = 3,
}

const NAMES: [&str; 4] = ["", "direct", "memcg", "kswapd"];

#[derive(Debug, Clone, Copy)]
enum Role {
    Begin(Family),
    /// With `nr_reclaimed`.
    End(Family, FieldRef),
    /// kswapd_wake / kswapd_sleep with `nid`.
    Wake(FieldRef),
    Sleep(FieldRef),
}

pub struct Vmscan {
    by_pid: bool,
    roles: FxMap<u32, Role>,
    /// (family, thread or node) -> open episode.
    pairs: Pairs<(Family, i32), ()>,
    comms: Vec<String>,
    comm_index: FxMap<String, u32>,
    /// Per key: pages reclaimed (selected episodes).
    reclaimed: FxMap<u64, u64>,
}

const SHIFT: u32 = 40;

impl Vmscan {
    fn key(&mut self, fam: Family, id: i32, tasks: &Tasks) -> u64 {
        let low = match fam {
            Family::Kswapd => id as u32 as u64,
            _ if self.by_pid => id as u32 as u64,
            _ => {
                let c = tasks.comm(id);
                match self.comm_index.get(&c) {
                    Some(&i) => i as u64,
                    None => {
                        let i = self.comms.len() as u32;
                        self.comm_index.insert(c.clone(), i);
                        self.comms.push(c);
                        i as u64
                    }
                }
            }
        };
        ((fam as u64) << SHIFT) | low
    }

    fn close(&mut self, fam: Family, id: i32, nr: Option<u64>, ev: &Event<'_>, out: &mut Out) {
        let Some(o) = self.pairs.end((fam, id)) else {
            if fam != Family::Kswapd {
                out.unmatched();
            }
            return;
        };
        let key = self.key(fam, id, &out.tasks);
        let tid = if fam == Family::Kswapd { ev.pid() } else { id };
        if o.mark.open == 0 && o.mark == out.mark() {
            if let Some(n) = nr {
                if out.selects(tid, o.cpu) {
                    *self.reclaimed.entry(key).or_default() += n;
                }
            }
        }
        out.pair(
            o.mark,
            Sample {
                start: o.start,
                value: ev.ts.saturating_sub(o.start),
                key,
                tid,
                cpu: o.cpu,
                flag: nr == Some(0),
                kind: Kind::Dur,
            },
        );
    }
}

impl Analyzer for Vmscan {
    const INFO: Info = Info {
        name: "vmscan",
        about: "page reclaim episodes: direct and memory-cgroup reclaim per task, kswapd per node",
        needs: "vmscan:mm_vmscan_direct_reclaim_begin/end, mm_vmscan_memcg_reclaim_begin/end or mm_vmscan_kswapd_wake/sleep",
        preset: "mem",
        by: &[
            ("comm", "family and reclaiming task's command"),
            ("pid", "family and reclaiming task (comm-pid)"),
        ],
        flag_column: Some("empty"),
        value: "reclaim time",
        unit: Unit::Ns,
        traits: Traits::DEFAULT,
        run: crate::piped::drive_piped::<Vmscan>,
        live: Some(crate::analyzer::live::<Vmscan>),
    };

    fn bind(trace: &Trace, by: &str) -> Result<(Self, Vec<u32>), Missing> {
        let mut roles = FxMap::default();
        let mut ids = Vec::new();
        let mut missing = Vec::new();
        let pairs = [
            ("direct_reclaim", Family::Direct),
            ("memcg_reclaim", Family::Memcg),
        ];
        for (name, fam) in pairs {
            let b = trace.events.find(&format!("vmscan:mm_vmscan_{name}_begin"));
            let e = trace.events.find(&format!("vmscan:mm_vmscan_{name}_end"));
            match (b, e.and_then(|e| Some((e, e.field("nr_reclaimed")?)))) {
                (Some(b), Some((e, nr))) => {
                    roles.insert(b.id, Role::Begin(fam));
                    roles.insert(e.id, Role::End(fam, nr.into()));
                    ids.extend([b.id, e.id]);
                }
                _ => missing.push(format!("vmscan:mm_vmscan_{name}_begin/end")),
            }
        }
        let w = trace.events.find("vmscan:mm_vmscan_kswapd_wake");
        let s = trace.events.find("vmscan:mm_vmscan_kswapd_sleep");
        match (
            w.and_then(|w| Some((w.id, w.field("nid")?))),
            s.and_then(|s| Some((s.id, s.field("nid")?))),
        ) {
            (Some((wid, wn)), Some((sid, sn))) => {
                roles.insert(wid, Role::Wake(wn.into()));
                roles.insert(sid, Role::Sleep(sn.into()));
                ids.extend([wid, sid]);
            }
            _ => missing.push("vmscan:mm_vmscan_kswapd_wake/sleep".into()),
        }
        if ids.is_empty() {
            return Err(Missing::events(missing));
        }
        Ok((
            Vmscan {
                by_pid: by == "pid",
                roles,
                pairs: Pairs::default(),
                comms: Vec::new(),
                comm_index: FxMap::default(),
                reclaimed: FxMap::default(),
            },
            ids,
        ))
    }

    fn event(&mut self, ev: &Event<'_>, out: &mut Out) {
        let Some(&role) = self.roles.get(&ev.id) else {
            return;
        };
        let (p, e) = (ev.payload, ev.endian);
        match role {
            Role::Begin(fam) => self.pairs.begin((fam, ev.pid()), ev.cpu, (), out),
            Role::End(fam, nr) => {
                let n = nr.get_u64(p, e);
                self.close(fam, ev.pid(), n, ev, out);
            }
            Role::Wake(nid) => {
                let nid = nid.get_i64(p, e).unwrap_or(0) as i32;
                self.pairs
                    .begin_first((Family::Kswapd, nid), ev.cpu, (), out);
            }
            Role::Sleep(nid) => {
                let nid = nid.get_i64(p, e).unwrap_or(0) as i32;
                self.close(Family::Kswapd, nid, None, ev, out);
            }
        }
    }

    fn finish(&mut self, _out: &mut Out) -> u64 {
        self.pairs.len() as u64
    }

    fn key_name(&self, key: u64, tasks: &Tasks) -> String {
        let fam = (key >> SHIFT) as usize;
        let low = key & ((1 << SHIFT) - 1);
        let name = NAMES.get(fam).copied().unwrap_or("?");
        if fam == Family::Kswapd as usize {
            format!("{name} {low}")
        } else if self.by_pid {
            format!("{name} {}", tasks.label(low as u32 as i32))
        } else {
            format!("{name} {}", self.comms[low as usize])
        }
    }

    fn tables(&mut self, out: &Out) -> Vec<Table> {
        let mut rows: Vec<(String, u64)> = self
            .reclaimed
            .iter()
            .map(|(k, n)| (self.key_name(*k, &out.tasks), *n))
            .collect();
        rows.sort();
        vec![Table {
            name: "reclaimed",
            title: "pages reclaimed per key (direct and memcg episodes)".into(),
            columns: vec!["key", "pages"],
            rows: rows
                .into_iter()
                .map(|(k, n)| vec![Cell::Text(k), Cell::Int(n)])
                .collect(),
        }]
    }
}
