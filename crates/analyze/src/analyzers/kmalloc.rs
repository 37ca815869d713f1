//! `kmalloc`: slab allocations — the size mix, and who allocates.
//!
//! Events: kmem:kmalloc and kmem:kmem_cache_alloc (either suffices). Each allocation is
//! one sample whose value is `bytes_req` (what the caller asked for; `--dist` shows the
//! size mix). `--stat` adds a table per key of bytes requested and bytes allocated
//! (`bytes_alloc`: the slab object size, the difference being internal fragmentation).
//!
//! Keys: `--by site` (default): the calling function, `call_site` symbolized with the
//! kernel symbols stored in the file (trace.dat's kallsyms; a hex address where the file
//! has none); `--by cache`: the kmem_cache's name for kmem_cache_alloc, `kmalloc-N`
//! (N = bytes_alloc) for kmalloc; `--by comm`: the allocating task's command.

use kstate_format::{Field, FieldRef, Trace};

use crate::analyzer::{
    need, Analyzer, Cell, Info, Kind, Missing, Out, Sample, Table, Tasks, Traits, Unit,
};
use crate::fxmap::FxMap;
use kstate_format::stream::merge::Event;
use kstate_symbols::ksyms::Ksyms;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum By {
    Site,
    Cache,
    Comm,
}

struct Alloc {
    id: u32,
    call_site: FieldRef,
    bytes_req: FieldRef,
    bytes_alloc: FieldRef,
    /// kmem_cache_alloc's cache name.
    name: Option<Field>,
}

pub struct Kmalloc {
    by: By,
    allocs: Vec<Alloc>,
    syms: Ksyms,
    /// call_site -> key, so each address is looked up once.
    site_key: FxMap<u64, u64>,
    /// Interned names (caches, commands).
    names: Vec<String>,
    index: FxMap<String, u32>,
    comm_of: FxMap<i32, u32>,
    /// Per key: bytes requested, bytes allocated (selected samples only).
    bytes: FxMap<u64, (u64, u64)>,
}

/// Keys of call sites no symbol covers: this bit and the interned hex address.
const ADDR: u64 = 1 << 62;

impl Kmalloc {
    fn intern(&mut self, s: &str) -> u64 {
        if let Some(&i) = self.index.get(s) {
            return i as u64;
        }
        let i = self.names.len() as u32;
        self.index.insert(s.to_string(), i);
        self.names.push(s.to_string());
        i as u64
    }
}

impl Analyzer for Kmalloc {
    const INFO: Info = Info {
        name: "kmalloc",
        about:
            "slab allocations (kmalloc, kmem_cache_alloc): size mix by call site, cache or command",
        needs: "kmem:kmalloc and/or kmem:kmem_cache_alloc",
        preset: "mem",
        by: &[
            ("site", "calling kernel function (call_site symbolized)"),
            ("cache", "slab cache (kmalloc-N for kmalloc)"),
            ("comm", "allocating task's command"),
        ],
        flag_column: None,
        value: "bytes requested",
        unit: Unit::Bytes,
        traits: Traits::DEFAULT,
        run: crate::piped::drive_piped::<Kmalloc>,
        live: Some(crate::analyzer::live::<Kmalloc>),
    };

    fn bind(trace: &Trace, by: &str) -> Result<(Self, Vec<u32>), Missing> {
        let mut missing = Vec::new();
        let mut allocs = Vec::new();
        for spec in ["kmem:kmalloc", "kmem:kmem_cache_alloc"] {
            let Some(e) = need(trace, spec, &mut missing) else {
                continue;
            };
            let (Some(cs), Some(req), Some(al)) = (
                e.field("call_site"),
                e.field("bytes_req"),
                e.field("bytes_alloc"),
            ) else {
                continue;
            };
            allocs.push(Alloc {
                id: e.id,
                call_site: cs.into(),
                bytes_req: req.into(),
                bytes_alloc: al.into(),
                name: e.field("name").cloned(),
            });
        }
        if allocs.is_empty() {
            return Err(Missing::events(missing));
        }
        let by = match by {
            "cache" => By::Cache,
            "comm" => By::Comm,
            _ => By::Site,
        };
        let syms = match (&trace.kallsyms, by) {
            (Some(k), By::Site) => Ksyms::parse(k),
            _ => Ksyms::default(),
        };
        let ids = allocs.iter().map(|a| a.id).collect();
        Ok((
            Kmalloc {
                by,
                allocs,
                syms,
                site_key: FxMap::default(),
                names: Vec::new(),
                index: FxMap::default(),
                comm_of: FxMap::default(),
                bytes: FxMap::default(),
            },
            ids,
        ))
    }

    fn event(&mut self, ev: &Event<'_>, out: &mut Out) {
        let (p, e) = (ev.payload, ev.endian);
        let Some(i) = self.allocs.iter().position(|a| a.id == ev.id) else {
            return;
        };
        let a = &self.allocs[i];
        let req = a.bytes_req.get_u64(p, e).unwrap_or(0);
        let alloc = a.bytes_alloc.get_u64(p, e).unwrap_or(0);
        let tid = ev.pid();
        let key = match self.by {
            By::Site => {
                let cs = a.call_site.get_u64(p, e).unwrap_or(0);
                match self.site_key.get(&cs) {
                    Some(&k) => k,
                    None => {
                        // Keyed by the containing function (offsets folded together).
                        let k = match self.syms.lookup(cs).map(|(n, _)| n.to_string()) {
                            Some(name) => self.intern(&name),
                            None => ADDR | self.intern(&format!("{cs:#x}")),
                        };
                        self.site_key.insert(cs, k);
                        k
                    }
                }
            }
            By::Cache => match &a.name {
                Some(f) => {
                    let n = f.str(p, e).unwrap_or_default();
                    self.intern(&n)
                }
                None => self.intern(&format!("kmalloc-{alloc}")),
            },
            By::Comm => match self.comm_of.get(&tid) {
                Some(&c) => c as u64,
                None => {
                    let c = self.intern(&out.tasks.comm(tid));
                    self.comm_of.insert(tid, c as u32);
                    c
                }
            },
        };
        if out.selects(tid, ev.cpu) {
            let b = self.bytes.entry(key).or_default();
            b.0 += req;
            b.1 += alloc;
        }
        out.emit(Sample {
            start: ev.ts,
            value: req,
            key,
            tid,
            cpu: ev.cpu,
            flag: false,
            kind: Kind::Dur,
        });
    }

    fn finish(&mut self, _out: &mut Out) -> u64 {
        0
    }

    fn key_name(&self, key: u64, _tasks: &Tasks) -> String {
        match self.by {
            By::Site if key & ADDR != 0 => self.names[(key & !ADDR) as usize].clone(),
            _ => self.names[key as usize].clone(),
        }
    }

    fn tables(&mut self, _out: &Out) -> Vec<Table> {
        let mut rows: Vec<(String, u64, u64)> = self
            .bytes
            .iter()
            .map(|(k, (r, a))| (self.key_name(*k, &Tasks::default()), *r, *a))
            .collect();
        rows.sort_by(|x, y| y.2.cmp(&x.2).then_with(|| x.0.cmp(&y.0)));
        vec![Table {
            name: "bytes",
            title: "bytes requested and allocated (slab object sizes) per key".into(),
            columns: vec!["key", "requested", "allocated", "waste_pct"],
            rows: rows
                .into_iter()
                .map(|(k, r, a)| {
                    let waste = if a > 0 {
                        ((a - r.min(a)) as f64 * 1000.0 / a as f64).round() / 10.0
                    } else {
                        0.0
                    };
                    vec![
                        Cell::Text(k),
                        Cell::Int(r),
                        Cell::Int(a),
                        Cell::Float(waste),
                    ]
                })
                .collect(),
        }]
    }
}
