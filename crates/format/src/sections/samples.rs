//! kstate's SAMPLES section (`sections::ids::SAMPLES`): CPU samples with call chains, taken
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
use crate::perf::decode::{
    count_source, raw_records, Attr, Counts, Header, RawRec, RecordSource, Source,
};
use crate::Endian;

pub const MAGIC: &str = "kstate-samples";
pub const VERSION: u32 = 1;

pub const TAG_HEADER: u8 = b'H';
pub const TAG_MAPS: u8 = b'M';
pub const TAG_RING: u8 = b'R';
pub const TAG_EVENT: u8 = b'E';
pub const TAG_EVENT_RING: u8 = b'S';

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

// ---------------------------------------------------------------------------------------
// Reading.

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

pub fn count(b: &[u8]) -> Result<Counts> {
    count_source(&decode(b)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::perf::decode::*;

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
