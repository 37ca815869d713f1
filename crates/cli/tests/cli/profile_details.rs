//! `kstate profile --details SYMBOL` against the running kernel: samples per instruction
//! of a function with a known hot loop (`kstate workload spin`: `kstate_spin_hot_loop`)
//! and of the kernel function that clears user memory when reading /dev/zero. binutils'
//! objdump (installed by CI) is the oracle for the instruction text; the per-symbol
//! profile is the oracle for the counts. Needs root; never skips.

use crate::support;

use serde_json::Value;
use std::path::Path;
use std::process::Command;
use support::{kstate, kstate_json, KSTATE};

fn details(file: &Path, sym: &str) -> Value {
    kstate_json(&[
        "profile",
        "--json",
        "--details",
        sym,
        file.to_str().unwrap(),
    ])
}

fn symbol_samples(p: &Value, sym: &str) -> u64 {
    p["symbols"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["symbol"] == sym)
        .map(|r| r["samples"].as_u64().unwrap())
        .sum()
}

/// The instructions' counts add up to the symbol's samples; returns the hottest one.
fn check_sums(d: &Value, want: u64) -> &Value {
    assert_eq!(d["samples"].as_u64(), Some(want), "{d}");
    let ins = d["instructions"].as_array().unwrap();
    let sum: u64 = ins.iter().map(|i| i["samples"].as_u64().unwrap()).sum();
    assert_eq!(sum + d["unplaced_samples"].as_u64().unwrap(), want, "{d}");
    let (start, size) = (d["start"].as_u64().unwrap(), d["size"].as_u64().unwrap());
    // Every row lies in the function, in address order.
    for w in ins.windows(2) {
        assert!(w[0]["address"].as_u64() < w[1]["address"].as_u64(), "{d}");
    }
    for i in ins {
        let a = i["address"].as_u64().unwrap();
        assert!(
            a >= start && a < start + size,
            "{i} outside {start:#x}+{size}"
        );
        assert_eq!(i["offset"].as_u64(), Some(a - start));
    }
    ins.iter()
        .max_by_key(|i| i["samples"].as_u64().unwrap())
        .unwrap()
}

/// `objdump -d` of [start, stop) in `file`: (address, mnemonic) per instruction.
fn objdump(file: &str, start: u64, stop: u64) -> Vec<(u64, String)> {
    let out = Command::new("objdump")
        .args([
            "-d",
            "--no-show-raw-insn",
            &format!("--start-address={start:#x}"),
            &format!("--stop-address={stop:#x}"),
            file,
        ])
        .output()
        .expect("objdump (binutils) runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let (addr, text) = l.split_once(":\t")?;
            let addr = u64::from_str_radix(addr.trim(), 16).ok()?;
            Some((addr, text.split_whitespace().next()?.to_string()))
        })
        .collect()
}

/// Mnemonics as the two print them: objdump adds an operand-size suffix (`movl`, `retq`)
/// in places where iced leaves it to the operands.
fn same_mnemonic(a: &str, b: &str) -> bool {
    let strip = |x: &'static str, y: &str| y.strip_suffix(x).map(str::to_string);
    a == b
        || ["b", "w", "l", "q"]
            .iter()
            .any(|s| strip(s, a).as_deref() == Some(b) || strip(s, b).as_deref() == Some(a))
}

fn mnemonic(i: &Value) -> String {
    let t = i["text"].as_str().unwrap();
    t.split_whitespace().next().unwrap().to_string()
}

/// The hot loop: every sample of the symbol lands on one of its instructions, the
/// hottest in the loop body, and the listing is objdump's, instruction for instruction.
#[test]
fn user_function_per_instruction_agrees_with_objdump() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("spin.dat");
    kstate(&[
        "record",
        "--sample",
        "-e",
        "sched",
        "-o",
        file.to_str().unwrap(),
        "--",
        KSTATE,
        "workload",
        "spin",
        "--ms",
        "600",
        "--cpu",
        "0",
    ]);
    let hot = "kstate_spin_hot_loop";
    let p = kstate_json(&["profile", "--json", file.to_str().unwrap()]);
    let n = symbol_samples(&p, hot);
    assert!(n > 100, "{n} samples in {hot}: {p}");

    // `kstate info` describes the section with the profile's totals.
    let info = kstate_json(&["info", "--json", file.to_str().unwrap()]);
    let s = &info["samples"];
    assert_eq!(s["samples"], p["samples_in_file"], "{s}");
    assert_eq!(s["kernel_samples"], p["kernel_samples"], "{s}");
    assert_eq!(s["user_samples"], p["user_samples"], "{s}");
    assert_eq!(
        (&s["event"], &s["freq_hz"], &s["period"]),
        (&"cpu-clock".into(), &999.into(), &Value::Null)
    );
    assert_eq!(s["call_chains"], true);
    assert_eq!(s["lost"], p["lost"]);
    // One process (the workload), which exec'd kstate: its mappings were read at the
    // start (before the exec) and the new image's were recorded as it mapped them.
    assert_eq!(
        (&s["processes"], &s["processes_at_start"]),
        (&1.into(), &1.into()),
        "{s}"
    );
    assert!(
        s["execs"].as_u64() >= Some(1) && s["mmaps"].as_u64() >= Some(1),
        "{s}"
    );
    assert!(s["mmaps_at_start"].as_u64() >= Some(1), "{s}");
    let text = kstate(&["info", file.to_str().unwrap()]);
    assert!(
        text.contains(&format!(
            "samples:     {} of cpu-clock at 999 Hz with call chains",
            s["samples"]
        )),
        "{text}"
    );

    let d = details(&file, hot);
    assert_eq!(d["details"].as_array().unwrap().len(), 1, "{d}");
    let d = &d["details"][0];
    assert_eq!(d["symbol"], hot);
    assert_eq!(d["no_text"], Value::Null, "{d}");
    let path = d["path"].as_str().unwrap();
    assert_eq!(d["code_source"], path);
    let top = check_sums(d, n);
    // The loop body: imul, add, dec, jne (the sample lands on or just after the slow
    // multiply); it holds nearly every sample.
    assert!(
        ["imul", "add", "dec", "jne"].contains(&mnemonic(top).as_str()),
        "{top}"
    );
    assert!(top["percent"].as_f64().unwrap() > 40.0, "{d}");

    let ins = d["instructions"].as_array().unwrap();
    let (start, size) = (d["start"].as_u64().unwrap(), d["size"].as_u64().unwrap());
    let want = objdump(path, start, start + size);
    let got: Vec<(u64, String)> = ins
        .iter()
        .map(|i| (i["address"].as_u64().unwrap(), mnemonic(i)))
        .collect();
    assert_eq!(got.len(), want.len(), "kstate {got:?}\nobjdump {want:?}");
    for (g, w) in got.iter().zip(&want) {
        assert!(
            g.0 == w.0 && same_mnemonic(&g.1, &w.1),
            "kstate {g:?}, objdump {w:?}"
        );
    }
    // The hottest address alone, as the brief's oracle check reads it.
    let a = top["address"].as_u64().unwrap();
    let len = top["bytes"].as_str().unwrap().len() as u64 / 2;
    let one = objdump(path, a, a + len);
    assert_eq!(one.len(), 1, "{one:?}");
    assert!(same_mnemonic(&mnemonic(top), &one[0].1), "{top} vs {one:?}");

    // The text view shows the same rows.
    let text = kstate(&["profile", "--details", hot, file.to_str().unwrap()]);
    assert!(text.contains(&format!("{hot} in kstate (binary")), "{text}");
    assert!(
        text.lines()
            .any(|l| l.contains(&format!("{a:#x}")) && l.contains(top["text"].as_str().unwrap())),
        "{text}"
    );
}

/// Reading /dev/zero into a large buffer: the kernel's clearing of user memory is the
/// hot spot. Counts per instruction (or per address, where the machine gives no kernel
/// code) add up to the symbol's samples and lie inside it; with /proc/kcore readable the
/// text is objdump's.
#[test]
fn kernel_function_per_instruction() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("zero.dat");
    kstate(&[
        "record",
        "--sample",
        "-e",
        "sched",
        "-o",
        file.to_str().unwrap(),
        "--",
        "taskset",
        "-c",
        "0",
        "dd",
        "if=/dev/zero",
        "of=/dev/null",
        "bs=4M",
        "count=4000",
    ]);
    let p = kstate_json(&["profile", "--json", file.to_str().unwrap()]);
    let top = &p["symbols"][0];
    assert_eq!(top["kind"], "kernel", "{p}");
    let sym = top["symbol"].as_str().unwrap();
    let n = symbol_samples(&p, sym);
    assert!(n > 20, "{p}");

    let d = details(&file, sym);
    let d = &d["details"][0];
    assert_eq!(d["image"], "[kernel.kallsyms]");
    let hottest = check_sums(d, n);
    // The running kernel's own symbol table names the hottest address as the symbol.
    let a = hottest["address"].as_u64().unwrap();
    let kallsyms = std::fs::read_to_string("/proc/kallsyms").unwrap();
    let below = kallsyms
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let addr = u64::from_str_radix(w.next()?, 16).ok()?;
            let name = w.nth(1)?;
            (addr <= a).then_some((addr, name))
        })
        .max_by_key(|s| s.0)
        .unwrap();
    assert_eq!(below.1, sym, "{a:#x}");

    if Path::new("/proc/kcore").exists() {
        assert_eq!(d["code_source"], "/proc/kcore", "{d}");
        let len = hottest["bytes"].as_str().unwrap().len() as u64 / 2;
        let one = objdump("/proc/kcore", a, a + len);
        assert_eq!(one.len(), 1, "{one:?}");
        assert!(
            same_mnemonic(&mnemonic(hottest), &one[0].1),
            "{hottest} vs {one:?}"
        );
    } else {
        // This machine: no kernel code to read, and the output says so.
        assert!(
            d["no_text"].as_str().unwrap().contains("/proc/kcore"),
            "{d}"
        );
        assert_eq!(hottest["text"], Value::Null);
    }
}
