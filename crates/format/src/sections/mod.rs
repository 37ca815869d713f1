//! kstate's own sections of a trace.dat: what trace-cmd has no place for. Each is stored
//! as a trace.dat option with an id in `writer::KSTATE_OPTION_IDS` (trace-cmd skips them)
//! and comes back in `Trace::extra_options` / [`crate::Trace::extra`].
//!
//! Every payload starts with a version line, `kstate-NAME 1\n`. The version changes only
//! when an old reader would misread the new layout; additions (new keys, new record tags,
//! new trailing fields) keep it, and decoders skip what they do not know.
//!
//! * RECORDING: text lines `KEY VALUE`, one per scalar field and one per list element
//!   (lists keep their order). Values are escaped: `\\`, `\n`, `\r`, `\0`.
//! * PROCESSES: text lines `PID TGID PPID COMM`, the comm (escaped) being the rest of the
//!   line, so spaces in it need nothing special.
//! * RING_STATS: text lines `cpu=N entries=N overrun=N ...`, one per CPU.
//! * SYSINFO: binary, compact, streamed: after the version line a sequence of records
//!   `TAG u8, LEN varint, BODY[LEN]`. Tag `S` is a snapshot; its body holds only what
//!   changed since the previous one (see [`SysinfoWriter`]). Integers are LEB128 varints;
//!   signed ones (deltas) are zigzag-coded first.
//!
//! Decoders never panic: malformed input is an error of kind `Corrupt` whose offset is the
//! byte in the payload where the problem is.

pub mod samples;
pub mod watch_log;

use std::collections::HashMap;
use std::io::{BufWriter, Write};

use crate::error::{Error, ErrorKind, Result};

/// Option ids of kstate's sections.
pub mod ids {
    /// How the recording was made: [`super::Recording`].
    pub const RECORDING: u16 = 0x6b00;
    /// The process table at the start of the recording, and the traced tasks that started
    /// later as the recorder found them: [`super::Process`].
    pub const PROCESSES: u16 = 0x6b01;
    /// /proc/meminfo and /proc/vmstat snapshots over time: [`super::SysinfoWriter`].
    pub const SYSINFO: u16 = 0x6b02;
    /// Per-CPU ring-buffer statistics at stop: [`super::RingStats`].
    pub const RING_STATS: u16 = 0x6b03;
    /// CPU samples with call chains (perf records and their attr): [`samples`].
    pub const SAMPLES: u16 = 0x6b04;
    /// Call chains taken at each hit of a tracepoint (`kstate record --stacks`: every
    /// futex() entry), in the SAMPLES layout ([`samples`]), its header naming the
    /// tracepoint. Joined to the trace's own events by thread and time.
    pub const STACKS: u16 = 0x6b05;
    /// Set by `kstate recover`: UTF-8 text saying where the recording came from and what
    /// it may lack.
    pub const RECOVERED: u16 = 0x6b06;
    /// What `kstate watch` did and saw while recording (alarms, escalations, shedding,
    /// losses, dropped pages): [`crate::sections::watch_log`].
    pub const WATCH_LOG: u16 = 0x6b07;
}

/// A human name for one of [`ids`], for messages.
pub fn section_name(id: u16) -> Option<&'static str> {
    match id {
        ids::RECORDING => Some("recording"),
        ids::PROCESSES => Some("processes"),
        ids::SYSINFO => Some("sysinfo"),
        ids::RING_STATS => Some("ring stats"),
        ids::SAMPLES => Some("samples"),
        ids::STACKS => Some("stacks"),
        ids::RECOVERED => Some("recovered"),
        ids::WATCH_LOG => Some("watch log"),
        _ => None,
    }
}

const RECORDING_MAGIC: &str = "kstate-recording";
const PROCESSES_MAGIC: &str = "kstate-processes";
const SYSINFO_MAGIC: &str = "kstate-sysinfo";
const RING_STATS_MAGIC: &str = "kstate-ring-stats";
const VERSION: u32 = 1;

/// In a capture directory (a recorder's scratch, see `crate::rawdir`): the files holding
/// kstate's sections, named for them, which a recorder keeps current while it records so
/// that a capture it leaves when killed has them.
pub const CAPTURE_RECORDING: &str = RECORDING_MAGIC;
pub const CAPTURE_PROCESSES: &str = PROCESSES_MAGIC;
/// The sections a capture directory may hold, and their files.
pub const CAPTURE_SECTIONS: [(u16, &str); 2] = [
    (ids::RECORDING, CAPTURE_RECORDING),
    (ids::PROCESSES, CAPTURE_PROCESSES),
];

// ---------------------------------------------------------------------------------------
// Text helpers shared by the line formats.

pub(crate) fn escape_into(out: &mut String, s: &str) {
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\0' => out.push_str("\\0"),
            c => out.push(c),
        }
    }
}

/// Undoes [`escape_into`]; `at` is the offset of `s` in the payload, for messages.
pub(crate) fn unescape(s: &str, at: usize) -> Result<String> {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.char_indices();
    while let Some((i, c)) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some((_, '\\')) => out.push('\\'),
            Some((_, 'n')) => out.push('\n'),
            Some((_, 'r')) => out.push('\r'),
            Some((_, '0')) => out.push('\0'),
            Some((_, other)) => {
                return Err(Error::corrupt(
                    (at + i) as u64,
                    format!("unknown escape \\{}", other.escape_debug()),
                ))
            }
            None => {
                return Err(Error::corrupt(
                    (at + i) as u64,
                    "backslash at the end of a value",
                ))
            }
        }
    }
    Ok(out)
}

/// The payload as UTF-8 text.
pub(crate) fn utf8<'a>(b: &'a [u8], what: &str) -> Result<&'a str> {
    std::str::from_utf8(b).map_err(|e| {
        Error::corrupt(
            e.valid_up_to() as u64,
            format!("{what} section: invalid UTF-8"),
        )
    })
}

/// Lines of `text[start..]` with their offsets in `text`, without the newline. A final
/// line without a newline is an error (a truncated payload).
pub(crate) fn lines<'a>(
    text: &'a str,
    start: usize,
    what: &'static str,
) -> impl Iterator<Item = Result<(usize, &'a str)>> {
    let mut pos = start;
    std::iter::from_fn(move || {
        if pos >= text.len() {
            return None;
        }
        let rest = &text[pos..];
        let at = pos;
        match rest.find('\n') {
            Some(n) => {
                pos += n + 1;
                Some(Ok((at, &rest[..n])))
            }
            None => {
                pos = text.len();
                Some(Err(Error::corrupt(
                    at as u64,
                    format!("{what} section: last line has no newline (truncated?)"),
                )))
            }
        }
    })
}

/// Checks the `MAGIC VERSION` line that starts `b`; returns the offset after it.
pub(crate) fn check_version_line(b: &[u8], magic: &str) -> Result<usize> {
    let end = match b.iter().position(|&c| c == b'\n') {
        Some(n) => n,
        None => {
            return Err(Error::corrupt(
                0,
                format!("no \"{magic} {VERSION}\" line at the start"),
            ))
        }
    };
    let line = &b[..end];
    let rest = line
        .strip_prefix(magic.as_bytes())
        .and_then(|r| r.strip_prefix(b" "));
    let Some(ver) = rest else {
        return Err(Error::corrupt(
            0,
            format!(
                "expected \"{magic} {VERSION}\" at the start, found {:?}",
                String::from_utf8_lossy(&line[..line.len().min(40)])
            ),
        ));
    };
    let at = (magic.len() + 1) as u64;
    let ver: u32 = std::str::from_utf8(ver)
        .ok()
        .and_then(parse_dec)
        .ok_or_else(|| Error::corrupt(at, format!("{magic}: version is not a number")))?;
    if ver != VERSION {
        return Err(Error::new(
            ErrorKind::Unsupported,
            Some(at),
            format!("{magic} version {ver}; this kstate reads version {VERSION}"),
        ));
    }
    Ok(end + 1)
}

/// Plain decimal digits with an optional `-` where `T` is signed; nothing else (no `+`,
/// no spaces), so every value has one spelling.
fn parse_dec<T: std::str::FromStr>(s: &str) -> Option<T> {
    let digits = s.strip_prefix('-').unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

pub(crate) fn int_at<T: std::str::FromStr>(s: &str, at: usize, what: &str) -> Result<T> {
    parse_dec(s).ok_or_else(|| {
        Error::corrupt(
            at as u64,
            format!(
                "{what}: {:?} is not a valid integer",
                &s[..s.floor_char_boundary_compat(40)]
            ),
        )
    })
}

/// `str::floor_char_boundary` is unstable; this is enough for clipping messages.
trait FloorCharBoundary {
    fn floor_char_boundary_compat(&self, max: usize) -> usize;
}

impl FloorCharBoundary for str {
    fn floor_char_boundary_compat(&self, max: usize) -> usize {
        if max >= self.len() {
            return self.len();
        }
        let mut i = max;
        while !self.is_char_boundary(i) {
            i -= 1;
        }
        i
    }
}

// ---------------------------------------------------------------------------------------
// RECORDING

/// How a recording was made.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Recording {
    /// The recording tool, e.g. "kstate 0.1.0".
    pub tool: String,
    /// argv of the kstate invocation.
    pub command: Vec<String>,
    /// argv of the traced command; empty if none.
    pub workload: Vec<String>,
    pub hostname: String,
    /// Trace clock, e.g. "mono".
    pub clock: String,
    /// Add to an event timestamp (ns) to get ns since the Unix epoch.
    pub wall_offset_ns: Option<i64>,
    /// Trace-clock ns when recording started.
    pub start_ts: u64,
    /// Trace-clock ns when recording stopped.
    pub stop_ts: u64,
    pub buffer_kib_per_cpu: u64,
    /// `system:event` enabled.
    pub events: Vec<String>,
    /// Requested but absent from this kernel.
    pub missing_events: Vec<String>,
    /// `system:event:EXPR`.
    pub filters: Vec<String>,
    /// pid filter; empty = system-wide.
    pub pids: Vec<i32>,
    /// 0 = off.
    pub sysinfo_interval_ms: u64,
    /// The traced command's pid, when kstate started one.
    pub workload_pid: Option<i32>,
    /// Why the recording stopped before it was asked to, losing what came after (the
    /// disk filled), as the recorder said it; None for a recording that ran its course.
    pub cut_short: Option<String>,
}

impl Recording {
    /// `kstate-recording 1`, then `KEY VALUE` lines; list fields repeat their key once per
    /// element; `wall_offset_ns` is left out when unknown.
    pub fn encode(&self) -> Vec<u8> {
        let mut s = format!("{RECORDING_MAGIC} {VERSION}\n");
        let mut kv = |k: &str, v: &str| {
            s.push_str(k);
            s.push(' ');
            escape_into(&mut s, v);
            s.push('\n');
        };
        kv("tool", &self.tool);
        for a in &self.command {
            kv("command", a);
        }
        for a in &self.workload {
            kv("workload", a);
        }
        kv("hostname", &self.hostname);
        kv("clock", &self.clock);
        if let Some(w) = self.wall_offset_ns {
            kv("wall_offset_ns", &w.to_string());
        }
        kv("start_ts", &self.start_ts.to_string());
        kv("stop_ts", &self.stop_ts.to_string());
        kv("buffer_kib_per_cpu", &self.buffer_kib_per_cpu.to_string());
        for e in &self.events {
            kv("events", e);
        }
        for e in &self.missing_events {
            kv("missing_events", e);
        }
        for f in &self.filters {
            kv("filters", f);
        }
        for p in &self.pids {
            kv("pids", &p.to_string());
        }
        kv("sysinfo_interval_ms", &self.sysinfo_interval_ms.to_string());
        if let Some(p) = self.workload_pid {
            kv("workload_pid", &p.to_string());
        }
        if let Some(why) = &self.cut_short {
            kv("cut_short", why);
        }
        s.into_bytes()
    }

    /// Reads what [`Recording::encode`] wrote. Unknown keys are skipped; missing ones keep
    /// their default; a scalar key given twice is an error.
    pub fn decode(b: &[u8]) -> Result<Recording> {
        let start = check_version_line(b, RECORDING_MAGIC)?;
        let text = utf8(b, "recording")?;
        let mut r = Recording::default();
        let mut seen: Vec<&str> = Vec::new();
        for line in lines(text, start, "recording") {
            let (at, line) = line?;
            let Some((key, raw)) = line.split_once(' ') else {
                return Err(Error::corrupt(
                    at as u64,
                    format!(
                        "recording section: line {:?} has no space after its key",
                        &line[..line.floor_char_boundary_compat(40)]
                    ),
                ));
            };
            let vat = at + key.len() + 1;
            let v = unescape(raw, vat)?;
            let scalar = matches!(
                key,
                "tool"
                    | "hostname"
                    | "clock"
                    | "wall_offset_ns"
                    | "start_ts"
                    | "stop_ts"
                    | "buffer_kib_per_cpu"
                    | "sysinfo_interval_ms"
                    | "workload_pid"
                    | "cut_short"
            );
            if scalar {
                if seen.contains(&key) {
                    return Err(Error::corrupt(
                        at as u64,
                        format!("recording section: {key} given twice"),
                    ));
                }
                seen.push(key);
            }
            match key {
                "tool" => r.tool = v,
                "command" => r.command.push(v),
                "workload" => r.workload.push(v),
                "hostname" => r.hostname = v,
                "clock" => r.clock = v,
                "wall_offset_ns" => r.wall_offset_ns = Some(int_at(&v, vat, key)?),
                "start_ts" => r.start_ts = int_at(&v, vat, key)?,
                "stop_ts" => r.stop_ts = int_at(&v, vat, key)?,
                "buffer_kib_per_cpu" => r.buffer_kib_per_cpu = int_at(&v, vat, key)?,
                "events" => r.events.push(v),
                "missing_events" => r.missing_events.push(v),
                "filters" => r.filters.push(v),
                "pids" => r.pids.push(int_at(&v, vat, key)?),
                "sysinfo_interval_ms" => r.sysinfo_interval_ms = int_at(&v, vat, key)?,
                "workload_pid" => r.workload_pid = Some(int_at(&v, vat, key)?),
                "cut_short" => r.cut_short = Some(v),
                _ => {} // a newer kstate's key
            }
        }
        Ok(r)
    }
}

// ---------------------------------------------------------------------------------------
// PROCESSES

/// One task of the process table taken when recording started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Process {
    pub pid: i32,
    pub tgid: i32,
    pub ppid: i32,
    pub comm: String,
}

/// `kstate-processes 1`, then `PID TGID PPID COMM` lines, the escaped comm taking the
/// rest of the line.
pub fn encode_processes(p: &[Process]) -> Vec<u8> {
    let mut s = format!("{PROCESSES_MAGIC} {VERSION}\n");
    for p in p {
        s.push_str(&format!("{} {} {} ", p.pid, p.tgid, p.ppid));
        escape_into(&mut s, &p.comm);
        s.push('\n');
    }
    s.into_bytes()
}

pub fn decode_processes(b: &[u8]) -> Result<Vec<Process>> {
    let start = check_version_line(b, PROCESSES_MAGIC)?;
    let text = utf8(b, "processes")?;
    let mut out = Vec::new();
    const FIELDS: [&str; 4] = ["pid", "tgid", "ppid", "comm"];
    for line in lines(text, start, "processes") {
        let (at, line) = line?;
        let words: Vec<&str> = line.splitn(4, ' ').collect();
        if words.len() < 4 {
            return Err(Error::corrupt(
                (at + line.len()) as u64,
                format!(
                    "processes section: line ends before its {}",
                    FIELDS[words.len()]
                ),
            ));
        }
        let mut pos = at;
        let mut nums = [0i32; 3];
        for ((n, word), what) in nums.iter_mut().zip(&words).zip(FIELDS) {
            *n = int_at(word, pos, what)?;
            pos += word.len() + 1;
        }
        out.push(Process {
            pid: nums[0],
            tgid: nums[1],
            ppid: nums[2],
            comm: unescape(words[3], pos)?,
        });
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------
// RING_STATS

/// One CPU's ring-buffer statistics (tracefs `per_cpu/cpuN/stats`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RingStats {
    pub cpu: u32,
    /// Events in the buffer.
    pub entries: u64,
    /// Events lost because the writer overwrote unread ones.
    pub overrun: u64,
    /// Events lost because an interrupting writer wrapped the buffer mid-commit.
    pub commit_overrun: u64,
    pub bytes: u64,
    /// Events lost because the buffer was full (non-overwrite mode).
    pub dropped_events: u64,
    pub read_events: u64,
}

const RING_KEYS: [&str; 6] = [
    "entries",
    "overrun",
    "commit_overrun",
    "bytes",
    "dropped_events",
    "read_events",
];

impl RingStats {
    fn field(&mut self, key: &str) -> Option<&mut u64> {
        Some(match key {
            "entries" => &mut self.entries,
            "overrun" => &mut self.overrun,
            "commit_overrun" => &mut self.commit_overrun,
            "bytes" => &mut self.bytes,
            "dropped_events" => &mut self.dropped_events,
            "read_events" => &mut self.read_events,
            _ => return None,
        })
    }
    fn get(&self, key: &str) -> u64 {
        match key {
            "entries" => self.entries,
            "overrun" => self.overrun,
            "commit_overrun" => self.commit_overrun,
            "bytes" => self.bytes,
            "dropped_events" => self.dropped_events,
            "read_events" => self.read_events,
            _ => 0,
        }
    }
    /// Events the ring buffer lost on this CPU, however they were lost.
    pub fn lost(&self) -> u64 {
        self.overrun
            .saturating_add(self.commit_overrun)
            .saturating_add(self.dropped_events)
    }
}

/// Parses the text of tracefs `per_cpu/cpuN/stats` ("entries: 0\noverrun: 0\n..."). The
/// timestamp lines and lines this version does not know are skipped; `entries` and
/// `overrun` (present since the ring buffer's start) must be there, the rest default to 0
/// on kernels without them.
pub fn parse_ring_stats(cpu: u32, text: &[u8]) -> Result<RingStats> {
    let text = utf8(text, "ring stats")?;
    let mut s = RingStats {
        cpu,
        ..RingStats::default()
    };
    let mut seen = [false; RING_KEYS.len()];
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        let line_at = at;
        at += line.len();
        let line = line.trim_end_matches('\n');
        if line.trim().is_empty() {
            continue;
        }
        let Some((raw_key, value)) = line.split_once(':') else {
            return Err(Error::corrupt(
                line_at as u64,
                format!(
                    "ring stats of CPU {cpu}: line {:?} is not \"name: value\"",
                    &line[..line.floor_char_boundary_compat(40)]
                ),
            ));
        };
        let key = raw_key.trim().replace(' ', "_");
        let Some(i) = RING_KEYS.iter().position(|k| *k == key) else {
            continue; // "oldest event ts", "now ts", or something newer
        };
        let vat = line_at + raw_key.len() + 1 + (value.len() - value.trim_start().len());
        *s.field(&key).expect("key from RING_KEYS") = int_at(
            value.trim(),
            vat,
            &format!("ring stats of CPU {cpu}: {key}"),
        )?;
        seen[i] = true;
    }
    for k in ["entries", "overrun"] {
        let i = RING_KEYS.iter().position(|x| *x == k).unwrap_or(0);
        if !seen[i] {
            return Err(Error::corrupt(
                text.len() as u64,
                format!("ring stats of CPU {cpu}: no \"{k}:\" line"),
            ));
        }
    }
    Ok(s)
}

/// `kstate-ring-stats 1`, then `cpu=N entries=N overrun=N commit_overrun=N bytes=N
/// dropped_events=N read_events=N` lines.
pub fn encode_ring_stats(s: &[RingStats]) -> Vec<u8> {
    let mut out = format!("{RING_STATS_MAGIC} {VERSION}\n");
    for s in s {
        out.push_str(&format!("cpu={}", s.cpu));
        for k in RING_KEYS {
            out.push_str(&format!(" {k}={}", s.get(k)));
        }
        out.push('\n');
    }
    out.into_bytes()
}

/// Reads what [`encode_ring_stats`] wrote; unknown `key=value` pairs are skipped, missing
/// counters are 0, a missing `cpu` is an error.
pub fn decode_ring_stats(b: &[u8]) -> Result<Vec<RingStats>> {
    let start = check_version_line(b, RING_STATS_MAGIC)?;
    let text = utf8(b, "ring stats")?;
    let mut out = Vec::new();
    for line in lines(text, start, "ring stats") {
        let (at, line) = line?;
        let mut s = RingStats::default();
        let mut cpu = None;
        let mut pos = at;
        for word in line.split(' ') {
            let wat = pos;
            pos += word.len() + 1;
            let Some((k, v)) = word.split_once('=') else {
                return Err(Error::corrupt(
                    wat as u64,
                    format!(
                        "ring stats section: {:?} is not key=value",
                        &word[..word.floor_char_boundary_compat(40)]
                    ),
                ));
            };
            let vat = wat + k.len() + 1;
            if k == "cpu" {
                if cpu.is_some() {
                    return Err(Error::corrupt(
                        wat as u64,
                        "ring stats section: cpu given twice",
                    ));
                }
                cpu = Some(int_at(v, vat, "ring stats cpu")?);
            } else if let Some(f) = s.field(k) {
                *f = int_at(v, vat, k)?;
            }
        }
        let Some(cpu) = cpu else {
            return Err(Error::corrupt(
                at as u64,
                "ring stats section: line without cpu=",
            ));
        };
        s.cpu = cpu;
        out.push(s);
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------
// SYSINFO

use crate::varint::{put as put_varint, Reader as Cursor};

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// Record tag of a snapshot.
const TAG_SNAPSHOT: u8 = b'S';

/// The values of /proc/meminfo and /proc/vmstat, in file order: meminfo's as
/// `meminfo.NAME` in bytes (its `kB` figures times 1024; unitless ones such as
/// `HugePages_Total` as they are), vmstat's as `vmstat.NAME`. A line that is not
/// `NAME: NUMBER [kB]` (meminfo) or `NAME NUMBER` (vmstat) is an error.
pub fn parse_sysinfo(meminfo: &[u8], vmstat: &[u8]) -> Result<Vec<(String, u64)>> {
    let mut out = Vec::new();
    for (src, text) in [("meminfo", meminfo), ("vmstat", vmstat)] {
        let text = utf8(text, src)?;
        let mut at = 0;
        for line in text.split_inclusive('\n') {
            let line_at = at;
            at += line.len();
            let line = line.trim_end_matches('\n');
            if line.trim().is_empty() {
                continue;
            }
            let bad = || {
                Error::corrupt(
                    line_at as u64,
                    format!(
                        "/proc/{src}: cannot read line {:?}",
                        &line[..line.floor_char_boundary_compat(60)]
                    ),
                )
            };
            let (name, rest) = if src == "meminfo" {
                line.split_once(':').ok_or_else(bad)?
            } else {
                line.split_once(' ').ok_or_else(bad)?
            };
            let mut words = rest.split_whitespace();
            let num: u64 = words.next().and_then(parse_dec).ok_or_else(bad)?;
            let v = match words.next() {
                None => num,
                Some("kB") if src == "meminfo" => num.checked_mul(1024).ok_or_else(bad)?,
                Some(_) => return Err(bad()),
            };
            if words.next().is_some() || name.is_empty() {
                return Err(bad());
            }
            out.push((format!("{src}.{name}"), v));
        }
    }
    Ok(out)
}

/// Streams /proc/meminfo + /proc/vmstat snapshots into any `Write` (the recorder writes a
/// scratch file, then embeds it as the SYSINFO section).
///
/// Snapshot record body (all varints): `zigzag(ts - previous ts)`; `n_changed`, then per
/// changed value `index gap` (index - previous changed index - 1, ascending from 0) and
/// `zigzag(value - previous value)` (wrapping); `n_new`, then per new name `name length`,
/// `name`, `value`; `n_gone`, then per vanished name its `index gap`. Names get indices in
/// order of first appearance. A vanished name that comes back is a change from its last
/// value. Readers ignore bytes after these fields, and skip records of unknown tags.
pub struct SysinfoWriter<W: Write> {
    out: BufWriter<W>,
    header_written: bool,
    snapshots: u64,
    last_ts: u64,
    index: HashMap<String, usize>,
    /// Per index: last value and whether the name was in the latest snapshot.
    values: Vec<(u64, bool)>,
    body: Vec<u8>,
}

impl<W: Write> SysinfoWriter<W> {
    pub fn new(w: W) -> SysinfoWriter<W> {
        SysinfoWriter {
            out: BufWriter::new(w),
            header_written: false,
            snapshots: 0,
            last_ts: 0,
            index: HashMap::new(),
            values: Vec::new(),
            body: Vec::new(),
        }
    }

    fn header(&mut self) -> std::io::Result<()> {
        if !self.header_written {
            self.out
                .write_all(format!("{SYSINFO_MAGIC} {VERSION}\n").as_bytes())?;
            self.header_written = true;
        }
        Ok(())
    }

    /// `ts`: trace-clock ns. `meminfo`/`vmstat`: the raw text of /proc/meminfo and
    /// /proc/vmstat. Text that does not parse is an error of kind `InvalidData`, and
    /// nothing is written for it.
    pub fn snapshot(&mut self, ts: u64, meminfo: &[u8], vmstat: &[u8]) -> std::io::Result<()> {
        let vals = parse_sysinfo(meminfo, vmstat)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string()))?;
        self.header()?;
        // This snapshot's value per index; a name given twice keeps its last value.
        let mut now: Vec<Option<u64>> = vec![None; self.values.len()];
        let mut new: Vec<(String, u64)> = Vec::new();
        let mut new_at: HashMap<String, usize> = HashMap::new();
        for (name, v) in vals {
            if let Some(&i) = self.index.get(&name) {
                now[i] = Some(v);
            } else if let Some(&j) = new_at.get(&name) {
                new[j].1 = v;
            } else {
                new_at.insert(name.clone(), new.len());
                new.push((name, v));
            }
        }
        let mut changed = Vec::new();
        let mut gone = Vec::new();
        for (i, (&(old, present), cur)) in self.values.iter().zip(&now).enumerate() {
            match cur {
                Some(v) if !present || *v != old => changed.push((i, v.wrapping_sub(old))),
                Some(_) => {}
                None if present => gone.push(i),
                None => {}
            }
        }
        let b = &mut self.body;
        b.clear();
        put_varint(b, zigzag(ts.wrapping_sub(self.last_ts) as i64));
        put_varint(b, changed.len() as u64);
        let mut next = 0;
        for &(i, d) in &changed {
            put_varint(b, (i - next) as u64);
            put_varint(b, zigzag(d as i64));
            next = i + 1;
        }
        put_varint(b, new.len() as u64);
        for (name, v) in &new {
            put_varint(b, name.len() as u64);
            b.extend_from_slice(name.as_bytes());
            put_varint(b, *v);
        }
        put_varint(b, gone.len() as u64);
        let mut next = 0;
        for &i in &gone {
            put_varint(b, (i - next) as u64);
            next = i + 1;
        }
        let mut head = vec![TAG_SNAPSHOT];
        put_varint(&mut head, b.len() as u64);
        self.out.write_all(&head)?;
        self.out.write_all(b)?;
        // Only now that it is written does the state move on.
        for (i, cur) in now.iter().enumerate() {
            match cur {
                Some(v) => self.values[i] = (*v, true),
                None => self.values[i].1 = false,
            }
        }
        for (name, v) in new {
            self.index.insert(name, self.values.len());
            self.values.push((v, true));
        }
        self.last_ts = ts;
        self.snapshots += 1;
        Ok(())
    }

    /// Snapshots written so far.
    pub fn snapshots(&self) -> u64 {
        self.snapshots
    }

    /// Flushes and returns the inner writer; the stream is complete (a writer that took no
    /// snapshot still writes the version line).
    pub fn into_inner(mut self) -> std::io::Result<W> {
        self.header()?;
        self.out.into_inner().map_err(|e| e.into_error())
    }
}

/// One snapshot: every value at `ts` (trace-clock ns), in order of the names' first
/// appearance in the stream; names like `meminfo.MemFree` (bytes) and
/// `vmstat.nr_free_pages`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    pub ts: u64,
    pub values: Vec<(String, u64)>,
}

impl Snapshot {
    pub fn get(&self, name: &str) -> Option<u64> {
        self.values.iter().find(|(n, _)| n == name).map(|(_, v)| *v)
    }
}

struct SysinfoDecoder<'a> {
    b: &'a [u8],
    pos: usize,
    started: bool,
    done: bool,
    ts: u64,
    names: Vec<String>,
    known: HashMap<String, usize>,
    values: Vec<(u64, bool)>,
}

impl SysinfoDecoder<'_> {
    fn next_snapshot(&mut self) -> Result<Option<Snapshot>> {
        if !self.started {
            self.pos = check_version_line(self.b, SYSINFO_MAGIC)?;
            self.started = true;
        }
        loop {
            if self.pos >= self.b.len() {
                return Ok(None);
            }
            let rec_at = self.pos;
            let tag = self.b[self.pos];
            let mut c = Cursor::new(self.b, self.pos + 1, self.b.len(), "sysinfo");
            let len = c.varint("record length").map_err(|_| {
                Error::corrupt(
                    rec_at as u64,
                    "sysinfo section: record header cut short (truncated?)",
                )
            })?;
            if len > (self.b.len() - c.pos) as u64 {
                return Err(Error::corrupt(
                    rec_at as u64,
                    format!(
                        "sysinfo section: record of {len} bytes runs past the end ({} left; truncated?)",
                        self.b.len() - c.pos
                    ),
                ));
            }
            c.end = c.pos + len as usize;
            self.pos = c.end;
            if tag == TAG_SNAPSHOT {
                return self.snapshot(c).map(Some);
            }
            // A record of a newer kstate: skipped.
        }
    }

    fn snapshot(&mut self, mut c: Cursor<'_>) -> Result<Snapshot> {
        let dts = unzigzag(c.varint("timestamp delta")?);
        let ts = self.ts.wrapping_add(dts as u64);
        // Changes are checked fully before any is applied, so a bad record leaves no
        // half-updated state behind (the iterator stops at it anyway).
        let n = c.varint("changed count")?;
        let mut changes = Vec::new();
        let mut next: u64 = 0;
        for _ in 0..n {
            let at = c.pos;
            let gap = c.varint("index gap")?;
            let i = next
                .checked_add(gap)
                .filter(|&i| i < self.values.len() as u64);
            let Some(i) = i else {
                return Err(Error::corrupt(
                    at as u64,
                    format!(
                        "sysinfo section: changed value index past the {} names defined",
                        self.values.len()
                    ),
                ));
            };
            let d = unzigzag(c.varint("value delta")?);
            changes.push((i as usize, d));
            next = i + 1;
        }
        let n = c.varint("new name count")?;
        let mut new: Vec<(String, u64)> = Vec::new();
        let mut new_names = std::collections::HashSet::new();
        for _ in 0..n {
            let len = c.varint("name length")?;
            let at = c.pos;
            let name = c.bytes(len, "name")?;
            let name = std::str::from_utf8(name).map_err(|e| {
                Error::corrupt(
                    (at + e.valid_up_to()) as u64,
                    "sysinfo section: name is not UTF-8",
                )
            })?;
            if self.known.contains_key(name) || !new_names.insert(name) {
                return Err(Error::corrupt(
                    at as u64,
                    format!("sysinfo section: name {name:?} defined twice"),
                ));
            }
            let v = c.varint("value")?;
            new.push((name.to_string(), v));
        }
        let n = c.varint("vanished count")?;
        let mut gone = Vec::new();
        let mut next: u64 = 0;
        for _ in 0..n {
            let at = c.pos;
            let gap = c.varint("index gap")?;
            let i = next
                .checked_add(gap)
                .filter(|&i| i < self.values.len() as u64);
            let Some(i) = i else {
                return Err(Error::corrupt(
                    at as u64,
                    format!(
                        "sysinfo section: vanished value index past the {} names defined",
                        self.values.len()
                    ),
                ));
            };
            gone.push(i as usize);
            next = i + 1;
        }
        // Trailing bytes in the body: fields of a newer kstate.
        for (i, d) in changes {
            let e = &mut self.values[i];
            *e = (e.0.wrapping_add(d as u64), true);
        }
        for i in gone {
            self.values[i].1 = false;
        }
        for (name, v) in new {
            self.known.insert(name.clone(), self.names.len());
            self.names.push(name);
            self.values.push((v, true));
        }
        self.ts = ts;
        Ok(Snapshot {
            ts,
            values: self
                .names
                .iter()
                .zip(&self.values)
                .filter(|(_, (_, present))| *present)
                .map(|(n, (v, _))| (n.clone(), *v))
                .collect(),
        })
    }
}

/// Decodes snapshots one at a time, each complete (memory: one snapshot plus the name
/// table). Ends after the first error.
pub fn sysinfo_snapshots(b: &[u8]) -> impl Iterator<Item = Result<Snapshot>> + '_ {
    let mut d = SysinfoDecoder {
        b,
        pos: 0,
        started: false,
        done: false,
        ts: 0,
        names: Vec::new(),
        known: HashMap::new(),
        values: Vec::new(),
    };
    std::iter::from_fn(move || {
        if d.done {
            return None;
        }
        match d.next_snapshot() {
            Ok(Some(s)) => Some(Ok(s)),
            Ok(None) => {
                d.done = true;
                None
            }
            Err(e) => {
                d.done = true;
                Some(Err(e))
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn corrupt_at<T: std::fmt::Debug>(r: Result<T>, offset: u64, needle: &str) {
        let e = r.expect_err("malformed input must not decode");
        assert_eq!(e.kind, ErrorKind::Corrupt, "{e}");
        assert_eq!(e.offset, Some(offset), "{e}");
        assert!(e.msg.contains(needle), "expected {needle:?} in {e}");
    }

    fn sample_recording() -> Recording {
        Recording {
            tool: "kstate 0.1.0".into(),
            command: vec![
                "kstate".into(),
                "record".into(),
                "-e".into(),
                "sched:*".into(),
                String::new(),
                "a b\\n\nc\r\0".into(),
            ],
            workload: vec!["sh".into(), "-c".into(), "echo 'hi there'; sleep 1".into()],
            hostname: "bühne-01".into(),
            clock: "mono".into(),
            wall_offset_ns: Some(-1_700_000_000_123_456_789),
            start_ts: 259_445_106_948_920,
            stop_ts: u64::MAX,
            buffer_kib_per_cpu: 8192,
            events: vec!["sched:sched_switch".into(), "irq:irq_handler_entry".into()],
            missing_events: vec!["foo:bar".into()],
            filters: vec!["sched:sched_switch:prev_pid != 0 && next_comm ~ \"a b\"".into()],
            pids: vec![1, -1, i32::MAX, i32::MIN],
            sysinfo_interval_ms: 100,
            workload_pid: Some(4242),
            cut_short: Some("the disk filled: writing out.dat: No space left\non device".into()),
        }
    }

    #[test]
    fn recording_round_trips() {
        for r in [
            sample_recording(),
            Recording::default(),
            Recording {
                wall_offset_ns: None,
                ..sample_recording()
            },
        ] {
            let b = r.encode();
            assert!(b.starts_with(b"kstate-recording 1\n"));
            assert_eq!(Recording::decode(&b).unwrap(), r);
        }
        // One line per field or element: no raw newline survives in a value.
        let b = sample_recording().encode();
        let text = String::from_utf8(b).unwrap();
        assert!(text.contains("command a b\\\\n\\nc\\r\\0\n"), "{text}");
        assert!(text.contains("wall_offset_ns -1700000000123456789\n"));
    }

    #[test]
    fn recording_skips_unknown_keys_and_defaults_missing_ones() {
        let b = b"kstate-recording 1\ntool kstate 9\nfuture_list a\nfuture_list b\nstart_ts 5\n\
                  future_scalar  x y \n";
        let r = Recording::decode(b).unwrap();
        assert_eq!(
            r,
            Recording {
                tool: "kstate 9".into(),
                start_ts: 5,
                ..Recording::default()
            }
        );
    }

    #[test]
    fn recording_errors_have_offsets() {
        corrupt_at(Recording::decode(b""), 0, "kstate-recording 1");
        corrupt_at(Recording::decode(b"kstate-process 1\n"), 0, "expected");
        corrupt_at(Recording::decode(b"kstate-recording x\n"), 17, "version");
        let e = Recording::decode(b"kstate-recording 2\n").unwrap_err();
        assert_eq!((e.kind, e.offset), (ErrorKind::Unsupported, Some(17)));
        corrupt_at(
            Recording::decode(b"kstate-recording 1\nstart_ts 12x\n"),
            28,
            "start_ts",
        );
        corrupt_at(
            Recording::decode(b"kstate-recording 1\nstart_ts +1\n"),
            28,
            "not a valid integer",
        );
        corrupt_at(
            Recording::decode(b"kstate-recording 1\nstop_ts 99999999999999999999\n"),
            27,
            "stop_ts",
        );
        corrupt_at(
            Recording::decode(b"kstate-recording 1\npids 1\npids 2147483648\n"),
            31,
            "pids",
        );
        corrupt_at(
            Recording::decode(b"kstate-recording 1\ntool a\\qb\n"),
            25,
            "unknown escape",
        );
        corrupt_at(
            Recording::decode(b"kstate-recording 1\ntool ab\\\n"),
            26,
            "backslash at the end",
        );
        corrupt_at(
            Recording::decode(b"kstate-recording 1\ntool a\nclock x"),
            26,
            "no newline",
        );
        corrupt_at(
            Recording::decode(b"kstate-recording 1\ntool\n"),
            19,
            "no space",
        );
        corrupt_at(
            Recording::decode(b"kstate-recording 1\nclock a\nclock b\n"),
            27,
            "clock given twice",
        );
        corrupt_at(
            Recording::decode(b"kstate-recording 1\ntool \xff\n"),
            24,
            "UTF-8",
        );
    }

    /// The process table of this machine, from /proc/PID/stat (comm is between the first
    /// '(' and the last ')', and may hold anything but NUL).
    fn real_processes() -> Vec<Process> {
        let mut out = Vec::new();
        for e in std::fs::read_dir("/proc").unwrap() {
            let e = e.unwrap();
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
                continue;
            };
            let Ok(stat) = std::fs::read(e.path().join("stat")) else {
                continue; // exited meanwhile
            };
            let stat = String::from_utf8_lossy(&stat).into_owned();
            let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
                panic!("unexpected /proc/{pid}/stat: {stat}");
            };
            let comm = stat[open + 1..close].to_string();
            let ppid: i32 = stat[close + 2..]
                .split(' ')
                .nth(1)
                .unwrap()
                .parse()
                .unwrap();
            let status = std::fs::read_to_string(e.path().join("status")).unwrap_or_default();
            let tgid = status
                .lines()
                .find_map(|l| l.strip_prefix("Tgid:"))
                .map(|t| t.trim().parse().unwrap())
                .unwrap_or(pid);
            out.push(Process {
                pid,
                tgid,
                ppid,
                comm,
            });
        }
        out
    }

    #[test]
    fn processes_round_trip() {
        let real = real_processes();
        assert!(real.len() > 3, "{real:?}");
        assert!(real.iter().any(|p| p.pid == std::process::id() as i32));
        let b = encode_processes(&real);
        assert_eq!(decode_processes(&b).unwrap(), real);

        let odd: Vec<Process> = [
            "kworker/0:1H-kb",
            "Web Content",
            " lead and trail ",
            "",
            "new\nline\\x",
            "tab\there\r",
            "ünïcødé😀",
            "(sd-pam)",
        ]
        .iter()
        .enumerate()
        .map(|(i, c)| Process {
            pid: i as i32 + 1,
            tgid: -(i as i32),
            ppid: i32::MAX - i as i32,
            comm: c.to_string(),
        })
        .collect();
        let b = encode_processes(&odd);
        assert_eq!(b.iter().filter(|&&c| c == b'\n').count(), odd.len() + 1);
        assert_eq!(decode_processes(&b).unwrap(), odd);
        assert_eq!(
            decode_processes(&encode_processes(&[])).unwrap(),
            Vec::new()
        );
    }

    #[test]
    fn processes_errors_have_offsets() {
        corrupt_at(decode_processes(b"kstate-processes\n"), 0, "expected");
        corrupt_at(
            decode_processes(b"kstate-processes 1\n1 1 0 init\n2 x 0 kthreadd\n"),
            32,
            "tgid",
        );
        corrupt_at(
            decode_processes(b"kstate-processes 1\n1 1 0 init\n2 2\n"),
            33,
            "before its ppid",
        );
        corrupt_at(
            decode_processes(b"kstate-processes 1\n1 1 0 a\\\n"),
            26,
            "backslash",
        );
        corrupt_at(
            decode_processes(b"kstate-processes 1\n1 1 0 init"),
            19,
            "no newline",
        );
    }

    fn tracefs_stats(cpu: u32) -> Vec<u8> {
        let p = Path::new("/sys/kernel/tracing/per_cpu")
            .join(format!("cpu{cpu}"))
            .join("stats");
        std::fs::read(&p).unwrap_or_else(|e| {
            panic!(
                "{}: {e} (these tests read the real tracefs; run as root with tracefs mounted)",
                p.display()
            )
        })
    }

    /// `name: N` of the stats text, read the plain way.
    fn stat_line(text: &str, name: &str) -> u64 {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{name}:")))
            .unwrap_or_else(|| panic!("no {name} in {text}"))
            .trim()
            .parse()
            .unwrap()
    }

    #[test]
    fn ring_stats_of_this_machine() {
        let cpus = std::fs::read_dir("/sys/kernel/tracing/per_cpu")
            .expect("tracefs at /sys/kernel/tracing")
            .count() as u32;
        assert!(cpus >= 1);
        let mut all = Vec::new();
        for cpu in 0..cpus {
            let raw = tracefs_stats(cpu);
            let text = String::from_utf8(raw.clone()).unwrap();
            assert!(text.contains("oldest event ts:"), "{text}");
            let s = parse_ring_stats(cpu, &raw).unwrap();
            assert_eq!(s.cpu, cpu);
            assert_eq!(s.entries, stat_line(&text, "entries"));
            assert_eq!(s.overrun, stat_line(&text, "overrun"));
            assert_eq!(s.commit_overrun, stat_line(&text, "commit overrun"));
            assert_eq!(s.bytes, stat_line(&text, "bytes"));
            assert_eq!(s.dropped_events, stat_line(&text, "dropped events"));
            assert_eq!(s.read_events, stat_line(&text, "read events"));
            all.push(s);
        }
        let b = encode_ring_stats(&all);
        assert_eq!(decode_ring_stats(&b).unwrap(), all);
    }

    #[test]
    fn ring_stats_parse_and_round_trip() {
        // A kernel from before "dropped events" and "read events" (3.9).
        let old = b"entries: 12\noverrun: 3\ncommit overrun: 1\nbytes: 4096\n\
                    oldest event ts:  1234.000001\nnow ts:  1240.123456\n";
        let s = parse_ring_stats(7, old).unwrap();
        assert_eq!(
            s,
            RingStats {
                cpu: 7,
                entries: 12,
                overrun: 3,
                commit_overrun: 1,
                bytes: 4096,
                dropped_events: 0,
                read_events: 0
            }
        );
        assert_eq!(s.lost(), 4);
        let many = vec![
            s,
            RingStats {
                cpu: 0,
                entries: u64::MAX,
                ..RingStats::default()
            },
        ];
        assert_eq!(decode_ring_stats(&encode_ring_stats(&many)).unwrap(), many);
        // Forward compatibility: unknown pairs skipped, missing counters 0.
        assert_eq!(
            decode_ring_stats(b"kstate-ring-stats 1\noverrun=5 cpu=3 future=x=y\n").unwrap(),
            vec![RingStats {
                cpu: 3,
                overrun: 5,
                ..RingStats::default()
            }]
        );
    }

    #[test]
    fn ring_stats_errors_have_offsets() {
        corrupt_at(
            parse_ring_stats(0, b"entries: 1\noverrun: x\n"),
            20,
            "overrun",
        );
        corrupt_at(parse_ring_stats(0, b"entries: 1\n"), 11, "no \"overrun:\"");
        corrupt_at(
            parse_ring_stats(0, b"entries: 1\ngarbage\n"),
            11,
            "not \"name: value\"",
        );
        corrupt_at(parse_ring_stats(0, b"entries: \xff\n"), 9, "UTF-8");
        corrupt_at(
            decode_ring_stats(b"kstate-ring-stats 1\ncpu=0 overrun=1\nentries=2\n"),
            36,
            "without cpu",
        );
        corrupt_at(
            decode_ring_stats(b"kstate-ring-stats 1\ncpu=0 overrun=-1\n"),
            34,
            "overrun",
        );
        corrupt_at(
            decode_ring_stats(b"kstate-ring-stats 1\ncpu=0  overrun=1\n"),
            26,
            "key=value",
        );
        corrupt_at(
            decode_ring_stats(b"kstate-ring-stats 1\ncpu=0 cpu=1\n"),
            26,
            "twice",
        );
    }

    fn read_proc(name: &str) -> Vec<u8> {
        std::fs::read(Path::new("/proc").join(name)).unwrap()
    }

    #[test]
    fn sysinfo_parses_this_machine() {
        let meminfo = read_proc("meminfo");
        let vmstat = read_proc("vmstat");
        let v = parse_sysinfo(&meminfo, &vmstat).unwrap();
        let mtext = String::from_utf8(meminfo).unwrap();
        let vtext = String::from_utf8(vmstat).unwrap();
        assert_eq!(v.len(), mtext.lines().count() + vtext.lines().count());
        let get = |n: &str| v.iter().find(|(k, _)| k == n).map(|(_, x)| *x);
        // MemTotal does not change while the machine runs: compare with the text.
        let total_kb: u64 = mtext
            .lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .unwrap()
            .trim()
            .strip_suffix(" kB")
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert_eq!(get("meminfo.MemTotal"), Some(total_kb * 1024));
        assert!(get("meminfo.HugePages_Total").is_some());
        assert!(get("vmstat.nr_free_pages").unwrap() > 0);
        assert!(v[0].0.starts_with("meminfo."));
        assert!(v.last().unwrap().0.starts_with("vmstat."));
    }

    #[test]
    fn sysinfo_deltas_rebuild_real_snapshots_exactly() {
        let mut expected = Vec::new();
        let mut w = SysinfoWriter::new(Vec::new());
        let t0 = std::time::Instant::now();
        let mut sizes = Vec::new();
        for i in 0..6 {
            if i > 0 {
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            // Churn some memory so values move between snapshots.
            let churn = vec![i as u8; 4 << 20];
            std::hint::black_box(&churn);
            let (m, v) = (read_proc("meminfo"), read_proc("vmstat"));
            let ts = 1_000_000_000 + t0.elapsed().as_nanos() as u64;
            expected.push(Snapshot {
                ts,
                values: parse_sysinfo(&m, &v).unwrap(),
            });
            w.snapshot(ts, &m, &v).unwrap();
            sizes.push(w.out.get_ref().len() + w.out.buffer().len());
        }
        assert_eq!(w.snapshots(), 6);
        let b = w.into_inner().unwrap();
        let got: Vec<Snapshot> = sysinfo_snapshots(&b).collect::<Result<_>>().unwrap();
        assert_eq!(got, expected);
        // Something did change, and only changes were stored.
        assert!(expected.windows(2).any(|p| p[0].values != p[1].values));
        let first = sizes[0];
        for p in sizes.windows(2) {
            let rec = p[1] - p[0];
            assert!(
                rec * 3 < first,
                "record of {rec} bytes after a first of {first}"
            );
        }
    }

    #[test]
    fn sysinfo_names_come_and_go() {
        let mut w = SysinfoWriter::new(Vec::new());
        let steps: [(u64, &[u8], &[u8]); 6] = [
            (
                100,
                b"MemFree: 10 kB\nHugePages_Total: 0\n",
                b"a 1\nb 18446744073709551615\n",
            ),
            (50, b"MemFree: 10 kB\nHugePages_Total: 0\n", b"a 1\nb 0\n"), // ts backwards, wrap
            (60, b"MemFree: 11 kB\n", b"a 1\nb 0\nc 7\n"),                // one gone, one new
            (70, b"MemFree: 11 kB\nHugePages_Total: 0\n", b"c 7\nb 0\n"), // back, a gone, reorder
            (70, b"", b""),                                               // everything gone
            (u64::MAX, b"HugePages_Total: 0\n", b"a 5\na 6\n"),           // twice: the last wins
        ];
        for (ts, m, v) in steps {
            w.snapshot(ts, m, v).unwrap();
        }
        let b = w.into_inner().unwrap();
        let got: Vec<Snapshot> = sysinfo_snapshots(&b).collect::<Result<_>>().unwrap();
        let vals = |s: &Snapshot| {
            s.values
                .iter()
                .map(|(n, v)| format!("{n}={v}"))
                .collect::<Vec<_>>()
                .join(" ")
        };
        let want = [
            "meminfo.MemFree=10240 meminfo.HugePages_Total=0 vmstat.a=1 vmstat.b=18446744073709551615",
            "meminfo.MemFree=10240 meminfo.HugePages_Total=0 vmstat.a=1 vmstat.b=0",
            "meminfo.MemFree=11264 vmstat.a=1 vmstat.b=0 vmstat.c=7",
            "meminfo.MemFree=11264 meminfo.HugePages_Total=0 vmstat.b=0 vmstat.c=7",
            "",
            "meminfo.HugePages_Total=0 vmstat.a=6",
        ];
        assert_eq!(got.len(), want.len());
        for ((g, w), (ts, _, _)) in got.iter().zip(want).zip(steps) {
            assert_eq!(vals(g), w);
            assert_eq!(g.ts, ts);
        }
        assert_eq!(got[5].get("vmstat.a"), Some(6));
        // No snapshot: just the version line, which decodes to nothing.
        let empty = SysinfoWriter::new(Vec::new()).into_inner().unwrap();
        assert_eq!(empty, b"kstate-sysinfo 1\n");
        assert_eq!(sysinfo_snapshots(&empty).count(), 0);
    }

    #[test]
    fn sysinfo_bad_text_is_refused_and_nothing_written() {
        let mut w = SysinfoWriter::new(Vec::new());
        w.snapshot(1, b"MemFree: 1 kB\n", b"x 1\n").unwrap();
        for (m, v) in [
            (&b"MemFree 1 kB\n"[..], &b""[..]),
            (b"MemFree: 1 MB\n", b""),
            (b"MemFree: -1 kB\n", b""),
            (b"", b"x 1 2\n"),
            (b"", b"x\n"),
            (b"MemFree: 18446744073709551615 kB\n", b""),
        ] {
            let e = w.snapshot(2, m, v).unwrap_err();
            assert_eq!(e.kind(), std::io::ErrorKind::InvalidData, "{m:?} {v:?}");
        }
        assert_eq!(w.snapshots(), 1);
        let b = w.into_inner().unwrap();
        assert_eq!(sysinfo_snapshots(&b).count(), 1);
    }

    /// A stream cut anywhere decodes the whole records before the cut, then (unless the cut
    /// is on a record boundary) fails at the cut record; never a panic.
    #[test]
    fn sysinfo_cut_anywhere() {
        let mut w = SysinfoWriter::new(Vec::new());
        let mut bounds = vec![];
        for i in 0..4u64 {
            w.snapshot(i * 10, format!("A: {i} kB\n").as_bytes(), b"b 2\n")
                .unwrap();
            w.out.flush().unwrap();
            bounds.push(w.out.get_ref().len());
        }
        let b = w.into_inner().unwrap();
        let header = b"kstate-sysinfo 1\n".len();
        for cut in 0..b.len() {
            let items: Vec<Result<Snapshot>> = sysinfo_snapshots(&b[..cut]).collect();
            let whole = bounds.iter().filter(|&&e| e <= cut).count();
            if cut < header {
                assert_eq!(items.len(), 1);
                assert!(items[0].is_err());
                continue;
            }
            let oks = items.iter().filter(|r| r.is_ok()).count();
            assert_eq!(oks, whole, "cut at {cut}");
            let on_boundary = cut == header || bounds.contains(&cut);
            assert_eq!(
                items.len(),
                whole + usize::from(!on_boundary),
                "cut at {cut}"
            );
            if let Some(Err(e)) = items.last() {
                let start = bounds
                    .iter()
                    .rev()
                    .find(|&&e| e <= cut)
                    .copied()
                    .unwrap_or(header);
                assert_eq!(e.offset, Some(start as u64), "cut at {cut}: {e}");
                assert_eq!(e.kind, ErrorKind::Corrupt);
            }
        }
    }

    #[test]
    fn sysinfo_errors_have_offsets() {
        let h = b"kstate-sysinfo 1\n".to_vec();
        let with = |rest: &[u8]| [&h[..], rest].concat();
        let first = |b: &[u8]| sysinfo_snapshots(b).find_map(|r| r.err());
        let err = |b: Vec<u8>, off: u64, needle: &str| {
            let e = first(&b).expect("an error");
            assert_eq!((e.kind, e.offset), (ErrorKind::Corrupt, Some(off)), "{e}");
            assert!(e.msg.contains(needle), "expected {needle:?} in {e}");
        };
        err(b"kstate-sysinfo\n".to_vec(), 0, "expected");
        err(with(b"S\x05\x00\x00"), 17, "runs past the end");
        // A change to index 0 when no name exists yet.
        err(
            with(b"S\x05\x00\x01\x00\x02\x00"),
            21,
            "index past the 0 names",
        );
        // An 11-byte varint.
        err(
            with(b"S\x0b\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"),
            19,
            "more than 64 bits",
        );
        err(with(b"S\x80"), 17, "record header cut short");
        // A name of 9 bytes in a record that has 2 left.
        err(with(b"S\x05\x00\x00\x01\x09ab"), 23, "name of 9 bytes");
        err(with(b"S\x06\x00\x00\x01\x01\xffx\x00"), 23, "not UTF-8");
        err(
            with(b"S\x0a\x00\x00\x02\x01a\x00\x01a\x00\x00"),
            26,
            "defined twice",
        );
        // Vanished index 1 with one name defined.
        err(
            with(b"S\x07\x00\x00\x01\x01a\x00\x00S\x05\x00\x00\x00\x01\x01"),
            32,
            "vanished value index",
        );
        // Unknown record tags and trailing body bytes are skipped.
        let ok = with(b"X\x03abcS\x08\x02\x00\x01\x01a\x07\x00\xeeS\x04\x00\x00\x00\x00");
        let got: Vec<Snapshot> = sysinfo_snapshots(&ok).collect::<Result<_>>().unwrap();
        let one = vec![("a".to_string(), 7)];
        assert_eq!(
            got,
            vec![
                Snapshot {
                    ts: 1,
                    values: one.clone()
                },
                Snapshot { ts: 1, values: one },
            ]
        );
    }

    #[test]
    fn varints_round_trip() {
        for v in [0, 1, 127, 128, 300, u32::MAX as u64, u64::MAX - 1, u64::MAX] {
            let mut b = Vec::new();
            put_varint(&mut b, v);
            let mut c = Cursor::new(&b, 0, b.len(), "sysinfo");
            assert_eq!(c.varint("v").unwrap(), v);
            assert_eq!(c.pos, b.len());
        }
        for v in [0i64, 1, -1, i64::MAX, i64::MIN, 12345, -12345] {
            assert_eq!(unzigzag(zigzag(v)), v);
        }
    }
}
