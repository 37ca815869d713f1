//! CPU profiles from a recording's SAMPLES section (`kstate record --sample`): where the
//! samples fell, per symbol, like `perf report --no-children`, and the call-graph views
//! around one symbol (who calls it, what it calls), cut by the analyzers' filters.
//!
//! Symbols: kernel addresses through the kallsyms the recording carries (modules named
//! by their `[module]` tag); user addresses through the MMAP2 records (the kernel's, and
//! those the recorder made from /proc at the start) to a file and offset, then that
//! file's ELF symbols (`kstate_symbols`). A file whose build id differs from the one recorded
//! gives no names (its samples count as `[build-id mismatch]`), not wrong ones.
//!
//! Shares are by period (a sample's weight, as perf weighs them); with cpu-clock every
//! period is the same, so shares and sample counts agree.

pub mod annotate;
pub mod compare;

use std::collections::{BTreeMap, HashMap};

use kstate_format::perf::decode::{self, PerfRecord};
use kstate_format::stream::merge::{IdFilter, Merger};
use kstate_format::{sections, Error, ErrorKind, Trace};
use kstate_symbols::samples::{read_side, source, walk_err, Side};
use kstate_symbols::symbolizer::build_maps;
use kstate_symbols::{frames, leaf, unwind, Comms, Kind, Sym, Symbolizer};

use kstate_analyze::filter::{Filters, TimeSel};

/// One row of the per-symbol report.
#[derive(Debug, Clone)]
pub struct Row {
    pub sym: Sym,
    pub samples: u64,
    pub period: u64,
}

/// Who calls a symbol, or what it calls.
#[derive(Debug, Clone)]
pub struct CallView {
    pub symbol: String,
    /// Selected samples with the symbol anywhere in their chain / as the leaf.
    pub samples: u64,
    pub self_samples: u64,
    /// Callers (or callees), most samples first; `[self]` (callees: the symbol itself was
    /// running) and `[no caller]` (the chain ends at the symbol) included.
    pub rows: Vec<(Sym, u64)>,
}

#[derive(Debug, Clone, Default)]
pub struct Options {
    pub filters: Filters,
    pub callers: Option<String>,
    pub callees: Option<String>,
    /// The sampled event to report (default: the file's first).
    pub event: Option<String>,
    /// Also collect folded stacks (for flame graphs): root first, `;`-separated.
    pub folded: bool,
    /// Collect the sampled addresses inside this symbol (`--details`).
    pub details: Option<String>,
}

/// Where the samples fell inside one symbol (`--details`). Addresses are the image's
/// own: the running kernel address for kernel code, the ELF symbol address (as in the
/// file's symbol table and `objdump -d`) for user code.
#[derive(Debug, Clone)]
pub struct SymbolHits {
    pub sym: Sym,
    pub samples: u64,
    pub period: u64,
    /// Image address -> samples there. Addresses that could not be placed in the file
    /// (outside its loaded segments) are not here but in `unplaced`.
    pub addrs: BTreeMap<u64, u64>,
    pub unplaced: u64,
}

#[derive(Debug, Clone)]
pub struct Profile {
    pub event: String,
    /// Every event sampled in the file, in file order.
    pub events: Vec<String>,
    pub freq: Option<u64>,
    pub period: Option<u64>,
    pub clock: String,
    /// Every sample in the file, and the records the kernel lost.
    pub total_samples: u64,
    pub lost: u64,
    /// The samples the filters selected, and their summed period.
    pub samples: u64,
    pub total_period: u64,
    pub kernel_samples: u64,
    pub user_samples: u64,
    /// Per symbol (of the sampled instruction), largest share first.
    pub rows: Vec<Row>,
    pub callers: Option<CallView>,
    pub callees: Option<CallView>,
    /// Stacks root first, with their sample counts (`--flame`).
    pub folded: Vec<(String, u64)>,
    /// `--details`: one entry per image with a symbol of that name, most samples first.
    pub details: Vec<SymbolHits>,
    /// Time of the first event of the trace (windows are relative to it), and the range
    /// of the selected samples.
    pub trace_start: u64,
    pub first_ts: Option<u64>,
    pub last_ts: Option<u64>,
    /// Things the user should know: files that could not be read, build-id mismatches.
    pub warnings: Vec<String>,
    /// How the user chains of all the file's samples of this event were found.
    pub chains: unwind::ChainCounts,
}

impl Profile {
    pub fn share(&self, period: u64) -> f64 {
        if self.total_period == 0 {
            0.0
        } else {
            period as f64 * 100.0 / self.total_period as f64
        }
    }
}

/// The first event's time of the whole trace, as the analyzers take it.
fn first_event(trace: &Trace) -> Option<u64> {
    let mut m = Merger::new(trace, None, IdFilter::all()).ok()?;
    m.next().ok().flatten().map(|e| e.ts)
}

pub fn profile(trace: &Trace, opts: &Options) -> Result<Profile, Error> {
    let id = sections::ids::SAMPLES;
    let Some(src) = source(trace, id)? else {
        return Err(Error::new(
            ErrorKind::Unsupported,
            None,
            "this recording has no CPU samples; record them with `kstate record --sample ...`",
        )
        .in_file(&trace.path));
    };
    let Side {
        event: ev,
        header: h,
        events,
        samples: total_samples,
        first_time,
        lost,
        mut side,
        changes,
    } = read_side(trace, &*src, id, opts.event.as_deref())?;
    let h = &h;
    let comms = Comms::new(trace, changes);

    let trace_start = first_event(trace).or(first_time).unwrap_or(0);
    let f = &opts.filters;
    let sel = TimeSel {
        include: f.window.map_or((0, u64::MAX), |w| w.resolve(trace_start)),
        exclude: f.not_window.map(|w| w.resolve(trace_start)),
    };

    // The mappings the user stacks are unwound with.
    let maps = build_maps(&mut side.clone());
    let mut unwinder = unwind::ChainUnwinder::new(&maps);
    let mut sy = Symbolizer::new(trace, &mut side);

    let mut p = Profile {
        event: h.event.clone(),
        events,
        freq: h.attr.freq(),
        period: h.attr.freq().is_none().then_some(h.attr.period_or_freq),
        clock: h.clock.clone(),
        total_samples,
        lost,
        samples: 0,
        total_period: 0,
        kernel_samples: 0,
        user_samples: 0,
        rows: Vec::new(),
        callers: None,
        callees: None,
        folded: Vec::new(),
        details: Vec::new(),
        trace_start,
        first_ts: None,
        last_ts: None,
        warnings: Vec::new(),
        chains: unwind::ChainCounts::default(),
    };
    let mut per_sym: HashMap<u32, (u64, u64)> = HashMap::new();
    let callers_of = opts.callers.clone();
    let callees_of = opts.callees.clone();
    let mut callers: HashMap<u32, u64> = HashMap::new();
    let mut callees: HashMap<u32, u64> = HashMap::new();
    let (mut in_callers, mut self_callers) = (0u64, 0u64);
    let (mut in_callees, mut self_callees) = (0u64, 0u64);
    let mut folded: HashMap<Vec<u32>, u64> = HashMap::new();
    let mut details: HashMap<u32, SymbolHits> = HashMap::new();
    let (no_caller, self_row) = (
        sy.intern(Sym {
            name: "[no caller]".into(),
            image: String::new(),
            path: None,
            kind: Kind::Unknown,
        }),
        sy.intern(Sym {
            name: "[self]".into(),
            image: String::new(),
            path: None,
            kind: Kind::Unknown,
        }),
    );
    let mut chain = Vec::new();
    let headers = src.events();
    src.visit(&mut |r| {
        if r.kind != decode::record::SAMPLE || r.event != ev {
            return Ok(());
        }
        let PerfRecord::Sample(mut s) = r.parse(headers)? else {
            return Ok(());
        };
        unwinder.unwind(&mut s, h.attr.sample_regs_user);
        let s = &s;
        if !sel.contains(s.time)
            || (!f.pids.is_empty() && !f.pids.contains(&(s.pid as i32)))
            || (!f.tids.is_empty() && !f.tids.contains(&(s.tid as i32)))
            || (!f.cpus.is_empty() && !f.cpus.contains(&s.cpu))
        {
            return Ok(());
        }
        if !f.comms.is_empty() {
            let c = comms.get(s.tid, s.time).unwrap_or("");
            if !f.comms.iter().any(|x| x == c) {
                return Ok(());
            }
        }
        p.samples += 1;
        // (Saturating: a damaged period may be near 2^64.)
        p.total_period = p.total_period.saturating_add(s.period);
        p.first_ts = Some(p.first_ts.map_or(s.time, |t| t.min(s.time)));
        p.last_ts = Some(p.last_ts.map_or(s.time, |t| t.max(s.time)));
        frames(s, &mut sy, &mut chain);
        let leaf = chain[0];
        if sy.sym(leaf).kind.is_kernel() {
            p.kernel_samples += 1;
        } else {
            p.user_samples += 1;
        }
        let e = per_sym.entry(leaf).or_default();
        e.0 += 1;
        e.1 = e.1.saturating_add(s.period);
        if let Some(name) = &opts.details {
            if sy.sym(leaf).name == *name {
                let (addr, user) = self::leaf(s);
                let at = if user {
                    sy.user_image_addr(s.pid, addr, s.time)
                } else {
                    Some(addr)
                };
                let h = details.entry(leaf).or_insert_with(|| SymbolHits {
                    sym: sy.sym(leaf).clone(),
                    samples: 0,
                    period: 0,
                    addrs: BTreeMap::new(),
                    unplaced: 0,
                });
                h.samples += 1;
                h.period = h.period.saturating_add(s.period);
                match at {
                    Some(a) => *h.addrs.entry(a).or_default() += 1,
                    None => h.unplaced += 1,
                }
            }
        }
        if let Some(name) = &callers_of {
            if let Some(i) = chain.iter().position(|&c| sy.sym(c).name == *name) {
                in_callers += 1;
                if i == 0 {
                    self_callers += 1;
                }
                *callers
                    .entry(chain.get(i + 1).copied().unwrap_or(no_caller))
                    .or_default() += 1;
            }
        }
        if let Some(name) = &callees_of {
            if let Some(i) = chain.iter().position(|&c| sy.sym(c).name == *name) {
                in_callees += 1;
                let c = if i == 0 {
                    self_callees += 1;
                    self_row
                } else {
                    chain[i - 1]
                };
                *callees.entry(c).or_default() += 1;
            }
        }
        if opts.folded {
            let mut stack = chain.clone();
            stack.reverse();
            // Runs of unnamed frames (code without frame pointers walks into garbage) as one.
            stack.dedup_by(|x, y| x == y && sy.sym(*x).name == "[unknown]");
            *folded.entry(stack).or_default() += 1;
        }
        Ok(())
    })
    .map_err(|e| walk_err(trace, id, e))?;
    p.chains = unwinder.counts;
    let mut rows: Vec<Row> = per_sym
        .into_iter()
        .map(|(i, (n, per))| Row {
            sym: sy.sym(i).clone(),
            samples: n,
            period: per,
        })
        .collect();
    rows.sort_by(|a, b| {
        b.period
            .cmp(&a.period)
            .then(b.samples.cmp(&a.samples))
            .then(a.sym.name.cmp(&b.sym.name))
            // `[unknown]` stands in many images: order them too, so output is stable.
            .then(a.sym.image.cmp(&b.sym.image))
            .then(a.sym.path.cmp(&b.sym.path))
    });
    p.rows = rows;
    let view = |name: Option<String>, m: HashMap<u32, u64>, n: u64, own: u64| {
        name.map(|symbol| {
            let mut rows: Vec<(Sym, u64)> =
                m.into_iter().map(|(i, c)| (sy.sym(i).clone(), c)).collect();
            rows.sort_by(|a, b| {
                b.1.cmp(&a.1)
                    .then(a.0.name.cmp(&b.0.name))
                    .then(a.0.image.cmp(&b.0.image))
                    .then(a.0.path.cmp(&b.0.path))
            });
            CallView {
                symbol,
                samples: n,
                self_samples: own,
                rows,
            }
        })
    };
    let mut details: Vec<SymbolHits> = details.into_values().collect();
    details.sort_by(|a, b| {
        b.samples
            .cmp(&a.samples)
            .then(a.sym.image.cmp(&b.sym.image))
            .then(a.sym.name.cmp(&b.sym.name))
    });
    p.details = details;
    p.callers = view(callers_of, callers, in_callers, self_callers);
    p.callees = view(callees_of, callees, in_callees, self_callees);
    if opts.folded {
        let mut v: Vec<(String, u64)> = folded
            .into_iter()
            .map(|(st, n)| {
                let names: Vec<String> = st
                    .iter()
                    .map(|&i| {
                        let s = &sy.sym(i);
                        // Kernel frames marked as stackcollapse marks them.
                        match s.kind.is_kernel() {
                            true => format!("{}_[k]", s.name),
                            false => s.name.replace(';', ":"),
                        }
                    })
                    .collect();
                (names.join(";"), n)
            })
            .collect();
        v.sort();
        p.folded = v;
    }
    let kernel_named = sy.kernel_named();
    let (mismatched, mut unreadable) = sy.into_problems();
    let mut mism: Vec<_> = mismatched.into_iter().collect();
    mism.sort();
    for (path, (want, have)) in mism {
        p.warnings.push(format!(
            "{path}: build id {have} differs from the recorded {want} (the file changed since the recording); its samples are left unnamed"
        ));
    }
    unreadable.sort();
    unreadable.dedup();
    p.warnings.extend(unreadable);
    if let Some(e) = &trace.truncated {
        p.warnings.push(e.msg.clone());
    }
    if !kernel_named && p.kernel_samples > 0 {
        p.warnings
            .push("the recording has no kallsyms: kernel samples are shown as addresses".into());
    }
    Ok(p)
}

/// One symbol's share before and after (`kstate diff`).
#[derive(Debug, Clone)]
pub struct DiffRow {
    pub name: String,
    pub image: String,
    pub kind: Kind,
    pub before_samples: u64,
    pub after_samples: u64,
    pub before_percent: f64,
    pub after_percent: f64,
}

/// Symbols of two profiles matched by (name, image), largest change in share first.
pub fn diff(a: &Profile, b: &Profile) -> Vec<DiffRow> {
    let mut m: HashMap<(String, String), DiffRow> = HashMap::new();
    for (p, after) in [(a, false), (b, true)] {
        for r in &p.rows {
            let e = m
                .entry((r.sym.name.clone(), r.sym.image.clone()))
                .or_insert_with(|| DiffRow {
                    name: r.sym.name.clone(),
                    image: r.sym.image.clone(),
                    kind: r.sym.kind,
                    before_samples: 0,
                    after_samples: 0,
                    before_percent: 0.0,
                    after_percent: 0.0,
                });
            if after {
                e.after_samples += r.samples;
                e.after_percent += p.share(r.period);
            } else {
                e.before_samples += r.samples;
                e.before_percent += p.share(r.period);
            }
        }
    }
    let mut v: Vec<DiffRow> = m.into_values().collect();
    v.sort_by(|x, y| {
        let dx = (x.after_percent - x.before_percent).abs();
        let dy = (y.after_percent - y.before_percent).abs();
        dy.total_cmp(&dx)
            .then(y.after_samples.cmp(&x.after_samples))
            .then(x.name.cmp(&y.name))
            // Several images' `[unknown]` tie on everything else: without this they came
            // out in hash order, so the same two files printed differently run to run.
            .then_with(|| x.image.cmp(&y.image))
    });
    v
}
