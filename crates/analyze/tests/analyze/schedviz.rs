//! Raw ring-buffer pages captured by other people's tools (google/schedviz test data),
//! checked against what the scheduler guarantees: a `sched_switch` on a CPU is recorded by
//! the task switching out, and the next event on that CPU is recorded by the task that
//! switched in. A page decoder that loses a record, mis-sizes one, or garbles a field or a
//! timestamp breaks these chains.

use std::collections::HashMap;
use std::path::PathBuf;

use kstate_format::stream::merge::{IdFilter, Merger};
use kstate_format::{Lost, Trace};

fn fixtures() -> PathBuf {
    kstate_testdata::dir().join("schedviz")
}

/// Unpacks the schedviz capture (formats/ + traces/cpuN) into a temporary directory.
fn capture() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let st = std::process::Command::new("tar")
        .arg("xzf")
        .arg(fixtures().join("test.tar.gz"))
        .arg("-C")
        .arg(dir.path())
        .status()
        .expect("tar runs");
    assert!(st.success());
    dir
}

struct Seen {
    counts: HashMap<String, u64>,
    events: u64,
    switches: u64,
    /// Switch events whose prev_pid differs from the recording task.
    prev_mismatch: u64,
    /// Events whose recording task is not the one the CPU last switched to.
    next_mismatch: u64,
    /// Checked successors of switches.
    chained: u64,
    lost_pages: u64,
}

fn walk(trace: &Trace) -> Seen {
    let switch = trace
        .events
        .find("sched_switch")
        .expect("sched_switch format");
    let prev_pid = switch.field("prev_pid").unwrap().clone();
    let next_pid = switch.field("next_pid").unwrap().clone();
    let mut m = Merger::new(trace, None, IdFilter::all()).unwrap();
    let mut s = Seen {
        counts: HashMap::new(),
        events: 0,
        switches: 0,
        prev_mismatch: 0,
        next_mismatch: 0,
        chained: 0,
        lost_pages: 0,
    };
    let mut running: HashMap<u32, i32> = HashMap::new();
    let mut last_ts = 0;
    while let Some(ev) = m.next().unwrap() {
        assert!(
            ev.ts >= last_ts,
            "time goes backwards at event {}",
            s.events
        );
        last_ts = ev.ts;
        if ev.lost_before != Lost::None {
            // The chain is broken by the kernel, not by us.
            running.remove(&ev.cpu);
            s.lost_pages += 1;
        }
        let fmt = trace
            .events
            .get(ev.id)
            .unwrap_or_else(|| panic!("event id {} has no format", ev.id));
        *s.counts.entry(fmt.name.clone()).or_default() += 1;
        s.events += 1;
        let pid = ev.pid();
        if let Some(p) = running.get(&ev.cpu) {
            s.chained += 1;
            if *p != pid {
                s.next_mismatch += 1;
            }
        }
        if ev.id == switch.id {
            s.switches += 1;
            let get = |f: &kstate_format::Field| {
                ev.endian.uint(ev.payload, f.offset, f.size).unwrap() as u32 as i32
            };
            if get(&prev_pid) != pid {
                s.prev_mismatch += 1;
            }
            running.insert(ev.cpu, get(&next_pid));
        }
    }
    eprintln!(
        "{} events {:?}; {} switches, {} chained successors, {} lost-page marks",
        s.events, s.counts, s.switches, s.chained, s.lost_pages
    );
    s
}

#[test]
fn capture_directory_decodes_with_its_own_formats() {
    let dir = capture();
    let trace = Trace::open(dir.path()).unwrap();
    assert_eq!(trace.layout.commit_size, 8);
    assert_eq!(trace.events.iter().count(), 4);
    let s = walk(&trace);
    assert!(s.events > 10_000, "only {} events", s.events);
    assert_eq!(s.counts.values().sum::<u64>(), s.events);
    assert!(s.switches > 1000);
    assert_eq!(
        s.prev_mismatch, 0,
        "sched_switch prev_pid must be the recording task"
    );
    assert!(s.chained > 1000);
    assert_eq!(
        s.next_mismatch, 0,
        "the task switched in must record the CPU's next event"
    );
}

#[test]
fn raw_64_bit_pages_decode() {
    let dir = capture();
    // The 64-bit pages from schedviz's traceparser tests were recorded on the kernel whose
    // formats the capture holds; put them in place of the capture's own pages.
    let traces = dir.path().join("traces");
    std::fs::remove_dir_all(&traces).unwrap();
    std::fs::create_dir(&traces).unwrap();
    std::fs::copy(fixtures().join("cpu0"), traces.join("cpu0")).unwrap();
    let trace = Trace::open(dir.path()).unwrap();
    let s = walk(&trace);
    let pages = std::fs::metadata(fixtures().join("cpu0")).unwrap().len() / 4096;
    assert_eq!(pages, 21);
    assert!(
        s.events > pages * 20,
        "{} events in {pages} pages",
        s.events
    );
    assert_eq!(s.prev_mismatch, 0);
    assert_eq!(s.next_mismatch, 0);
    assert!(s.chained > 0);
}

/// Format files of the 32-bit PREEMPT_RT kernel that wrote `cpu0-32` (its common fields
/// end at 16: migrate_disable and padding follow the pid).
const FORMATS_32: &[(&str, u32, &str)] = &[
    ("sched_migrate_task", 220, "char comm[16];16;16;1 pid_t pid;32;4;1 int prio;36;4;1 int orig_cpu;40;4;1 int dest_cpu;44;4;1"),
    ("sched_switch", 221, "char prev_comm[16];16;16;1 pid_t prev_pid;32;4;1 int prev_prio;36;4;1 long prev_state;40;4;1 char next_comm[16];44;16;1 pid_t next_pid;60;4;1 int next_prio;64;4;1"),
    ("sched_wakeup_new", 222, "char comm[16];16;16;1 pid_t pid;32;4;1 int prio;36;4;1 int success;40;4;1 int target_cpu;44;4;1"),
    ("sched_wakeup", 223, "char comm[16];16;16;1 pid_t pid;32;4;1 int prio;36;4;1 int success;40;4;1 int target_cpu;44;4;1"),
];

#[test]
fn raw_32_bit_page_decodes() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(
        d.join("header_page"),
        "\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;\n\tfield: local_t commit;\toffset:8;\tsize:4;\tsigned:1;\n\tfield: int overwrite;\toffset:8;\tsize:1;\tsigned:1;\n\tfield: char data;\toffset:12;\tsize:4084;\tsigned:1;\n",
    )
    .unwrap();
    for (name, id, fields) in FORMATS_32 {
        let mut text = format!("name: {name}\nID: {id}\nformat:\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n");
        for f in fields.split(' ').collect::<Vec<_>>().chunks(2) {
            let (decl, rest) = (f[0], f[1]);
            let mut p = rest.split(';');
            let name = p.next().unwrap();
            let (off, size, signed) = (p.next().unwrap(), p.next().unwrap(), p.next().unwrap());
            text +=
                &format!("\tfield:{decl} {name};\toffset:{off};\tsize:{size};\tsigned:{signed};\n");
        }
        let ev = d.join("events/sched").join(name);
        std::fs::create_dir_all(&ev).unwrap();
        std::fs::write(ev.join("format"), text).unwrap();
    }
    let cpu = d.join("per_cpu/cpu0");
    std::fs::create_dir_all(&cpu).unwrap();
    std::fs::copy(fixtures().join("cpu0-32"), cpu.join("trace_pipe_raw")).unwrap();

    let trace = Trace::open(d).unwrap();
    assert_eq!(
        (trace.layout.commit_size, trace.layout.data_offset),
        (4, 12)
    );
    let s = walk(&trace);
    assert!(s.events >= 40, "{} events in one page", s.events);
    assert!(s.switches > 0);
    assert_eq!(s.prev_mismatch, 0);
    assert_eq!(s.next_mismatch, 0);
    // The first record is the wakeup of rcu_sched seen in the page's bytes.
    let wake = trace.events.find("sched_wakeup").unwrap();
    let comm = wake.field("comm").unwrap().clone();
    let mut m = Merger::new(&trace, None, IdFilter::only([wake.id])).unwrap();
    let first = m.next().unwrap().unwrap();
    let c = &first.payload[comm.offset..comm.offset + comm.size];
    assert_eq!(&c[..9], b"rcu_sched");
}
