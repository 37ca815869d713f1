//! kstate's SAMPLES section (`extras::ids::SAMPLES`): CPU samples with call chains, taken
//! through `perf_event_open` while tracing, on the trace clock.
//!
//! The payload is what the recorder copied out of the kernel's perf ring buffers, unparsed,
//! plus what is needed to parse it:
//!
//! ```text
//! "kstate-samples 1\n"
//! records: TAG u8, LEN varint, BODY[LEN]
//!   'H' header (first):  endian u8 (0 little, 1 big), clock (varint length + UTF-8),
//!                        event name (varint length + UTF-8),
//!                        perf_event_attr (varint length + the bytes given to the kernel)
//!   'M' maps at start:   perf records (MMAP2, COMM) the recorder made from /proc/PID/maps
//!                        of the processes that already ran, as perf does
//!   'R' ring data:       varint CPU, then whole perf records as the kernel wrote them
//!   'E' another event:   event name (varint length + UTF-8), perf_event_attr (varint
//!                        length + bytes); the n-th 'E' is event n, the header's event 0
//!   'S' its ring data:   varint event (>= 1, after its 'E'), varint CPU, perf records
//! ```
//!
//! Event 0's rings carry the side-band records (MMAP2, COMM, FORK) for all events; the
//! others only samples. Files from before 'E'/'S' are the one-event case, and a kstate
//! from before them reads event 0 of a newer file. Unknown tags are skipped (later
//! additions). Perf records are `struct perf_event_header`
//! (u32 type, u16 misc, u16 size) and a body; [`parse_record`] reads the ones a profile
//! needs according to the attr's `sample_type`. Decoders never panic: malformed input is
//! an error of kind `Corrupt` with the payload offset.

use crate::error::{Error, ErrorKind, Result};
use crate::fxmap::{FxMap, FxSet};
use crate::Endian;

/// Reads from the start of a slice that the caller has checked is long enough.
trait Rd {
    fn r16(self, b: &[u8]) -> u16;
    fn r32(self, b: &[u8]) -> u32;
    fn r64(self, b: &[u8]) -> u64;
}

impl Rd for Endian {
    fn r16(self, b: &[u8]) -> u16 {
        self.u16([b[0], b[1]])
    }
    fn r32(self, b: &[u8]) -> u32 {
        self.u32([b[0], b[1], b[2], b[3]])
    }
    fn r64(self, b: &[u8]) -> u64 {
        let mut a = [0u8; 8];
        a.copy_from_slice(&b[..8]);
        self.u64(a)
    }
}

pub const MAGIC: &str = "kstate-samples";
pub const VERSION: u32 = 1;

pub const TAG_HEADER: u8 = b'H';
pub const TAG_MAPS: u8 = b'M';
pub const TAG_RING: u8 = b'R';
pub const TAG_EVENT: u8 = b'E';
pub const TAG_EVENT_RING: u8 = b'S';

/// `perf_event_attr.type`
pub mod event_type {
    pub const HARDWARE: u32 = 0;
    pub const SOFTWARE: u32 = 1;
    pub const TRACEPOINT: u32 = 2;
    pub const HW_CACHE: u32 = 3;
}

/// `perf_event_attr.sample_type` bits.
pub mod sample {
    pub const IP: u64 = 1 << 0;
    pub const TID: u64 = 1 << 1;
    pub const TIME: u64 = 1 << 2;
    pub const ADDR: u64 = 1 << 3;
    pub const READ: u64 = 1 << 4;
    pub const CALLCHAIN: u64 = 1 << 5;
    pub const ID: u64 = 1 << 6;
    pub const CPU: u64 = 1 << 7;
    pub const PERIOD: u64 = 1 << 8;
    pub const STREAM_ID: u64 = 1 << 9;
    pub const RAW: u64 = 1 << 10;
    pub const BRANCH_STACK: u64 = 1 << 11;
    /// The user registers named by `sample_regs_user`, at the sample.
    pub const REGS_USER: u64 = 1 << 12;
    /// A copy of `sample_stack_user` bytes of the user stack from its pointer up.
    pub const STACK_USER: u64 = 1 << 13;
    pub const IDENTIFIER: u64 = 1 << 16;
}

/// Bits of the attr's flag word (offset 40).
pub mod flag {
    pub const DISABLED: u64 = 1 << 0;
    pub const INHERIT: u64 = 1 << 1;
    pub const MMAP: u64 = 1 << 8;
    pub const COMM: u64 = 1 << 9;
    pub const FREQ: u64 = 1 << 10;
    pub const TASK: u64 = 1 << 13;
    pub const WATERMARK: u64 = 1 << 14;
    pub const SAMPLE_ID_ALL: u64 = 1 << 18;
    pub const EXCLUDE_CALLCHAIN_KERNEL: u64 = 1 << 21;
    pub const EXCLUDE_CALLCHAIN_USER: u64 = 1 << 22;
    pub const MMAP2: u64 = 1 << 23;
    pub const COMM_EXEC: u64 = 1 << 24;
    pub const USE_CLOCKID: u64 = 1 << 25;
    pub const BUILD_ID: u64 = 1 << 34;
}

/// `perf_event_header.type`
pub mod record {
    pub const MMAP: u32 = 1;
    pub const LOST: u32 = 2;
    pub const COMM: u32 = 3;
    pub const EXIT: u32 = 4;
    pub const THROTTLE: u32 = 5;
    pub const FORK: u32 = 7;
    pub const SAMPLE: u32 = 9;
    pub const MMAP2: u32 = 10;
    pub const LOST_SAMPLES: u32 = 13;
}

pub const MISC_CPUMODE_MASK: u16 = 7;
pub const MISC_KERNEL: u16 = 1;
pub const MISC_USER: u16 = 2;
pub const MISC_COMM_EXEC: u16 = 1 << 13;
pub const MISC_MMAP_BUILD_ID: u16 = 1 << 14;
/// A LOST_SAMPLES record from perf's BPF counters (`perf record --off-cpu`), not the kernel.
pub const MISC_LOST_SAMPLES_BPF: u16 = 1 << 15;

/// Call-chain context markers (`PERF_CONTEXT_*`): entries at or above this are markers.
pub const CONTEXT_MAX: u64 = -4095i64 as u64;
pub const CONTEXT_KERNEL: u64 = -128i64 as u64;
pub const CONTEXT_USER: u64 = -512i64 as u64;

/// The size of `perf_event_attr` this recorder passes (PERF_ATTR_SIZE_VER8).
pub const ATTR_SIZE: usize = 136;

/// The fields of `perf_event_attr` kstate sets or reads, at their kernel offsets.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Attr {
    pub type_: u32,
    pub config: u64,
    /// Period, or frequency in Hz when `flags` has [`flag::FREQ`].
    pub period_or_freq: u64,
    pub sample_type: u64,
    pub flags: u64,
    pub wakeup_watermark: u32,
    pub clockid: i32,
    pub sample_max_stack: u16,
    /// Which user registers a sample carries (bits of [`regs`]).
    pub sample_regs_user: u64,
    /// How many bytes of user stack a sample copies.
    pub sample_stack_user: u32,
}

/// x86_64 `perf_event_x86_regs` bits: the registers an unwinder needs.
pub mod regs {
    pub const BP: u32 = 6;
    pub const SP: u32 = 7;
    pub const IP: u32 = 8;
    /// BP, SP and IP: what a CFI or frame-pointer walk starts from.
    pub const UNWIND_MASK: u64 = 1 << BP | 1 << SP | 1 << IP;
}

impl Attr {
    /// The kernel's struct, native byte order, [`ATTR_SIZE`] bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut b = vec![0u8; ATTR_SIZE];
        b[0..4].copy_from_slice(&self.type_.to_ne_bytes());
        b[4..8].copy_from_slice(&(ATTR_SIZE as u32).to_ne_bytes());
        b[8..16].copy_from_slice(&self.config.to_ne_bytes());
        b[16..24].copy_from_slice(&self.period_or_freq.to_ne_bytes());
        b[24..32].copy_from_slice(&self.sample_type.to_ne_bytes());
        b[40..48].copy_from_slice(&self.flags.to_ne_bytes());
        b[48..52].copy_from_slice(&self.wakeup_watermark.to_ne_bytes());
        b[80..88].copy_from_slice(&self.sample_regs_user.to_ne_bytes());
        b[88..92].copy_from_slice(&self.sample_stack_user.to_ne_bytes());
        b[92..96].copy_from_slice(&self.clockid.to_ne_bytes());
        b[108..110].copy_from_slice(&self.sample_max_stack.to_ne_bytes());
        b
    }

    /// Reads the fields back from a stored attr of any size the kernel has used (64 bytes
    /// and up); fields past its end read as 0.
    pub fn from_bytes(b: &[u8], endian: Endian) -> Result<Attr> {
        if b.len() < 64 {
            return Err(Error::corrupt(
                0,
                format!(
                    "samples section: perf_event_attr of {} bytes (at least 64)",
                    b.len()
                ),
            ));
        }
        let u32_at = |o: usize| b.get(o..o + 4).map_or(0, |s| endian.r32(s));
        let u64_at = |o: usize| b.get(o..o + 8).map_or(0, |s| endian.r64(s));
        Ok(Attr {
            type_: u32_at(0),
            config: u64_at(8),
            period_or_freq: u64_at(16),
            sample_type: u64_at(24),
            flags: u64_at(40),
            wakeup_watermark: u32_at(48),
            clockid: u32_at(92) as i32,
            sample_max_stack: b.get(108..110).map_or(0, |s| endian.r16(s)),
            sample_regs_user: u64_at(80),
            sample_stack_user: u32_at(88),
        })
    }

    pub fn freq(&self) -> Option<u64> {
        (self.flags & flag::FREQ != 0).then_some(self.period_or_freq)
    }
}

// ---------------------------------------------------------------------------------------
// Writing (the recorder streams this into a scratch file, then embeds it whole).

pub use crate::varint::put as put_varint;

/// The version line and the 'H' record.
pub fn encode_header(clock: &str, event: &str, attr: &[u8]) -> Vec<u8> {
    let mut body = Vec::new();
    body.push(if cfg!(target_endian = "big") { 1 } else { 0 });
    for s in [clock.as_bytes(), event.as_bytes(), attr] {
        put_varint(&mut body, s.len() as u64);
        body.extend_from_slice(s);
    }
    let mut out = format!("{MAGIC} {VERSION}\n").into_bytes();
    out.extend(record_head(TAG_HEADER, body.len()));
    out.extend(body);
    out
}

/// `TAG, varint LEN` for a record whose body is `len` bytes.
pub fn record_head(tag: u8, len: usize) -> Vec<u8> {
    let mut h = vec![tag];
    put_varint(&mut h, len as u64);
    h
}

/// The 'E' record of an event after the first (the header's).
pub fn encode_event(event: &str, attr: &[u8]) -> Vec<u8> {
    let mut body = Vec::new();
    for s in [event.as_bytes(), attr] {
        put_varint(&mut body, s.len() as u64);
        body.extend_from_slice(s);
    }
    let mut out = record_head(TAG_EVENT, body.len());
    out.extend(body);
    out
}

/// The head of a record holding `len` bytes of event `event`'s ring on CPU `cpu` ('R'
/// for event 0, 'S' for the others): write it, then the bytes.
pub fn ring_head(event: u32, cpu: u32, len: usize) -> Vec<u8> {
    let mut c = Vec::new();
    if event > 0 {
        put_varint(&mut c, event as u64);
    }
    put_varint(&mut c, cpu as u64);
    let tag = if event > 0 { TAG_EVENT_RING } else { TAG_RING };
    let mut h = record_head(tag, c.len() + len);
    h.extend(c);
    h
}

/// A synthesized PERF_RECORD_MMAP2 for an existing mapping (the 'M' record's content),
/// with the build id when known, and a sample_id trailer for `sample_type` (time 0).
#[allow(clippy::too_many_arguments)]
pub fn synth_mmap2(
    sample_type: u64,
    pid: u32,
    start: u64,
    len: u64,
    pgoff: u64,
    prot: u32,
    build_id: Option<&[u8]>,
    path: &str,
) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend(pid.to_ne_bytes());
    b.extend(pid.to_ne_bytes());
    b.extend(start.to_ne_bytes());
    b.extend(len.to_ne_bytes());
    b.extend(pgoff.to_ne_bytes());
    let mut misc = MISC_USER;
    match build_id {
        Some(id) if id.len() <= 20 => {
            misc |= MISC_MMAP_BUILD_ID;
            let mut u = [0u8; 24];
            u[0] = id.len() as u8;
            u[4..4 + id.len()].copy_from_slice(id);
            b.extend(u);
        }
        _ => b.extend([0u8; 24]),
    }
    b.extend(prot.to_ne_bytes());
    b.extend(2u32.to_ne_bytes()); // MAP_PRIVATE
    b.extend(path.as_bytes());
    b.push(0);
    while b.len() % 8 != 0 {
        b.push(0);
    }
    b.extend(sample_id(sample_type, pid, 0));
    with_header(record::MMAP2, misc, b)
}

/// A synthesized PERF_RECORD_COMM (time 0).
pub fn synth_comm(sample_type: u64, pid: u32, tid: u32, comm: &str) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend(pid.to_ne_bytes());
    b.extend(tid.to_ne_bytes());
    b.extend(comm.as_bytes());
    b.push(0);
    while b.len() % 8 != 0 {
        b.push(0);
    }
    b.extend(sample_id(sample_type, tid, pid));
    with_header(record::COMM, MISC_USER, b)
}

fn sample_id(sample_type: u64, pid: u32, tid: u32) -> Vec<u8> {
    let tid = if tid == 0 { pid } else { tid };
    let mut b = Vec::new();
    if sample_type & sample::TID != 0 {
        b.extend(pid.to_ne_bytes());
        b.extend(tid.to_ne_bytes());
    }
    for bit in [sample::TIME, sample::ID, sample::STREAM_ID, sample::CPU] {
        if sample_type & bit != 0 {
            b.extend(0u64.to_ne_bytes());
        }
    }
    if sample_type & sample::IDENTIFIER != 0 {
        b.extend(0u64.to_ne_bytes());
    }
    b
}

fn with_header(ty: u32, misc: u16, body: Vec<u8>) -> Vec<u8> {
    let mut r = Vec::with_capacity(8 + body.len());
    r.extend(ty.to_ne_bytes());
    r.extend(misc.to_ne_bytes());
    r.extend(((8 + body.len()) as u16).to_ne_bytes());
    r.extend(body);
    r
}

// ---------------------------------------------------------------------------------------
// Reading.

/// The 'H' record, or an 'E' record with the header's endian and clock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    pub endian: Endian,
    pub clock: String,
    pub event: String,
    pub attr_bytes: Vec<u8>,
    pub attr: Attr,
}

/// Where a run of perf records came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// Made by the recorder from /proc at the start.
    Maps,
    /// Copied from this CPU's ring.
    Cpu(u32),
}

/// One run of perf records and its offset in the payload.
#[derive(Debug, Clone, Copy)]
pub struct Chunk<'a> {
    /// Index into [`Samples::events`] (0 for the maps).
    pub event: usize,
    pub source: Source,
    pub offset: usize,
    pub data: &'a [u8],
}

/// A decoded SAMPLES payload: the sampled events (never empty; the first is the 'H'
/// record's) and the record runs, in file order.
#[derive(Debug, Clone)]
pub struct Samples<'a> {
    pub events: Vec<Header>,
    pub chunks: Vec<Chunk<'a>>,
}

impl Samples<'_> {
    /// The first event's header (the only one in older files).
    pub fn header(&self) -> &Header {
        &self.events[0]
    }
    /// The header that describes a chunk's records.
    pub fn header_of(&self, ch: &Chunk<'_>) -> &Header {
        &self.events[ch.event]
    }
}

/// Splits a SAMPLES payload into its header and record runs (the records themselves are
/// read by [`Samples::records`]).
pub fn decode(b: &[u8]) -> Result<Samples<'_>> {
    let line_end = b
        .iter()
        .position(|&c| c == b'\n')
        .ok_or_else(|| Error::corrupt(0, format!("no \"{MAGIC} {VERSION}\" line at the start")))?;
    let line = &b[..line_end];
    let ver = line
        .strip_prefix(MAGIC.as_bytes())
        .and_then(|r| r.strip_prefix(b" "))
        .ok_or_else(|| {
            Error::corrupt(
                0,
                format!(
                    "expected \"{MAGIC} {VERSION}\" at the start, found {:?}",
                    String::from_utf8_lossy(&line[..line.len().min(40)])
                ),
            )
        })?;
    let at = (MAGIC.len() + 1) as u64;
    let ver: u32 = std::str::from_utf8(ver)
        .ok()
        .filter(|s| !s.is_empty() && s.bytes().all(|c| c.is_ascii_digit()))
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| Error::corrupt(at, format!("{MAGIC}: version is not a number")))?;
    if ver != VERSION {
        return Err(Error::new(
            ErrorKind::Unsupported,
            Some(at),
            format!("{MAGIC} version {ver}; this kstate reads version {VERSION}"),
        ));
    }
    let mut pos = line_end + 1;
    let mut events: Vec<Header> = Vec::new();
    let mut chunks = Vec::new();
    while pos < b.len() {
        let rec_at = pos;
        let tag = b[pos];
        let mut c = crate::varint::Reader::new(b, pos + 1, b.len(), "samples");
        let len = c.varint("record length")?;
        if len > (b.len() - c.pos) as u64 {
            return Err(Error::corrupt(
                rec_at as u64,
                format!(
                    "samples section: record of {len} bytes runs past the end ({} left; truncated?)",
                    b.len() - c.pos
                ),
            ));
        }
        c.end = c.pos + len as usize;
        pos = c.end;
        match tag {
            TAG_HEADER => {
                if !events.is_empty() {
                    return Err(Error::corrupt(
                        rec_at as u64,
                        "samples section: second header",
                    ));
                }
                let endian = match c.bytes(1, "endian")?[0] {
                    0 => Endian::Little,
                    1 => Endian::Big,
                    e => {
                        return Err(Error::corrupt(
                            (c.pos - 1) as u64,
                            format!("samples section: endian byte {e}"),
                        ))
                    }
                };
                let clock = c.text("clock")?;
                let (event, attr_bytes, attr) = event_and_attr(&mut c, endian)?;
                events.push(Header {
                    endian,
                    clock,
                    event,
                    attr_bytes,
                    attr,
                });
            }
            TAG_EVENT => {
                let Some(first) = events.first() else {
                    return Err(Error::corrupt(
                        rec_at as u64,
                        "samples section: event record before the header",
                    ));
                };
                let (endian, clock) = (first.endian, first.clock.clone());
                let (event, attr_bytes, attr) = event_and_attr(&mut c, endian)?;
                events.push(Header {
                    endian,
                    clock,
                    event,
                    attr_bytes,
                    attr,
                });
            }
            TAG_MAPS | TAG_RING | TAG_EVENT_RING => {
                if events.is_empty() {
                    return Err(Error::corrupt(
                        rec_at as u64,
                        "samples section: records before the header",
                    ));
                }
                let mut event = 0;
                if tag == TAG_EVENT_RING {
                    let n = c.varint("event")?;
                    if n == 0 || n >= events.len() as u64 {
                        return Err(Error::corrupt(
                            rec_at as u64,
                            format!(
                                "samples section: ring data of event {n}, but {} events are described before it",
                                events.len()
                            ),
                        ));
                    }
                    event = n as usize;
                }
                let source = if tag == TAG_MAPS {
                    Source::Maps
                } else {
                    let cpu = c.varint("CPU")?;
                    Source::Cpu(u32::try_from(cpu).map_err(|_| {
                        Error::corrupt(rec_at as u64, format!("samples section: CPU {cpu}"))
                    })?)
                };
                let offset = c.pos;
                chunks.push(Chunk {
                    event,
                    source,
                    offset,
                    data: &b[c.pos..c.end],
                });
            }
            _ => {} // a newer kstate's record
        }
    }
    if events.is_empty() {
        return Err(Error::corrupt(
            (line_end + 1) as u64,
            "samples section: no header record",
        ));
    }
    Ok(Samples { events, chunks })
}

/// An event's name and attr ('H' and 'E' records).
fn event_and_attr(
    c: &mut crate::varint::Reader<'_>,
    endian: Endian,
) -> Result<(String, Vec<u8>, Attr)> {
    let event = c.text("event name")?;
    let n = c.varint("attr length")?;
    let attr_at = c.pos;
    let attr_bytes = c.bytes(n, "attr")?.to_vec();
    let attr = Attr::from_bytes(&attr_bytes, endian).map_err(|e| e.shifted(attr_at as u64))?;
    Ok((event, attr_bytes, attr))
}

/// One perf record, as much as a profile uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PerfRecord {
    Sample(SampleRec),
    Mmap2(Mmap2Rec),
    Comm {
        pid: u32,
        tid: u32,
        comm: String,
        exec: bool,
        time: u64,
    },
    Fork {
        pid: u32,
        ppid: u32,
        tid: u32,
        /// The thread that forked.
        ptid: u32,
        time: u64,
    },
    Exit {
        pid: u32,
        tid: u32,
        time: u64,
    },
    /// Records the kernel dropped (PERF_RECORD_LOST, PERF_RECORD_LOST_SAMPLES).
    Lost {
        lost: u64,
    },
    Throttle,
    Other(u32),
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SampleRec {
    pub misc: u16,
    pub ip: u64,
    pub pid: u32,
    pub tid: u32,
    pub time: u64,
    pub cpu: u32,
    pub period: u64,
    /// With context markers (>= [`CONTEXT_MAX`]) as the kernel wrote them.
    pub callchain: Vec<u64>,
    /// The user registers of `sample_regs_user`, lowest bit first; empty when the sample
    /// has none (a kernel thread, or the attr asked for none).
    pub user_regs: Vec<u64>,
    /// The copied user stack, from the stack pointer up: only the bytes the kernel could
    /// copy (its `dyn_size`), so a read past the end is a stack copy cut short.
    pub user_stack: Vec<u8>,
}

impl SampleRec {
    /// The user register `reg` (a [`regs`] number) with `mask` the attr's
    /// `sample_regs_user`.
    pub fn user_reg(&self, mask: u64, reg: u32) -> Option<u64> {
        if mask & (1 << reg) == 0 {
            return None;
        }
        let i = (mask & ((1u64 << reg) - 1)).count_ones() as usize;
        self.user_regs.get(i).copied()
    }
}

impl SampleRec {
    pub fn is_kernel(&self) -> bool {
        self.misc & MISC_CPUMODE_MASK == MISC_KERNEL
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Mmap2Rec {
    pub pid: u32,
    pub tid: u32,
    pub start: u64,
    pub len: u64,
    pub pgoff: u64,
    pub build_id: Option<Vec<u8>>,
    pub prot: u32,
    pub path: String,
    pub time: u64,
}

/// Splits a run into its perf records: `(offset in the run, type, misc, body)`. A record
/// whose header cannot be read ends the run with an error.
pub fn raw_records(
    data: &[u8],
    e: Endian,
) -> impl Iterator<Item = Result<(usize, u32, u16, &[u8])>> + '_ {
    let mut pos = 0usize;
    let mut done = false;
    std::iter::from_fn(move || {
        if done || pos >= data.len() {
            return None;
        }
        let at = pos;
        if data.len() - pos < 8 {
            done = true;
            return Some(Err(Error::corrupt(
                at as u64,
                "perf record header cut short",
            )));
        }
        let ty = e.r32(&data[pos..]);
        let misc = e.r16(&data[pos + 4..]);
        let size = e.r16(&data[pos + 6..]) as usize;
        if size < 8 || size > data.len() - pos {
            done = true;
            return Some(Err(Error::corrupt(
                at as u64,
                format!(
                    "perf record of type {ty} claims {size} bytes ({} left)",
                    data.len() - pos
                ),
            )));
        }
        pos += size;
        Some(Ok((at, ty, misc, &data[at + 8..at + size])))
    })
}

/// Iterates the perf records of a run; each item is `(offset in the run, record)`.
/// A record that cannot be read ends the run with an error.
pub fn records<'a>(
    data: &'a [u8],
    h: &'a Header,
) -> impl Iterator<Item = Result<(usize, PerfRecord)>> + 'a {
    let mut failed = false;
    raw_records(data, h.endian).map_while(move |r| {
        if failed {
            return None;
        }
        let r = r.and_then(|(at, ty, misc, body)| {
            parse_record(ty, misc, body, h)
                .map(|p| (at, p))
                .map_err(|msg| {
                    Error::corrupt(at as u64, format!("perf record of type {ty}: {msg}"))
                })
        });
        failed = r.is_err();
        Some(r)
    })
}

/// One perf record as a [`RecordSource`] hands it out: the event whose attr describes
/// it, where it came from, its offset (in the file, or in the section's payload), type,
/// misc bits and body after the header.
#[derive(Debug, Clone, Copy)]
pub struct RawRec<'a> {
    pub event: usize,
    pub source: Source,
    pub at: u64,
    pub kind: u32,
    pub misc: u16,
    pub body: &'a [u8],
}

impl RawRec<'_> {
    pub fn parse(&self, events: &[Header]) -> Result<PerfRecord> {
        parse_record(self.kind, self.misc, self.body, &events[self.event]).map_err(|msg| {
            Error::corrupt(self.at, format!("perf record of type {}: {msg}", self.kind))
        })
    }

    /// A SAMPLE record's time, read without parsing the rest.
    pub fn sample_time(&self, events: &[Header]) -> Option<u64> {
        let st = events[self.event].attr.sample_type;
        if st & sample::TIME == 0 {
            return None;
        }
        let at = 8 * [sample::IDENTIFIER, sample::IP, sample::TID]
            .iter()
            .filter(|&&b| st & b != 0)
            .count();
        self.body
            .get(at..at + 8)
            .map(|b| events[self.event].endian.r64(b))
    }
}

/// Where a profile's perf records come from: kstate's SAMPLES or STACKS section, or a
/// perf.data file. Records are visited, never collected, so memory does not grow with them.
pub trait RecordSource {
    /// The sampled events, in the file's order (never empty).
    fn events(&self) -> &[Header];
    /// Hands every record to `f` in file order; the first error (of the data or of `f`)
    /// ends the walk.
    fn visit(&self, f: &mut dyn FnMut(&RawRec<'_>) -> Result<()>) -> Result<()>;
}

impl<T: RecordSource + ?Sized> RecordSource for &T {
    fn events(&self) -> &[Header] {
        (**self).events()
    }
    fn visit(&self, f: &mut dyn FnMut(&RawRec<'_>) -> Result<()>) -> Result<()> {
        (**self).visit(f)
    }
}

impl RecordSource for Samples<'_> {
    fn events(&self) -> &[Header] {
        &self.events
    }
    fn visit(&self, f: &mut dyn FnMut(&RawRec<'_>) -> Result<()>) -> Result<()> {
        for ch in &self.chunks {
            for r in raw_records(ch.data, self.header_of(ch).endian) {
                let (at, kind, misc, body) = r.map_err(|e| e.shifted(ch.offset as u64))?;
                f(&RawRec {
                    event: ch.event,
                    source: ch.source,
                    at: (ch.offset + at) as u64,
                    kind,
                    misc,
                    body,
                })?;
            }
        }
        Ok(())
    }
}

struct Body<'a> {
    b: &'a [u8],
    pos: usize,
    e: Endian,
}

impl Body<'_> {
    fn u32(&mut self) -> std::result::Result<u32, String> {
        let s = self.b.get(self.pos..self.pos + 4).ok_or("cut short")?;
        self.pos += 4;
        Ok(self.e.r32(s))
    }
    fn u64(&mut self) -> std::result::Result<u64, String> {
        let s = self.b.get(self.pos..self.pos + 8).ok_or("cut short")?;
        self.pos += 8;
        Ok(self.e.r64(s))
    }
    /// A NUL-terminated string padded to 8 bytes, ending `trailer` bytes before the end.
    fn cstr(&mut self, trailer: usize) -> std::result::Result<String, String> {
        let end = self.b.len().checked_sub(trailer).ok_or("cut short")?;
        let s = self.b.get(self.pos..end).ok_or("cut short")?;
        let n = s.iter().position(|&c| c == 0).unwrap_or(s.len());
        self.pos = end;
        Ok(String::from_utf8_lossy(&s[..n]).into_owned())
    }
}

/// Bytes of the sample_id trailer non-sample records carry with `sample_id_all`.
fn trailer_len(h: &Header) -> usize {
    if h.attr.flags & flag::SAMPLE_ID_ALL == 0 {
        return 0;
    }
    let st = h.attr.sample_type;
    [
        sample::TID,
        sample::TIME,
        sample::ID,
        sample::STREAM_ID,
        sample::CPU,
        sample::IDENTIFIER,
    ]
    .iter()
    .filter(|&&b| st & b != 0)
    .count()
        * 8
}

/// The time in a sample_id trailer (0 without one).
fn trailer_time(b: &[u8], h: &Header) -> u64 {
    let st = h.attr.sample_type;
    if h.attr.flags & flag::SAMPLE_ID_ALL == 0 || st & sample::TIME == 0 {
        return 0;
    }
    let start = b.len() - trailer_len(h);
    let skip = if st & sample::TID != 0 { 8 } else { 0 };
    b.get(start + skip..start + skip + 8)
        .map_or(0, |s| h.endian.r64(s))
}

pub fn parse_record(
    ty: u32,
    misc: u16,
    b: &[u8],
    h: &Header,
) -> std::result::Result<PerfRecord, String> {
    let mut r = Body {
        b,
        pos: 0,
        e: h.endian,
    };
    let tl = trailer_len(h);
    if ty != record::SAMPLE && b.len() < tl {
        return Err("shorter than its sample_id trailer".into());
    }
    Ok(match ty {
        record::SAMPLE => PerfRecord::Sample(parse_sample(&mut r, misc, h)?),
        record::MMAP2 => {
            let pid = r.u32()?;
            let tid = r.u32()?;
            let start = r.u64()?;
            let len = r.u64()?;
            let pgoff = r.u64()?;
            let u = b.get(r.pos..r.pos + 24).ok_or("cut short")?;
            r.pos += 24;
            let build_id = (misc & MISC_MMAP_BUILD_ID != 0)
                .then(|| u[4..4 + (u[0] as usize).min(20)].to_vec());
            let prot = r.u32()?;
            let _flags = r.u32()?;
            let path = r.cstr(tl)?;
            PerfRecord::Mmap2(Mmap2Rec {
                pid,
                tid,
                start,
                len,
                pgoff,
                build_id,
                prot,
                path,
                time: trailer_time(b, h),
            })
        }
        record::MMAP => {
            let pid = r.u32()?;
            let tid = r.u32()?;
            let start = r.u64()?;
            let len = r.u64()?;
            let pgoff = r.u64()?;
            let path = r.cstr(tl)?;
            PerfRecord::Mmap2(Mmap2Rec {
                pid,
                tid,
                start,
                len,
                pgoff,
                build_id: None,
                prot: 4, // PROT_EXEC: only executable maps are reported without mmap_data
                path,
                time: trailer_time(b, h),
            })
        }
        record::COMM => {
            let pid = r.u32()?;
            let tid = r.u32()?;
            let comm = r.cstr(tl)?;
            PerfRecord::Comm {
                pid,
                tid,
                comm,
                exec: misc & MISC_COMM_EXEC != 0,
                time: trailer_time(b, h),
            }
        }
        record::FORK | record::EXIT => {
            let pid = r.u32()?;
            let ppid = r.u32()?;
            let tid = r.u32()?;
            let ptid = r.u32()?;
            let time = r.u64()?;
            if ty == record::FORK {
                PerfRecord::Fork {
                    pid,
                    ppid,
                    tid,
                    ptid,
                    time,
                }
            } else {
                PerfRecord::Exit { pid, tid, time }
            }
        }
        record::LOST => {
            let _id = r.u64()?;
            PerfRecord::Lost { lost: r.u64()? }
        }
        record::LOST_SAMPLES => PerfRecord::Lost { lost: r.u64()? },
        record::THROTTLE => PerfRecord::Throttle,
        t => PerfRecord::Other(t),
    })
}

fn parse_sample(r: &mut Body<'_>, misc: u16, h: &Header) -> std::result::Result<SampleRec, String> {
    let attr = &h.attr;
    let st = attr.sample_type;
    let mut s = SampleRec {
        misc,
        ..SampleRec::default()
    };
    if st & sample::IDENTIFIER != 0 {
        r.u64()?;
    }
    if st & sample::IP != 0 {
        s.ip = r.u64()?;
    }
    if st & sample::TID != 0 {
        s.pid = r.u32()?;
        s.tid = r.u32()?;
    }
    if st & sample::TIME != 0 {
        s.time = r.u64()?;
    }
    if st & sample::ADDR != 0 {
        r.u64()?;
    }
    if st & sample::ID != 0 {
        r.u64()?;
    }
    if st & sample::STREAM_ID != 0 {
        r.u64()?;
    }
    if st & sample::CPU != 0 {
        s.cpu = r.u32()?;
        r.u32()?;
    }
    s.period = if st & sample::PERIOD != 0 {
        r.u64()?
    } else {
        1
    };
    if st & sample::READ != 0 {
        skip_read(r, h)?;
    }
    if st & sample::CALLCHAIN != 0 {
        let n = r.u64()?;
        if n > ((r.b.len() - r.pos) / 8) as u64 {
            return Err(format!("call chain of {n} entries runs past the record"));
        }
        s.callchain = (0..n)
            .map(|_| r.u64())
            .collect::<std::result::Result<_, _>>()?;
    }
    if st & (sample::RAW | sample::BRANCH_STACK) != 0
        && st & (sample::REGS_USER | sample::STACK_USER) != 0
    {
        return Err(
            "samples with raw data or branch stacks before user registers are not supported".into(),
        );
    }
    if st & sample::REGS_USER != 0 {
        // abi: 0 when the sample has no user registers (a kernel thread).
        if r.u64()? != 0 {
            let n = attr.sample_regs_user.count_ones() as usize;
            if n > (r.b.len() - r.pos) / 8 {
                return Err(format!("{n} user registers run past the record"));
            }
            s.user_regs = (0..n)
                .map(|_| r.u64())
                .collect::<std::result::Result<_, _>>()?;
        }
    }
    if st & sample::STACK_USER != 0 {
        let size = r.u64()?;
        if size > (r.b.len() - r.pos) as u64 {
            return Err(format!(
                "a user stack copy of {size} bytes runs past the record"
            ));
        }
        let at = r.pos;
        r.pos += size as usize;
        if size > 0 {
            let dyn_size = r.u64()?.min(size) as usize;
            s.user_stack = r.b[at..at + dyn_size].to_vec();
        }
    }
    Ok(s)
}

/// Steps over a sample's PERF_SAMPLE_READ values (`perf_event_attr.read_format` says
/// which: a group's or one counter's, with times, ids and lost counts).
fn skip_read(r: &mut Body<'_>, h: &Header) -> std::result::Result<(), String> {
    const ENABLED: u64 = 1 << 0;
    const RUNNING: u64 = 1 << 1;
    const ID: u64 = 1 << 2;
    const GROUP: u64 = 1 << 3;
    const LOST: u64 = 1 << 4;
    let rf = h.attr_bytes.get(32..40).map_or(0, |b| h.endian.r64(b));
    let times = (rf & ENABLED != 0) as usize + (rf & RUNNING != 0) as usize;
    let per_value = 1 + (rf & ID != 0) as usize + (rf & LOST != 0) as usize;
    let words = if rf & GROUP != 0 {
        let nr = r.u64()?;
        if nr > ((r.b.len() - r.pos) / 8) as u64 {
            return Err(format!("read group of {nr} values runs past the record"));
        }
        times + nr as usize * per_value
    } else {
        times + per_value
    };
    for _ in 0..words {
        r.u64()?;
    }
    Ok(())
}

/// Totals over a payload: samples, lost records, throttle events, the processes and
/// mappings seen; for the recorder's summary and `kstate info`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counts {
    pub samples: u64,
    /// Samples taken in the kernel (the rest were in user space).
    pub kernel_samples: u64,
    /// Losses: the LOST and LOST_SAMPLES records together (see [`Counts::perf_lost`]).
    pub lost: u64,
    /// What the LOST records count: records a ring buffer dropped, per buffer.
    pub lost_records: u64,
    /// What the LOST_SAMPLES records count, where there are any (those of perf's BPF
    /// counters aside, as perf leaves them out): samples lost per event.
    pub lost_samples: Option<u64>,
    pub throttled: u64,
    /// Bytes of the rings' records (not counting the start-up mappings).
    pub bytes: u64,
    /// Each event's name and samples, in file order.
    pub per_event: Vec<(String, u64)>,
    /// Distinct processes and threads that samples were taken in.
    pub processes: u64,
    pub threads: u64,
    /// Executable mappings: read from /proc at the start, and made during the recording.
    pub start_mmaps: u64,
    pub mmaps: u64,
    /// Processes whose mappings were read at the start.
    pub start_processes: u64,
    pub forks: u64,
    pub execs: u64,
    /// The earliest and latest sample times.
    pub first_time: Option<u64>,
    pub last_time: Option<u64>,
    /// Samples per (event index, CPU); the CPU is `None` where the event's samples do not
    /// record it (perf records one command's samples without it).
    pub spans: std::collections::BTreeMap<(usize, Option<u32>), Span>,
}

impl Counts {
    /// The losses of a perf.data as perf counts them (`perf report`'s "Total Lost
    /// Samples", per event in `perf report --stats`): its LOST_SAMPLES records where it
    /// has any, else its LOST records; and whether they were the LOST_SAMPLES. perf record
    /// writes a LOST_SAMPLES record per event at the end from the kernel's count of that
    /// event's lost samples: the same losses the LOST records counted as the buffers
    /// dropped them, so the two are not added.
    pub fn perf_lost(&self) -> (u64, bool) {
        match self.lost_samples {
            Some(n) => (n, true),
            None => (self.lost_records, false),
        }
    }
}

/// How many samples, and the earliest and latest times among them (when they carry one).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Span {
    pub samples: u64,
    pub first_time: Option<u64>,
    pub last_time: Option<u64>,
}

pub fn count(b: &[u8]) -> Result<Counts> {
    count_source(&decode(b)?)
}

/// [`count`] over any source of records.
pub fn count_source(s: &dyn RecordSource) -> Result<Counts> {
    let events = s.events();
    let mut c = Counts {
        per_event: events.iter().map(|h| (h.event.clone(), 0)).collect(),
        ..Counts::default()
    };
    // Once per sample: Fx-hashed, and the spans ordered only at the end (SipHash and a
    // B-tree per sample made `kstate info` on a 4 M-sample perf.data 4x slower than an
    // analysis of it).
    let (mut pids, mut tids, mut start_pids) =
        (FxSet::default(), FxSet::default(), FxSet::default());
    let mut spans: FxMap<(usize, Option<u32>), Span> = FxMap::default();
    s.visit(&mut |r| {
        let at_start = r.source == Source::Maps;
        if !at_start {
            c.bytes += 8 + r.body.len() as u64;
        }
        match r.parse(events)? {
            PerfRecord::Sample(x) => {
                c.samples += 1;
                c.per_event[r.event].1 += 1;
                c.kernel_samples += x.is_kernel() as u64;
                let st = events[r.event].attr.sample_type;
                let cpu = (st & sample::CPU != 0).then_some(x.cpu);
                let span = spans.entry((r.event, cpu)).or_default();
                span.samples += 1;
                if st & sample::TIME != 0 {
                    c.first_time = Some(c.first_time.map_or(x.time, |t| t.min(x.time)));
                    c.last_time = Some(c.last_time.map_or(x.time, |t| t.max(x.time)));
                    span.first_time = Some(span.first_time.map_or(x.time, |t| t.min(x.time)));
                    span.last_time = Some(span.last_time.map_or(x.time, |t| t.max(x.time)));
                }
                pids.insert(x.pid);
                tids.insert(x.tid);
            }
            PerfRecord::Lost { lost } => {
                c.lost = c.lost.saturating_add(lost);
                if r.kind == record::LOST {
                    c.lost_records = c.lost_records.saturating_add(lost);
                } else if r.misc & MISC_LOST_SAMPLES_BPF == 0 {
                    c.lost_samples = Some(c.lost_samples.unwrap_or(0).saturating_add(lost));
                }
            }
            PerfRecord::Throttle => c.throttled += 1,
            PerfRecord::Mmap2(m) if at_start => {
                c.start_mmaps += 1;
                start_pids.insert(m.pid);
            }
            PerfRecord::Mmap2(_) => c.mmaps += 1,
            PerfRecord::Fork { pid, tid, .. } if pid == tid => c.forks += 1,
            PerfRecord::Comm { exec: true, .. } => c.execs += 1,
            _ => {}
        }
        Ok(())
    })?;
    c.spans = spans.into_iter().collect();
    (c.processes, c.threads, c.start_processes) = (
        pids.len() as u64,
        tids.len() as u64,
        start_pids.len() as u64,
    );
    Ok(c)
}

// ---------------------------------------------------------------------------------------
// ELF build ids, read from a file's program headers and notes only (no full parse).

/// The GNU build id of an ELF file, if it has one; reads only the headers and notes.
pub fn elf_build_id(path: &std::path::Path) -> Option<Vec<u8>> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = std::fs::File::open(path).ok()?;
    let mut eh = [0u8; 64];
    f.read_exact(&mut eh).ok()?;
    if &eh[..4] != b"\x7fELF" || eh[4] != 2 {
        return None; // 64-bit only
    }
    let e = if eh[5] == 2 {
        Endian::Big
    } else {
        Endian::Little
    };
    let phoff = e.r64(&eh[32..]);
    let phentsize = e.r16(&eh[54..]) as u64;
    let phnum = e.r16(&eh[56..]) as u64;
    if phentsize < 56 || phnum > 256 {
        return None;
    }
    let mut ph = vec![0u8; (phentsize * phnum) as usize];
    f.seek(SeekFrom::Start(phoff)).ok()?;
    f.read_exact(&mut ph).ok()?;
    for p in ph.chunks_exact(phentsize as usize) {
        if e.r32(p) != 4 {
            continue; // PT_NOTE
        }
        let off = e.r64(&p[8..]);
        let size = e.r64(&p[32..]).min(1 << 16);
        let mut notes = vec![0u8; size as usize];
        f.seek(SeekFrom::Start(off)).ok()?;
        f.read_exact(&mut notes).ok()?;
        if let Some(id) = find_build_id(&notes, e) {
            return Some(id);
        }
    }
    None
}

/// NT_GNU_BUILD_ID in a run of ELF notes.
pub fn find_build_id(notes: &[u8], e: Endian) -> Option<Vec<u8>> {
    let mut pos = 0usize;
    let align4 = |n: usize| n.checked_add(3).map(|x| x & !3);
    while pos.checked_add(12)? <= notes.len() {
        let namesz = e.r32(&notes[pos..]) as usize;
        let descsz = e.r32(&notes[pos + 4..]) as usize;
        let ty = e.r32(&notes[pos + 8..]);
        let name_at = pos + 12;
        let desc_at = name_at.checked_add(align4(namesz)?)?;
        let end = desc_at.checked_add(align4(descsz)?)?;
        if desc_at.checked_add(descsz)? > notes.len() {
            return None;
        }
        if ty == 3 && namesz == 4 && &notes[name_at..name_at + 4] == b"GNU\0" {
            return Some(notes[desc_at..desc_at + descsz].to_vec());
        }
        pos = end;
    }
    None
}

pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample_payload() -> Vec<u8> {
        let attr = Attr {
            type_: event_type::SOFTWARE,
            config: 0,
            period_or_freq: 999,
            sample_type: sample::IP
                | sample::TID
                | sample::TIME
                | sample::CPU
                | sample::PERIOD
                | sample::CALLCHAIN,
            flags: flag::FREQ | flag::SAMPLE_ID_ALL | flag::MMAP2 | flag::COMM,
            ..Attr::default()
        };
        let st = attr.sample_type;
        let mut b = encode_header("mono", "cpu-clock", &attr.to_bytes());
        let maps = [
            synth_mmap2(st, 42, 0x1000, 0x2000, 0, 5, Some(&[1, 2, 3]), "/bin/x"),
            synth_comm(st, 42, 43, "worker"),
        ]
        .concat();
        b.extend(record_head(TAG_MAPS, maps.len()));
        b.extend(maps);
        // One sample on CPU 1.
        let mut s = Vec::new();
        s.extend(0x1234u64.to_ne_bytes());
        s.extend(42u32.to_ne_bytes());
        s.extend(43u32.to_ne_bytes());
        s.extend(777u64.to_ne_bytes());
        s.extend(1u32.to_ne_bytes());
        s.extend(0u32.to_ne_bytes());
        s.extend(1_001_001u64.to_ne_bytes());
        s.extend(3u64.to_ne_bytes());
        s.extend(CONTEXT_USER.to_ne_bytes());
        s.extend(0x1234u64.to_ne_bytes());
        s.extend(0x1500u64.to_ne_bytes());
        let rec = with_header(record::SAMPLE, MISC_USER, s);
        let mut lost = Vec::new();
        lost.extend(0u64.to_ne_bytes());
        lost.extend(5u64.to_ne_bytes());
        lost.extend(sample_id(st, 1, 1));
        let lost = with_header(record::LOST, 0, lost);
        let ring = [rec, lost].concat();
        b.extend(ring_head(0, 1, ring.len()));
        b.extend(ring);
        b.extend(record_head(b'Z', 3));
        b.extend([9, 9, 9]);
        b
    }

    #[test]
    fn round_trip() {
        let b = sample_payload();
        let s = decode(&b).unwrap();
        assert_eq!(s.header().clock, "mono");
        assert_eq!(s.header().event, "cpu-clock");
        assert_eq!(s.header().attr.freq(), Some(999));
        assert_eq!(s.events.len(), 1);
        assert_eq!(s.chunks.len(), 2);
        let maps: Vec<_> = records(s.chunks[0].data, s.header())
            .map(|r| r.unwrap().1)
            .collect();
        match &maps[0] {
            PerfRecord::Mmap2(m) => {
                assert_eq!((m.pid, m.start, m.len, m.prot), (42, 0x1000, 0x2000, 5));
                assert_eq!(m.path, "/bin/x");
                assert_eq!(m.build_id.as_deref(), Some(&[1u8, 2, 3][..]));
            }
            r => panic!("{r:?}"),
        }
        assert!(matches!(&maps[1], PerfRecord::Comm { comm, tid: 43, .. } if comm == "worker"));
        assert_eq!(s.chunks[1].source, Source::Cpu(1));
        let ring: Vec<_> = records(s.chunks[1].data, s.header())
            .map(|r| r.unwrap().1)
            .collect();
        match &ring[0] {
            PerfRecord::Sample(x) => {
                assert_eq!(
                    (x.ip, x.pid, x.tid, x.time, x.cpu),
                    (0x1234, 42, 43, 777, 1)
                );
                assert_eq!(x.period, 1_001_001);
                assert_eq!(x.callchain, vec![CONTEXT_USER, 0x1234, 0x1500]);
            }
            r => panic!("{r:?}"),
        }
        assert_eq!(ring[1], PerfRecord::Lost { lost: 5 });
        let c = count(&b).unwrap();
        assert_eq!((c.samples, c.lost), (1, 5));
        assert_eq!((c.processes, c.threads, c.kernel_samples), (1, 1, 0));
        assert_eq!((c.start_mmaps, c.start_processes, c.mmaps), (1, 1, 0));
        assert_eq!(c.per_event, vec![("cpu-clock".to_string(), 1)]);
    }

    /// A second event's description and ring data, appended to a one-event payload.
    fn second_event(b: &mut Vec<u8>) {
        let attr = Attr {
            type_: event_type::SOFTWARE,
            config: 2,
            period_or_freq: 1,
            sample_type: sample::IP | sample::TID | sample::PERIOD,
            ..Attr::default()
        };
        b.extend(encode_event("page-faults", &attr.to_bytes()));
        let mut s = Vec::new();
        s.extend(0x1300u64.to_ne_bytes());
        s.extend(42u32.to_ne_bytes());
        s.extend(42u32.to_ne_bytes());
        s.extend(1u64.to_ne_bytes());
        let rec = with_header(record::SAMPLE, MISC_USER, s);
        let ring = [rec.clone(), rec].concat();
        b.extend(ring_head(1, 0, ring.len()));
        b.extend(ring);
    }

    #[test]
    fn several_events() {
        let mut b = sample_payload();
        second_event(&mut b);
        let s = decode(&b).unwrap();
        assert_eq!(s.events.len(), 2);
        assert_eq!(s.events[1].event, "page-faults");
        assert_eq!(s.events[1].clock, "mono");
        assert_eq!(s.events[1].attr.period_or_freq, 1);
        let last = s.chunks.last().unwrap();
        assert_eq!((last.event, last.source), (1, Source::Cpu(0)));
        // Read with the second event's sample_type (no time, no call chain).
        let recs: Vec<_> = records(last.data, s.header_of(last))
            .map(|r| r.unwrap().1)
            .collect();
        assert!(
            matches!(&recs[0], PerfRecord::Sample(x) if x.ip == 0x1300 && x.callchain.is_empty())
        );
        let c = count(&b).unwrap();
        assert_eq!(c.samples, 3);
        assert_eq!(
            c.per_event,
            vec![("cpu-clock".to_string(), 1), ("page-faults".to_string(), 2)]
        );
        // Ring data of an event not described (yet) is an error.
        let mut bad = sample_payload();
        bad.extend(ring_head(1, 0, 0));
        let e = decode(&bad).unwrap_err();
        assert!(e.msg.contains("ring data of event 1"), "{e}");
    }

    /// User registers and a stack copy: only the `dyn_size` bytes the kernel copied are
    /// kept; a record whose copy runs past its end is an error, not a panic.
    #[test]
    fn user_registers_and_stack() {
        let attr = Attr {
            sample_type: sample::TID | sample::REGS_USER | sample::STACK_USER,
            sample_regs_user: regs::UNWIND_MASK,
            sample_stack_user: 32,
            ..Attr::default()
        };
        let h = Header {
            endian: Endian::Little,
            clock: "mono".into(),
            event: "cpu-clock".into(),
            attr_bytes: attr.to_bytes(),
            attr: attr.clone(),
        };
        let mut s = Vec::new();
        s.extend(42u32.to_ne_bytes());
        s.extend(43u32.to_ne_bytes());
        s.extend(2u64.to_ne_bytes()); // abi 64
        for r in [0x7ff0u64, 0x7fe0, 0x401000] {
            s.extend(r.to_ne_bytes()); // bp, sp, ip
        }
        s.extend(32u64.to_ne_bytes());
        s.extend((0u8..32).collect::<Vec<_>>());
        s.extend(24u64.to_ne_bytes()); // dyn_size
        let PerfRecord::Sample(r) = parse_record(record::SAMPLE, MISC_USER, &s, &h).unwrap() else {
            panic!("not a sample");
        };
        assert_eq!(r.user_reg(attr.sample_regs_user, regs::IP), Some(0x401000));
        assert_eq!(r.user_reg(attr.sample_regs_user, regs::SP), Some(0x7fe0));
        assert_eq!(r.user_reg(attr.sample_regs_user, regs::BP), Some(0x7ff0));
        assert_eq!(r.user_reg(attr.sample_regs_user, 0), None);
        assert_eq!(r.user_stack, (0u8..24).collect::<Vec<_>>());
        for n in 0..s.len() {
            let _ = parse_record(record::SAMPLE, MISC_USER, &s[..n], &h);
        }
        assert!(parse_record(record::SAMPLE, MISC_USER, &s[..s.len() - 16], &h).is_err());
    }

    #[test]
    fn malformed_input_is_an_error() {
        let b = sample_payload();
        // Every truncation either decodes (at a record boundary) or fails; never panics.
        let mut b = b;
        second_event(&mut b);
        for n in 0..b.len() {
            if let Ok(s) = decode(&b[..n]) {
                for ch in &s.chunks {
                    for r in records(ch.data, s.header_of(ch)) {
                        let _ = r;
                    }
                }
            }
        }
        let e = decode(b"kstate-samples 2\n").unwrap_err();
        assert_eq!(e.kind, ErrorKind::Unsupported);
        let e = decode(b"kstate-samples 1\nR\x01\x00").unwrap_err();
        assert!(e.msg.contains("before the header"), "{e}");
        // A record claiming more bytes than the run has.
        let h = decode(&b).unwrap().header().clone();
        let bad = with_header(record::SAMPLE, 0, vec![0; 8]);
        let mut bad2 = bad.clone();
        bad2[6] = 200;
        assert!(records(&bad2, &h).next().unwrap().is_err());
        // A call chain longer than its record.
        let mut s = vec![0u8; 40];
        s.extend(1000u64.to_ne_bytes());
        let r = with_header(record::SAMPLE, 0, s);
        let e = records(&r, &h).next().unwrap().unwrap_err();
        assert!(e.msg.contains("call chain"), "{e}");
    }

    #[test]
    fn build_id_of_this_test_binary() {
        let exe = std::env::current_exe().unwrap();
        // Rust's linker invocation asks for a build id on Linux; where the toolchain does
        // not, there is simply none.
        if let Some(id) = elf_build_id(&exe) {
            assert!(id.len() >= 8 && id.len() <= 20, "{}", hex(&id));
        }
        assert_eq!(elf_build_id(std::path::Path::new("/nonexistent")), None);
    }
}
