//! Callers through code without frame pointers: user chains unwound through the files'
//! DWARF CFI from the registers and stack copy each sample carries (`--stack-bytes`),
//! checked against `perf record --call-graph dwarf` on the same programs, and against
//! what the programs do by construction.

use crate::support;

use std::collections::HashMap;
use std::path::Path;

use support::{kstate, kstate_json, KSTATE};

/// The `main` of the test programs: ARGV[1] rounds (200 by default) of `twice(n)` and
/// `once(n)`, defined by each program.
macro_rules! main_two_to_one {
    () => {
        r#"
int main(int argc, char **argv) {
    unsigned long rounds = argc > 1 ? strtoul(argv[1], 0, 10) : 200, s = 0, h = 1;
    for (unsigned long r = 0; r < rounds; r++) {
        /* Rounds of pseudo-random length (0.5 to 1.5 M steps): rounds of one length
           alias with the sampling period and favour one caller (see two_to_one). */
        h = h * 6364136223846793005UL + 1442695040888963407UL;
        unsigned long n = 500000 + (h >> 33) % 1000000;
        s += twice(n) + once(n);
    }
    return s == 42;
}
"#
    };
}

/// A leaf gcc builds without a frame at -O1 (even with -mno-omit-leaf-frame-pointer),
/// called by `twice` with twice the work `once` gives it.
const LEAF_C: &str = concat!(
    r#"
#include <stdlib.h>
__attribute__((noinline)) unsigned long leaf(unsigned long n) {
    unsigned long x = 0;
    for (unsigned long i = 0; i < n; i++) x = x * 31 + i;
    return x;
}
__attribute__((noinline)) unsigned long twice(unsigned long n) { return leaf(2 * n) + 1; }
__attribute__((noinline)) unsigned long once(unsigned long n) { return leaf(n) + 2; }
"#,
    main_two_to_one!()
);

/// Whether `twice` and `once` samples are the 2:1 split the programs make, within what
/// sampling allows: `twice`'s share within five standard deviations of 2/3, which a
/// binomial draw leaves once in 1.7 million runs (for 750 samples, shares 0.58 to 0.75).
/// Either caller lost, or the two confused (1:1, 0.5), falls outside from 200 samples on.
///
/// That holds because the programs' rounds vary in length. With rounds of one length the
/// samples, 1/999 s apart, fell at a few fixed points of each round wherever the two
/// periods are near a small ratio, and the share drifted with the machine's speed: at
/// 2.5 sampling periods a round (about 750 samples for 300 rounds) it came out at 0.61 in a
/// CI run (3.1 deviations) and from 0.64 to 0.71 over four runs here, against 0.66 to 0.68
/// at other lengths; rounds of random length gave 0.65 to 0.69 in ten runs at that speed.
fn two_to_one(twice: u64, once: u64) -> bool {
    let n = (twice + once) as f64;
    let share = twice as f64 / n.max(1.0);
    let sd = (2.0 / 9.0 / n.max(1.0)).sqrt();
    once > 0 && (share - 2.0 / 3.0).abs() <= 5.0 * sd
}

fn build_leaf(dir: &Path) -> String {
    let flags = [
        "-O1",
        "-fno-omit-frame-pointer",
        "-mno-omit-leaf-frame-pointer",
    ];
    support::gcc(dir, "leaf", LEAF_C, &flags)
}

/// Callers of `leaf` in `perf script` of a cpu-clock recording with `--call-graph MODE`.
fn perf_leaf_callers(exe: &str, mode: &str, dir: &Path) -> HashMap<String, u64> {
    let text = support::perf_script(
        &dir.join(format!("perf-{mode}.data")),
        &["-q", "-e", "cpu-clock", "-F", "999", "--call-graph", mode],
        &[exe, "300"],
        &["--no-inline", "-F", "ip,sym"],
    );
    let mut callers = HashMap::new();
    for chain in text.split("\n\n") {
        let syms: Vec<&str> = chain
            .lines()
            .filter_map(|l| l.split_whitespace().nth(1))
            .collect();
        if syms.first() == Some(&"leaf") {
            let c = syms.get(1).copied().unwrap_or("[no caller]");
            *callers.entry(c.to_string()).or_default() += 1;
        }
    }
    callers
}

/// `kstate record --sample --stack-bytes BYTES` of the leaf program running ROUNDS, then
/// `kstate profile --callers leaf --json`: caller -> samples, and the chain counts.
fn record_leaf(
    exe: &str,
    file: &Path,
    bytes: &str,
    rounds: &str,
) -> (HashMap<String, u64>, serde_json::Value) {
    let f = file.to_str().unwrap();
    let e = "sched:sched_process_exit";
    kstate(&[
        "record",
        "-e",
        e,
        "--sample",
        "--stack-bytes",
        bytes,
        "-o",
        f,
        "--",
        exe,
        rounds,
    ]);
    let v = kstate_json(&[
        "profile",
        "--callers",
        "leaf",
        "--json",
        file.to_str().unwrap(),
    ]);
    let rows = v["callers"]["rows"].as_array().unwrap();
    let m = rows
        .iter()
        .map(|r| {
            (
                r["symbol"].as_str().unwrap().to_string(),
                r["samples"].as_u64().unwrap(),
            )
        })
        .collect();
    (m, v["user_chains"].clone())
}

#[test]
fn a_frameless_leaf_shows_its_two_callers_in_their_ratio() {
    let tmp = tempfile::tempdir().unwrap();
    let exe = build_leaf(tmp.path());
    let file = tmp.path().join("leaf.dat");
    // 300 rounds: about 750 samples.
    let (callers, chains) = record_leaf(&exe, &file, "8192", "300");
    let (twice, once) = (callers["twice"], callers["once"]);
    let shown: u64 = callers.values().sum();
    // Nothing but the two real callers (not `main`, which a frame-pointer walk shows).
    assert!(twice + once >= shown * 98 / 100, "{callers:?}");
    assert!(two_to_one(twice, once), "twice:once {callers:?}");
    assert!(chains["cfi"].as_u64().unwrap() >= shown, "{chains}");

    // The oracle: perf's DWARF unwinding sees the same two callers in the same ratio,
    // and its frame-pointer walk skips to main (why the stack copy is needed).
    let dwarf = perf_leaf_callers(&exe, "dwarf", tmp.path());
    assert!(
        two_to_one(dwarf["twice"], dwarf["once"]),
        "perf dwarf: {dwarf:?}"
    );
    let fp = perf_leaf_callers(&exe, "fp", tmp.path());
    assert!(
        !fp.contains_key("twice") && fp.contains_key("main"),
        "perf fp: {fp:?}"
    );

    // Without a stack copy kstate sees what perf's frame-pointer walk sees.
    let plain = tmp.path().join("plain.dat");
    let (callers, chains) = record_leaf(&exe, &plain, "0", "50");
    assert!(
        !callers.contains_key("twice") && callers.contains_key("main"),
        "{callers:?}"
    );
    assert_eq!(chains["cfi"], 0, "{chains}");
}

#[test]
fn a_stack_copy_cut_short_cuts_chains_and_never_names_a_wrong_caller() {
    let tmp = tempfile::tempdir().unwrap();
    let exe = build_leaf(tmp.path());
    let file = tmp.path().join("short.dat");
    let (callers, chains) = record_leaf(&exe, &file, "16", "50");
    let total = chains["cfi"].as_u64().unwrap()
        + chains["frame_pointers"].as_u64().unwrap()
        + chains["cut"].as_u64().unwrap();
    // 16 bytes hold no frame of main: chains end before the process's root. A sample
    // taken where the root frame itself runs (the loader's entry, without CFI, one
    // frame-pointer step to a null frame) is whole even so: one in 128 was, in a CI run.
    let cut = chains["cut"].as_u64().unwrap();
    assert!(total > 0 && cut >= total * 95 / 100, "{chains}");
    for c in callers.keys() {
        assert!(
            ["twice", "once", "[no caller]"].contains(&c.as_str()),
            "{callers:?}"
        );
    }
}

/// Per caller of futex() calls made inside glibc's malloc or free, from `perf script` of
/// a `--call-graph dwarf` recording: the first frame outside libc.
fn perf_malloc_lock_callers(workload: &[&str], dir: &Path) -> HashMap<String, u64> {
    let mut cmd = vec![KSTATE, "workload"];
    cmd.extend(workload);
    let text = support::perf_script(
        &dir.join("perf-futex.data"),
        &[
            "-q",
            "-e",
            "syscalls:sys_enter_futex",
            "--call-graph",
            "dwarf",
        ],
        &cmd,
        &["--no-inline", "-F", "ip,sym,dso"],
    );
    let mut callers = HashMap::new();
    for chain in text.split("\n\n") {
        let frames: Vec<(&str, bool)> = chain
            .lines()
            .filter_map(|l| {
                let mut w = l.split_whitespace();
                let (_, sym) = (w.next()?, w.next()?);
                Some((sym, l.contains("libc.so")))
            })
            .collect();
        let in_malloc = frames
            .iter()
            .any(|(s, libc)| *libc && (s.contains("malloc") || s.contains("free")));
        if let Some((caller, _)) = frames.iter().find(|(_, libc)| !libc).filter(|_| in_malloc) {
            *callers.entry(caller.to_string()).or_default() += 1;
        }
    }
    callers
}

#[test]
fn glibc_malloc_lock_is_taken_from_the_harness_function() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("malloc.dat");
    let workload = [
        "malloc-fight",
        "--threads",
        "8",
        "--iters",
        "100000",
        "--arenas",
        "1",
    ];
    let mut args = vec![
        "top-locks",
        "--json",
        "-o",
        file.to_str().unwrap(),
        "--",
        KSTATE,
    ];
    args.push("workload");
    args.extend(workload);
    let out = kstate(&args);
    let v: serde_json::Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    let arena = v["locks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["lock"].as_str().unwrap().starts_with("main_arena@"))
        .unwrap_or_else(|| panic!("no main_arena lock (libc6-dbg installed?): {v}"));
    // Most waits (not most time: the few waits at thread start, in std's thread set-up,
    // can be long ones; they show as `[unknown caller]`, std's frames being machinery).
    let top = arena["callers"]
        .as_array()
        .unwrap()
        .iter()
        // `[no chain]`: waits whose stack copy the sampler's ring dropped under load.
        .filter(|c| c["caller"] != "[unknown caller]" && c["caller"] != "[no chain]")
        .max_by_key(|c| c["waits"].as_u64().unwrap())
        .map(|c| c["caller"].as_str().unwrap())
        .unwrap();
    // The harness's own code: malloc_churn is the one function that calls malloc/free.
    assert_eq!(top, "kstate_lab::workload::malloc_churn", "{arena}");
    // Most chains named the lock's caller. A chain that ended inside the lock machinery
    // names none (`[unknown caller]`: std's thread set-up, a few waits per thread).
    let waits = |named: bool| -> u64 {
        arena["callers"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["caller"] != "[no chain]")
            .filter(|c| (c["caller"] != "[unknown caller]") == named)
            .map(|c| c["waits"].as_u64().unwrap())
            .sum()
    };
    assert!(waits(true) > waits(false), "{arena}");
    // Most chains were unwound through CFI to their root, or as far as their stack copy
    // went (`N unwound by CFI, ..., N cut short (N at the end of the stack copy)`): a
    // futex() chain copies 1 KiB of stack (the recorder's default for --stacks), enough
    // to pass glibc's and std's lock machinery, not always to reach the thread's root; in
    // a debug build malloc_churn's threads need 1 to 2 KiB (18 of 5,003 chains reached it
    // with 1 KiB in a run here, 115 of 117 with 2 KiB).
    let notes = v["notes"][0].as_str().unwrap();
    let count = |what: &str| -> u64 {
        let Some((before, _)) = notes.split_once(what) else {
            return 0;
        };
        before
            .rsplit([' ', ',', '('])
            .find(|w| !w.is_empty())
            .unwrap()
            .parse()
            .unwrap()
    };
    let (cfi, cut) = (count(" unwound by CFI"), count(" cut short"));
    let at_end = count(" at the end of the stack copy");
    assert!(cfi + at_end > cut - at_end, "{notes}");

    // The oracle: perf's DWARF unwinding of the futex calls made inside malloc/free.
    let perf = perf_malloc_lock_callers(&workload, tmp.path());
    let best = perf
        .iter()
        .max_by_key(|(_, n)| **n)
        .map(|(c, _)| c.as_str());
    assert_eq!(best, Some(top), "perf --call-graph dwarf: {perf:?}");
}

/// `spin` is hand-written assembly without `.cfi_*` directives (it keeps a frame
/// pointer), in a file whose C code has CFI and no frame pointers; `twice` calls it with
/// twice the work `once` gives it.
const NO_CFI_C: &str = concat!(
    r#"
#include <stdlib.h>
__asm__(".text\n.globl spin\n.type spin,@function\nspin:\n"
        "push %rbp\nmov %rsp,%rbp\nmov %rdi,%rax\n"
        "1:\nimul $3,%rax,%rax\nadd $1,%rax\ndec %rdi\njnz 1b\n"
        "pop %rbp\nret\n.size spin,.-spin\n");
unsigned long spin(unsigned long n);
__attribute__((noinline)) unsigned long twice(unsigned long n) { return spin(2 * n) + 1; }
__attribute__((noinline)) unsigned long once(unsigned long n) { return spin(n) + 2; }
"#,
    main_two_to_one!()
);

/// `kstate profile --callers SYMBOL --json FILE`: caller -> samples, and the chain counts.
fn callers_of(symbol: &str, file: &Path) -> (HashMap<String, u64>, serde_json::Value) {
    let v = kstate_json(&[
        "profile",
        "--callers",
        symbol,
        "--json",
        file.to_str().unwrap(),
    ]);
    let m = v["callers"]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["symbol"].as_str().unwrap().to_string(),
                r["samples"].as_u64().unwrap(),
            )
        })
        .collect();
    (m, v["user_chains"].clone())
}

#[test]
fn a_function_without_cfi_still_shows_its_callers() {
    let tmp = tempfile::tempdir().unwrap();
    let flags = ["-O1", "-fomit-frame-pointer"];
    let exe = support::gcc(tmp.path(), "nocfi", NO_CFI_C, &flags);
    // The premise: the file has CFI, but none for `spin`.
    let eh = std::process::Command::new("readelf")
        .args(["--debug-dump=frames", &exe])
        .output()
        .unwrap();
    let syms = std::process::Command::new("nm").arg(&exe).output().unwrap();
    let spin = String::from_utf8_lossy(&syms.stdout)
        .lines()
        .find(|l| l.ends_with(" T spin"))
        .map(|l| u64::from_str_radix(l.split(' ').next().unwrap(), 16).unwrap())
        .unwrap();
    let covered = String::from_utf8_lossy(&eh.stdout)
        .lines()
        .filter_map(|l| l.split("pc=").nth(1))
        .filter_map(|r| {
            let (a, b) = r.trim().split_once("..")?;
            Some((
                u64::from_str_radix(a, 16).ok()?,
                u64::from_str_radix(b, 16).ok()?,
            ))
        })
        .collect::<Vec<_>>();
    assert!(covered.len() >= 3, "no CFI in {exe}?");
    assert!(!covered.iter().any(|&(a, b)| a <= spin && spin < b));

    let file = tmp.path().join("nocfi.dat");
    let f = file.to_str().unwrap();
    let e = "sched:sched_process_exit";
    kstate(&[
        "record",
        "-e",
        e,
        "--sample",
        "--stack-bytes",
        "8192",
        "-o",
        f,
        "--",
        &exe,
        "300",
    ]);
    let (callers, chains) = callers_of("spin", &file);
    let (twice, once) = (callers["twice"], callers["once"]);
    let shown: u64 = callers.values().sum();
    assert!(twice + once >= shown * 98 / 100, "{callers:?}");
    assert!(two_to_one(twice, once), "twice:once {callers:?}");
    // Walked through spin's frame pointer, then on through the C code's CFI (it has no
    // frame pointers: the kernel's walk loses the way there) up to main.
    assert!(
        chains["frame_pointers"].as_u64().unwrap() >= shown,
        "{chains}"
    );
    let (up, _) = callers_of("twice", &file);
    let to_main = up.get("main").copied().unwrap_or(0);
    assert!(to_main >= twice * 98 / 100, "callers of twice: {up:?}");
}

/// (file offset, size) of section `name` of an ELF file, from `readelf -SW`.
fn section_span(exe: &str, name: &str) -> (usize, usize) {
    let out = std::process::Command::new("readelf")
        .args(["-SW", exe])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let line = text
        .lines()
        .find(|l| l.split_whitespace().any(|w| w == name))
        .unwrap_or_else(|| panic!("no {name} in {exe}"));
    // [Nr] Name Type Address Off Size ...: the three fields after the type.
    let w: Vec<&str> = line.split_whitespace().collect();
    let at = w.iter().position(|x| *x == name).unwrap();
    let hex = |s: &str| usize::from_str_radix(s, 16).unwrap();
    (hex(w[at + 3]), hex(w[at + 4]))
}

#[test]
fn corrupt_cfi_cuts_chains_and_never_names_a_wrong_caller() {
    let tmp = tempfile::tempdir().unwrap();
    let exe = build_leaf(tmp.path());
    // The same program with its .eh_frame overwritten by pseudo-random bytes; its
    // .eh_frame_hdr still points into it.
    let (off, len) = section_span(&exe, ".eh_frame");
    let mut bytes = std::fs::read(&exe).unwrap();
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for b in &mut bytes[off..off + len] {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = x as u8;
    }
    let bad = tmp.path().join("leaf-bad-cfi");
    std::fs::write(&bad, &bytes).unwrap();
    std::fs::set_permissions(&bad, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let file = tmp.path().join("bad.dat");
    let (callers, chains) = record_leaf(bad.to_str().unwrap(), &file, "8192", "100");
    let shown: u64 = callers.values().sum();
    // framehop alone walks this to `main` (a frame-pointer step over the frameless leaf)
    // and counts it as CFI: here no caller is named, and the chains are counted as cut.
    assert!(shown > 50, "{callers:?}");
    assert_eq!(
        callers.keys().collect::<Vec<_>>(),
        ["[no caller]"],
        "{callers:?}"
    );
    assert!(chains["cut"].as_u64().unwrap() >= shown, "{chains}");
}

/// `kstate ARGS` with HOME at `home` (where perf's build-id cache, `~/.debug`, is).
fn kstate_home(home: &Path, args: &[&str]) -> serde_json::Value {
    let out = std::process::Command::new(KSTATE)
        .env("HOME", home)
        .args(args)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "kstate {args:?}: {text}");
    serde_json::from_str(text.lines().last().unwrap()).unwrap()
}

/// Samples per caller of `leaf` in `kstate profile --callers leaf --json` output.
fn leaf_callers(v: &serde_json::Value) -> HashMap<String, u64> {
    v["callers"]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let name = r["symbol"].as_str().unwrap().to_string();
            (name, r["samples"].as_u64().unwrap())
        })
        .collect()
}

#[test]
fn a_deleted_or_rebuilt_binary_is_read_from_perfs_build_id_cache() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let empty = tmp.path().join("empty");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&empty).unwrap();
    let exe = build_leaf(tmp.path());
    let perf = |args: &[&str]| {
        let st = std::process::Command::new("perf")
            .env("HOME", &home)
            .args(args)
            .output()
            .expect("perf is needed by these tests");
        assert!(st.status.success(), "perf {args:?}");
    };

    // kstate's recording, then the binary put in the cache and deleted: its CFI (and
    // symbols) come from the cached copy.
    let copy = tmp.path().join("leaf-copy");
    std::fs::copy(&exe, &copy).unwrap();
    let c = copy.to_str().unwrap();
    let file = tmp.path().join("copy.dat");
    let f = file.to_str().unwrap();
    let e = "sched:sched_process_exit";
    kstate(&[
        "record",
        "-e",
        e,
        "--sample",
        "--stack-bytes",
        "8192",
        "-o",
        f,
        "--",
        c,
        "100",
    ]);
    perf(&["buildid-cache", "-a", c]);
    std::fs::remove_file(&copy).unwrap();
    let args = ["profile", "--callers", "leaf", "--json", f];
    let v = kstate_home(&home, &args);
    let callers = leaf_callers(&v);
    let (twice, once) = (callers["twice"], callers["once"]);
    assert!(two_to_one(twice, once), "{callers:?}");
    assert!(
        v["user_chains"]["cfi"].as_u64().unwrap() >= twice + once,
        "{v}"
    );
    // Without the cache the same chains are cut at once: nothing on the stack is named.
    let v = kstate_home(&empty, &["profile", "--json", f]);
    assert!(
        v["user_chains"]["cut"].as_u64().unwrap() >= twice + once,
        "{v}"
    );
    // Another program at the path (a rebuild: another build id): the cache again.
    let other = support::gcc(tmp.path(), "other", NO_CFI_C, &["-O1"]);
    std::fs::copy(&other, &copy).unwrap();
    let v = kstate_home(&home, &args);
    assert_eq!(leaf_callers(&v), callers, "{v}");
    let v = kstate_home(&empty, &["profile", "--json", f]);
    assert!(
        v["user_chains"]["cut"].as_u64().unwrap() >= twice + once,
        "{v}"
    );

    // perf record -g puts the binary in the cache itself; deleted, it is read from there.
    let copy = tmp.path().join("leaf-perf");
    std::fs::copy(&exe, &copy).unwrap();
    let data = tmp.path().join("perf.data");
    let d = data.to_str().unwrap();
    let c = copy.to_str().unwrap();
    perf(&[
        "record",
        "-q",
        "-g",
        "-e",
        "cpu-clock",
        "-o",
        d,
        "--",
        c,
        "100",
    ]);
    std::fs::remove_file(&copy).unwrap();
    let v = kstate_home(&home, &["profile", "--json", d]);
    let top = &v["symbols"][0];
    assert_eq!(top["symbol"], "leaf", "{v}");
    assert!(top["percent"].as_f64().unwrap() > 90.0, "{v}");
    // Neither the file nor a copy: named by image and file offset, as perf does.
    let v = kstate_home(&empty, &["profile", "--json", d]);
    let top = v["symbols"][0]["symbol"].as_str().unwrap();
    assert!(top.starts_with("leaf-perf+0x"), "{v}");
}
