//! The writers against a real trace (LISA's sched_load recording, testdata/): what each
//! file holds is read back with a reader of its own format (JSON, the protobuf wire format,
//! the Parquet reader) and compared with what kstate-format's reader gives for the same
//! trace, switch by switch and event by event.

use std::collections::{BTreeMap, HashMap};

use kstate_format::stream::merge::{IdFilter, Merger};
use kstate_format::{FieldRef, Trace};

/// LISA's sched_load trace as the writers take it, with the engine that runs the analyzers.
fn lisa_source() -> kstate_analyze::Source {
    kstate_analyze::Source::open(&kstate_testdata::path("lisa-sched_load/trace.dat")).unwrap()
}

/// One sched_switch as the reader gives it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Switch {
    cpu: u32,
    ts: u64,
    prev_pid: i64,
    next_pid: i64,
    next_comm: String,
}

/// Every sched_switch of `trace`, in the merge's order.
fn switches(trace: &Trace) -> Vec<Switch> {
    let fmt = trace.events.find("sched:sched_switch").unwrap();
    let int = |n: &str| FieldRef::from(fmt.field(n).unwrap());
    let (prev, next) = (int("prev_pid"), int("next_pid"));
    let comm = fmt.field("next_comm").unwrap();
    let mut m = Merger::new(trace, None, IdFilter::only([fmt.id])).unwrap();
    let mut v = Vec::new();
    while let Some(ev) = m.next().unwrap() {
        let (p, e) = (ev.payload, ev.endian);
        let name = comm.data(p, e).unwrap();
        let name = &name[..name.iter().position(|&b| b == 0).unwrap_or(name.len())];
        v.push(Switch {
            cpu: ev.cpu,
            ts: ev.ts,
            prev_pid: prev.get_i64(p, e).unwrap(),
            next_pid: next.get_i64(p, e).unwrap(),
            next_comm: String::from_utf8_lossy(name).into_owned(),
        });
    }
    assert!(v.len() > 300, "{} switches", v.len());
    v
}

/// Events of the named kinds in `trace`.
fn count(trace: &Trace, specs: &[&str]) -> u64 {
    let ids: Vec<u32> = specs
        .iter()
        .filter_map(|s| trace.events.find(s).map(|f| f.id))
        .collect();
    let mut m = Merger::new(trace, None, IdFilter::only(ids)).unwrap();
    let mut n = 0;
    while m.next().unwrap().is_some() {
        n += 1;
    }
    n
}

mod chrome {
    use super::*;
    use serde_json::Value;

    /// A time the writer printed as microseconds with three decimals, back in ns: the
    /// digits as written (an f64 would round the larger times).
    fn ns(line: &str, key: &str) -> u64 {
        let at = line.find(&format!("\"{key}\":")).unwrap() + key.len() + 3;
        let num: String = line[at..]
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == '.')
            .collect();
        let (us, frac) = num.split_once('.').unwrap();
        assert_eq!(frac.len(), 3, "{line}");
        us.parse::<u64>().unwrap() * 1000 + frac.parse::<u64>().unwrap()
    }

    /// On each CPU a run per switch to a task: from that switch to the CPU's next one, the
    /// last run to the trace's last switch.
    fn runs(sw: &[Switch]) -> Vec<(u32, u64, u64, i64, String)> {
        let end = sw.last().unwrap().ts;
        let mut on: BTreeMap<u32, &Switch> = BTreeMap::new();
        let mut v = Vec::new();
        for s in sw {
            if let Some(r) = on.remove(&s.cpu) {
                v.push((r.cpu, r.ts, s.ts, r.next_pid, r.next_comm.clone()));
            }
            if s.next_pid != 0 {
                on.insert(s.cpu, s);
            }
        }
        v.extend(
            on.values()
                .map(|r| (r.cpu, r.ts, end, r.next_pid, r.next_comm.clone())),
        );
        v.sort();
        v
    }

    #[test]
    fn cpu_tracks_hold_a_run_per_switch_and_analyzer_tracks_never_overlap() {
        let src = lisa_source();
        let trace = src.trace();
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("trace.json");
        let analyzers = ["runq".to_string(), "offcpu".to_string()];
        let sum = crate::chrome::write(&src, &out, &analyzers).unwrap();
        let text = std::fs::read_to_string(&out).unwrap();
        let doc: Value = serde_json::from_str(&text).expect("the file is JSON");
        assert_eq!(doc["displayTimeUnit"], "ns");
        // One event a line, as written: the times are read from the text.
        let lines: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with('{'))
            .skip(1)
            .collect();
        let events: Vec<Value> = lines
            .iter()
            .map(|l| serde_json::from_str(l.trim_end_matches(',')).unwrap())
            .collect();
        assert_eq!(events.len(), doc["traceEvents"].as_array().unwrap().len());
        let names: HashMap<(u64, u64), &str> = events
            .iter()
            .filter(|e| e["name"] == "thread_name")
            .map(|e| {
                let id = (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap());
                (id, e["args"]["name"].as_str().unwrap())
            })
            .collect();
        let track = |e: &Value| names[&(e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap())];

        let mut got = Vec::new();
        for (l, e) in lines
            .iter()
            .zip(&events)
            .filter(|(_, e)| e["cat"] == "sched")
        {
            let cpu = track(e).strip_prefix("CPU ").unwrap().parse().unwrap();
            let (ts, dur) = (ns(l, "ts"), ns(l, "dur"));
            let comm = e["args"]["comm"].as_str().unwrap().to_string();
            assert_eq!(e["name"], comm.as_str());
            got.push((cpu, ts, ts + dur, e["args"]["tid"].as_i64().unwrap(), comm));
        }
        got.sort();
        let want = runs(&switches(trace));
        assert_eq!(got.len() as u64, sum.runs);
        assert_eq!(
            sum.cpus as usize,
            want.iter()
                .map(|r| r.0)
                .collect::<std::collections::BTreeSet<_>>()
                .len()
        );
        assert_eq!(got, want);

        // Each analyzer's rows: one event each, on its lanes (slices and instants) and
        // counters (levels); no two slices on a lane overlap (a track must nest, and these
        // are meant to sit side by side).
        assert_eq!(sum.analyzers.len(), 2);
        let mut slices = 0;
        for (name, rows, tracks) in &sum.analyzers {
            let proc = events
                .iter()
                .find(|e| {
                    e["name"] == "process_name" && e["args"]["name"] == format!("kstate {name}")
                })
                .unwrap()["pid"]
                .as_u64();
            let mut lanes: BTreeMap<&str, Vec<(u64, u64)>> = BTreeMap::new();
            let mut counters = std::collections::BTreeSet::new();
            let mut n = 0;
            for (l, e) in lines.iter().zip(&events) {
                if e["pid"].as_u64() != proc || e["ph"] == "M" {
                    continue;
                }
                n += 1;
                let ts = ns(l, "ts");
                match e["ph"].as_str().unwrap() {
                    "X" => lanes
                        .entry(track(e))
                        .or_default()
                        .push((ts, ts + ns(l, "dur"))),
                    "i" => lanes.entry(track(e)).or_default().push((ts, ts)),
                    "C" => {
                        counters.insert(e["name"].as_str().unwrap());
                    }
                    ph => panic!("{name}: event of phase {ph}"),
                }
            }
            assert_eq!(n, *rows, "{name}");
            assert_eq!(lanes.len() + counters.len(), *tracks, "{name}");
            for (lane, mut spans) in lanes {
                spans.sort_unstable();
                slices += spans.len();
                for w in spans.windows(2) {
                    assert!(w[0].1 <= w[1].0, "{lane}: {:?} overlaps {:?}", w[0], w[1]);
                }
            }
        }
        assert!(slices > 100, "{slices} slices");
    }

    #[test]
    fn an_output_that_cannot_be_created_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("missing").join("trace.json");
        let e = crate::chrome::write(&lisa_source(), &out, &[])
            .err()
            .expect("an error");
        assert!(e.to_string().contains(&*out.to_string_lossy()), "{e}");
        assert!(std::fs::read_dir(dir.path()).unwrap().next().is_none());
    }
}

mod perfetto {
    use super::*;

    /// A protobuf field's value on the wire.
    #[derive(Debug, Clone, Copy)]
    enum Wire<'a> {
        Int(u64),
        Bytes(&'a [u8]),
    }

    fn varint(b: &mut &[u8]) -> u64 {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let (&x, rest) = b.split_first().expect("a varint runs past the end");
            *b = rest;
            v |= u64::from(x & 0x7f) << shift;
            if x & 0x80 == 0 {
                return v;
            }
        }
        panic!("a varint longer than 10 bytes");
    }

    /// The fields of one message, every byte accounted for (a wrong length anywhere makes
    /// the next key garbage or runs past the end).
    fn fields(mut b: &[u8]) -> Vec<(u32, Wire<'_>)> {
        let mut v = Vec::new();
        while !b.is_empty() {
            let key = varint(&mut b);
            let value = match key & 7 {
                0 => Wire::Int(varint(&mut b)),
                2 => {
                    let n = varint(&mut b) as usize;
                    assert!(n <= b.len(), "a length runs past the end");
                    let (d, rest) = b.split_at(n);
                    b = rest;
                    Wire::Bytes(d)
                }
                w => panic!("wire type {w}: the writer writes only varints and lengths"),
            };
            v.push(((key >> 3) as u32, value));
        }
        v
    }

    fn int(f: &[(u32, Wire)], n: u32) -> Option<u64> {
        f.iter().find_map(|(k, v)| match v {
            Wire::Int(i) if *k == n => Some(*i),
            _ => None,
        })
    }

    fn msgs<'a>(f: &[(u32, Wire<'a>)], n: u32) -> Vec<&'a [u8]> {
        f.iter()
            .filter_map(|(k, v)| match v {
                Wire::Bytes(b) if *k == n => Some(*b),
                _ => None,
            })
            .collect()
    }

    fn text(f: &[(u32, Wire)], n: u32) -> String {
        let b = msgs(f, n);
        let b = b.first().unwrap_or_else(|| panic!("no field {n} in {f:?}"));
        String::from_utf8(b.to_vec()).unwrap()
    }

    // Field numbers from Perfetto's protos (perfetto/trace/trace_packet.proto,
    // ftrace/ftrace_event_bundle.proto, ftrace/ftrace_event.proto, ftrace/sched.proto,
    // ps/process_tree.proto, track_event/track_event.proto, track_descriptor.proto).
    const PACKET: u32 = 1;
    const FTRACE_EVENTS: u32 = 1;
    const PROCESS_TREE: u32 = 2;
    const TIMESTAMP: u32 = 8;
    const SEQUENCE_ID: u32 = 10;
    const TRACK_EVENT: u32 = 11;
    const TRACK_DESCRIPTOR: u32 = 60;

    #[test]
    fn every_switch_lies_in_its_cpus_bundles_and_every_slice_ends_on_its_track() {
        let src = lisa_source();
        let trace = src.trace();
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("trace.pftrace");
        let analyzers = ["runq".to_string(), "offcpu".to_string()];
        let sum = crate::perfetto::write(&src, &out, &analyzers).unwrap();
        let file = std::fs::read(&out).unwrap();
        let mut got: BTreeMap<u32, Vec<Switch>> = BTreeMap::new();
        let mut wakeups = 0;
        let mut threads: HashMap<i64, String> = HashMap::new();
        let mut described = std::collections::HashSet::new();
        // Per track: the open slice's start, and the rows seen.
        let mut open: HashMap<u64, Option<u64>> = HashMap::new();
        let mut rows = 0;
        for (k, p) in fields(&file) {
            assert_eq!(k, PACKET);
            let Wire::Bytes(p) = p else {
                panic!("a packet is a message")
            };
            let pkt = fields(p);
            assert!(
                int(&pkt, SEQUENCE_ID).is_some(),
                "a packet without its sequence"
            );
            for bundle in msgs(&pkt, FTRACE_EVENTS) {
                let b = fields(bundle);
                let cpu = int(&b, 1).unwrap() as u32;
                for ev in msgs(&b, 2) {
                    let e = fields(ev);
                    let ts = int(&e, 1).unwrap();
                    if let Some(s) = msgs(&e, 4).first() {
                        let s = fields(s);
                        got.entry(cpu).or_default().push(Switch {
                            cpu,
                            ts,
                            prev_pid: int(&s, 2).unwrap() as i64,
                            next_pid: int(&s, 6).unwrap() as i64,
                            next_comm: text(&s, 5),
                        });
                    } else {
                        // sched_wakeup (17) or sched_waking (20), and nothing else.
                        assert!(!msgs(&e, 17).is_empty() || !msgs(&e, 20).is_empty());
                        wakeups += 1;
                    }
                }
            }
            for tree in msgs(&pkt, PROCESS_TREE) {
                for t in msgs(&fields(tree), 2) {
                    let t = fields(t);
                    threads.insert(int(&t, 1).unwrap() as i64, text(&t, 2));
                }
            }
            for d in msgs(&pkt, TRACK_DESCRIPTOR) {
                described.insert(int(&fields(d), 1).unwrap());
            }
            for t in msgs(&pkt, TRACK_EVENT) {
                let t = fields(t);
                let (kind, uuid) = (int(&t, 9).unwrap(), int(&t, 11).unwrap());
                let ts = int(&pkt, TIMESTAMP).unwrap();
                // Trace markers' instants have their own track; ends and counters carry no
                // category.
                if [1, 3].contains(&kind) && text(&t, 22) == "marker" {
                    continue;
                }
                assert!(
                    described.contains(&uuid),
                    "track {uuid} used before described"
                );
                let slice = open.entry(uuid).or_default();
                match kind {
                    1 => {
                        assert!(slice.is_none(), "a slice begins inside another on {uuid}");
                        *slice = Some(ts);
                        rows += 1;
                    }
                    2 => {
                        let start = slice.take().expect("an end without a begin");
                        assert!(start <= ts);
                    }
                    3 | 4 => rows += 1,
                    k => panic!("track event type {k}"),
                }
            }
        }
        // Each CPU's switches, in the reader's order, with their fields.
        let mut want: BTreeMap<u32, Vec<Switch>> = BTreeMap::new();
        for s in switches(trace) {
            want.entry(s.cpu).or_default().push(s);
        }
        assert_eq!(got, want);
        assert_eq!(
            sum.switches,
            want.values().map(|v| v.len() as u64).sum::<u64>()
        );
        assert_eq!(sum.cpus, want.len());
        let wanted = count(trace, &["sched:sched_wakeup", "sched:sched_waking"]);
        assert_eq!((wakeups, sum.wakeups), (wanted, wanted));
        // Every task switched to is named, with a name it ran under.
        for s in want.values().flatten().filter(|s| s.next_pid != 0) {
            assert!(
                threads.contains_key(&s.next_pid),
                "no name for {}",
                s.next_pid
            );
        }
        assert_eq!(threads.len(), sum.threads);
        // Every slice ended; one row each.
        assert!(open.values().all(Option::is_none));
        assert_eq!(rows, sum.analyzers.iter().map(|a| a.1).sum::<u64>());
        assert!(rows > 100, "{rows} analyzer rows");
    }
}

#[cfg(feature = "parquet")]
mod parquet {
    use super::*;

    /// The trace written as Parquet tables and opened again holds every event with the
    /// same time, CPU, task and field values, in the same order.
    #[test]
    fn a_real_trace_reads_back_event_for_event() {
        let src = lisa_source();
        let trace = src.trace();
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("tables");
        crate::parquet::write(&src, &out, &["none".to_string()]).unwrap();
        let back = Trace::open(&out).unwrap();
        assert_eq!(back.cpu_count, trace.cpu_count);
        let mut a = Merger::new(trace, None, IdFilter::all()).unwrap();
        let mut b = Merger::new(&back, None, IdFilter::all()).unwrap();
        let mut n = 0u64;
        let mut kinds = std::collections::BTreeSet::new();
        loop {
            let (x, y) = match (a.next().unwrap(), b.next().unwrap()) {
                (None, None) => break,
                (Some(x), Some(y)) => (x, y),
                (x, y) => panic!(
                    "event {n}: {:?} against {:?}",
                    x.map(|e| e.ts),
                    y.map(|e| e.ts)
                ),
            };
            let (fx, fy) = (
                trace.events.get(x.id).unwrap(),
                back.events.get(y.id).unwrap(),
            );
            assert_eq!(
                (x.ts, x.cpu, x.pid(), &fx.system, &fx.name),
                (y.ts, y.cpu, y.pid(), &fy.system, &fy.name),
                "event {n}"
            );
            for f in &fx.fields {
                let g = fy
                    .field(&f.name)
                    .unwrap_or_else(|| panic!("{}: no {}", fx.name, f.name));
                assert_eq!(
                    f.value(x.payload, x.endian),
                    g.value(y.payload, y.endian),
                    "event {n} ({}) field {}",
                    fx.name,
                    f.name
                );
            }
            kinds.insert(fx.name.clone());
            n += 1;
        }
        assert!(n > 3000 && kinds.len() > 5, "{n} events of {kinds:?}");
    }
}
