//! trace.dat reader against real traces, with `trace-cmd report` (run at test time) as the
//! oracle for what the CPU data holds.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use kstate_format::page::PageRecords;
use kstate_format::trace::DataLoc;
use kstate_format::{tracedat, Container, Endian, ErrorKind, Trace};

const TRACES: [&str; 2] = ["lisa-rtapp", "lisa-sched_load"];
const VARIANTS: [&str; 3] = ["trace.dat", "trace.v7-none.dat", "trace.v7-zstd.dat"];

/// A fixture file (testdata/, or a v7 copy made from it); a missing one fails the test (a
/// skipped comparison proves nothing).
fn fixture(dir: &str, name: &str) -> PathBuf {
    kstate_testdata::path(&format!("{dir}/{name}"))
}

/// Per-CPU record count and first/last timestamp in ns.
#[derive(Debug, Default, PartialEq, Eq, Clone, Copy)]
struct CpuStats {
    count: u64,
    first: u64,
    last: u64,
}

impl CpuStats {
    fn add(&mut self, ns: u64) {
        if self.count == 0 {
            self.first = ns;
        }
        self.last = ns;
        self.count += 1;
    }
}

/// `trace-cmd report -t -R` per CPU; fails the test when trace-cmd is absent.
fn oracle(path: &Path) -> BTreeMap<u32, CpuStats> {
    let out = match Command::new("trace-cmd")
        .args(["report", "-t", "-R", "-i"])
        .arg(path)
        .output()
    {
        Ok(o) => o,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            panic!("trace-cmd is not installed: apt-get install trace-cmd (the oracle for these tests)")
        }
        Err(e) => panic!("running trace-cmd: {e}"),
    };
    assert!(
        out.status.success(),
        "trace-cmd report failed on {}",
        path.display()
    );
    let mut stats = BTreeMap::<u32, CpuStats>::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        if let Some((cpu, ns)) = report_line(line) {
            stats.entry(cpu).or_default().add(ns);
        }
    }
    stats
}

/// The CPU and timestamp of an event line: `comm-pid [CPU] SECS.NANOS: ...`. trace-cmd
/// sometimes prints the time as bare nanoseconds (no dot, no space after the bracket).
/// Lines without that shape ("cpus=6", "CPU:N [LOST ...]") yield None.
fn report_line(line: &str) -> Option<(u32, u64)> {
    let mut from = 0;
    while let Some(open) = line[from..].find('[').map(|i| from + i) {
        from = open + 1;
        let rest = &line[open + 1..];
        let Some(close) = rest.find(']') else { break };
        let Ok(cpu) = rest[..close].parse::<u32>() else {
            continue;
        };
        let after = rest[close + 1..].trim_start();
        let Some(colon) = after.find(':') else {
            continue;
        };
        let ts = &after[..colon];
        let ns = match ts.split_once('.') {
            Some((s, f)) if f.len() <= 9 => {
                let frac: u64 = format!("{f:0<9}").parse().ok()?;
                s.parse::<u64>().ok()? * 1_000_000_000 + frac
            }
            Some(_) => continue,
            None => match ts.parse() {
                Ok(ns) => ns,
                Err(_) => continue,
            },
        };
        return Some((cpu, ns));
    }
    None
}

/// Walks every page of `cpu_data[index]` and collects the same statistics from our decoding.
fn decode_cpu(trace: &Trace, index: usize) -> CpuStats {
    let mut s = CpuStats::default();
    let mut pages = trace.pages(index).unwrap();
    while pages.advance().unwrap() {
        let page = pages.page();
        let (_, recs) = PageRecords::new(page, &trace.layout).unwrap();
        for r in recs {
            s.add(trace.clock_map.to_ns(r.unwrap().0));
        }
    }
    s
}

fn decode(trace: &Trace) -> BTreeMap<u32, CpuStats> {
    (0..trace.cpu_data.len())
        .map(|i| (trace.cpu_data[i].cpu, decode_cpu(trace, i)))
        .collect()
}

fn check_against_trace_cmd(ours: &Path, reference: &Path) {
    let trace = tracedat::open(ours).unwrap();
    assert!(trace.truncated.is_none(), "{:?}", trace.truncated);
    let got = decode(&trace);
    let want = oracle(reference);
    assert!(
        !want.is_empty(),
        "trace-cmd printed no events for {}",
        reference.display()
    );
    assert_eq!(
        got,
        want,
        "{} vs trace-cmd on {}",
        ours.display(),
        reference.display()
    );
}

#[test]
fn records_match_trace_cmd() {
    for dir in TRACES {
        for v in VARIANTS {
            let p = fixture(dir, v);
            check_against_trace_cmd(&p, &p);
        }
    }
}

#[test]
fn metadata_of_all_variants() {
    for dir in TRACES {
        let v6 = fixture(dir, "trace.dat");
        let base = tracedat::open(&v6).unwrap();
        assert_eq!(
            base.container,
            Container::TraceDat {
                version: 6,
                compression: None
            }
        );
        assert_eq!(base.endian, Endian::Little);
        assert_eq!(base.long_size, 8);
        assert_eq!(base.layout.page_size, 4096);
        assert_eq!(base.layout.data_offset, 16);
        assert_eq!(base.cpu_count, 6);
        // Only rtapp's v6 file has a TRACECLOCK option; v7 always names the buffer's clock.
        let clock = (dir == "lisa-rtapp").then(|| "local".to_string());
        assert_eq!(base.clock, clock);
        assert!(base.clock_map.is_identity());
        assert!(!base.comms.is_empty());
        assert!(base.events.find("sched:sched_switch").is_some());
        assert!(base.events.find("ftrace:print").is_some());
        for v in &VARIANTS[1..] {
            let p = fixture(dir, v);
            let t = tracedat::open(&p).unwrap();
            let compression = v.contains("zstd").then(|| "zstd".to_string());
            assert_eq!(
                t.container,
                Container::TraceDat {
                    version: 7,
                    compression
                }
            );
            // trace-cmd convert copied the metadata: it must read back identically.
            assert_eq!(t.layout, base.layout);
            assert_eq!(t.comms, base.comms);
            assert_eq!(t.kallsyms, base.kallsyms);
            assert_eq!(t.printk_formats, base.printk_formats);
            assert_eq!(t.clock.as_deref(), Some("local"));
            assert_eq!(t.cpu_count, base.cpu_count);
            assert_eq!(t.events.iter().count(), base.events.iter().count());
            let cpus = |t: &Trace| t.cpu_data.iter().map(|c| c.cpu).collect::<Vec<_>>();
            assert_eq!(cpus(&t), cpus(&base));
        }
    }
}

#[test]
fn rtapp_sizes_match_trace_cmd_dump() {
    // Numbers from `trace-cmd dump --summary -i lisa-rtapp/trace.dat`.
    let p = fixture("lisa-rtapp", "trace.dat");
    let t = tracedat::open(&p).unwrap();
    assert_eq!(t.kallsyms.as_ref().map(Vec::len), Some(2_684_861));
    assert_eq!(t.printk_formats.as_ref().map(Vec::len), Some(3843));
    assert_eq!(t.comms.get(&6973).map(String::as_str), Some("trace-cmd"));
    // Six CPUSTAT options and an (empty) TRACECLOCK; CPUSTAT is not interpreted.
    let ids: Vec<u16> = t.extra_options.iter().map(|o| o.0).collect();
    assert_eq!(ids, vec![2; 6]);
    assert!(t.extra_options[0].1.starts_with(b"CPU: 0\n"));
    // From `trace-cmd dump --flyrecord`.
    let sizes: Vec<u64> = t.cpu_data.iter().map(|c| c.file_bytes).collect();
    assert_eq!(sizes, vec![24576, 290816, 237568, 12288, 4096, 45056]);
}

// ---- A zlib-compressed v7 file, made from the uncompressed one -------------------------
//
// This trace-cmd build has no zlib, so `trace-cmd convert` cannot make one. We compress the
// v7-none file in place instead: every compressed section and every CPU's chunk list is
// smaller than the data it replaces, so all offsets stay valid; only the sizes in the
// section headers and the BUFFER option change. trace-cmd's report of the v7-none file is
// the oracle, since the events are the same.

fn u16_at(d: &[u8], at: usize) -> u16 {
    u16::from_le_bytes(d[at..at + 2].try_into().unwrap())
}
fn u32_at(d: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(d[at..at + 4].try_into().unwrap())
}
fn u64_at(d: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(d[at..at + 8].try_into().unwrap())
}

fn zlib(data: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

/// Rewrites the section at `at` as a compressed one, in place.
fn compress_section(d: &mut [u8], at: usize) {
    let size = u64_at(d, at + 8) as usize;
    let content = d[at + 16..at + 16 + size].to_vec();
    let z = zlib(&content);
    assert!(z.len() + 8 <= size, "compressed section must fit in place");
    d[at + 2] |= 1;
    d[at + 8..at + 16].copy_from_slice(&((z.len() + 8) as u64).to_le_bytes());
    let body = at + 16;
    d[body..body + 4].copy_from_slice(&(z.len() as u32).to_le_bytes());
    d[body + 4..body + 8].copy_from_slice(&(size as u32).to_le_bytes());
    d[body + 8..body + 8 + z.len()].copy_from_slice(&z);
    d[body + 8 + z.len()..body + size].fill(0);
}

/// Replaces one CPU's pages by zlib chunks of ten pages; returns trace-cmd's size field.
fn compress_cpu(d: &mut [u8], off: usize, size: usize) -> u64 {
    let pages = d[off..off + size].to_vec();
    let mut out = Vec::new();
    let chunks: Vec<&[u8]> = pages.chunks(10 * 4096).collect();
    out.extend_from_slice(&(chunks.len() as u32).to_le_bytes());
    for c in chunks {
        let z = zlib(c);
        out.extend_from_slice(&(z.len() as u32).to_le_bytes());
        out.extend_from_slice(&(c.len() as u32).to_le_bytes());
        out.extend_from_slice(&z);
    }
    assert!(out.len() <= size);
    d[off..off + out.len()].copy_from_slice(&out);
    d[off + out.len()..off + size].fill(0);
    out.len() as u64 - 4
}

fn make_zlib_v7(v7_none: &Path, out: &Path) {
    let mut d = std::fs::read(v7_none).unwrap();
    assert_eq!(
        &d[18..24],
        b"none\0\0",
        "header of a v7 file without compression"
    );
    d[18..22].copy_from_slice(b"zlib");
    let mut next = u64_at(&d, 24) as usize;
    let mut sections = Vec::new();
    let mut buffer_options = Vec::new();
    while next != 0 {
        let end = next + 16 + u64_at(&d, next + 8) as usize;
        let mut p = next + 16;
        next = 0;
        while p < end {
            let (id, size) = (u16_at(&d, p), u32_at(&d, p + 2) as usize);
            let payload = p + 6;
            match id {
                0 => next = u64_at(&d, payload) as usize,
                3 => buffer_options.push(payload),
                16..=21 => sections.push(u64_at(&d, payload) as usize),
                _ => {}
            }
            p = payload + size;
        }
    }
    for s in sections {
        compress_section(&mut d, s);
    }
    for b in buffer_options {
        let section = u64_at(&d, b) as usize;
        d[section + 2] |= 1;
        // Skip the instance name and clock strings, the page size and the CPU count.
        let name_end = b + 8 + d[b + 8..].iter().position(|&c| c == 0).unwrap() + 1;
        let clock_end = name_end + d[name_end..].iter().position(|&c| c == 0).unwrap() + 1;
        let cpus = u32_at(&d, clock_end + 4) as usize;
        for i in 0..cpus {
            let e = clock_end + 8 + i * 20;
            let (off, size) = (u64_at(&d, e + 4) as usize, u64_at(&d, e + 12) as usize);
            if size > 0 {
                let zsize = compress_cpu(&mut d, off, size);
                d[e + 12..e + 20].copy_from_slice(&zsize.to_le_bytes());
            }
        }
    }
    std::fs::write(out, d).unwrap();
}

#[test]
fn zlib_v7_made_at_test_time() {
    let dir = tempfile::tempdir().unwrap();
    for name in TRACES {
        let none = fixture(name, "trace.v7-none.dat");
        let z = dir.path().join(format!("{name}.v7-zlib.dat"));
        make_zlib_v7(&none, &z);
        let t = tracedat::open(&z).unwrap();
        assert_eq!(
            t.container,
            Container::TraceDat {
                version: 7,
                compression: Some("zlib".into())
            }
        );
        assert!(t
            .cpu_data
            .iter()
            .all(|c| matches!(c.loc, DataLoc::Compressed(_))));
        assert_eq!(t.kallsyms, tracedat::open(&none).unwrap().kallsyms);
        check_against_trace_cmd(&z, &none);
    }
}

// ---- Clock options, checked against trace-cmd on a modified v6 file --------------------

/// Inserts extra v6 options at the start of the options block, taking the room from the
/// zero padding before the first CPU's pages so that no offset moves.
fn with_options(v6: &Path, out: &Path, options: &[(u16, Vec<u8>)]) {
    let mut d = std::fs::read(v6).unwrap();
    let find = |d: &[u8], tag: &[u8]| {
        let all: Vec<usize> = d
            .windows(tag.len())
            .enumerate()
            .filter(|(_, w)| *w == tag)
            .map(|(i, _)| i)
            .collect();
        assert_eq!(
            all.len(),
            1,
            "{:?} must occur once",
            String::from_utf8_lossy(tag)
        );
        all[0]
    };
    let opts = find(&d, b"options  \0") + 10;
    let fly = find(&d, b"flyrecord\0") + 10;
    let first_cpu = u64_at(&d, fly) as usize;
    let mut ins = Vec::new();
    for (id, payload) in options {
        ins.extend_from_slice(&id.to_le_bytes());
        ins.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        ins.extend_from_slice(payload);
    }
    assert!(d[first_cpu - ins.len()..first_cpu].iter().all(|&b| b == 0));
    d.drain(first_cpu - ins.len()..first_cpu);
    d.splice(opts..opts, ins);
    std::fs::write(out, d).unwrap();
}

#[test]
fn tsc2nsec_offset_and_date_match_trace_cmd() {
    let v6 = fixture("lisa-rtapp", "trace.dat");
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("clock.dat");
    let mut tsc = Vec::new();
    tsc.extend_from_slice(&3u32.to_le_bytes()); // mult
    tsc.extend_from_slice(&1u32.to_le_bytes()); // shift
    tsc.extend_from_slice(&1_000_000_000u64.to_le_bytes()); // TSC offset
    with_options(
        &v6,
        &p,
        &[
            (14, tsc),
            (7, b"-2500\0".to_vec()),
            (1, b"0x10\0".to_vec()),
            (5, b"Linux test 6.1.0 aarch64\0".to_vec()),
            (9, b"3.1.6\0".to_vec()),
            (4242, b"kstate".to_vec()),
        ],
    );
    let t = tracedat::open(&p).unwrap();
    assert_eq!((t.clock_map.mult, t.clock_map.shift), (3, 1));
    // OFFSET in ns plus DATE in microseconds.
    assert_eq!(t.clock_map.offset, -2500 + 16_000);
    assert_eq!(t.uname.as_deref(), Some("Linux test 6.1.0 aarch64"));
    assert_eq!(t.tool_version.as_deref(), Some("3.1.6"));
    assert!(t.extra_options.contains(&(4242, b"kstate".to_vec())));
    check_against_trace_cmd(&p, &p);
}

// ---- Broken inputs ----------------------------------------------------------------------

fn truncated_copy(src: &Path, dir: &Path, len: u64) -> PathBuf {
    let p = dir.join(format!("cut-{len}.dat"));
    let d = std::fs::read(src).unwrap();
    std::fs::write(&p, &d[..len as usize]).unwrap();
    p
}

#[test]
fn truncated_metadata_is_an_error_with_an_offset() {
    let dir = tempfile::tempdir().unwrap();
    for v in VARIANTS {
        let src = fixture("lisa-rtapp", v);
        let len = std::fs::metadata(&src).unwrap().len();
        // v6 metadata ends with the trace_clock text at 3370586 (then padding and CPU data);
        // v7 writes the BUFFER option after the CPU data, so cutting a v7 file anywhere
        // before its trailing strings section loses metadata.
        let metadata_end = if v == "trace.dat" { 3_370_586 } else { len };
        for cut in [
            0,
            5,
            11,
            20,
            33,
            300,
            5_000,
            700_000,
            3_369_500,
            3_370_500,
            3_370_585,
            len - 150,
        ] {
            if cut >= metadata_end {
                continue;
            }
            let p = truncated_copy(&src, dir.path(), cut);
            let Err(e) = tracedat::open(&p) else {
                panic!("{v} cut at {cut} opened")
            };
            assert_eq!(e.kind, ErrorKind::Truncated, "{v} cut at {cut}: {e}");
            let off = e.offset.expect("offset reported");
            assert!(off <= len, "{v} cut at {cut}: offset {off} in {e}");
            assert_eq!(e.path.as_deref(), Some(p.as_path()));
        }
    }
}

#[test]
fn truncated_cpu_data_opens_and_reports() {
    let src = fixture("lisa-rtapp", "trace.dat");
    let dir = tempfile::tempdir().unwrap();
    // CPU 1's pages run from 3395584 for 290816 bytes; cut it mid-page.
    let cut = 3_395_584 + 5 * 4096 + 100;
    let p = truncated_copy(&src, dir.path(), cut);
    let t = tracedat::open(&p).unwrap();
    let e = t.truncated.as_ref().expect("truncation noted");
    assert_eq!((e.kind, e.offset), (ErrorKind::Truncated, Some(cut)));
    // CPU 0 is whole; CPU 1 gives its five whole pages, then reports the short one.
    let mut pages = t.pages(1).unwrap();
    for _ in 0..5 {
        assert!(pages.advance().unwrap());
    }
    let e = pages.advance().unwrap_err();
    assert_eq!(e.kind, ErrorKind::Truncated);
    let whole = oracle(&src);
    assert_eq!(decode_cpu(&t, 0).count, whole[&0].count);
}

#[test]
fn bad_magic_and_versions() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("x.dat");
    std::fs::write(&p, b"\x17\x08\x44tracinX6\0").unwrap();
    let e = tracedat::open(&p).unwrap_err();
    assert_eq!((e.kind, e.offset), (ErrorKind::BadMagic, Some(0)));
    assert!(
        e.msg.contains("not a trace.dat (\\x17\\x08\\x44tracing)"),
        "{e}"
    );
    std::fs::write(&p, b"PERFILE2 and more").unwrap();
    assert_eq!(tracedat::open(&p).unwrap_err().kind, ErrorKind::BadMagic);
    std::fs::write(&p, b"\x17\x08\x44tracing9\0\0\x08\0\x10\0\0").unwrap();
    let e = tracedat::open(&p).unwrap_err();
    assert_eq!((e.kind, e.offset), (ErrorKind::Unsupported, Some(10)));
}

#[test]
fn corrupt_lengths_are_errors_not_allocations() {
    let src = fixture("lisa-rtapp", "trace.dat");
    let dir = tempfile::tempdir().unwrap();
    let d = std::fs::read(&src).unwrap();
    let p = dir.path().join("bad.dat");
    // header_page's u64 size sits right after magic, version, endian, long and page size
    // and the "header_page\0" tag.
    let mut bad = d.clone();
    bad[30..38].copy_from_slice(&(u64::MAX - 7).to_le_bytes());
    std::fs::write(&p, &bad).unwrap();
    let e = tracedat::open(&p).unwrap_err();
    assert_eq!((e.kind, e.offset), (ErrorKind::Truncated, Some(38)), "{e}");
    assert!(e.msg.contains("header_page"), "{e}");
    // Not "header_page": the tag is named in the message.
    let mut bad = d.clone();
    bad[18] = b'X';
    std::fs::write(&p, &bad).unwrap();
    let e = tracedat::open(&p).unwrap_err();
    assert_eq!((e.kind, e.offset), (ErrorKind::Corrupt, Some(18)), "{e}");
    assert!(e.msg.contains("header_page"), "{e}");
}

#[test]
fn corrupt_compressed_chunks_are_reported_by_the_page_reader() {
    let src = fixture("lisa-rtapp", "trace.v7-zstd.dat");
    let dir = tempfile::tempdir().unwrap();
    let t = tracedat::open(&src).unwrap();
    let DataLoc::Compressed(c) = &t.cpu_data[0].loc else {
        panic!("zstd data should be compressed")
    };
    let chunk = c.offset() as usize + 4;
    let d = std::fs::read(&src).unwrap();
    let p = dir.path().join("bad.dat");
    for (at, value, kind) in [
        (chunk + 4, 4097u32, ErrorKind::Corrupt),  // not whole pages
        (chunk + 4, u32::MAX, ErrorKind::Corrupt), // huge claim
        (chunk, u32::MAX - 64, ErrorKind::Corrupt), // compressed size beyond any chunk
        (chunk, 1000, ErrorKind::Corrupt),         // cuts the zstd frame short
    ] {
        let mut bad = d.clone();
        bad[at..at + 4].copy_from_slice(&value.to_le_bytes());
        std::fs::write(&p, &bad).unwrap();
        let t = tracedat::open(&p).unwrap();
        let mut pages = t.pages(0).unwrap();
        let e = pages.advance().unwrap_err();
        assert_eq!((e.kind, e.offset), (kind, Some(chunk as u64)), "{e}");
        assert!(!pages.advance().unwrap());
    }
}

#[test]
fn no_input_prefix_panics() {
    // Every prefix length in the metadata of a small v7 file, and a spread of byte flips:
    // errors are fine, panics are not.
    let src = fixture("lisa-sched_load", "trace.v7-zstd.dat");
    let d = std::fs::read(&src).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("f.dat");
    let mut cases: Vec<Vec<u8>> = (0..400).map(|n| d[..n].to_vec()).collect();
    for i in (0..d.len()).step_by(7919) {
        let mut m = d.clone();
        m[i] ^= 0xff;
        cases.push(m);
    }
    for c in cases {
        std::fs::write(&p, &c).unwrap();
        if let Ok(t) = tracedat::open(&p) {
            for i in 0..t.cpu_data.len() {
                let mut pages = t.pages(i).unwrap();
                while let Ok(true) = pages.advance() {
                    if let Ok((_, recs)) = PageRecords::new(pages.page(), &t.layout) {
                        recs.for_each(drop);
                    }
                }
            }
        }
    }
}
