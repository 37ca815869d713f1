//! What kstate writes, as root, into directories others can write (issue 24 §1, issue 22
//! §6): a symbolic link or a hard link planted at any name `record` and `run -o` write
//! is replaced, never written through; files are created 0600; the report escapes
//! hostile process names. Needs root and tracefs (as the CI machine has); never skips.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::support;
use support::kstate as ok;

const PRECIOUS: &[u8] = b"precious: must not change\n";

fn tmp() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("kstate-safe-output")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap()
}

#[derive(Clone, Copy, Debug)]
enum Link {
    Symbolic,
    Hard,
}

/// The shell command that plants `link` to `victim` at `at`.
fn plant_cmd(link: Link, victim: &Path, at: &Path) -> String {
    let flag = match link {
        Link::Symbolic => "-s ",
        Link::Hard => "",
    };
    format!("ln {flag}'{}' '{}'", victim.display(), at.display())
}

fn plant(link: Link, victim: &Path, at: &Path) {
    match link {
        Link::Symbolic => std::os::unix::fs::symlink(victim, at).unwrap(),
        Link::Hard => std::fs::hard_link(victim, at).unwrap(),
    }
}

/// `at` is now kstate's own file: a regular file of its own, mode 0600.
fn assert_own_file(at: &Path, victim: &Path) {
    let m = std::fs::symlink_metadata(at).unwrap();
    assert!(
        m.file_type().is_file(),
        "{} is not a regular file",
        at.display()
    );
    assert_eq!(m.nlink(), 1, "{} is still linked", at.display());
    assert_ne!(m.ino(), std::fs::metadata(victim).unwrap().ino());
    assert_eq!(m.mode() & 0o777, 0o600, "{}", at.display());
}

#[test]
fn record_replaces_links_planted_at_its_names_and_creates_0600() {
    for link in [Link::Symbolic, Link::Hard] {
        let dir = tmp();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, PRECIOUS).unwrap();
        let out = dir.path().join("out.dat");
        // The output, and the temporary name kstate used to write through.
        let planted = [out.clone(), dir.path().join("out.dat.tmp")];
        for at in &planted {
            plant(link, &victim, at);
        }
        ok(&[
            "record",
            "-e",
            "sched",
            "-d",
            "0.3",
            "-o",
            out.to_str().unwrap(),
            "--",
            "true",
        ]);
        assert_eq!(std::fs::read(&victim).unwrap(), PRECIOUS, "{link:?}");
        assert_own_file(&out, &victim);
        let info = ok(&["info", "--json", out.to_str().unwrap()]);
        let info: serde_json::Value = serde_json::from_str(&info).unwrap();
        assert!(info["events"].as_u64().unwrap() > 0);
        // Nothing else was created beside them (no scratch, no temporary file).
        let mut names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, ["out.dat", "out.dat.tmp", "victim"], "{link:?}");
    }
}

/// `kstate run -o DIR -- sh -c SCRIPT`: DIR must be empty when the run starts, so the
/// workload itself plants the links, as another user could while the run records.
fn run_in(dir: &Path, script: &str) -> String {
    ok(&["run", "-o", dir.to_str().unwrap(), "--", "sh", "-c", script])
}

fn names_in(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    v.sort();
    v
}

#[test]
fn run_replaces_links_planted_at_every_name_it_writes() {
    let top = tmp();
    let workload = "for i in $(seq 200); do : > /dev/null; done";
    // The names a run writes, learnt from a clean run.
    let clean = top.path().join("clean");
    run_in(&clean, workload);
    let names: Vec<_> = names_in(&clean)
        .iter()
        .map(|p| p.file_name().unwrap().to_owned())
        .collect();
    assert!(names.len() > 10, "a run writes its reports: {names:?}");
    for link in [Link::Symbolic, Link::Hard] {
        let victim = top.path().join(format!("victim-{link:?}"));
        std::fs::write(&victim, PRECIOUS).unwrap();
        let dir = top.path().join(format!("planted-{link:?}"));
        let plants: Vec<String> = names
            .iter()
            .map(|n| plant_cmd(link, &victim, &dir.join(n)))
            .collect();
        run_in(&dir, &format!("{} && {workload}", plants.join(" && ")));
        assert_eq!(std::fs::read(&victim).unwrap(), PRECIOUS, "{link:?}");
        // Analyzers and charts apply where the (system-wide) recording has their events, so
        // a name of the clean run may not be written this time: its planted link stays.
        let mut untouched = Vec::new();
        for n in &names {
            let at = dir.join(n);
            let m = std::fs::symlink_metadata(&at).unwrap();
            let still_planted = match link {
                Link::Symbolic => m.file_type().is_symlink(),
                Link::Hard => m.ino() == std::fs::metadata(&victim).unwrap().ino(),
            };
            if still_planted {
                untouched.push(n.clone());
            } else {
                assert_own_file(&at, &victim);
            }
        }
        for always in ["kstate.dat", "report.html", "findings.txt", "syscall.csv"] {
            assert!(!untouched.contains(&always.into()), "{always}: {link:?}");
        }
        // Most names are written again (which ones depends on what the system did).
        assert!(untouched.len() * 2 < names.len(), "{untouched:?}");
        let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
        assert!(html.contains("<html"), "report.html is kstate's report");
    }
}

#[test]
fn the_report_escapes_a_hostile_process_name() {
    let top = tmp();
    let dir = top.path().join("run");
    // The kernel keeps 15 bytes of a name: "<svg onload=ale".
    let script = "printf '<svg onload=alert(1)>' > /proc/$$/comm; \
                  for i in $(seq 3000); do : > /dev/null; done";
    run_in(&dir, script);
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(
        html.contains("&lt;svg onload=ale"),
        "the name is not in the report"
    );
    assert!(!html.contains("<svg onload"), "the name is not escaped");
}

/// Runs `kstate ARGS` from a shell whose PID kstate inherits (`exec`), with TMPDIR set to
/// `tmpdir`, after planting a symbolic link to `victim` at each of `names` in `tmpdir`
/// (`$$` in a name is that PID): the fixed scratch names kstate used to write through.
fn run_with_planted_scratch(tmpdir: &Path, victim: &Path, names: &[&str], args: &[&str]) {
    let plants: Vec<String> = names
        .iter()
        .map(|n| format!("ln -s '{}' \"$TMPDIR/{n}\"", victim.display()))
        .collect();
    let quoted: Vec<String> = args.iter().map(|a| format!("'{a}'")).collect();
    let script = format!(
        "{} && exec '{}' {}",
        plants.join(" && "),
        support::KSTATE,
        quoted.join(" ")
    );
    let out = std::process::Command::new("sh")
        .args(["-c", &script])
        .env("TMPDIR", tmpdir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{script}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// What is left in `dir` besides the planted links: kstate's scratch must be gone too.
fn leftovers(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| !e.file_type().unwrap().is_symlink())
        .map(|e| e.file_name().into_string().unwrap())
        .collect()
}

#[test]
fn cachesim_never_writes_through_links_planted_at_its_old_scratch_names() {
    let top = tmp();
    let victim = top.path().join("victim");
    std::fs::write(&victim, PRECIOUS).unwrap();
    let scratch = top.path().join("tmp");
    std::fs::create_dir(&scratch).unwrap();
    let kept = top.path().join("cg.out");
    plant(Link::Symbolic, &victim, &kept);
    run_with_planted_scratch(
        &scratch,
        &victim,
        &["kstate-cachesim-$$.log", "kstate-cachesim-$$.out"],
        &[
            "cachesim",
            "--keep",
            kept.to_str().unwrap(),
            "--",
            "/bin/true",
        ],
    );
    assert_eq!(std::fs::read(&victim).unwrap(), PRECIOUS);
    // --keep replaced the link planted at it with cachegrind's output.
    assert_own_file(&kept, &victim);
    let text = std::fs::read_to_string(&kept).unwrap();
    assert!(text.contains("\nevents: "), "{text}");
    assert_eq!(leftovers(&scratch), Vec::<String>::new());
}

#[test]
fn bench_read_never_writes_through_a_link_planted_at_its_old_scratch_name() {
    let top = tmp();
    let victim = top.path().join("victim");
    std::fs::write(&victim, PRECIOUS).unwrap();
    let trace = support::fixture("lisa-sched_load/trace.dat");
    run_with_planted_scratch(
        top.path(),
        &victim,
        &["kstate-bench-$$.out"],
        &[
            "bench",
            "read",
            trace.to_str().unwrap(),
            "--runs",
            "1",
            "--no-peer",
        ],
    );
    assert_eq!(std::fs::read(&victim).unwrap(), PRECIOUS);
    assert_eq!(leftovers(top.path()), ["victim"]);
}

/// `run -o DIR` and `split -o DIR` where DIR is a symbolic link planted to an empty
/// directory: refused before anything is written (exit 2), as O_NOFOLLOW refuses a file,
/// and the link's target stays empty.
#[test]
fn an_output_directory_that_is_a_symlink_is_refused() {
    let top = tmp();
    let target = top.path().join("elsewhere");
    std::fs::create_dir(&target).unwrap();
    let link = top.path().join("out");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let l = link.to_str().unwrap();
    let trace = support::fixture("lisa-sched_load/trace.dat");
    let commands: [&[&str]; 2] = [
        &["run", "-o", l, "--", "true"],
        &["split", "--per-cpu", trace.to_str().unwrap(), "-o", l],
    ];
    for args in commands {
        let o = support::run(args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains(&format!("{l}: the output directory is a symbolic link")),
            "{args:?}: {err}"
        );
        assert_eq!(names_in(&target), Vec::<PathBuf>::new(), "{args:?}");
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
    }
    // The same directory named as itself is used.
    let t = target.to_str().unwrap();
    let o = support::run(&["split", "--per-cpu", trace.to_str().unwrap(), "-o", t]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(!names_in(&target).is_empty());
}

/// A full disk behind stdout is a failed output (exit 1, the OS's reason), and a reader
/// that closed the pipe only means it had enough (exit 0, nothing said): never a panic,
/// whichever command prints.
#[test]
fn a_full_or_closed_stdout_is_reported_never_a_panic() {
    let trace = support::fixture("lisa-sched_load/trace.dat");
    let t = trace.to_str().unwrap();
    let commands: [&[&str]; 4] = [
        &["info", t],
        &["classify", t],
        &["analyze", "--list"],
        &["analyze", "runq", "--stat", t],
    ];
    for args in commands {
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap();
        let o = std::process::Command::new(support::KSTATE)
            .args(args)
            .stdout(full)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{args:?} > /dev/full: {err}");
        assert!(
            err.contains("kstate: writing output: No space left on device")
                && !err.contains("panicked"),
            "{args:?} > /dev/full: {err}"
        );

        let mut child = std::process::Command::new(support::KSTATE)
            .args(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        let o = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            o.status.success() && err.is_empty(),
            "{args:?} | (closed): {:?} {err}",
            o.status
        );
    }
}
