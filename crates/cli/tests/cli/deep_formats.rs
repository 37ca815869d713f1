//! A print fmt nested deeper than kstate evaluates (10,000 parentheses, a 5,000-deep `?:`,
//! 50,000 `!` or unary `-`, a 300,000-term sum, 20,000 nested `__print_symbolic`) never
//! overflows the stack: `kstate dump` prints everything, the deep event as its raw fields,
//! and ends with an error naming the file, the format's offset in it and the event (exit
//! 2). The kernel's own formats nest a few levels; one at the limit's edge still prints.

use crate::support;

use std::path::Path;
use std::process::Command;

use support::built::{Built, Val};

/// A trace with one record of `deep:deep` (print fmt `"v=%d", ARG` or `"v=%s", ARG`, field
/// `x` = 5) between two of `deep:plain`; returns (stdout, stderr, exit code, the format's
/// offset in the file).
fn dump_deep(
    dir: &Path,
    name: &str,
    conv: &str,
    arg: &str,
    opts: &[&str],
) -> (String, String, i32, usize) {
    let mut b = Built::default();
    let fields = "\tfield:int x;\toffset:8;\tsize:4;\tsigned:1;\n";
    b.event_format("deep", "plain", fields, "\"x=%d\", REC->x");
    b.event_format("deep", "deep", fields, &format!("\"v={conv}\", {arg}"));
    b.record(0, 1_000_000, 1, "plain", &[("x", Val::U(1))]);
    b.record(0, 2_000_000, 1, "deep", &[("x", Val::U(5))]);
    b.record(0, 3_000_000, 1, "plain", &[("x", Val::U(3))]);
    let f = dir.join(format!("{name}.dat"));
    b.write(&f);
    if let Some(keep) = std::env::var_os("KSTATE_KEEP_DEEP") {
        let _ = std::fs::copy(&f, Path::new(&keep).join(format!("{name}.dat")));
    }
    let bytes = std::fs::read(&f).unwrap();
    let at = bytes
        .windows(11)
        .position(|w| w == b"name: deep\n")
        .expect("the format in the file");
    let out = Command::new(support::KSTATE)
        .arg("dump")
        .arg(&f)
        .args(opts)
        .output()
        .expect("run kstate");
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status.code().unwrap_or(-1),
        at,
    )
}

/// The deep format is refused with exit 2 and an error naming the file, the offset of the
/// format and the event; its record prints as raw fields, the others as their messages.
fn refused(name: &str, conv: &str, arg: &str) {
    let dir = tempfile::tempdir().unwrap();
    for opts in [&[][..], &["--threads", "1"], &["--json"]] {
        let (out, err, code, at) = dump_deep(dir.path(), name, conv, arg, opts);
        assert_eq!(code, 2, "{name} {opts:?}: exit {code}, stderr:\n{err}");
        let file = dir.path().join(format!("{name}.dat"));
        let want = format!(
            "kstate: {}: offset {at} (0x{at:x}): event deep:deep: its print fmt nests deeper than 100 levels",
            file.display()
        );
        assert!(err.contains(&want), "{name}: stderr lacks {want:?}:\n{err}");
        assert!(
            err.contains("its events are printed as raw fields"),
            "{err}"
        );
        if opts == ["--json"] {
            let lines: Vec<&str> = out.lines().collect();
            assert_eq!(lines.len(), 3, "{out}");
            assert!(
                lines[1].contains("\"fields\":{\"x\":5},\"text\":null"),
                "{out}"
            );
            assert!(lines[2].contains("\"text\":\"x=3\""), "{out}");
        } else {
            let lines: Vec<&str> = out.lines().collect();
            assert_eq!(lines.len(), 4, "{name}: {out}");
            assert!(
                lines[1].ends_with("plain:                x=1"),
                "{}",
                lines[1]
            );
            assert!(
                lines[2].ends_with("deep:                 x=5"),
                "{}",
                lines[2]
            );
            assert!(
                lines[3].ends_with("plain:                x=3"),
                "{}",
                lines[3]
            );
        }
    }
}

#[test]
fn ten_thousand_nested_parentheses() {
    let n = 10_000;
    refused(
        "parens",
        "%d",
        &format!("{}REC->x{}", "(".repeat(n), ")".repeat(n)),
    );
}

#[test]
fn a_ternary_five_thousand_deep() {
    let n = 5_000;
    // Nested in the middle (`a ? a ? ... : 0 : 0`) and chained (`a ? 1 : a ? 2 : ...`).
    let middle = format!("{}1{}", "REC->x ? ".repeat(n), " : 0".repeat(n));
    refused("ternary", "%d", &middle);
    let chained: String = (0..n)
        .map(|i| format!("REC->x ? {i} : "))
        .collect::<String>()
        + "0";
    refused("ternary_chain", "%d", &chained);
}

#[test]
fn fifty_thousand_not_and_minus() {
    let n = 50_000;
    refused("not", "%d", &format!("{}REC->x", "!".repeat(n)));
    refused("minus", "%d", &format!("{}REC->x", "- ".repeat(n)));
}

#[test]
fn a_sum_of_three_hundred_thousand_terms() {
    let n = 300_000;
    refused("sum", "%d", &vec!["REC->x"; n].join(" + "));
}

#[test]
fn twenty_thousand_nested_print_symbolic() {
    let n = 20_000;
    let arg = format!(
        "{}REC->x{}",
        "__print_symbolic(".repeat(n),
        ", { 5, \"five\" })".repeat(n)
    );
    refused("symbolic", "%s", &arg);
}

/// Nesting within the limit prints as trace-cmd prints it (on every thread count).
#[test]
fn deep_but_within_the_limit_prints_its_message() {
    let dir = tempfile::tempdir().unwrap();
    let n = 90;
    let cases = [
        (
            "parens",
            "%d",
            format!("{}REC->x{}", "(".repeat(n), ")".repeat(n)),
            "v=5",
        ),
        // An even number of `!`: !!5 is 1.
        ("not", "%d", format!("{}REC->x", "!".repeat(n)), "v=1"),
        ("sum", "%d", vec!["REC->x"; n].join(" + "), "v=450"),
        (
            "symbolic",
            "%s",
            format!(
                "__print_symbolic({}REC->x{}, {{ 5, \"five\" }})",
                "(".repeat(n - 2),
                ")".repeat(n - 2)
            ),
            "v=five",
        ),
    ];
    for (name, conv, arg, want) in cases {
        let (out, err, code, _) = dump_deep(dir.path(), name, conv, &arg, &[]);
        assert_eq!(code, 0, "{name}: {err}");
        assert!(err.is_empty(), "{name}: {err}");
        let line = out.lines().nth(2).unwrap();
        assert!(
            line.ends_with(&format!("deep:                 {want}")),
            "{name}: {line}"
        );
        let theirs = support::trace_cmd_report(&dir.path().join(format!("{name}.dat")), &[]);
        assert_eq!(out, theirs, "{name}: kstate and trace-cmd differ");
    }
}
