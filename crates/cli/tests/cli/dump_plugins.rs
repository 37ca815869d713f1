//! `kstate dump` prints what `trace-cmd report` (Debian 3.1.6, libtraceevent 1.7.1 and its
//! plugins) prints for the events whose text comes from a plugin or from trace-cmd itself,
//! and for print fmts libtraceevent reads its own way: kvm and kvmmmu, tlb, kernel_stack,
//! func_repeats, raw_data, the function graph, the helpers plugins define
//! (jiffies_to_msecs, jbd2_dev_to_name, xen_hypercall_name, scsi_trace_parse_cdb,
//! __le16_to_cpup, is_writable_pte), mac80211, 9p's protocol dumps, sched_switch and
//! sched_wakeup of several kernels, kmem, timer_start's flags, mmap_lock's ternaries.
//!
//! Each test builds a trace.dat with `support::built`: the event formats are the kernel's
//! own (Linux 6.18's tracefs files under tests/formats/, or written here from the kernel's
//! TRACE_EVENT definitions of older kernels, named where they are), the records chosen to
//! reach each branch of the plugin. trace-cmd reads the same file in the same run, and
//! every line must be the same, in microseconds and in nanoseconds (`-t` / `--ns`), on one
//! thread and on several. Each test also checks that the plugin's text is there, so that
//! a class silently printed through its print fmt by both could not pass.

use crate::support;

use std::path::Path;
use std::process::Command;

use support::built::{dyn_str, Built, Val};
use Val::U;

/// A Linux 6.18 format file kept under tests/formats.
fn kernel_format(path: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/formats")
        .join(path);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Adds the Linux 6.18 formats `paths` (`system/name`).
fn kernel_formats(b: &mut Built, paths: &[&str]) {
    for p in paths {
        let system = p.split('/').next().unwrap();
        b.format_text(system, &kernel_format(p));
    }
}

const KALLSYMS: &str = "\
ffffffff81000000 T _stext
ffffffff81100000 T try_to_wake_up
ffffffff81100400 T do_IRQ
ffffffff81100800 T schedule
ffffffff81100c00 T kmalloc_caller
ffffffff81101000 T vmx_vcpu_run
ffffffff81200000 t kvm_fn [kvm]
ffffffff81300000 T _etext
";

fn kstate_dump(file: &Path, opts: &[&str]) -> String {
    let out = Command::new(support::KSTATE)
        .arg("dump")
        .arg(file)
        .args(opts)
        .output()
        .expect("run kstate");
    assert!(
        out.status.success(),
        "kstate dump {} {opts:?} failed: {}",
        file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8")
}

/// Every line of `a` equals `b`'s, else a message with the first differences.
fn same_lines(what: &str, ours: &str, theirs: &str) {
    let (a, b): (Vec<&str>, Vec<&str>) = (ours.lines().collect(), theirs.lines().collect());
    let bad: Vec<String> = a
        .iter()
        .zip(&b)
        .enumerate()
        .filter(|(_, (x, y))| x != y)
        .map(|(i, (x, y))| format!("line {}:\n  kstate:    {x}\n  trace-cmd: {y}", i + 1))
        .collect();
    assert!(
        bad.is_empty() && a.len() == b.len(),
        "{what}: {} lines differ ({} lines against {}):\n{}",
        bad.len(),
        a.len(),
        b.len(),
        bad[..bad.len().min(6)].join("\n")
    );
}

/// Writes `b` as NAME.dat, compares `kstate dump` with `trace-cmd report` (and `--ns` with
/// `-t`, and several threads with one), and checks that each of `expect` is in the text.
fn check(b: &Built, name: &str, expect: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join(format!("{name}.dat"));
    b.write(&f);
    let theirs = support::trace_cmd_report(&f, &[]);
    let ours = kstate_dump(&f, &["--threads", "1"]);
    same_lines(name, &ours, &theirs);
    let theirs_ns = support::trace_cmd_report(&f, &["-t"]);
    same_lines(
        &format!("{name} (ns)"),
        &kstate_dump(&f, &["--ns"]),
        &theirs_ns,
    );
    let threads = kstate_dump(&f, &["--threads", "2", "--slice-bytes", "4096"]);
    assert_eq!(
        threads, ours,
        "{name}: two threads print otherwise than one"
    );
    for e in expect {
        assert!(ours.contains(e), "{name}: no {e:?} in\n{ours}");
    }
    ours
}

fn clock() -> impl FnMut() -> u64 {
    let mut ts = 5_000_000_000u64;
    move || {
        ts += 1_337;
        ts
    }
}

#[test]
fn kvm_exits_entries_and_emulations_print_as_plugin_kvm() {
    let mut b = Built::default();
    b.kallsyms(KALLSYMS);
    b.comm(42, "qemu-system-x86");
    kernel_formats(
        &mut b,
        &[
            "kvm/kvm_exit",
            "kvm/kvm_entry",
            "kvm/kvm_emulate_insn",
            "kvm/kvm_nested_vmexit",
            "kvm/kvm_nested_vmexit_inject",
        ],
    );
    let mut t = clock();
    let rip = U(0xffffffff81101010);
    // VMX (isa 1) and SVM (isa 2) reasons, a failed VM entry, one neither table names, an
    // ISA the plugin does not know, and SVM's -1.
    for (isa, reason) in [
        (1, 49),
        (1, 1),
        (1, 0x8000_0021),
        (1, 99),
        (2, 0x400),
        (2, 0x7b),
        (2, 0xffff_ffff),
        (3, 1),
    ] {
        b.record(
            0,
            t(),
            42,
            "kvm_exit",
            &[
                ("exit_reason", U(reason)),
                ("isa", U(isa)),
                ("guest_rip", rip.clone()),
                ("info1", U(0x1234)),
                ("info2", U(5)),
                ("vcpu_id", U(1)),
            ],
        );
    }
    b.record(
        0,
        t(),
        42,
        "kvm_entry",
        &[("vcpu_id", U(3)), ("rip", rip.clone())],
    );
    b.record(
        1,
        t(),
        42,
        "kvm_entry",
        &[
            ("vcpu_id", U(0x1_0000_0007)),
            ("rip", U(0x7fff1234)),
            ("immediate_exit", U(1)),
        ],
    );
    b.record(
        0,
        t(),
        42,
        "kvm_emulate_insn",
        &[
            ("rip", U(0xffffffffb90da2d5)),
            ("len", U(2)),
            ("insn", Val::Bytes(vec![0x89, 0x38, 0xff])),
            ("flags", U(9)),
        ],
    );
    b.record(
        0,
        t(),
        42,
        "kvm_emulate_insn",
        &[
            ("rip", U(0x1000)),
            ("csbase", U(0xf0000)),
            ("len", U(15)),
            ("insn", Val::Bytes((1..=15).collect())),
            ("flags", U(1)),
            ("failed", U(1)),
        ],
    );
    // Linux 6.18's kvm_nested_vmexit has no `rip`: the plugin says so, then the print fmt.
    b.record(
        1,
        t(),
        42,
        "kvm_nested_vmexit",
        &[
            ("exit_reason", U(30)),
            ("isa", U(1)),
            ("guest_rip", U(0x1234)),
        ],
    );
    b.record(
        1,
        t(),
        42,
        "kvm_nested_vmexit_inject",
        &[
            ("exit_code", U(0x7c)),
            ("isa", U(2)),
            ("exit_info1", U(7)),
            ("exit_int_info", U(0x80000b0e)),
        ],
    );
    check(
        &b,
        "kvm",
        &[
            "kvm_exit:             reason EPT_MISCONFIG rip 0xffffffff81101010 info 1234 5",
            "reason UNKNOWN (2147483681) rip",
            "reason EXIT_NPF rip",
            "reason EXIT_ERR rip",
            "reason UNKNOWN-ISA rip",
            "kvm_entry:             vcpu 3 rip 0xffffffff81101010",
            "kvm_emulate_insn:     0:ffffffffb90da2d5: 89 38",
            "f0000:1000: 01 02 03 04 05 06 07 08 09 0a 0b 0c 0d 0e 0f FAIL",
            "<CANT FIND FIELD rip>vcpu 0 reason IO_INSTRUCTION",
            "reason EXIT_MSR info1 7 info2 0 int_info 80000b0e int_info_err 0",
        ],
    );
}

/// A kvm_exit and kvm_entry of Linux 2.6.32 (`include/trace/events/kvm.h` of its time, then
/// in arch/x86/kvm/trace.h): no isa (the plugin takes VMX), no info fields.
#[test]
fn kvm_events_of_an_old_kernel_print_as_plugin_kvm() {
    let mut b = Built::default();
    b.event_format(
        "kvm",
        "kvm_exit",
        "\tfield:unsigned int exit_reason;\toffset:8;\tsize:4;\tsigned:0;\n\
         \tfield:unsigned long guest_rip;\toffset:16;\tsize:8;\tsigned:0;\n",
        "\"reason %s rip 0x%lx\", __print_symbolic(REC->exit_reason, { 0, \"EXCEPTION_NMI\" }, { 48, \"EPT_VIOLATION\" }), REC->guest_rip",
    );
    b.event_format(
        "kvm",
        "kvm_entry",
        "\tfield:unsigned int vcpu_id;\toffset:8;\tsize:4;\tsigned:0;\n",
        "\"vcpu %u\", REC->vcpu_id",
    );
    let mut t = clock();
    b.record(
        0,
        t(),
        9,
        "kvm_exit",
        &[("exit_reason", U(48)), ("guest_rip", U(0xffff))],
    );
    b.record(0, t(), 9, "kvm_entry", &[("vcpu_id", U(2))]);
    check(
        &b,
        "kvm_old",
        &[
            "kvm_exit:             reason EPT_VIOLATION rip 0xffff",
            // No rip field: what the plugin wrote, then the print fmt.
            "kvm_entry:             vcpu 2<CANT FIND FIELD rip>vcpu 2",
        ],
    );
}

#[test]
fn kvm_mmu_pages_print_their_role_as_plugin_kvm() {
    let mut b = Built::default();
    kernel_formats(
        &mut b,
        &[
            "kvmmmu/kvm_mmu_get_page",
            "kvmmmu/kvm_mmu_sync_page",
            "kvmmmu/kvm_mmu_unsync_page",
            "kvmmmu/kvm_mmu_prepare_zap_page",
        ],
    );
    let mut t = clock();
    for (i, role) in [0x1u64, 0x0000_0924, 0x0100_f0ff, 0xffff_ffff]
        .into_iter()
        .enumerate()
    {
        let page = [
            ("gfn", U(0x1234 + i as u64)),
            ("role", U(role)),
            ("root_count", U(i as u64)),
        ];
        let mut get = page.to_vec();
        get.extend([("created", U(role & 1)), ("unsync", U(1))]);
        b.record(0, t(), 3, "kvm_mmu_get_page", &get);
        b.record(0, t(), 3, "kvm_mmu_sync_page", &page);
        b.record(0, t(), 3, "kvm_mmu_unsync_page", &page);
        b.record(0, t(), 3, "kvm_mmu_prepare_zap_page", &page);
    }
    check(
        &b,
        "kvmmmu",
        &[
            "kvm_mmu_get_page:     new sp gfn 1234 1 q0 --- !pae !nxe !wp root 0 unsync",
            "kvm_mmu_sync_page:    4 q1 --x invalid !pae !nxe !wp root 1 sync",
            "15 q3 direct wux invalid pae nxe wp smep smap smm root 3 sync",
        ],
    );
}

#[test]
fn tlb_flush_prints_as_plugin_tlb() {
    let mut b = Built::default();
    kernel_formats(&mut b, &["tlb/tlb_flush"]);
    let mut t = clock();
    for (reason, pages) in [
        (0, u64::MAX),
        (1, 7),
        (2, 0),
        (3, 1),
        (4, 2),
        (5, 3),
        (0xffff_fffe, 1),
    ] {
        b.record(
            1,
            t(),
            7,
            "tlb_flush",
            &[("reason", U(reason)), ("pages", U(pages))],
        );
    }
    check(
        &b,
        "tlb",
        &[
            "tlb_flush:            pages=-1 reason=flush on task switch (0)",
            "pages=1 reason=local mm shootdown (3)",
            "pages=2 reason= (4)",
            "pages=1 reason= (4294967294)",
        ],
    );
}

fn callers(addrs: &[u64]) -> Val {
    Val::Bytes(addrs.iter().flat_map(|a| a.to_le_bytes()).collect())
}

/// kernel_stack (plugin_function: a frame per line with its address, to the first -1),
/// user_stack (its print fmt), raw_data (plugin_function: the id and the bytes).
#[test]
fn stacks_and_raw_data_print_as_plugin_function() {
    let mut b = Built::default();
    b.kallsyms(KALLSYMS);
    kernel_formats(&mut b, &["ftrace/kernel_stack", "ftrace/user_stack"]);
    // Linux's ftrace raw_data entry (kernel/trace/trace_entries.h).
    b.event_format(
        "ftrace",
        "raw_data",
        "\tfield:unsigned int id;\toffset:8;\tsize:4;\tsigned:0;\n\
         \tfield:char buf;\toffset:12;\tsize:0;\tsigned:1;\n",
        "\"id:%04x %08x\", REC->id, (int)REC->buf[0]",
    );
    let mut t = clock();
    let frames = [
        0xffffffff81100010,
        0xffffffff81100400,
        0xffffffff81100900,
        0x1234,
        0,
        0,
        0,
        0,
    ];
    b.record(
        1,
        t(),
        7,
        "kernel_stack",
        &[("size", U(4)), ("caller", callers(&frames))],
    );
    let cut = [
        0xffffffff81100800,
        u64::MAX,
        0xffffffff81100400,
        0,
        0,
        0,
        0,
        0,
    ];
    b.record(
        1,
        t(),
        7,
        "kernel_stack",
        &[("size", U(3)), ("caller", callers(&cut))],
    );
    let low = [0xffffffff81100800, 0x0000_0001_ffff_ffff, 0, 0, 0, 0, 0, 0];
    b.record(
        1,
        t(),
        7,
        "kernel_stack",
        &[("size", U(2)), ("caller", callers(&low))],
    );
    b.record(
        1,
        t(),
        7,
        "user_stack",
        &[("tgid", U(7)), ("caller", callers(&frames))],
    );
    let mut raw = b.payload("raw_data", 7, &[("id", U(0xbeef))]);
    raw.truncate(12);
    raw.extend_from_slice(&[1, 2, 3, 0xfe, 5, 6, 7, 8]);
    b.raw_record(1, t(), raw);
    let text = check(
        &b,
        "stacks",
        &[
            "kernel_stack:         <stack trace >",
            "=> try_to_wake_up (ffffffff81100010)",
            "=> do_IRQ (ffffffff81100400)",
            "=> schedule (ffffffff81100900)",
            "=> 1234\n=> 0",
            "raw_data:             # beef 01 02 03 fe 05 06 07 08",
        ],
    );
    // Stops at an address of -1, or whose low 32 bits are all set.
    assert!(text.contains("=> schedule (ffffffff81100800)\n"), "{text}");
    assert_eq!(text.matches("=> ").count(), 8 + 1 + 1 + 8, "{text}");
}

#[test]
fn func_repeats_print_as_plugin_function() {
    let mut b = Built::default();
    b.kallsyms(KALLSYMS);
    kernel_formats(&mut b, &["ftrace/func_repeats"]);
    let mut t = clock();
    b.record(
        2,
        t(),
        8,
        "func_repeats",
        &[
            ("ip", U(0xffffffff81100400)),
            ("parent_ip", U(0xffffffff81100800)),
            ("count", U(3)),
            ("top_delta_ts", U(0)),
            ("bottom_delta_ts", U(1_234_567)),
        ],
    );
    b.record(
        2,
        t(),
        8,
        "func_repeats",
        &[
            ("ip", U(0x99)),
            ("parent_ip", U(0x98)),
            ("count", U(70000)),
            ("top_delta_ts", U(1)),
        ],
    );
    check(
        &b,
        "func_repeats",
        &[
            "func_repeats:         do_IRQ (count: 3  last_ts:     4.998767)",
            "0x99 (count: 4464  last_ts:",
        ],
    );
}

/// trace-cmd's function graph: an entry whose return is the next record (same pid, same
/// function) is one line with the duration, the return not printed; others are `func() {`
/// and `}`; the marks of long calls.
#[test]
fn function_graph_entries_fold_with_their_returns() {
    let mut b = Built::default();
    b.kallsyms(KALLSYMS);
    b.comm(7, "worker");
    kernel_formats(
        &mut b,
        &[
            "ftrace/funcgraph_entry",
            "ftrace/funcgraph_exit",
            "sched/sched_switch",
        ],
    );
    let mut t = clock();
    let (irq, sched) = (0xffffffff81100400u64, 0xffffffff81100800u64);
    let entry = |b: &mut Built, cpu, ts, pid, func, depth| {
        b.record(
            cpu,
            ts,
            pid,
            "funcgraph_entry",
            &[("func", U(func)), ("depth", U(depth))],
        );
    };
    let exit = |b: &mut Built, cpu, ts, pid, func, depth, calltime, d| {
        b.record(
            cpu,
            ts,
            pid,
            "funcgraph_exit",
            &[
                ("func", U(func)),
                ("depth", U(depth)),
                ("calltime", U(calltime)),
                ("rettime", U(calltime + d)),
            ],
        );
    };
    // A call with a leaf inside it.
    let s0 = t();
    entry(&mut b, 0, s0, 7, irq, 0);
    let s1 = t();
    entry(&mut b, 0, s1, 7, sched, 1);
    exit(&mut b, 0, t(), 7, sched, 1, s1, 16_000);
    exit(&mut b, 0, t(), 7, irq, 0, s0, 3_242_027);
    // Leaves of every duration mark, and a function kallsyms does not name.
    for d in [
        5u64,
        10_001,
        150_000,
        999_999,
        1_200_000_000,
        12_345_678_901,
    ] {
        let s = t();
        entry(&mut b, 1, s, 8, 0x1234, 2);
        exit(&mut b, 1, t(), 8, 0x1234, 2, s, d);
    }
    // The next record is another CPU's: not a leaf, though its return comes right after.
    let s = t();
    entry(&mut b, 2, s, 9, sched, 0);
    b.record(
        3,
        t(),
        10,
        "sched_switch",
        &[("prev_pid", U(10)), ("next_pid", U(0))],
    );
    exit(&mut b, 2, t(), 9, sched, 0, s, 500);
    // The next record is the return of another pid's call of the same function.
    let s = t();
    entry(&mut b, 2, s, 9, irq, 1);
    exit(&mut b, 3, t(), 10, irq, 1, s, 700);
    exit(&mut b, 2, t(), 9, irq, 1, s, 900);
    let text = check(
        &b,
        "fgraph",
        &[
            "funcgraph_entry:                   |  do_IRQ() {",
            "funcgraph_entry:      + 16.000 us  |    schedule();",
            "funcgraph_exit:       # 3242.027 us |  }",
            "  0.005 us   |      1234();",
            "+ 10.001 us  |      1234();",
            "! 150.000 us |      1234();",
            "! 999.999 us |      1234();",
            "$ 1200000 us |      1234();",
            "$ 12345678 us |      1234();",
        ],
    );
    // The two folded returns are not printed on their own.
    assert_eq!(text.matches("funcgraph_exit:").count(), 1 + 3, "{text}");
}

/// libtraceevent reads operators its own way: timer_start's `flags & (A | B | C | D)` is
/// `(flags & A) | B | C | D`, mm_page_alloc_extfrag's `a < (c ? x : y)` is `(a < c) ? x :
/// y`, `a - b - c` is `a - (b - c)`, what follows `?:` takes the whole `?:` as its left.
#[test]
fn operators_read_as_libtraceevent_reads_them() {
    let mut b = Built::default();
    b.kallsyms(KALLSYMS);
    kernel_formats(
        &mut b,
        &[
            "timer/timer_start",
            "kmem/mm_page_alloc_extfrag",
            "kmem/mm_page_alloc",
        ],
    );
    b.event_format(
        "quirks",
        "ops",
        "\tfield:int a;\toffset:8;\tsize:4;\tsigned:1;\n\
         \tfield:int b;\toffset:12;\tsize:4;\tsigned:1;\n\
         \tfield:int c;\toffset:16;\tsize:4;\tsigned:1;\n",
        "\"sub=%d div=%d cond=%d chain=%s tail=%d shift=%d\", REC->a - REC->b - REC->c, REC->a / REC->b / REC->c, REC->a ? REC->b : REC->c + 100, REC->a == 1 ? \"one\" : REC->a == 2 ? \"two\" : \"many\", -REC->a * REC->b, REC->a << 2 + REC->b",
    );
    let mut t = clock();
    for flags in [0x3d00_0000u64, 0x0004_0001, 0x0008_0000, 0x003c_0000, 0] {
        b.record(
            3,
            t(),
            9,
            "timer_start",
            &[
                ("timer", U(0xffff888012345678)),
                ("function", U(0xffffffff81100800)),
                ("expires", U(100)),
                ("now", U(90)),
                ("flags", U(flags)),
            ],
        );
    }
    for (order, fallback) in [(0, 3), (3, 10), (9, 0)] {
        b.record(
            3,
            t(),
            9,
            "mm_page_alloc_extfrag",
            &[
                ("pfn", U(0x1000)),
                ("alloc_order", U(order)),
                ("fallback_order", U(fallback)),
                ("change_ownership", U(1)),
            ],
        );
    }
    for gfp in [0xcc0u64, 0x2800, 0x140dca, 0] {
        b.record(
            3,
            t(),
            9,
            "mm_page_alloc",
            &[("pfn", U(0x2000)), ("order", U(1)), ("gfp_flags", U(gfp))],
        );
    }
    // (No zero divisor, in C's reading or libtraceevent's: trace-cmd dies of it, SIGFPE.)
    for (a, bb, c) in [(10, 3, 2), (1, 7, 5), (2, 2, 1), (0, 1, 1), (5, 1, 1)] {
        b.record(3, t(), 9, "ops", &[("a", U(a)), ("b", U(bb)), ("c", U(c))]);
    }
    check(
        &b,
        "operators",
        &[
            "flags=D|P|I",
            "flags=M|D|P|I",
            "fragmenting=10",
            "gfp_flags=GFP_KERNEL",
            "sub=9 ",
            "chain=two",
        ],
    );
}

/// mmap_lock's `write ? "true" : "false"` (Linux 6.18) and Linux 5.10's form with the
/// memcg path before it.
#[test]
fn mmap_lock_ternaries_print_strings() {
    let mut b = Built::default();
    kernel_formats(
        &mut b,
        &[
            "mmap_lock/mmap_lock_start_locking",
            "mmap_lock/mmap_lock_acquire_returned",
        ],
    );
    // include/trace/events/mmap_lock.h of Linux 5.10.
    b.event_format(
        "mmap_lock",
        "mmap_lock_released",
        "\tfield:struct mm_struct * mm;\toffset:8;\tsize:8;\tsigned:0;\n\
         \tfield:__data_loc char[] memcg_path;\toffset:16;\tsize:4;\tsigned:1;\n\
         \tfield:bool write;\toffset:20;\tsize:1;\tsigned:0;\n",
        "\"mm=%p memcg_path=%s write=%s\\n\", REC->mm, __get_str(memcg_path), REC->write ? \"true\" : \"false\"",
    );
    let mut t = clock();
    for w in [0u64, 1] {
        let mm = U(0xffff888000001000);
        b.record(
            3,
            t(),
            9,
            "mmap_lock_start_locking",
            &[("mm", mm.clone()), ("memcg_id", U(3)), ("write", U(w))],
        );
        b.record(
            3,
            t(),
            9,
            "mmap_lock_acquire_returned",
            &[("mm", mm.clone()), ("write", U(w)), ("success", U(1 - w))],
        );
        b.record(
            3,
            t(),
            9,
            "mmap_lock_released",
            &[
                ("mm", mm),
                ("memcg_path", dyn_str("/user.slice")),
                ("write", U(w)),
            ],
        );
    }
    check(
        &b,
        "mmap_lock",
        &[
            "write=false",
            "write=true success=false",
            "memcg_path=/user.slice write=true",
        ],
    );
}

/// plugin_jbd2's helpers: `jiffies_to_msecs` gives the jiffies back (Linux 6.18's
/// jbd2_run_stats), `jbd2_dev_to_name` prints MAJOR:MINOR (Linux 2.6.32's jbd2 events).
#[test]
fn jbd2_helpers_print_as_plugin_jbd2() {
    let mut b = Built::default();
    kernel_formats(
        &mut b,
        &[
            "jbd2/jbd2_run_stats",
            "jbd2/jbd2_checkpoint_stats",
            "jbd2/jbd2_start_commit",
        ],
    );
    b.event_format(
        "jbd2",
        "jbd2_commit_locking",
        "\tfield:dev_t dev;\toffset:8;\tsize:4;\tsigned:0;\n\
         \tfield:char sync_commit;\toffset:12;\tsize:1;\tsigned:1;\n\
         \tfield:int transaction;\toffset:16;\tsize:4;\tsigned:1;\n",
        "\"dev %s transaction %d sync %d\", jbd2_dev_to_name(REC->dev), REC->transaction, REC->sync_commit",
    );
    let mut t = clock();
    let dev = U(8 << 20 | 1);
    b.record(
        3,
        t(),
        9,
        "jbd2_run_stats",
        &[
            ("dev", dev.clone()),
            ("tid", U(5)),
            ("wait", U(250)),
            ("running", U(1000)),
            ("blocks", U(3)),
        ],
    );
    b.record(
        3,
        t(),
        9,
        "jbd2_checkpoint_stats",
        &[
            ("dev", dev.clone()),
            ("tid", U(5)),
            ("chp_time", U(u64::MAX)),
        ],
    );
    b.record(
        3,
        t(),
        9,
        "jbd2_start_commit",
        &[
            ("dev", dev.clone()),
            ("transaction", U(5)),
            ("sync_commit", U(1)),
        ],
    );
    b.record(
        3,
        t(),
        9,
        "jbd2_commit_locking",
        &[("dev", U(259 << 20 | 65537)), ("transaction", U(77))],
    );
    check(
        &b,
        "jbd2",
        &[
            "dev 8,1 tid 5 wait 250 request_delay 0 running 1000",
            "chp_time 4294967295",
            "jbd2_commit_locking:  dev 259:65537 transaction 77",
        ],
    );
}

/// plugin_xen's `xen_hypercall_name` in xen_mc_entry (include/trace/events/xen.h).
#[test]
fn xen_hypercalls_are_named_as_plugin_xen_names_them() {
    let mut b = Built::default();
    b.event_format(
        "xen",
        "xen_mc_entry",
        "\tfield:unsigned int op;\toffset:8;\tsize:4;\tsigned:0;\n\
         \tfield:unsigned int nargs;\toffset:12;\tsize:4;\tsigned:0;\n\
         \tfield:unsigned long args[6];\toffset:16;\tsize:48;\tsigned:0;\n",
        "\"op %u%s args [%lx, %lx, %lx, %lx, %lx, %lx]\", REC->op, xen_hypercall_name(REC->op), REC->args[0], REC->args[1], REC->args[2], REC->args[3], REC->args[4], REC->args[5]",
    );
    let mut t = clock();
    for op in [1u64, 11, 13, 29, 40, 55, 56, 1000] {
        b.record(
            0,
            t(),
            1,
            "xen_mc_entry",
            &[
                ("op", U(op)),
                ("nargs", U(2)),
                ("args", callers(&[0xdead, 2, 0, 0, 0, 0])),
            ],
        );
    }
    check(
        &b,
        "xen",
        &[
            "op 1(mmu_update) args [dead, 2,",
            "op 11 args",
            "op 29(sched_op) args",
            "op 55(arch_7) args",
        ],
    );
}

/// plugin_scsi's `scsi_trace_parse_cdb` in scsi_dispatch_cmd_start (include/trace/events/
/// scsi.h of Linux 6.x, its opcode and protection tables cut to a few entries): the
/// command decoded by opcode. The plugin ends its text with a NUL, where trace-cmd's line
/// ends.
#[test]
fn scsi_commands_decode_as_plugin_scsi() {
    let mut b = Built::default();
    b.event_format(
        "scsi",
        "scsi_dispatch_cmd_start",
        "\tfield:unsigned int host_no;\toffset:8;\tsize:4;\tsigned:0;\n\
         \tfield:unsigned int channel;\toffset:12;\tsize:4;\tsigned:0;\n\
         \tfield:unsigned int id;\toffset:16;\tsize:4;\tsigned:0;\n\
         \tfield:unsigned int lun;\toffset:20;\tsize:4;\tsigned:0;\n\
         \tfield:unsigned int opcode;\toffset:24;\tsize:4;\tsigned:0;\n\
         \tfield:unsigned int cmd_len;\toffset:28;\tsize:4;\tsigned:0;\n\
         \tfield:int driver_tag;\toffset:32;\tsize:4;\tsigned:1;\n\
         \tfield:int scheduler_tag;\toffset:36;\tsize:4;\tsigned:1;\n\
         \tfield:unsigned int data_sglen;\toffset:40;\tsize:4;\tsigned:0;\n\
         \tfield:unsigned int prot_sglen;\toffset:44;\tsize:4;\tsigned:0;\n\
         \tfield:unsigned char prot_op;\toffset:48;\tsize:1;\tsigned:0;\n\
         \tfield:__data_loc unsigned char[] cmnd;\toffset:52;\tsize:4;\tsigned:0;\n",
        "\"host_no=%u channel=%u id=%u lun=%u data_sgl=%u prot_sgl=%u prot_op=%s driver_tag=%d scheduler_tag=%d cmnd=(%s %s raw=%s)\", REC->host_no, REC->channel, REC->id, REC->lun, REC->data_sglen, REC->prot_sglen, __print_symbolic(REC->prot_op, { 0, \"SCSI_PROT_NORMAL\" }, { 1, \"SCSI_PROT_READ_INSERT\" }), REC->driver_tag, REC->scheduler_tag, __print_symbolic(REC->opcode, { 0x08, \"READ_6\" }, { 0x28, \"READ_10\" }, { 0x2a, \"WRITE_10\" }, { 0x41, \"WRITE_SAME\" }, { 0x42, \"UNMAP\" }, { 0x88, \"READ_16\" }, { 0x93, \"WRITE_SAME_16\" }, { 0x9e, \"SERVICE_ACTION_IN_16\" }, { 0xa8, \"READ_12\" }, { 0x7f, \"VARIABLE_LENGTH_CMD\" }), scsi_trace_parse_cdb(p, __get_dynamic_array(cmnd), REC->cmd_len), __print_hex(__get_dynamic_array(cmnd), REC->cmd_len)",
    );
    let mut t = clock();
    let mut cdb32 = vec![0u8; 32];
    cdb32[0] = 0x7f;
    cdb32[9] = 0x0d;
    cdb32[10] = 0xe8;
    cdb32[19] = 0x44;
    cdb32[23] = 9;
    cdb32[31] = 8;
    let cdbs: Vec<Vec<u8>> = vec![
        vec![0x08, 0x1f, 0x12, 0x34, 0x08, 0],
        vec![0x28, 0x20, 0x00, 0x10, 0x00, 0x00, 0, 0x00, 0x08, 0],
        vec![0x2a, 0x00, 0x80, 0x00, 0x00, 0x01, 0, 0x01, 0x00, 0],
        vec![0x41, 0x08, 0, 0, 0, 1, 0, 0, 1, 0],
        vec![0x42, 0, 0, 0, 0, 0, 0, 0, 0x28, 0],
        vec![0x88, 0, 0, 0, 0, 1, 0x80, 0, 0, 0, 0x80, 0, 0, 8, 0, 0],
        vec![0x93, 0x08, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0],
        vec![0x9e, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 32, 0, 0],
        vec![0x9e, 0x11, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 32, 0, 0],
        vec![0xa8, 0x40, 0, 0, 1, 0, 0, 0, 0, 9, 0, 0],
        cdb32,
        vec![0x00, 0, 0, 0, 0, 0],
    ];
    for cdb in cdbs {
        let (op, len) = (cdb[0] as u64, cdb.len() as u64);
        b.record(
            0,
            t(),
            1,
            "scsi_dispatch_cmd_start",
            &[
                ("host_no", U(2)),
                ("opcode", U(op)),
                ("cmd_len", U(len)),
                ("driver_tag", U(7)),
                ("cmnd", Val::Dyn(cdb)),
            ],
        );
    }
    check(
        &b,
        "scsi",
        &[
            "cmnd=(READ_6 lba=2036276 txlen=8 raw=08 1f 12 34 08 00)",
            "cmnd=(READ_10 lba=1048576 txlen=8 protect=1 raw=",
            "lba=18446744071562067969 txlen=256 protect=0",
            "unmap=1",
            "regions=2",
            "READ_CAPACITY_16 lba=0 alloc_len=32",
            "cmnd=(SERVICE_ACTION_IN_16 UNKNOWN",
            "WRITE_SAME_32 lba=68 txlen=8 protect=7 ei_lbrt=9 unmap=1",
            "cmnd=(0x0 -",
        ],
    );
}

/// plugin_mac80211's drv_bss_info_changed (net/mac80211/driver-trace.h of Linux 2.6.34):
/// the device and interface, and the BSS on three more lines.
#[test]
fn mac80211_bss_info_prints_as_plugin_mac80211() {
    let mut b = Built::default();
    b.event_format(
        "mac80211",
        "drv_bss_info_changed",
        "\tfield:char wiphy_name[32];\toffset:8;\tsize:32;\tsigned:1;\n\
         \tfield:enum nl80211_iftype vif_type;\toffset:40;\tsize:4;\tsigned:0;\n\
         \tfield:void * sdata;\toffset:48;\tsize:8;\tsigned:0;\n\
         \tfield:__data_loc char[] vif_name;\toffset:56;\tsize:4;\tsigned:1;\n\
         \tfield:bool assoc;\toffset:60;\tsize:1;\tsigned:0;\n\
         \tfield:u16 aid;\toffset:62;\tsize:2;\tsigned:0;\n\
         \tfield:bool cts;\toffset:64;\tsize:1;\tsigned:0;\n\
         \tfield:bool shortpre;\toffset:65;\tsize:1;\tsigned:0;\n\
         \tfield:bool shortslot;\toffset:66;\tsize:1;\tsigned:0;\n\
         \tfield:u8 dtimper;\toffset:67;\tsize:1;\tsigned:0;\n\
         \tfield:u16 bcnint;\toffset:68;\tsize:2;\tsigned:0;\n\
         \tfield:u16 assoc_cap;\toffset:70;\tsize:2;\tsigned:0;\n\
         \tfield:u64 timestamp;\toffset:72;\tsize:8;\tsigned:0;\n\
         \tfield:u32 basic_rates;\toffset:80;\tsize:4;\tsigned:0;\n\
         \tfield:u32 changed;\toffset:84;\tsize:4;\tsigned:0;\n\
         \tfield:bool enable_beacon;\toffset:88;\tsize:1;\tsigned:0;\n\
         \tfield:u16 ht_operation_mode;\toffset:90;\tsize:2;\tsigned:0;\n",
        "\"%s vif:%s(%d) changed:%#x\", REC->wiphy_name, __get_str(vif_name), REC->vif_type, REC->changed",
    );
    let mut t = clock();
    b.record(
        0,
        t(),
        1,
        "drv_bss_info_changed",
        &[
            ("wiphy_name", Val::Bytes(b"phy0".to_vec())),
            ("vif_type", U(2)),
            ("vif_name", dyn_str("wlan0")),
            ("assoc", U(1)),
            ("aid", U(3)),
            ("dtimper", U(2)),
            ("bcnint", U(100)),
            ("assoc_cap", U(0x431)),
            ("basic_rates", U(0)),
            ("changed", U(0x1f)),
            ("ht_operation_mode", U(4)),
        ],
    );
    check(
        &b,
        "mac80211",
        &[
            "drv_bss_info_changed: phy0 vif:wlan0(2)",
            "assoc:1 aid:3 cts:0 shortpre:0 shortslot:0 dtimper:2 ",
            "bcnint:100 assoc_cap:0x431 basic_rates:0 enable_beacon:0",
            "ht_operation_mode:4",
        ],
    );
}

/// plugin_cfg80211's `__le16_to_cpup` (of a pointer into the record) and plugin_kvm's
/// `is_writable_pte`, in formats written to use them.
#[test]
fn other_plugin_helpers_evaluate_as_their_plugins() {
    let mut b = Built::default();
    b.event_format(
        "cfg80211",
        "rx_frame",
        "\tfield:__data_loc u8[] frame;\toffset:8;\tsize:4;\tsigned:0;\n",
        "\"fc=%#x\", __le16_to_cpup((__le16 *)__get_dynamic_array(frame))",
    );
    b.event_format(
        "kvmmmu",
        "spte",
        "\tfield:u64 spte;\toffset:8;\tsize:8;\tsigned:0;\n",
        "\"spte %llx writable %d\", REC->spte, is_writable_pte(REC->spte)",
    );
    let mut t = clock();
    b.record(
        0,
        t(),
        1,
        "rx_frame",
        &[("frame", Val::Dyn(vec![0x08, 0x42, 0, 0]))],
    );
    b.record(0, t(), 1, "spte", &[("spte", U(0x8000_0000_0000_0027))]);
    b.record(0, t(), 1, "spte", &[("spte", U(0x25))]);
    check(
        &b,
        "helpers",
        &[
            "rx_frame:             fc=0x4208",
            "writable 2",
            "spte 25 writable 0",
        ],
    );
}

/// 9p_protocol_dump of Linux 6.x (include/trace/events/9p.h): `%16ph` of an array field
/// and of `field + 16`, which libtraceevent does not print (it names the argument's type).
#[test]
fn nine_p_protocol_dumps_print_as_trace_cmd_prints_them() {
    let mut b = Built::default();
    b.event_format(
        "9p",
        "9p_protocol_dump",
        "\tfield:void * clnt;\toffset:8;\tsize:8;\tsigned:0;\n\
         \tfield:__u8 type;\toffset:16;\tsize:1;\tsigned:0;\n\
         \tfield:__u16 tag;\toffset:18;\tsize:2;\tsigned:0;\n\
         \tfield:unsigned char line[32];\toffset:20;\tsize:32;\tsigned:0;\n",
        "\"clnt %lu %s(tag = %d)\\n%.3x: %16ph\\n%.3x: %16ph\\n\", (unsigned long)REC->clnt, __print_symbolic(REC->type, { 6, \"P9_TLERROR\" }, { 7, \"P9_RLERROR\" }, { 24, \"P9_TGETATTR\" }, { 25, \"P9_RGETATTR\" }), REC->tag, 0, REC->line, 16, REC->line + 16",
    );
    // A dump of a dynamic array, whose `%*ph` libtraceevent prints.
    b.event_format(
        "9p",
        "9p_dyn_dump",
        "\tfield:__u16 tag;\toffset:8;\tsize:2;\tsigned:0;\n\
         \tfield:__data_loc unsigned char[] line;\toffset:12;\tsize:4;\tsigned:0;\n",
        "\"tag %d\\n%*ph\\n%ph %*phC %*phD %*phN\", REC->tag, __get_dynamic_array_len(line), __get_dynamic_array(line), __get_dynamic_array(line), 3, __get_dynamic_array(line), 2, __get_dynamic_array(line), 40, __get_dynamic_array(line)",
    );
    let mut t = clock();
    b.record(
        0,
        t(),
        1,
        "9p_protocol_dump",
        &[
            ("clnt", U(0xffff888003bd1000)),
            ("type", U(24)),
            ("tag", U(0)),
            ("line", Val::Bytes((0..32).collect())),
        ],
    );
    b.record(
        0,
        t(),
        1,
        "9p_dyn_dump",
        &[
            ("tag", U(3)),
            ("line", Val::Dyn(vec![0xde, 0xad, 0xbe, 0xef, 1])),
        ],
    );
    check(
        &b,
        "9p",
        &[
            "9p_protocol_dump:     clnt 18446612682132754432 P9_TGETATTR(tag = 0)",
            "000: ARG TYPE NOT FIELD BUT 2",
            "010: ARG TYPE NOT FIELD BUT 11",
            "de ad be ef 01",
            "de de:ad:be de-ad deadbeef01",
        ],
    );
}

/// sched_switch and sched_wakeup through plugin_sched_switch, with Linux 6.18's formats,
/// Linux 3.10's sched_wakeup (with `success`) and a sched_switch without priorities.
#[test]
fn sched_switch_and_wakeup_of_several_kernels() {
    let comm = |s: &str| Val::Bytes(s.as_bytes().to_vec());
    let mut b = Built::default();
    b.comm(1, "init");
    kernel_formats(
        &mut b,
        &[
            "sched/sched_switch",
            "sched/sched_wakeup",
            "sched/sched_wakeup_new",
        ],
    );
    let mut t = clock();
    for (state, prio) in [
        (0u64, 120u64),
        (1, 120),
        (2, 100),
        (0x100, 139),
        (0x82, 98),
        (0x8000_0000_0000_0000, 0),
    ] {
        b.record(
            0,
            t(),
            44,
            "sched_switch",
            &[
                ("prev_comm", comm("kworker/0:1")),
                ("prev_pid", U(44)),
                ("prev_prio", U(prio)),
                ("prev_state", U(state)),
                ("next_comm", comm("fresh")),
                ("next_pid", U(4242)),
                ("next_prio", U(120)),
            ],
        );
    }
    b.record(
        1,
        t(),
        4242,
        "sched_wakeup",
        &[
            ("comm", comm("fresh")),
            ("pid", U(4242)),
            ("prio", U(120)),
            ("target_cpu", U(3)),
        ],
    );
    b.record(
        1,
        t(),
        1,
        "sched_wakeup_new",
        &[
            ("comm", comm("child")),
            ("pid", U(77)),
            ("prio", U(120)),
            ("target_cpu", U(1)),
        ],
    );
    // A pid the saved comms lack: its name is learnt from the event.
    b.record(
        1,
        t(),
        77,
        "sched_switch",
        &[
            ("prev_comm", comm("child")),
            ("prev_pid", U(77)),
            ("prev_state", U(4)),
            ("next_comm", comm("swapper/1")),
            ("next_pid", U(0)),
        ],
    );
    check(
        &b,
        "sched",
        &[
            "kworker/0:1:44 [120] R ==> fresh:4242 [120]",
            "[120] S ==> ",
            "[100] D ==> ",
            "fresh:4242 [120] CPU:003",
            "child:77 [120] CPU:001",
            "child-77    [001]",
        ],
    );

    // include/trace/events/sched.h of Linux 3.10.
    let mut b = Built::default();
    b.event_format(
        "sched",
        "sched_wakeup",
        "\tfield:char comm[16];\toffset:8;\tsize:16;\tsigned:1;\n\
         \tfield:pid_t pid;\toffset:24;\tsize:4;\tsigned:1;\n\
         \tfield:int prio;\toffset:28;\tsize:4;\tsigned:1;\n\
         \tfield:int success;\toffset:32;\tsize:4;\tsigned:1;\n\
         \tfield:int target_cpu;\toffset:36;\tsize:4;\tsigned:1;\n",
        "\"comm=%s pid=%d prio=%d success=%d target_cpu=%03d\", REC->comm, REC->pid, REC->prio, REC->success, REC->target_cpu",
    );
    // A sched_switch without priorities.
    b.event_format(
        "sched",
        "sched_switch",
        "\tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:1;\n\
         \tfield:pid_t prev_pid;\toffset:24;\tsize:4;\tsigned:1;\n\
         \tfield:long prev_state;\toffset:32;\tsize:8;\tsigned:1;\n\
         \tfield:char next_comm[16];\toffset:40;\tsize:16;\tsigned:1;\n\
         \tfield:pid_t next_pid;\toffset:56;\tsize:4;\tsigned:1;\n",
        "\"prev_comm=%s prev_pid=%d prev_state=%ld ==> next_comm=%s next_pid=%d\", REC->prev_comm, REC->prev_pid, REC->prev_state, REC->next_comm, REC->next_pid",
    );
    let mut t = clock();
    b.record(
        0,
        t(),
        5,
        "sched_wakeup",
        &[
            ("comm", comm("old")),
            ("pid", U(5)),
            ("prio", U(120)),
            ("success", U(1)),
            ("target_cpu", U(2)),
        ],
    );
    b.record(
        0,
        t(),
        5,
        "sched_switch",
        &[
            ("prev_comm", comm("old")),
            ("prev_pid", U(5)),
            ("prev_state", U(64)),
            ("next_comm", comm("new")),
            ("next_pid", U(6)),
        ],
    );
    check(
        &b,
        "sched_old",
        &[
            "old:5 [120] success=1 CPU:002",
            "old:5 <CANT FIND FIELD prev_prio>x ==> new:6<CANT FIND FIELD next_prio>",
        ],
    );
}

/// kmem's allocation events through plugin_kmem (`(func+0xoff)` before the print fmt).
#[test]
fn kmem_allocations_print_as_plugin_kmem() {
    let mut b = Built::default();
    b.kallsyms(KALLSYMS);
    kernel_formats(
        &mut b,
        &[
            "kmem/kmalloc",
            "kmem/kfree",
            "kmem/kmem_cache_alloc",
            "kmem/kmem_cache_free",
            "kmem/mm_page_free",
        ],
    );
    let mut t = clock();
    let site = U(0xffffffff81100c10);
    b.record(
        0,
        t(),
        1,
        "kmalloc",
        &[
            ("call_site", site.clone()),
            ("ptr", U(0xffff888001234000)),
            ("bytes_req", U(100)),
            ("bytes_alloc", U(128)),
            ("gfp_flags", U(0xcc0)),
            ("node", U(u32::MAX as u64)),
        ],
    );
    b.record(
        0,
        t(),
        1,
        "kfree",
        &[("call_site", site.clone()), ("ptr", U(0xffff888001234000))],
    );
    b.record(
        0,
        t(),
        1,
        "kmem_cache_alloc",
        &[
            ("call_site", U(0x10)),
            ("ptr", U(0xffff888001234000)),
            ("bytes_req", U(64)),
            ("bytes_alloc", U(64)),
            ("gfp_flags", U(0x400cc0)),
        ],
    );
    b.record(
        0,
        t(),
        1,
        "kmem_cache_free",
        &[
            ("call_site", site),
            ("ptr", U(0xffff888001234000)),
            ("name", dyn_str("kmalloc-64")),
        ],
    );
    b.record(
        0,
        t(),
        1,
        "mm_page_free",
        &[("pfn", U(0x1234)), ("order", U(2))],
    );
    check(
        &b,
        "kmem",
        &["kmalloc:              (kmalloc_caller+0x10) call_site=kmalloc_caller+0x10"],
    );
}
