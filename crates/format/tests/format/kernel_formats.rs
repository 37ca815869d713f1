//! Every event format file of the running kernel must parse: the kernel is the
//! authority on what format files look like.

use kstate_format::{EventFormat, FieldKind};
use std::path::Path;

fn tracefs() -> Option<&'static Path> {
    let p = Path::new("/sys/kernel/tracing");
    if !p.join("events").exists() {
        // Root on the CI machines; mount as the recorder would.
        let _ = std::process::Command::new("mount")
            .args(["-t", "tracefs", "nodev", "/sys/kernel/tracing"])
            .status();
    }
    p.join("events/header_page").exists().then_some(p)
}

#[test]
fn all_kernel_formats_parse() {
    let Some(fs) = tracefs() else {
        panic!(
            "tracefs is not available at /sys/kernel/tracing and could not be mounted (need root)"
        );
    };
    let mut n = 0;
    let mut dynamic = 0;
    for sys in std::fs::read_dir(fs.join("events")).unwrap() {
        let sys = sys.unwrap().path();
        if !sys.is_dir() {
            continue;
        }
        for ev in std::fs::read_dir(&sys).unwrap() {
            let f = ev.unwrap().path().join("format");
            let Ok(text) = std::fs::read(&f) else {
                continue;
            };
            let sysname = sys.file_name().unwrap().to_str().unwrap();
            let fmt = EventFormat::parse(&text, sysname, 8)
                .unwrap_or_else(|e| panic!("{}: {e}", f.display()));
            assert_eq!(
                Some(fmt.name.as_str()),
                f.parent().unwrap().file_name().unwrap().to_str()
            );
            assert_eq!(
                fmt.common.first().map(|c| c.name.as_str()),
                Some("common_type"),
                "{}",
                f.display()
            );
            for fld in &fmt.fields {
                if matches!(fld.kind, FieldKind::Dynamic { .. }) {
                    dynamic += 1;
                }
            }
            n += 1;
        }
    }
    assert!(n > 500, "only {n} event formats found");
    assert!(dynamic > 50, "only {dynamic} __data_loc fields found");
}

/// The kernel's own print fmts nest far less than the depth the evaluator refuses
/// (`print_fmt::MAX_DEPTH`, which keeps hostile formats from exhausting the stack): each
/// parses within the limit, and the deepest needs less than half of it.
#[test]
fn kernel_print_fmts_nest_well_within_the_limit() {
    use kstate_format::print_fmt::parse::{parse_print_fmt_within, Ctx, FmtError};
    use kstate_format::print_fmt::MAX_DEPTH;
    let Some(fs) = tracefs() else {
        panic!("tracefs is not available at /sys/kernel/tracing and could not be mounted");
    };
    let mut deepest = (0, String::new());
    let mut parsed = 0;
    for sys in std::fs::read_dir(fs.join("events")).unwrap() {
        let sys = sys.unwrap().path();
        if !sys.is_dir() {
            continue;
        }
        for ev in std::fs::read_dir(&sys).unwrap() {
            let f = ev.unwrap().path().join("format");
            let Ok(text) = std::fs::read(&f) else {
                continue;
            };
            let sysname = sys.file_name().unwrap().to_str().unwrap();
            let fmt = EventFormat::parse(&text, sysname, 8).unwrap();
            let mut symbol = |_: &[u8]| 0u64;
            let mut parses = |limit: usize| {
                let mut ctx = Ctx {
                    long_size: 8,
                    symbol: &mut symbol,
                };
                parse_print_fmt_within(&fmt, &mut ctx, limit)
            };
            match parses(MAX_DEPTH) {
                Err(e @ FmtError::TooDeep { .. }) => panic!("{}: {e}", f.display()),
                // Formats kstate does not evaluate (statement expressions, ...).
                Err(FmtError::Unsupported(_)) => continue,
                Ok(_) => {}
            }
            parsed += 1;
            // The least limit it parses within.
            let (mut lo, mut hi) = (0, MAX_DEPTH);
            while lo < hi {
                let mid = (lo + hi) / 2;
                if parses(mid).is_ok() {
                    hi = mid;
                } else {
                    lo = mid + 1;
                }
            }
            if lo > deepest.0 {
                deepest = (lo, f.display().to_string());
            }
        }
    }
    assert!(parsed > 500, "only {parsed} print fmts parsed");
    eprintln!("deepest print fmt: {} levels ({})", deepest.0, deepest.1);
    assert!(
        deepest.0 * 2 < MAX_DEPTH,
        "{} nests {} levels",
        deepest.1,
        deepest.0
    );
}
