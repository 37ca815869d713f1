//! trace-cmd's TIME_SHIFT option (id 12): how a guest's clock maps to its host's.
//!
//! `trace-cmd record -A` and `trace-cmd agent` sample, for every guest CPU, the offset
//! between the guest's and the host's clocks while recording, and store the samples in
//! the guest's file. trace-cmd's reader corrects each raw guest timestamp with the
//! samples of its CPU before any other clock mapping (TSC2NSEC, OFFSET, DATE), so that a
//! host's and its guests' files print on one timeline. This module reads and writes the
//! option and applies it the way libtracecmd 3.1 does (`timestamp_host_sync`).
//!
//! Payload: `u64 peer trace id, u32 flags, u32 CPU count`, then per CPU `u32 n`, `n`
//! times, `n` offsets and `n` scaling ratios (each an `i64`), then, in files since
//! trace-cmd 3.0, per CPU `n` fraction bits. Flag 1 means "interpolate the offset
//! between samples"; without it a sample's offset holds until the next one.

use crate::bytes::{Endian, Reader};
use crate::error::{Error, Result};

/// The flag that asks for the offset to be interpolated between two samples.
pub const FLAG_INTERPOLATE: u32 = 1;

/// One clock comparison: at guest time `time` the host clock read `time + offset`; guest
/// time is first scaled by `scaling / 2^fraction` (the TSC scaling of a KVM guest).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    pub time: i64,
    pub offset: i64,
    pub scaling: i64,
    pub fraction: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimeShift {
    /// The trace id of the host's file these samples map to.
    pub peer_trace_id: u64,
    pub flags: u32,
    /// Samples per guest CPU, ordered by time, no two with the same time.
    pub cpus: Vec<Vec<Sample>>,
}

impl TimeShift {
    /// Reads the option's payload; `at` is its file offset, for messages. The counts in
    /// the payload are checked against its size before anything is allocated from them.
    pub fn parse(payload: &[u8], endian: Endian, at: u64) -> Result<TimeShift> {
        let mut r = Reader::new(payload, at, endian);
        let peer_trace_id = r.u64("TIME_SHIFT option: peer trace id")?;
        let flags = r.u32("TIME_SHIFT option: flags")?;
        // Every CPU takes at least its 4-byte sample count, every sample 24 bytes.
        let ncpus = count(&mut r, 4, "CPUs")?;
        let mut cpus = Vec::with_capacity(ncpus);
        for cpu in 0..ncpus {
            let n = count(&mut r, 24, &format!("samples of CPU {cpu}"))?;
            let mut column = |what: &str| -> Result<Vec<i64>> {
                (0..n).map(|_| Ok(r.u64(what)? as i64)).collect()
            };
            let times = column("TIME_SHIFT option: sample time")?;
            let offsets = column("TIME_SHIFT option: sample offset")?;
            let scalings = column("TIME_SHIFT option: sample scaling")?;
            cpus.push(
                (0..n)
                    .map(|i| Sample {
                        time: times[i],
                        offset: offsets[i],
                        scaling: scalings[i],
                        fraction: 0,
                    })
                    .collect::<Vec<_>>(),
            );
        }
        // Older files end here; newer ones add the fraction bits of every sample.
        if !r.is_empty() {
            for samples in &mut cpus {
                for s in samples.iter_mut() {
                    s.fraction = r.u64("TIME_SHIFT option: sample fraction bits")? as i64;
                }
            }
        }
        for samples in &mut cpus {
            // As trace-cmd: by time, and of samples taken at the same time only the first.
            samples.sort_by_key(|s| s.time);
            samples.dedup_by_key(|s| s.time);
        }
        Ok(TimeShift {
            peer_trace_id,
            flags,
            cpus,
        })
    }

    /// The option's payload, with the fraction bits (the layout trace-cmd 3 writes).
    pub fn to_bytes(&self, endian: Endian) -> Vec<u8> {
        let mut b = Vec::new();
        let put = |b: &mut Vec<u8>, v: u64, n: usize| {
            let mut x = [0u8; 8];
            endian.put_uint(&mut x[..n], v);
            b.extend_from_slice(&x[..n]);
        };
        put(&mut b, self.peer_trace_id, 8);
        put(&mut b, self.flags as u64, 4);
        put(&mut b, self.cpus.len() as u64, 4);
        for samples in &self.cpus {
            put(&mut b, samples.len() as u64, 4);
            for field in [
                |s: &Sample| s.time,
                |s: &Sample| s.offset,
                |s: &Sample| s.scaling,
            ] {
                for s in samples {
                    put(&mut b, field(s) as u64, 8);
                }
            }
        }
        for samples in &self.cpus {
            for s in samples {
                put(&mut b, s.fraction as u64, 8);
            }
        }
        b
    }

    /// Whether any timestamp is corrected at all (trace-cmd leaves the sync off when
    /// the option names no CPU).
    pub fn is_active(&self) -> bool {
        !self.cpus.is_empty()
    }

    /// The host time of raw guest timestamp `ts` on `cpu`, before the file's other clock
    /// mappings. CPUs beyond the option's keep their raw time. Arithmetic wraps as
    /// trace-cmd's 64-bit C arithmetic does, so that damaged samples give the same
    /// numbers as `trace-cmd report`, never a panic.
    pub fn apply(&self, cpu: u32, ts: u64) -> u64 {
        let Some(s) = self.cpus.get(cpu as usize) else {
            return ts;
        };
        match s.len() {
            0 => ts,
            // One sample: a plain offset, no scaling.
            1 => ts.wrapping_add(s[0].offset as u64),
            n => {
                // The pair of samples around `ts`; before the first or after the last,
                // the first or last pair (extrapolating). Times compare unsigned, as in C.
                let i = if ts <= s[0].time as u64 {
                    0
                } else if ts >= s[n - 1].time as u64 {
                    n - 2
                } else {
                    // The last sample at or before `ts`; it is below n - 1 here.
                    let (mut lo, mut hi) = (0usize, n - 1);
                    while hi - lo > 1 {
                        let mid = (lo + hi) / 2;
                        if s[mid].time as u64 <= ts {
                            lo = mid;
                        } else {
                            hi = mid;
                        }
                    }
                    lo
                };
                self.between(ts, &s[i], &s[i + 1])
            }
        }
    }

    fn between(&self, ts: u64, a: &Sample, b: &Sample) -> u64 {
        let correction = if self.flags & FLAG_INTERPOLATE != 0 {
            let span = b.time.wrapping_sub(a.time);
            let moved = (ts as i64)
                .wrapping_sub(a.time)
                .wrapping_mul(b.offset.wrapping_sub(a.offset));
            match moved.wrapping_add(span / 2).checked_div(span) {
                Some(q) => a.offset.wrapping_add(q),
                None => a.offset,
            }
        } else {
            a.offset
        };
        let scaled = match u32::try_from(a.fraction) {
            Ok(f) if f < 64 => ts.wrapping_mul(a.scaling as u64) >> f,
            _ => 0,
        };
        scaled.wrapping_add(correction as u64)
    }

    /// One line for `info`: how many CPUs and samples, and how the offsets move.
    pub fn describe(&self) -> String {
        let samples: usize = self.cpus.iter().map(Vec::len).sum();
        let offsets = self.cpus.iter().flatten().map(|s| s.offset);
        let range = match (offsets.clone().min(), offsets.max()) {
            (Some(a), Some(b)) if a == b => format!(", offset {a} ns"),
            (Some(a), Some(b)) => format!(", offsets {a} .. {b} ns"),
            _ => String::new(),
        };
        format!(
            "guest clock mapped to its host's (TIME_SHIFT: {} CPUs, {samples} samples{range}, {}; host trace id {:#x})",
            self.cpus.len(),
            if self.flags & FLAG_INTERPOLATE != 0 {
                "interpolated"
            } else {
                "stepwise"
            },
            self.peer_trace_id
        )
    }
}

/// A u32 count of items of at least `each` bytes, refused if they cannot fit in what is
/// left of the payload (so that no damaged count sizes an allocation).
fn count(r: &mut Reader, each: usize, what: &str) -> Result<usize> {
    let at = r.offset();
    let n = r.u32(&format!("TIME_SHIFT option: count of {what}"))? as usize;
    if n > r.remaining() / each {
        return Err(Error::corrupt(
            at,
            format!(
                "TIME_SHIFT option: {n} {what} do not fit in the {} bytes left",
                r.remaining()
            ),
        ));
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(time: i64, offset: i64) -> Sample {
        Sample {
            time,
            offset,
            scaling: 1,
            fraction: 0,
        }
    }

    #[test]
    fn round_trip_and_order() {
        let t = TimeShift {
            peer_trace_id: 0xabc,
            flags: FLAG_INTERPOLATE,
            cpus: vec![vec![sample(10, 5), sample(20, 7)], vec![]],
        };
        for e in [Endian::Little, Endian::Big] {
            assert_eq!(TimeShift::parse(&t.to_bytes(e), e, 0).unwrap(), t);
        }
        // Unordered samples and a repeated time: sorted, the repeat dropped.
        let u = TimeShift {
            cpus: vec![vec![sample(20, 7), sample(10, 5), sample(10, 9)]],
            ..t.clone()
        };
        let back = TimeShift::parse(&u.to_bytes(Endian::Little), Endian::Little, 0).unwrap();
        assert_eq!(back.cpus[0], vec![sample(10, 5), sample(20, 7)]);
    }

    #[test]
    fn counts_beyond_the_payload_are_errors() {
        let mut b = TimeShift {
            peer_trace_id: 1,
            flags: 0,
            cpus: vec![vec![sample(1, 1)]],
        }
        .to_bytes(Endian::Little);
        b[16..20].copy_from_slice(&u32::MAX.to_le_bytes());
        let e = TimeShift::parse(&b, Endian::Little, 100).unwrap_err();
        assert_eq!(e.offset, Some(116), "{e}");
        b[12..16].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(TimeShift::parse(&b, Endian::Little, 0).is_err());
        assert!(TimeShift::parse(&b[..10], Endian::Little, 0).is_err());
    }

    #[test]
    fn interpolates_and_steps_between_samples() {
        let mut t = TimeShift {
            peer_trace_id: 0,
            flags: FLAG_INTERPOLATE,
            cpus: vec![vec![sample(1000, 100), sample(2000, 200), sample(3000, 0)]],
        };
        assert_eq!(t.apply(0, 1500), 1500 + 150);
        // trace-cmd rounds by adding half the span and truncating toward zero, so a
        // falling offset comes out one above the exact 100 here.
        assert_eq!(t.apply(0, 2500), 2500 + 101);
        // Outside the samples, the end pairs extrapolate.
        assert_eq!(t.apply(0, 500), 500 + 51);
        assert_eq!(t.apply(0, 4000), 4000 - 199);
        // A CPU the option does not cover keeps its time.
        assert_eq!(t.apply(1, 1500), 1500);
        t.flags = 0;
        assert_eq!(t.apply(0, 1999), 1999 + 100);
        assert_eq!(t.apply(0, 2000), 2000 + 200);
        t.cpus[0].truncate(1);
        assert_eq!(t.apply(0, 7), 107);
    }
}
