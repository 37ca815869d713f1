//! The analyzers, one file each. To add one: write `NAME.rs` with a type implementing
//! [`crate::analyzer::Analyzer`] (its `INFO`, `bind`, `event`, `finish`, `key_name`) and
//! list its `INFO` in [`ALL`].

use crate::analyzer::{Analyzer, Info};

pub mod biotime;
pub mod blkqueue;
pub mod block;
pub mod futex;
pub mod irq;
pub mod kmalloc;
pub mod lockhold;
pub mod lockwait;
pub mod microstate;
pub mod net;
pub mod offcpu;
pub mod palloc;
pub mod proc;
pub mod runq;
pub mod sched;
#[cfg(test)]
mod slice_check;
pub mod softirq;
pub mod syscall;
pub mod syscall_x86_64;
pub mod sysinfo;
mod task_names;
pub mod vmscan;

/// Every analyzer, in `--list` order.
pub const ALL: &[Info] = &[
    <syscall::Syscall as Analyzer>::INFO,
    <runq::Runq as Analyzer>::INFO,
    <offcpu::OffCpu as Analyzer>::INFO,
    <softirq::Softirq as Analyzer>::INFO,
    <irq::Irq as Analyzer>::INFO,
    <lockwait::LockWait as Analyzer>::INFO,
    <net::Net as Analyzer>::INFO,
    <net::NetSize as Analyzer>::INFO,
    <biotime::BioTime as Analyzer>::INFO,
    <blkqueue::BlkQueue as Analyzer>::INFO,
    <proc::Proc as Analyzer>::INFO,
    <futex::Futex as Analyzer>::INFO,
    <lockhold::LockHold as Analyzer>::INFO,
    <microstate::Microstate as Analyzer>::INFO,
    <palloc::Palloc as Analyzer>::INFO,
    <kmalloc::Kmalloc as Analyzer>::INFO,
    <vmscan::Vmscan as Analyzer>::INFO,
    sysinfo::INFO,
];

pub fn find(name: &str) -> Option<&'static Info> {
    ALL.iter().find(|i| i.name == name)
}
