//! The real traces the tests read: `testdata/` at the repository's root (its README says
//! where each came from and under which licence), and the files derived from them with
//! Debian's trace-cmd, made on first use and kept under `target/`. Every crate's tests find
//! them through [`path`], so a clone of the repository alone runs the whole suite.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

/// The repository's `testdata` directory, where the originals are.
pub fn dir() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    // crates/testdata -> the repository's root.
    manifest
        .ancestors()
        .nth(2)
        .expect("crates/testdata lies two levels below the root")
        .join("testdata")
}

/// The test file `name` (`lisa-rtapp/trace.dat`, `lisa-rtapp/trace.v7-zstd.dat`, ...): an
/// original in [`dir`], or a derived copy, made now when it is missing or older than its
/// original. Panics when the file is missing or cannot be made: a test never skips.
pub fn path(name: &str) -> PathBuf {
    let original = dir().join(name);
    if original.is_file() {
        return original;
    }
    let Some((source, args)) = derivation(name) else {
        panic!(
            "test file {name} is neither in {} nor made from a file there (see its README.md)",
            dir().display()
        );
    };
    derived(name, &dir().join(source), &args)
}

/// How `name` is made: the original it comes from, and trace-cmd's arguments.
fn derivation(name: &str) -> Option<(String, [&'static str; 5])> {
    let (trace, file) = name.rsplit_once('/')?;
    let compression = match file {
        "trace.v7-none.dat" => "none",
        "trace.v7-zstd.dat" => "zstd",
        _ => return None,
    };
    let args = [
        "convert",
        "--file-version",
        "7",
        "--compression",
        compression,
    ];
    Some((format!("{trace}/trace.dat"), args))
}

/// The derived file `name`, made from `source` by `trace-cmd ARGS` unless a fresh copy is
/// kept already.
fn derived(name: &str, source: &Path, args: &[&str]) -> PathBuf {
    // One thread of a test binary makes a file while the others wait for it. Test binaries
    // run side by side may make the same file at once: each writes a temporary of its own
    // and renames it into place, so no reader sees half a file.
    static MAKING: Mutex<()> = Mutex::new(());
    let _making = MAKING.lock().unwrap_or_else(|e| e.into_inner());
    let out = Path::new(env!("OUT_DIR")).join("testdata").join(name);
    if newer_than(&out, source) {
        return out;
    }
    assert!(
        source.is_file(),
        "{} is missing (test file {name} is made from it)",
        source.display()
    );
    let parent = out.parent().expect("a derived file lies in a directory");
    std::fs::create_dir_all(parent)
        .unwrap_or_else(|e| panic!("cannot create {}: {e}", parent.display()));
    let tmp = out.with_extension(format!("{}.tmp", std::process::id()));
    let run = Command::new("trace-cmd")
        .args(args)
        .arg("-i")
        .arg(source)
        .arg("-o")
        .arg(&tmp)
        .output();
    let shown = format!("trace-cmd {} -i {}", args.join(" "), source.display());
    match run {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => panic!(
            "test file {name} is made by `{shown}`, but trace-cmd is not installed: \
             run `apt-get install trace-cmd`"
        ),
        Err(e) => panic!("cannot run `{shown}`: {e}"),
        Ok(o) if !o.status.success() => panic!(
            "`{shown}` failed ({}):\n{}",
            o.status,
            String::from_utf8_lossy(&o.stderr)
        ),
        Ok(_) => {}
    }
    std::fs::rename(&tmp, &out)
        .unwrap_or_else(|e| panic!("cannot rename {} into place: {e}", tmp.display()));
    out
}

/// Whether `file` exists and was written no earlier than `than` (make's rule).
fn newer_than(file: &Path, than: &Path) -> bool {
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    matches!((modified(file), modified(than)), (Some(f), Some(t)) if f >= t)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The file version in a trace.dat's header: magic (3 bytes), "tracing", then the
    /// version as a NUL-terminated string.
    fn version(file: &Path) -> String {
        let bytes = std::fs::read(file).unwrap();
        assert_eq!(&bytes[..10], b"\x17\x08Dtracing", "{}", file.display());
        let end = bytes[10..].iter().position(|&b| b == 0).unwrap();
        String::from_utf8(bytes[10..10 + end].to_vec()).unwrap()
    }

    #[test]
    fn originals_are_found_in_the_repository() {
        let p = path("lisa-rtapp/trace.dat");
        assert_eq!(p, dir().join("lisa-rtapp/trace.dat"));
        assert_eq!(version(&p), "6");
        assert!(path("schedviz/test.tar.gz").is_file());
    }

    #[test]
    fn v7_copies_are_made_by_trace_cmd_and_kept() {
        for name in [
            "lisa-sched_load/trace.v7-none.dat",
            "lisa-sched_load/trace.v7-zstd.dat",
        ] {
            let p = path(name);
            assert!(p.starts_with(env!("OUT_DIR")), "{}", p.display());
            assert_eq!(version(&p), "7", "{name}");
            let made = std::fs::metadata(&p).unwrap().modified().unwrap();
            // A second call keeps the copy it made.
            assert_eq!(path(name), p);
            assert_eq!(std::fs::metadata(&p).unwrap().modified().unwrap(), made);
        }
        // The uncompressed copy holds the original's pages; zstd makes them smaller.
        let size = |n: &str| std::fs::metadata(path(n)).unwrap().len();
        assert!(size("lisa-sched_load/trace.v7-zstd.dat") < size("lisa-sched_load/trace.dat") / 2);
        assert!(size("lisa-sched_load/trace.v7-none.dat") >= size("lisa-sched_load/trace.dat"));
    }

    #[test]
    #[should_panic(expected = "neither in")]
    fn unknown_names_fail() {
        path("lisa-rtapp/trace.v9.dat");
    }
}
