//! The documentation's examples, checked against the binary: README.md and every
//! docs/*.md.
//!
//! Conventions (docs/development.md tells writers):
//! - A ```` ```console ```` block is run. `$ ` starts a command (a trailing `\` continues it
//!   on the next line); the lines up to the next `$ ` are its expected output, standard
//!   output and error together. `[..]` in a line stands for any text within the line, a
//!   line `...` for any number of lines; a command shown without output only has to
//!   succeed. A last line `[exit status: N]` expects that status instead of 0. A line `^C`
//!   interrupts the command (SIGINT to its process group, as a terminal's Ctrl-C) once the
//!   output above it has appeared; what follows `^C` is the output after the interrupt.
//! - ```` ```console parquet ```` blocks run only in a build with the `parquet` feature.
//! - ```` ```LANG file=NAME ```` blocks are written to NAME for the examples after them.
//! - Commands run with `sh -c` in a scratch directory of the guide's own (so a guide's
//!   later examples read what its earlier ones wrote), with this build's `kstate` first in
//!   PATH.
//! - Every `kstate ...` command anywhere else (other blocks, `kstate ...` code in the
//!   text) is checked to exist: its subcommands, its options, and the analyzers and
//!   `--by` keyings it names, against `kstate ... --help` and `kstate analyze --list`.
use crate::support;

use std::collections::HashMap;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Every markdown file the project ships, each checked by the test of the same name.
const DOCS: &[&str] = &[
    "README.md",
    "docs/allocators.md",
    "docs/analysis.md",
    "docs/architecture.md",
    "docs/bucket-scheme.md",
    "docs/development.md",
    "docs/dump.md",
    "docs/fleet.md",
    "docs/formats.md",
    "docs/locks.md",
    "docs/methodology.md",
    "docs/performance.md",
    "docs/profiling.md",
    "docs/recording.md",
    "docs/ui.md",
    "docs/watch.md",
    "docs/why.md",
    "docs/write-stall.md",
];

/// Examples slower than this are named on standard error.
const SLOW_EXAMPLE: Duration = Duration::from_secs(2);

/// How long one example may run before it counts as hung.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(90);

macro_rules! doc_tests {
    ($($name:ident => $path:literal),* $(,)?) => {
        $(#[test] fn $name() { check($path) })*
    };
}

doc_tests! {
    readme => "README.md",
    allocators => "docs/allocators.md",
    analysis => "docs/analysis.md",
    architecture => "docs/architecture.md",
    bucket_scheme => "docs/bucket-scheme.md",
    development => "docs/development.md",
    dump => "docs/dump.md",
    fleet => "docs/fleet.md",
    formats => "docs/formats.md",
    locks => "docs/locks.md",
    methodology => "docs/methodology.md",
    performance => "docs/performance.md",
    profiling => "docs/profiling.md",
    recording => "docs/recording.md",
    ui => "docs/ui.md",
    watch => "docs/watch.md",
    why => "docs/why.md",
    write_stall => "docs/write-stall.md",
}

/// A guide added without a test of its own would go unchecked.
#[test]
fn every_doc_has_a_test() {
    let mut found = vec!["README.md".to_string()];
    for entry in std::fs::read_dir(root().join("docs")).expect("docs/") {
        let name = entry.expect("docs/ entry").file_name();
        let name = name.to_string_lossy();
        if name.ends_with(".md") {
            found.push(format!("docs/{name}"));
        }
    }
    found.sort();
    assert_eq!(found, DOCS, "add a doc_tests! line for each new guide");
}

/// The harness itself: the matcher on the cases it must tell apart.
#[test]
fn output_patterns() {
    let m = |pat: &str, out: &str| {
        let p: Vec<&str> = pat.lines().collect();
        let o: Vec<&str> = out.lines().collect();
        lines_match(&p, &o)
    };
    assert!(m("a [..] c", "a b c"));
    assert!(m("a [..] c", "a  c"));
    assert!(!m("a [..] c", "a b d"));
    assert!(m("x\n...\nz", "x\nz"));
    assert!(m("x\n...\nz", "x\n1\n2\nz"));
    assert!(!m("x\n...\nz", "x\n1\n2"));
    assert!(!m("x", "x\ny"));
    assert!(m("[..]b[..]", "abc"));
    assert!(!m("[..]b[..]", "ac"));
    assert!(m("ab[..]b", "abb"));
    assert!(!m("ab[..]ab", "ab"));
}

/// The harness itself: the command check refuses what kstate would refuse.
#[test]
fn command_checks() {
    for good in [
        "kstate record -e syscall -o x.dat -- ls -la",
        "kstate la syscall --by tid --sort count --top 10 FILE",
        "kstate plot syscall --log --with runq FILE -o both.png --size 1280x720",
        "zstdcat t.dat.zst | kstate analyze syscall -",
        "kstate watch --alarm 'syscall.p99 > 5ms # not a comment' -- ./server",
        "kstate bench malloc -t 4 -m 4096 -r -s",
        "kstate record --sample -o spin.dat -- ./spin",
        "kstate ui FILE [FILE2] [--open]",
    ] {
        assert_eq!(command_exists(good), Ok(()), "{good}");
    }
    for bad in [
        "kstate nosuch FILE",
        "kstate bench nosuch",
        "kstate analyze syscall --bogus FILE",
        "kstate la nosuch FILE",
        "kstate la syscall --by nope FILE",
        "kstate record -Z -- ls",
        "echo x | kstate dump --nope FILE",
    ] {
        assert!(command_exists(bad).is_err(), "{bad}");
    }
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Checks one markdown file: its commands exist, its console examples give what they show.
fn check(rel: &str) {
    let path = root().join(rel);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{rel}: {e}"));
    let blocks = fenced_blocks(&text);
    let mut failures = Vec::new();
    for (line, cmd) in kstate_commands(&text, &blocks) {
        if let Err(e) = command_exists(&cmd) {
            failures.push(format!("{rel}:{line}: `{cmd}`: {e}"));
        }
    }
    // Under target/: O_DIRECT examples need a disk filesystem, which $TMPDIR may not be.
    let scratch = tempfile::Builder::new()
        .prefix("kstate-docs-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .expect("scratch directory");
    for block in &blocks {
        if let Some(name) = block.attrs.iter().find_map(|a| a.strip_prefix("file=")) {
            std::fs::write(scratch.path().join(name), &block.body).expect("write example file");
            continue;
        }
        if block.lang != "console" {
            continue;
        }
        if block.attrs.iter().any(|a| a == "parquet") && !cfg!(feature = "parquet") {
            continue;
        }
        for ex in examples(block) {
            let start = Instant::now();
            if let Err(e) = run_example(&ex, scratch.path()) {
                failures.push(format!("{rel}:{}: $ {}\n{e}", ex.line, ex.command));
            }
            // The whole docs test should stay near a minute: show what costs (--nocapture).
            let took = start.elapsed();
            if took > SLOW_EXAMPLE {
                eprintln!(
                    "{rel}:{}: {:.1} s: $ {}",
                    ex.line,
                    took.as_secs_f64(),
                    ex.command
                );
            }
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n\n"));
}

// ---- Markdown ----------------------------------------------------------------------

struct Block {
    /// The line of the opening fence (1-based).
    line: usize,
    lang: String,
    attrs: Vec<String>,
    /// The content, without the fence's indentation.
    body: String,
}

/// The fenced code blocks, also those indented inside list items.
fn fenced_blocks(text: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut lines = text.lines().enumerate();
    while let Some((i, l)) = lines.next() {
        let indent = l.len() - l.trim_start().len();
        let Some(info) = l.trim_start().strip_prefix("```") else {
            continue;
        };
        let mut words = info.split_whitespace();
        let lang = words.next().unwrap_or("").to_string();
        let attrs = words.map(str::to_string).collect();
        let mut body = String::new();
        for (_, l) in lines.by_ref() {
            if l.trim_start().starts_with("```") {
                break;
            }
            let cut = l.len() - l.trim_start().len();
            body.push_str(&l[cut.min(indent)..]);
            body.push('\n');
        }
        blocks.push(Block {
            line: i + 1,
            lang,
            attrs,
            body,
        });
    }
    blocks
}

struct Example {
    line: usize,
    command: String,
    expected: Vec<String>,
}

fn examples(block: &Block) -> Vec<Example> {
    let mut out: Vec<Example> = Vec::new();
    let mut continuing = false;
    for (i, l) in block.body.lines().enumerate() {
        if continuing {
            let ex = out.last_mut().expect("a command being continued");
            ex.command.push('\n');
            ex.command.push_str(l);
            continuing = l.ends_with('\\');
        } else if let Some(cmd) = l.strip_prefix("$ ") {
            out.push(Example {
                line: block.line + 1 + i,
                command: cmd.to_string(),
                expected: Vec::new(),
            });
            continuing = l.ends_with('\\');
        } else if let Some(ex) = out.last_mut() {
            ex.expected.push(l.to_string());
        } else {
            panic!(
                "console block at line {}: output before any `$ ` command",
                block.line
            );
        }
    }
    out
}

/// `kstate ...` commands shown anywhere: blocks' lines (after `$ `) and code in the text.
fn kstate_commands(text: &str, blocks: &[Block]) -> Vec<(usize, String)> {
    let mut cmds = Vec::new();
    for b in blocks {
        if b.attrs.iter().any(|a| a.starts_with("file=")) {
            continue;
        }
        let mut joined = String::new();
        let mut start = 0;
        for (i, l) in b.body.lines().enumerate() {
            if joined.is_empty() {
                start = b.line + 1 + i;
            }
            joined.push_str(l.trim_end_matches('\\'));
            joined.push(' ');
            if l.ends_with('\\') {
                continue;
            }
            let line = std::mem::take(&mut joined);
            let line = line.trim();
            let cmd = match line.strip_prefix("$ ") {
                Some(cmd) => cmd,
                // A console block's other lines are output.
                None if b.lang == "console" => continue,
                None => line,
            };
            if is_command(cmd) {
                cmds.push((start, cmd.to_string()));
            }
        }
    }
    let mut in_fence = false;
    for (i, l) in text.lines().enumerate() {
        if l.trim_start().starts_with("```") {
            in_fence = !in_fence;
            continue;
        }
        if in_fence {
            continue;
        }
        for (k, span) in l.split('`').enumerate() {
            if k % 2 == 1 && is_command(span) {
                cmds.push((i + 1, span.to_string()));
            }
        }
    }
    cmds
}

/// `kstate WORD ...` or `... | kstate WORD ...`, not a message such as `kstate record: ...`.
fn is_command(text: &str) -> bool {
    let w = words(text);
    w.iter()
        .position(|x| x == "kstate")
        .filter(|&at| at == 0 || w[at - 1] == "|")
        .and_then(|at| w.get(at + 1))
        .is_some_and(|next| !next.ends_with(':'))
}

// ---- Running examples ----------------------------------------------------------------

fn run_example(ex: &Example, dir: &Path) -> Result<(), String> {
    let mut expected = ex.expected.clone();
    while expected.last().is_some_and(|l| l.trim().is_empty()) {
        expected.pop();
    }
    let mut status_wanted = 0;
    if let Some(n) = expected
        .last()
        .and_then(|l| l.strip_prefix("[exit status: "))
        .and_then(|l| l.strip_suffix(']'))
    {
        status_wanted = n.parse().map_err(|_| format!("bad status line {n}"))?;
        expected.pop();
    }
    let interrupt_at = expected.iter().position(|l| l == "^C");
    let bin_dir = Path::new(support::KSTATE)
        .parent()
        .expect("binary directory");
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let script = format!("exec 2>&1\n{}", ex.command);
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(&script)
        .current_dir(dir)
        .env("PATH", path)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|e| format!("cannot start sh: {e}"))?;
    let pgid = child.id() as i32;
    let mut stdout = child.stdout.take().expect("piped stdout");
    let (tx, rx) = mpsc::channel::<Vec<u8>>();
    std::thread::spawn(move || {
        let mut buf = [0u8; 65536];
        while let Ok(n) = stdout.read(&mut buf) {
            if n == 0 || tx.send(buf[..n].to_vec()).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + COMMAND_TIMEOUT;
    let mut output = Vec::new();
    let mut interrupted = false;
    loop {
        if let (Some(at), false) = (interrupt_at, interrupted) {
            let mut before = expected[..at].to_vec();
            before.push("...".to_string());
            let text = String::from_utf8_lossy(&output);
            // Only whole lines count: the last one may still be growing.
            let complete: Vec<&str> = match text.rfind('\n') {
                Some(end) => text[..end].lines().collect(),
                None => Vec::new(),
            };
            if lines_match(&refs(&before), &complete) {
                unsafe { libc::kill(-pgid, libc::SIGINT) };
                interrupted = true;
            }
        }
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left.min(Duration::from_millis(100))) {
            Ok(chunk) => output.extend_from_slice(&chunk),
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) if left.is_zero() => {
                unsafe { libc::kill(-pgid, libc::SIGKILL) };
                let _ = child.wait();
                return Err(format!(
                    "still running after {COMMAND_TIMEOUT:?}; output so far:\n{}",
                    String::from_utf8_lossy(&output)
                ));
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
    }
    let status = child.wait().map_err(|e| format!("wait: {e}"))?;
    let text = String::from_utf8_lossy(&output).into_owned();
    let actual: Vec<&str> = text.lines().collect();
    let pattern: Vec<&str> = expected
        .iter()
        .map(String::as_str)
        .filter(|l| *l != "^C")
        .collect();
    let code = status.code();
    let status_ok = if interrupt_at.is_some() {
        // Ctrl-C ends a command normally: its own exit, or death by the signal.
        matches!(code, Some(0) | Some(130)) || code.is_none()
    } else {
        code == Some(status_wanted)
    };
    if interrupt_at.is_some() && !interrupted {
        return Err(format!(
            "ended before the output shown above ^C appeared:\n{text}"
        ));
    }
    if !status_ok {
        return Err(format!(
            "exit status {status}, expected {status_wanted}; output:\n{text}"
        ));
    }
    if !pattern.is_empty() && !lines_match(&pattern, &actual) {
        return Err(format!(
            "output differs.\n--- expected\n{}\n--- actual\n{text}",
            pattern.join("\n")
        ));
    }
    Ok(())
}

fn refs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// Whether the output lines match the pattern lines (`...` lines, `[..]` within lines).
fn lines_match(pat: &[&str], out: &[&str]) -> bool {
    // ok[i][j]: pat[i..] matches out[j..].
    let (p, o) = (pat.len(), out.len());
    let mut ok = vec![vec![false; o + 1]; p + 1];
    ok[p][o] = true;
    for i in (0..p).rev() {
        for j in (0..=o).rev() {
            ok[i][j] = if pat[i].trim() == "..." {
                ok[i + 1][j] || (j < o && ok[i][j + 1])
            } else {
                j < o && line_match(pat[i], out[j]) && ok[i + 1][j + 1]
            };
        }
    }
    ok[0][0]
}

fn line_match(pat: &str, line: &str) -> bool {
    let (pat, line) = (pat.trim_end(), line.trim_end());
    let parts: Vec<&str> = pat.split("[..]").collect();
    if parts.len() == 1 {
        return pat == line;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !line.starts_with(first) || line.len() < first.len() + last.len() {
        return false;
    }
    let mut rest = &line[first.len()..line.len() - last.len()];
    if !line.ends_with(last) {
        return false;
    }
    for mid in &parts[1..parts.len() - 1] {
        match rest.find(mid) {
            Some(at) => rest = &rest[at + mid.len()..],
            None => return false,
        }
    }
    true
}

// ---- Commands and options that exist -----------------------------------------------

/// `kstate ARGS --help`'s text, or None when kstate refuses ARGS; asked once per path.
fn help(path: &[String]) -> Option<String> {
    static CACHE: OnceLock<Mutex<HashMap<Vec<String>, Option<String>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    if let Some(h) = cache.lock().expect("help cache").get(path) {
        return h.clone();
    }
    let out = Command::new(support::KSTATE)
        .args(path)
        .arg("--help")
        .output()
        .expect("run kstate --help");
    let text = out
        .status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned());
    cache
        .lock()
        .expect("help cache")
        .insert(path.to_vec(), text.clone());
    text
}

/// The analyzers and each one's `--by` keyings, from `kstate analyze --list`.
fn analyzers() -> &'static HashMap<String, Vec<String>> {
    static LIST: OnceLock<HashMap<String, Vec<String>>> = OnceLock::new();
    LIST.get_or_init(|| {
        let text = support::kstate(&["analyze", "--list"]);
        let mut map: HashMap<String, Vec<String>> = HashMap::new();
        let mut current = String::new();
        for l in text.lines().skip(1) {
            if !l.starts_with(' ') {
                current = l.split_whitespace().next().unwrap_or("").to_string();
                map.entry(current.clone()).or_default();
            } else if let Some(by) = l.trim().strip_prefix("--by:") {
                let keys = by.split(',').map(|k| k.trim().to_string());
                map.entry(current.clone()).or_default().extend(keys);
            }
        }
        map.insert("sysinfo".into(), vec!["field".into()]);
        map
    })
}

/// The subcommands a help text lists (its "Commands:" section).
fn subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect()
}

/// How an option takes its value, from its help line: None when the help has no such
/// option, Some(0) a flag, Some(1) a value, Some(2) an optional value.
fn option_arity(help: &str, opt: &str) -> Option<u8> {
    for l in help.lines() {
        let l = l.trim_start();
        if !l.starts_with('-') {
            continue;
        }
        // `-o, --output <OUTPUT>  Description`: the names, then the value they take.
        let spec = l.split("  ").next().unwrap_or("");
        let named = spec
            .split(", ")
            .any(|part| part.split([' ', '=']).next() == Some(opt));
        if named {
            return Some(if spec.contains("[<") {
                2
            } else if spec.contains('<') {
                1
            } else {
                0
            });
        }
    }
    None
}

/// Shell-like words: quotes kept together, a `#` word starts a comment.
fn words(cmd: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quote = None;
    let mut in_word = false;
    for c in cmd.chars() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => cur.push(c),
            None if c == '\'' || c == '"' => {
                quote = Some(c);
                in_word = true;
            }
            None if c.is_whitespace() => {
                if in_word {
                    out.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            None if c == '#' && !in_word => break,
            None => {
                cur.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        out.push(cur);
    }
    out
}

/// A placeholder the docs use for a value (FILE, CMD, A, OLD_KSTATE, ...).
fn placeholder(w: &str) -> bool {
    w.chars().any(|c| c.is_ascii_uppercase())
        && w.chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || "_-.[]|".contains(c))
}

/// Whether every `kstate` invocation in a command line names commands, options,
/// analyzers and keyings that exist.
fn command_exists(cmd: &str) -> Result<(), String> {
    let w = words(cmd);
    for segment in w.split(|x| matches!(x.as_str(), "|" | "||" | "&&" | ";")) {
        let Some(start) = segment.iter().position(|x| x == "kstate") else {
            continue;
        };
        check_invocation(&segment[start + 1..])?;
    }
    Ok(())
}

fn check_invocation(args: &[String]) -> Result<(), String> {
    let mut path: Vec<String> = Vec::new();
    let mut i = 0;
    // The subcommand chain: each word must be a command of the one before.
    loop {
        let h = help(&path).ok_or_else(|| format!("`kstate {}` is refused", path.join(" ")))?;
        let subs = subcommands(&h);
        let Some(next) = args.get(i) else { break };
        if subs.is_empty() || next.starts_with('-') {
            break;
        }
        if placeholder(next) || next == "..." {
            break;
        }
        let known = subs.contains(next) || (path.is_empty() && next == "la");
        if !known && help(&[path.clone(), vec![next.clone()]].concat()).is_none() {
            return Err(format!(
                "no command `{next}` in `kstate {}`",
                path.join(" ")
            ));
        }
        path.push(next.clone());
        i += 1;
    }
    let h = help(&path).ok_or_else(|| format!("`kstate {}` is refused", path.join(" ")))?;
    let analyzing = matches!(
        path.first().map(String::as_str),
        Some("analyze" | "la" | "plot")
    );
    let mut positionals = Vec::new();
    let mut by = None;
    while i < args.len() {
        let a = args[i].trim_matches(|c| c == '[' || c == ']');
        i += 1;
        if a == "--" {
            break;
        }
        if a.len() < 2 || !a.starts_with('-') || a.starts_with("-.") || a == "..." {
            positionals.push(a.to_string());
            continue;
        }
        let (name, inline_value) = match a.split_once('=') {
            Some((n, _)) => (n, true),
            None => (a, false),
        };
        let arity = if name == "--help" || name == "-h" {
            0
        } else {
            option_arity(&h, name)
                .ok_or_else(|| format!("`kstate {}` has no option {name}", path.join(" ")))?
        };
        let takes = match arity {
            1 => !inline_value,
            2 => !inline_value && args.get(i).is_some_and(|n| !n.starts_with('-')),
            _ => false,
        };
        if takes {
            if name == "--by" {
                by = args.get(i).cloned();
            }
            i += 1;
        }
    }
    if analyzing {
        let list = analyzers();
        if let Some(name) = positionals.first().filter(|n| !placeholder(n)) {
            let Some(keys) = list.get(name.as_str()) else {
                return Err(format!("no analyzer `{name}`"));
            };
            if let Some(by) = by.filter(|b| !placeholder(b)) {
                if !keys.contains(&by) {
                    return Err(format!("{name} has no --by {by} (it has {keys:?})"));
                }
            }
        }
    }
    Ok(())
}
