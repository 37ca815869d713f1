//! Traces as users keep and pass them: compressed with gzip, zstd or xz (by Debian's own
//! tools, here, at test time), through a pipe, a FIFO or standard input, read exactly as the
//! file they came from; what is not a trace named plainly; and a damaged section of a zstd
//! trace.dat lost alone, named with its file offset.

use crate::support;

use std::ffi::OsStr;
use std::fs::File;
use std::path::Path;
use std::process::{Command, Output};

use support::{fixture, kstate, kstate_json, record_workload, run, KSTATE};

const TOOLS: [(&str, &str); 3] = [("gzip", "gz"), ("zstd", "zst"), ("xz", "xz")];

/// `TOOL -c SRC > DEST` with Debian's compressor; fails (never skips) when it is missing.
fn compress(tool: &str, src: &Path, dest: &Path) {
    let out = File::create(dest).unwrap();
    let st = Command::new(tool)
        .arg("-c")
        .arg(src)
        .stdout(out)
        .status()
        .unwrap_or_else(|e| panic!("cannot run {tool} (apt-get install {tool}): {e}"));
    assert!(st.success(), "{tool} -c {} failed", src.display());
}

/// Output with the line naming the input left out (it names the file as given).
fn unnamed(text: &str) -> String {
    text.lines()
        .filter(|l| !l.starts_with("file:"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Runs `sh -c SCRIPT` (kstate is `$K`); returns its output.
fn sh(script: &str) -> Output {
    Command::new("sh")
        .args(["-c", script])
        .env("K", KSTATE)
        .output()
        .unwrap()
}

/// Every compressed copy of `src` reads as `src` does: the same dump, the same analysis,
/// and `info` gives the compressor and both sizes as the file system has them.
fn assert_compressed_copies_read_alike(src: &Path, analyze: &[&str], dir: &Path) {
    let dump = kstate(&["dump".as_ref(), src.as_os_str()]);
    let analysis_of = |f: &Path| {
        let mut a: Vec<&OsStr> = analyze.iter().map(|s| s.as_ref()).collect();
        a.push(f.as_os_str());
        unnamed(&kstate(&a))
    };
    let analysis = analysis_of(src);
    let events = kstate_json(&["info".as_ref(), "--json".as_ref(), src.as_os_str()])["events"]
        .as_u64()
        .unwrap();
    assert!(events > 0);
    for (tool, ext) in TOOLS {
        let packed = dir.join(format!(
            "{}.{ext}",
            src.file_name().unwrap().to_string_lossy()
        ));
        compress(tool, src, &packed);
        assert_eq!(
            kstate(&["dump".as_ref(), packed.as_os_str()]),
            dump,
            "{tool}: dump differs"
        );
        assert_eq!(
            analysis_of(&packed),
            analysis,
            "{tool}: {analyze:?} differs"
        );
        let v = kstate_json(&["info".as_ref(), "--json".as_ref(), packed.as_os_str()]);
        assert_eq!(v["events"], events, "{tool}");
        assert_eq!(v["input"]["compression"], tool);
        assert_eq!(v["input"]["pipe"], false);
        assert_eq!(
            v["input"]["stored_bytes"],
            std::fs::metadata(&packed).unwrap().len()
        );
        assert_eq!(v["input"]["bytes"], std::fs::metadata(src).unwrap().len());
        let text = kstate(&["info".as_ref(), packed.as_os_str()]);
        assert!(
            text.contains(&format!("stored:      {tool}-compressed")),
            "{text}"
        );
        std::fs::remove_file(&packed).unwrap();
    }
}

#[test]
fn compressed_fixtures_read_as_the_originals() {
    let tmp = tempfile::tempdir().unwrap();
    for f in ["lisa-rtapp/trace.dat", "lisa-sched_load/trace.v7-zstd.dat"] {
        assert_compressed_copies_read_alike(
            &fixture(f),
            &["analyze", "runq", "--stat"],
            tmp.path(),
        );
    }
}

#[test]
fn compressed_live_recording_reads_as_the_original() {
    let tmp = tempfile::tempdir().unwrap();
    let cap = tmp.path().join("getppid.dat");
    record_workload("syscall,sched", &["getppid", "3000"], false, &cap);
    assert_compressed_copies_read_alike(&cap, &["analyze", "syscall", "--stat"], tmp.path());
}

#[test]
fn pipes_fifos_and_standard_input() {
    let tmp = tempfile::tempdir().unwrap();
    let src = fixture("lisa-sched_load/trace.dat");
    let zst = tmp.path().join("t.dat.zst");
    compress("zstd", &src, &zst);
    let dump = kstate(&["dump".as_ref(), src.as_os_str()]);
    let events =
        kstate_json(&["info".as_ref(), "--json".as_ref(), src.as_os_str()])["events"].clone();

    // A compressed stream down a pipe, named `-`.
    let o = sh(&format!(
        "zstdcat '{}' | \"$K\" info --json -",
        zst.display()
    ));
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["events"], events);
    assert_eq!(v["file"], "standard input");
    assert_eq!(v["input"]["pipe"], true);
    assert_eq!(v["input"]["compression"], serde_json::Value::Null);
    assert_eq!(v["input"]["bytes"], std::fs::metadata(&src).unwrap().len());

    // The compressed file itself on standard input, and a plain trace down a pipe.
    let o = sh(&format!("\"$K\" dump - < '{}'", zst.display()));
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        String::from_utf8(o.stdout).unwrap() == dump,
        "dump - < t.dat.zst differs"
    );
    let o = sh(&format!("cat '{}' | \"$K\" dump -", src.display()));
    assert!(
        String::from_utf8(o.stdout).unwrap() == dump,
        "cat | dump - differs"
    );

    // A FIFO, written by zstdcat while kstate reads it.
    let fifo = tmp.path().join("fifo");
    let st = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(st.success());
    let mut writer = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "zstdcat '{}' > '{}'",
            zst.display(),
            fifo.display()
        ))
        .spawn()
        .unwrap();
    let o = run(&["dump".as_ref(), fifo.as_os_str()]);
    assert!(writer.wait().unwrap().success());
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        String::from_utf8(o.stdout).unwrap() == dump,
        "dump FIFO differs"
    );
}

#[test]
fn what_is_not_a_trace_is_named() {
    let tmp = tempfile::tempdir().unwrap();
    let expect = |o: &Output, line: &str| {
        assert_eq!(o.status.code(), Some(2), "{}", stderr(o));
        assert_eq!(stderr(o).trim_end(), line);
    };
    let tail = "expected trace.dat, perf.data or a capture directory";
    expect(
        &run(&["info", "/dev/zero"]),
        &format!("kstate: /dev/zero: not a trace: 4096 zero bytes at the start; {tail}"),
    );
    // An endless stream is refused from its first bytes, not copied.
    expect(
        &sh("cat /dev/zero | \"$K\" info -"),
        &format!("kstate: standard input: not a trace: 4096 zero bytes at the start; {tail}"),
    );
    let text = tmp.path().join("report.txt");
    std::fs::write(
        &text,
        "cpus=2\n  <idle>-0  [001] 1.000: sched_switch: ...\n",
    )
    .unwrap();
    expect(
        &run(&["dump".as_ref(), text.as_os_str()]),
        &format!(
            "kstate: {}: not a trace: text, starting \"cpus=2\"; {tail}",
            text.display()
        ),
    );
    let gz = tmp.path().join("report.txt.gz");
    compress("gzip", &text, &gz);
    expect(
        &run(&["info".as_ref(), gz.as_os_str()]),
        &format!(
            "kstate: {}: gzip-compressed, but not a trace: text, starting \"cpus=2\"; {tail}",
            gz.display()
        ),
    );
    let tgz = fixture("schedviz/test.tar.gz");
    let o = run(&["info".as_ref(), tgz.as_os_str()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("gzip-compressed, but not a trace: a tar archive"));
    let empty = tmp.path().join("empty.dat");
    File::create(&empty).unwrap();
    expect(
        &run(&["info".as_ref(), empty.as_os_str()]),
        &format!(
            "kstate: {}: empty (0 bytes): nothing was recorded",
            empty.display()
        ),
    );
    expect(
        &sh("\"$K\" info - < /dev/null"),
        "kstate: standard input: empty (0 bytes): nothing was recorded",
    );
}

#[test]
fn an_xz_check_kstate_cannot_verify_is_named() {
    let tmp = tempfile::tempdir().unwrap();
    let f = tmp.path().join("t.xz");
    let src = fixture("lisa-rtapp/trace.dat");
    let o = sh(&format!(
        "xz -c --check=sha256 '{}' > '{}'",
        src.display(),
        f.display()
    ));
    assert!(o.status.success(), "{}", stderr(&o));
    let o = run(&["info".as_ref(), f.as_os_str()]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        stderr(&o).trim_end(),
        format!(
            "kstate: {}: the xz stream cannot be read: its integrity check is SHA-256 or \
             unknown, which kstate's xz reader does not verify (xz writes CRC64 unless told \
             otherwise: recompress with `xz`)",
            f.display()
        )
    );
}

#[test]
fn offsets_in_an_unpacked_trace_say_so() {
    let tmp = tempfile::tempdir().unwrap();
    let src = fixture("lisa-rtapp/trace.dat");
    // Cut inside the CPU data: the trace opens, and its end is an offset in the unpacked data.
    let mut bytes = std::fs::read(&src).unwrap();
    bytes.truncate(bytes.len() - 1000);
    let cut = tmp.path().join("cut.dat");
    std::fs::write(&cut, &bytes).unwrap();
    let packed = tmp.path().join("cut.dat.gz");
    compress("gzip", &cut, &packed);
    let plain = stderr(&run(&["info".as_ref(), cut.as_os_str()]));
    let o = run(&["info".as_ref(), packed.as_os_str()]);
    assert_eq!(o.status.code(), Some(2));
    let first = plain.lines().next().unwrap().replacen(
        &cut.display().to_string(),
        &packed.display().to_string(),
        1,
    );
    assert!(
        stderr(&o).starts_with(&format!("{first} (the offset is in the unpacked data)")),
        "{}\nvs\n{plain}",
        stderr(&o)
    );
}

#[test]
fn a_cut_compressed_file_says_so() {
    let tmp = tempfile::tempdir().unwrap();
    let src = fixture("lisa-rtapp/trace.dat");
    for (tool, ext) in TOOLS {
        let packed = tmp.path().join(format!("t.{ext}"));
        compress(tool, &src, &packed);
        let mut bytes = std::fs::read(&packed).unwrap();
        let cut = bytes.len() * 9 / 10;
        bytes.truncate(cut);
        std::fs::write(&packed, &bytes).unwrap();
        let o = run(&["info".as_ref(), packed.as_os_str()]);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{tool}: {err}");
        assert!(!err.contains("panicked"), "{err}");
        assert!(
            err.contains(&format!(
                "offset {cut} (0x{cut:x}): the {tool} stream ends early (the file is cut short)"
            )),
            "{tool}: {err}"
        );
    }
}

/// A trace.dat v7 walked independently of kstate: (id, file offset) of every section the
/// options point at, and the top buffer's (cpu, data offset, size).
struct V7 {
    sections: Vec<(u16, u64)>,
    cpus: Vec<(u32, u64, u64)>,
}

fn walk_v7(d: &[u8]) -> V7 {
    let u16_at = |i: usize| u16::from_le_bytes(d[i..i + 2].try_into().unwrap());
    let u32_at = |i: usize| u32::from_le_bytes(d[i..i + 4].try_into().unwrap());
    let u64_at = |i: usize| u64::from_le_bytes(d[i..i + 8].try_into().unwrap());
    let cstr_end = |i: usize| i + d[i..].iter().position(|&c| c == 0).unwrap() + 1;
    // magic, version, endianness, long size, page size, compression name and version.
    let mut i = cstr_end(10) + 1 + 1 + 4;
    i = cstr_end(cstr_end(i));
    let mut next = u64_at(i) as usize;
    let mut v = V7 {
        sections: Vec::new(),
        cpus: Vec::new(),
    };
    while next != 0 {
        assert_eq!(u16_at(next), 0, "an options section");
        assert_eq!(u16_at(next + 2), 0, "options uncompressed in this fixture");
        let (mut j, end) = (next + 16, next + 16 + u64_at(next + 8) as usize);
        next = 0;
        while j < end {
            let (id, size) = (u16_at(j), u32_at(j + 2) as usize);
            let p = j + 6;
            match id {
                0 => next = u64_at(p) as usize,
                16..=21 => v.sections.push((id, u64_at(p))),
                3 => {
                    // section offset, instance name, clock, page size, cpu count, cpus.
                    let mut k = cstr_end(cstr_end(p + 8)) + 4;
                    let n = u32_at(k);
                    k += 4;
                    for _ in 0..n {
                        v.cpus.push((u32_at(k), u64_at(k + 4), u64_at(k + 12)));
                        k += 20;
                    }
                }
                _ => {}
            }
            j = p + size;
        }
    }
    v
}

#[test]
fn a_damaged_section_of_a_zstd_trace_dat_is_lost_alone() {
    let tmp = tempfile::tempdir().unwrap();
    let src = fixture("lisa-rtapp/trace.v7-zstd.dat");
    let good = std::fs::read(&src).unwrap();
    let v7 = walk_v7(&good);
    let analyze = |f: &Path| {
        run(&[
            "analyze".as_ref(),
            "runq".as_ref(),
            "--stat".as_ref(),
            f.as_os_str(),
        ])
    };
    let want = analyze(&src);
    assert!(want.status.success());

    // kallsyms: section header (16 bytes), then u32 compressed and u32 uncompressed sizes.
    let (_, at) = *v7
        .sections
        .iter()
        .find(|s| s.0 == 19)
        .expect("a kallsyms section");
    let content = at as usize + 16;
    let csize = u32::from_le_bytes(good[content..content + 4].try_into().unwrap()) as usize;
    let mut bad = good.clone();
    for b in &mut bad[content + 8 + csize / 2..content + 8 + csize / 2 + 64] {
        *b ^= 0xa5;
    }
    let f = tmp.path().join("kallsyms-damaged.dat");
    std::fs::write(&f, &bad).unwrap();
    let o = analyze(&f);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    // The report is the undamaged one's, with the loss said in it.
    let out = String::from_utf8_lossy(&o.stdout);
    let (errors, rest): (Vec<&str>, Vec<&str>) = out.lines().partition(|l| l.starts_with("ERROR:"));
    assert_eq!(
        unnamed(&rest.join("\n")),
        unnamed(&String::from_utf8_lossy(&want.stdout)),
        "the events must read as before"
    );
    assert!(
        errors.len() == 1 && errors[0].contains("lost the kallsyms section"),
        "{out}"
    );
    let named = format!(
        "{}: offset {content} (0x{content:x}): lost the kallsyms section (the events are read \
         without it): kallsyms section: its compressed block of {csize} bytes is damaged: it \
         does not decompress as zstd",
        f.display()
    );
    assert!(err.contains(&named), "{err}");
    let info = kstate_json(&["info".as_ref(), "--json".as_ref(), src.as_os_str()]);
    let o = run(&["info".as_ref(), "--json".as_ref(), f.as_os_str()]);
    assert_eq!(o.status.code(), Some(2));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["events"], info["events"]);
    assert_eq!(v["truncated"], false);
    assert!(v["errors"][0]
        .as_str()
        .unwrap()
        .contains("lost the kallsyms section"));

    // A damaged chunk of CPU data: its place, and the codec, in words.
    let (cpu, data, _) = *v7.cpus.iter().find(|c| c.2 > 64).expect("CPU data");
    let chunk = data as usize + 4;
    let ccsize = u32::from_le_bytes(good[chunk..chunk + 4].try_into().unwrap()) as usize;
    let mut bad = good.clone();
    for b in &mut bad[chunk + 8 + ccsize / 2..chunk + 8 + ccsize / 2 + 16] {
        *b ^= 0xa5;
    }
    std::fs::write(&f, &bad).unwrap();
    let o = run(&["info".as_ref(), f.as_os_str()]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!(
            "offset {chunk} (0x{chunk:x}): CPU {cpu}: compressed chunk of {ccsize} bytes is \
             damaged: it does not decompress as zstd"
        )),
        "{err}"
    );
}

/// kstate's writer gives every zstd frame a checksum (trace-cmd's libzstd does not). A
/// byte changed inside a raw literal block (text stored as it is) still decodes; only the
/// checksum tells, and the section and its offset are named, not a misparse of its text.
#[test]
fn a_zstd_section_that_decodes_but_fails_its_checksum_is_named() {
    let tmp = tempfile::tempdir().unwrap();
    let z = tmp.path().join("z.dat");
    let src = fixture("lisa-rtapp/trace.dat");
    kstate(&[
        "convert".as_ref(),
        "--zstd".as_ref(),
        "-o".as_ref(),
        z.as_os_str(),
        src.as_os_str(),
    ]);
    let good = std::fs::read(&z).unwrap();
    let v7 = walk_v7(&good);
    // header info: section header (16 bytes), u32 compressed and u32 uncompressed sizes.
    let (_, at) = *v7
        .sections
        .iter()
        .find(|s| s.0 == 16)
        .expect("a header info section");
    let content = at as usize + 16;
    let csize = u32::from_le_bytes(good[content..content + 4].try_into().unwrap()) as usize;
    let block = content + 8..content + 8 + csize;
    // header_page's text, stored raw: "field: u64 timestamp;".
    let raw = good[block.clone()]
        .windows(9)
        .position(|w| w == b"timestamp")
        .expect("the header_page text stored raw in the block");
    let mut bad = good.clone();
    bad[block.start + raw + 2] ^= 0x20; // "tiMestamp"
    let f = tmp.path().join("checksum-damaged.dat");
    std::fs::write(&f, &bad).unwrap();
    for args in [&["info"][..], &["dump"]] {
        let mut a: Vec<&OsStr> = args.iter().map(OsStr::new).collect();
        a.push(f.as_os_str());
        let o = run(&a);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
        assert!(
            err.contains(&format!(
                "{}: offset {content} (0x{content:x}): header info section: its compressed block \
                 of {csize} bytes is damaged: it decompresses as zstd, but not to the bytes its \
                 checksum was taken of",
                f.display()
            )),
            "{args:?}: {err}"
        );
    }
    // The undamaged file reads, every frame's checksum verified.
    let info = kstate_json(&["info".as_ref(), "--json".as_ref(), z.as_os_str()]);
    assert_eq!(info["events"], 7820);
}

/// `kstate info - < t.dat`: standard input that is a regular file is read where it lies,
/// not copied as a pipe would be. With TMPDIR pointing nowhere a copy could not even be
/// made; the file is named "standard input", and not said to come down a pipe.
#[test]
fn standard_input_from_a_file_is_read_in_place() {
    let tmp = tempfile::tempdir().unwrap();
    let src = fixture("lisa-sched_load/trace.v7-zstd.dat");
    let dump = kstate(&["dump".as_ref(), src.as_os_str()]);
    let events =
        kstate_json(&["info".as_ref(), "--json".as_ref(), src.as_os_str()])["events"].clone();
    let nowhere = tmp.path().join("no-such-dir");
    let sh_in = |script: &str| {
        Command::new("sh")
            .args(["-c", script])
            .env("K", KSTATE)
            .env("TMPDIR", &nowhere)
            .output()
            .unwrap()
    };
    let o = sh_in(&format!("\"$K\" info --json - < '{}'", src.display()));
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["events"], events);
    assert_eq!(v["file"], "standard input");
    assert_eq!(v["input"]["pipe"], false);
    assert_eq!(v["input"]["compression"], serde_json::Value::Null);
    assert_eq!(v["input"]["bytes"], std::fs::metadata(&src).unwrap().len());
    let o = sh_in(&format!("\"$K\" info - < '{}'", src.display()));
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(!text.contains("pipe"), "{text}");
    let o = sh_in(&format!("\"$K\" dump - < '{}'", src.display()));
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        String::from_utf8(o.stdout).unwrap() == dump,
        "dump - < t.dat differs"
    );
    // A pipe still needs the copy, and says where it could not make it.
    let o = sh_in(&format!("cat '{}' | \"$K\" info -", src.display()));
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("cannot make a temporary file in"),
        "{}",
        stderr(&o)
    );
    // Damage is named under the name the user gave, not /proc/self/fd/N.
    let cut = tmp.path().join("cut.dat");
    let bytes = std::fs::read(&src).unwrap();
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let o = sh_in(&format!("\"$K\" info - < '{}'", cut.display()));
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("standard input: "), "{err}");
    assert!(!err.contains("/proc/self"), "{err}");
}

/// The compressed block of v7 section `id` with 8 bytes in its middle flipped: (file,
/// offset of the section's content, compressed size).
fn damage_section(good: &[u8], id: u16) -> (Vec<u8>, usize, usize) {
    let (_, at) = *walk_v7(good)
        .sections
        .iter()
        .find(|s| s.0 == id)
        .unwrap_or_else(|| panic!("a section {id}"));
    let content = at as usize + 16;
    let csize = u32::from_le_bytes(good[content..content + 4].try_into().unwrap()) as usize;
    let mut bad = good.to_vec();
    for b in &mut bad[content + 8 + csize / 2..content + 8 + csize / 2 + 8] {
        *b ^= 0xa5;
    }
    (bad, content, csize)
}

/// A damaged ftrace formats section (v7 id 17) is lost alone when no record is an ftrace
/// event (a sched recording), and refuses the file, naming the records that need it,
/// when some are (lisa-rtapp's 6242 bprint records).
#[test]
fn a_damaged_ftrace_formats_section_is_lost_unless_an_event_needs_it() {
    let tmp = tempfile::tempdir().unwrap();
    let rec = tmp.path().join("rec.dat");
    record_workload("sched", &["sleep", "3", "10"], false, &rec);
    let z = tmp.path().join("recz.dat");
    kstate(&[
        "convert".as_ref(),
        "--zstd".as_ref(),
        "-o".as_ref(),
        z.as_os_str(),
        rec.as_os_str(),
    ]);
    let good = std::fs::read(&z).unwrap();
    let (bad, content, csize) = damage_section(&good, 17);
    let f = tmp.path().join("ftrace-damaged.dat");
    std::fs::write(&f, &bad).unwrap();
    let dump = kstate(&["dump".as_ref(), z.as_os_str()]);
    assert!(dump.contains("sched_switch"), "{dump}");
    let o = run(&["dump".as_ref(), f.as_os_str()]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    let out = String::from_utf8(o.stdout).unwrap();
    let kept: Vec<&str> = out.lines().filter(|l| !l.starts_with("ERROR:")).collect();
    assert_eq!(
        kept.join("\n"),
        dump.trim_end(),
        "the events read as before"
    );
    assert!(
        err.contains(&format!(
            "{}: offset {content} (0x{content:x}): lost the ftrace formats section (the events \
             are read without it): ftrace formats section: its compressed block of {csize} bytes \
             is damaged",
            f.display()
        )),
        "{err}"
    );

    let src = fixture("lisa-rtapp/trace.v7-zstd.dat");
    let (bad, content, _) = damage_section(&std::fs::read(&src).unwrap(), 17);
    std::fs::write(&f, &bad).unwrap();
    let o = run(&["info".as_ref(), f.as_os_str()]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(o.stdout.is_empty(), "refused: nothing is read");
    assert!(
        err.contains(&format!(
            "{}: offset {content} (0x{content:x}): the ftrace formats section is damaged, and \
             6242 records of event id 6",
            f.display()
        )),
        "{err}"
    );
}
