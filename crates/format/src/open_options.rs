//! What a caller may choose about opening a trace ([`crate::Trace::open_with`]); every
//! choice leaves what the open finds the same, only how it gets there changes.

/// How a trace is opened; [`Default`] is what [`crate::Trace::open`] does.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OpenOptions {
    /// Threads the open may use (a perf.data's scan of its records, in parts side by
    /// side); None: the cores no other task was running on as the process started
    /// ([`crate::cores::free_cores`]).
    pub threads: Option<usize>,
    /// How a perf.data's tracepoint samples are read.
    pub perf_read: PerfReadWay,
    /// The least bytes of a perf.data's records per part of the scan on several threads
    /// (None: 16 MiB; tests cut small files into parts).
    pub scan_part_bytes: Option<u64>,
}

impl OpenOptions {
    /// The threads the open uses (at least one).
    pub(crate) fn threads(&self) -> usize {
        self.threads.unwrap_or_else(crate::cores::free_cores).max(1)
    }
}

/// How a perf.data's tracepoint samples are read. The older ways stay to compare the
/// direct read with (tests, `bench analyze`): all three give the same events.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum PerfReadWay {
    /// Straight from the file where it allows (the fastest).
    #[default]
    Direct,
    /// Through ring-buffer pages built from the records as they are read.
    Pages,
    /// Sorted whole into pages spooled to temporary files.
    Sorted,
}
