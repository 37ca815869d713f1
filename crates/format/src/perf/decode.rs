//! perf_event records as the kernel writes them into its perf ring buffers, and as perf
//! and kstate store them: the attr that describes an event's samples, the record types
//! a profile reads (samples with call chains, MMAP2, COMM, FORK, LOST), their decoding
//! according to the attr's `sample_type`, and records made up for mappings and processes
//! that existed before the recording. kstate's SAMPLES and STACKS sections
//! ([`crate::sections::samples`]) and perf.data files ([`super::file`]) both hand out
//! these records through [`RecordSource`]. Decoders never panic: malformed input is an
//! error of kind `Corrupt` with its offset.

use crate::error::{Error, Result};
use crate::fxmap::{FxMap, FxSet};
use crate::Endian;

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

pub(crate) fn sample_id(sample_type: u64, pid: u32, tid: u32) -> Vec<u8> {
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

pub(crate) fn with_header(ty: u32, misc: u16, body: Vec<u8>) -> Vec<u8> {
    let mut r = Vec::with_capacity(8 + body.len());
    r.extend(ty.to_ne_bytes());
    r.extend(misc.to_ne_bytes());
    r.extend(((8 + body.len()) as u16).to_ne_bytes());
    r.extend(body);
    r
}

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
    pub lost: u64,
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

/// How many samples, and the earliest and latest times among them (when they carry one).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Span {
    pub samples: u64,
    pub first_time: Option<u64>,
    pub last_time: Option<u64>,
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
            PerfRecord::Lost { lost } => c.lost = c.lost.saturating_add(lost),
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
