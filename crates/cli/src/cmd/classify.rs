//! `kstate classify`: sorts a recording into CPU-busy, I/O-bound, lock-contention or other
//! (the three kinds of the seeds' OS-layer study), with the figures that decided it.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::error::Error;
use kstate_views::classify::{figures, verdict};
use kstate_views::workload::workload_scope;

#[derive(clap::Args)]
#[command(
    after_help = "Needs sched:sched_switch; uses lock:contention_begin/end, \
    block:block_rq_issue/complete and raw_syscalls (futex waits) where recorded: \
    kstate record -e perf,syscall -a -- CMD records them all.\n\n\
    Scope: where the file names the command it recorded (record -- CMD), CPU busy, lock\n\
    wait and I/O wait are those of the command's threads (it and every task it forked);\n\
    --system counts every thread. Disk busy is always the whole system's.\n\n\
    Figures (T = the time the recording covers, or the command's life from its first\n\
    context switch to its last when scoped; N = CPUs):\n  \
    CPU busy     time CPUs ran something other than the idle task, / (T x N); also\n               \
                 as CPUs' worth (/ T)\n  \
    lock wait    kernel lock contention (contention_begin..end) plus futex wait calls\n               \
                 (FUTEX_WAIT, WAIT_BITSET, LOCK_PI) of 10 ms or less (longer ones are idle\n               \
                 threads), summed over threads, / (T x N)\n  \
    I/O wait     time threads slept in D state (uninterruptible) outside a kernel lock\n               \
                 contention, summed over threads, / (T x N): the iowait proxy\n  \
    CPU demand   the command's on-CPU time plus the time its threads were preempted and\n               \
                 waiting for a CPU, / T (CPUs' worth; CPU busy / T unscoped)\n  \
    disk busy    time at least one block request was in flight (issue..complete), / T,\n               \
                 and the mean number in flight\n\n\
    Rules, first match wins:\n  \
    1. lock-contention  lock wait >= 20 % and lock wait >= I/O wait\n  \
    2. I/O-bound        I/O wait >= 20 % and CPU busy < 70 % and disk busy >= 30 %\n  \
    3. CPU-busy         CPU busy >= 50 %, or CPU demand >= 0.6 CPUs' worth\n  \
    4. other            with the reason (mostly idle, or waits without a busy disk)"
)]
pub struct Args {
    /// trace.dat or capture directory
    file: PathBuf,
    /// Count every thread's waits and CPU, not only the recorded command's (the default
    /// where the file names the command it recorded)
    #[arg(long)]
    system: bool,
    /// Print the verdict and figures as JSON
    #[arg(long)]
    json: bool,
}

pub fn run(a: Args) -> Result<ExitCode, Error> {
    let trace = super::open(&a.file)?;
    let scope = if a.system {
        None
    } else {
        workload_scope(&trace)
    };
    let f = figures(&trace, scope.as_ref())?;
    let (kind, evidence) = verdict(&f);
    if a.json {
        println!(
            "{}",
            serde_json::json!({
                "file": a.file.display().to_string(),
                "verdict": kind, "evidence": evidence,
                "span_ns": f.span_ns, "cpus": f.cpus, "scope": if f.scoped { "command" } else { "system" },
                "system_cpu_busy": f.system_cpu(),
                "cpu_busy": f.cpu(), "cpus_worth": f.cpus_worth(), "cpu_demand": f.demand(), "runq_wait_ns": f.wl_runq_ns,
                "lock_wait": f.lock(), "kernel_lock_ns": f.kernel_lock_ns, "futex_wait_ns": f.futex_ns, "futex_waits_over_10ms": f.futex_long,
                "io_wait": f.io(), "io_wait_ns": f.io_wait_ns, "lock_d_state_ns": f.lock_d_ns,
                "disk_busy": f.disk(), "disk_depth": f.depth(), "requests": f.requests,
                "recorded": {"lock": f.have_lock, "block": f.have_block, "syscalls": f.have_syscalls},
            })
        );
    } else {
        println!("{kind}: {evidence}");
        let mut missing = Vec::new();
        if !f.have_lock {
            missing.push("lock events");
        }
        if !f.have_block {
            missing.push("block events");
        }
        if !f.have_syscalls {
            missing.push("system calls (futex waits)");
        }
        if !missing.is_empty() {
            println!(
                "(the recording lacks {}: record -e perf,syscall)",
                missing.join(", ")
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
