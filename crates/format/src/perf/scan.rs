//! The one pass over a perf.data's records at open, before any analysis: which CPUs hold
//! samples, the command names, whether each CPU's records are in time order (or near
//! enough for `reorder` to sort), and where each CPU's records lie in the file, so
//! that readers go straight to them (`direct`) and time slices start at a mark.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use crate::bytes::Endian;
use crate::error::{Error, Result};
use crate::open_options::OpenOptions;
use crate::perf::records::Records;
use crate::perf::reorder::{Disorder, Found, Stretches, MAX_STRETCH_BYTES};
use crate::perf::stream::{Layouts, RECORD_COMM, RECORD_LOST, RECORD_SAMPLE};

/// What one pass over the records found before any analysis: which CPUs hold samples, the
/// command names, whether every CPU's records are in time order, and where each CPU's
/// records lie in the file.
pub(crate) struct Scan {
    /// CPUs with samples or losses, and the bytes their samples take in the file.
    pub cpus: Vec<(u32, u64)>,
    pub comms: HashMap<i32, String>,
    /// Whether every CPU's records are in time order, or near enough to sort stretches.
    pub in_order: bool,
    /// The CPUs whose records are near time order but not in it, and the stretches of the
    /// file a reader sorts to put them in it.
    pub stretches: HashMap<u32, Stretches>,
    /// Per CPU of `cpus`, where its records lie in the data section; None where the
    /// records were compressed, and offsets in the file do not locate them.
    pub places: Option<HashMap<u32, Places>>,
}

/// Where one CPU's records lie in the data section.
#[derive(Debug, Clone)]
pub(crate) struct Places {
    /// The [start, end) offsets of the stretches holding its records, in file order (see
    /// [`RUN_GAP`]).
    pub runs: Arc<[(u64, u64)]>,
    /// Records a reader may start from, about one per [`MARK_BYTES`] of the CPU's
    /// samples: (time, offset), the first record first. None after the first lies inside
    /// a stretch that `reorder` sorts, so every record before a mark is no later
    /// than it.
    pub marks: Arc<[(u64, u64)]>,
}

/// Two stretches of one CPU's records closer than this in the file are kept as one, with
/// the other CPUs' records between them passed over when it is read. perf writes each
/// CPU's buffer out in chunks, so stretches are long in real files; in a file whose CPUs
/// alternate record by record this bounds the index to one entry per 64 KiB per CPU
/// instead of one per record.
const RUN_GAP: u64 = 64 << 10;

/// Bytes of a CPU's samples between two marks ([`Places::marks`]): what a ring-buffer
/// page holds, so that a time slice's plan counts marks as it counts a trace.dat's pages.
const MARK_BYTES: u64 = 4096;

/// Bytes the scan maps at a time: twice a reader's window. The scan's threads walk the
/// whole file once, and every window mapped and unmapped costs them both (the unmap
/// flushes the other core's TLB). On a 2-core VM, `analyze syscall --stat` of a 4 M-event
/// perf.data took 5-6 % less time than with 4 MiB, for 4 MiB more peak RSS (16 MiB: 8 %,
/// for 20 MiB more).
const SCAN_WINDOW: usize = 8 << 20;

/// Bytes of the data section each thread scans at least: below this a second thread costs
/// more than it saves.
const MIN_PART_BYTES: u64 = 16 << 20;

/// Bytes all parts together may hold to look back over each CPU's records
/// ([`Disorder`]: 24 bytes per 4 KiB of the last [`MAX_STRETCH_BYTES`] of a CPU's
/// records, per CPU and part at most): on a machine with many CPUs, fewer parts.
const MAX_LOOK_BACK_BYTES: u64 = 64 << 20;

/// Records in a row that must look whole for an offset to be taken as where a record
/// starts ([`record_start`]).
const CHAIN: usize = 16;

/// How far past a part's nominal start a record start is looked for.
const SEARCH_BYTES: usize = 1 << 20;

/// One CPU's part of the scan.
#[derive(Clone)]
struct CpuScan {
    order: Disorder,
    bytes: u64,
    runs: Vec<(u64, u64)>,
    marks: Vec<(u64, u64)>,
    /// `bytes` at which the next mark is taken.
    next_mark: u64,
    /// The earliest time seen (a part joins the one before only if no record of it is
    /// earlier than that one's latest).
    min: u64,
}

impl Default for CpuScan {
    fn default() -> CpuScan {
        CpuScan {
            order: Disorder::default(),
            bytes: 0,
            runs: Vec::new(),
            marks: Vec::new(),
            next_mark: 0,
            min: u64::MAX,
        }
    }
}

impl CpuScan {
    fn covers(&mut self, at: u64, end: u64) {
        match self.runs.last_mut() {
            Some(r) if at.saturating_sub(r.1) <= RUN_GAP => r.1 = end,
            _ => self.runs.push((at, end)),
        }
    }

    /// Takes over the scan of the same CPU's records further on in the file; false (and
    /// nothing taken) where one of them is earlier than one here, which only a scan of
    /// both together places.
    fn append(&mut self, next: CpuScan) -> bool {
        if next.min < self.order.max() {
            return false;
        }
        self.order.append(next.order);
        self.bytes += next.bytes;
        for (at, end) in next.runs {
            self.covers(at, end);
        }
        self.marks.extend(next.marks);
        self.min = self.min.min(next.min);
        true
    }
}

/// The CPUs seen so far. Only those get an entry (a header may claim any number of
/// CPUs), found through the last one used, since records come in long runs of one CPU.
#[derive(Default)]
struct Slots {
    seen: Vec<(u32, CpuScan)>,
    index: HashMap<u32, usize>,
    last: Option<(u32, usize)>,
}

impl Slots {
    #[inline(always)]
    fn get(&mut self, cpu: u32) -> &mut CpuScan {
        let i = match self.last {
            Some((c, i)) if c == cpu => i,
            _ => self.find(cpu),
        };
        &mut self.seen[i].1
    }

    #[cold]
    fn find(&mut self, cpu: u32) -> usize {
        let seen = &mut self.seen;
        let i = *self.index.entry(cpu).or_insert_with(|| {
            seen.push((cpu, CpuScan::default()));
            seen.len() - 1
        });
        self.last = Some((cpu, i));
        i
    }
}

/// What the scan of a stretch of the data section found.
struct Part {
    slots: Slots,
    comms: HashMap<i32, String>,
    /// The offset after the last record read.
    end: u64,
    /// Compressed records were met (offsets in the file do not locate what they hold).
    inflated: bool,
}

impl Part {
    /// Takes over the scan of the records that follow this part's; false where the two
    /// cannot be joined as one scan would have seen them.
    fn append(&mut self, next: Part) -> bool {
        if next.inflated || self.inflated {
            return false;
        }
        for (cpu, c) in next.slots.seen {
            let mine = self.slots.get(cpu);
            if !mine.append(c) {
                return false;
            }
        }
        self.comms.extend(next.comms);
        self.end = next.end;
        true
    }
}

/// Reads every record header once; CPU numbers are checked against `cpu_limit` here, with
/// the record's offset, before any table is sized by them.
///
/// On several threads ([`OpenOptions::threads`]) the data section is cut into parts
/// scanned side by side, each from where a record seems to start ([`record_start`]), and
/// joined where each part ended exactly where the next began; otherwise (a guess that
/// was wrong, compressed records, damage, records out of order across a cut) one thread
/// scans it all, so the result and any error are the one scan's.
pub(crate) fn scan(
    path: &Path,
    data: (u64, u64),
    layouts: &Layouts,
    cpu_limit: u32,
    opts: &OpenOptions,
) -> Result<Scan> {
    let threads = opts.threads() as u64;
    let least = opts.scan_part_bytes.unwrap_or(MIN_PART_BYTES).max(1);
    let per_part = cpu_limit as u64 * (MAX_STRETCH_BYTES / 4096 * 24);
    let parts = threads
        .min(data.1.saturating_sub(data.0) / least)
        .min(MAX_LOOK_BACK_BYTES / per_part.max(1));
    let joined = match parts > 1 {
        true => scan_parts(path, data, layouts, cpu_limit, parts),
        false => None,
    };
    let part = match joined {
        Some(p) => {
            SCANS_IN_PARTS.with(|n| n.set(n.get() + 1));
            p
        }
        None => scan_part(path, (data.0, u64::MAX), data.1, layouts, cpu_limit)?,
    };
    finish(part, path, data.1, layouts)
}

thread_local! {
    static SCANS_IN_PARTS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// perf.data scans this thread has run in parts on several threads so far (for tests:
/// a result equal to one scan's proves nothing if the parts were never joined).
pub fn scans_in_parts() -> u64 {
    SCANS_IN_PARTS.with(|n| n.get())
}

/// [`scan`] in `parts` parts, one per thread; None where they cannot be joined.
fn scan_parts(
    path: &Path,
    data: (u64, u64),
    layouts: &Layouts,
    cpu_limit: u32,
    parts: u64,
) -> Option<Part> {
    let file = std::fs::File::open(path).ok()?;
    let size = data.1 - data.0;
    let mut starts = vec![data.0];
    for k in 1..parts {
        let nominal = data.0 + (size / parts * k) / 8 * 8;
        starts.push(record_start(&file, nominal, data.1, layouts, cpu_limit)?);
    }
    starts.push(u64::MAX);
    if starts.windows(2).any(|w| w[0] >= w[1]) {
        return None;
    }
    let scanned: Vec<Option<Part>> = std::thread::scope(|s| {
        let handles: Vec<_> = starts
            .windows(2)
            .map(|w| {
                let (from, to) = (w[0], w[1]);
                s.spawn(move || scan_part(path, (from, to), data.1, layouts, cpu_limit).ok())
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().ok().flatten())
            .collect()
    });
    let mut scanned = scanned.into_iter();
    let mut all = scanned.next()??;
    for (next, &start) in scanned.zip(&starts[1..]) {
        let next = next?;
        if all.end != start || !all.append(next) {
            return None;
        }
    }
    Some(all)
}

/// The first offset at or after `from` (in steps of 8 bytes, as perf aligns records)
/// where [`CHAIN`] records in a row look whole: a known type, a size of at least its
/// header, a sample that names a CPU below `cpu_limit`. A guess: the scan checks it by
/// where the part before ends.
fn record_start(
    file: &std::fs::File,
    from: u64,
    data_end: u64,
    layouts: &Layouts,
    cpu_limit: u32,
) -> Option<u64> {
    use std::os::unix::fs::FileExt;
    let len = (data_end.checked_sub(from)?).min(SEARCH_BYTES as u64) as usize;
    let mut buf = vec![0; len];
    file.read_exact_at(&mut buf, from).ok()?;
    let whole = |mut p: usize| -> bool {
        for _ in 0..CHAIN {
            let Some(h) = buf.get(p..p + 8) else {
                return false;
            };
            let kind = Endian::Little.r32(h);
            let size = Endian::Little.r16(&h[6..]) as usize;
            let known = matches!(kind, 1..=21 | 64..=82);
            if !known || size < 8 || !size.is_multiple_of(8) {
                return false;
            }
            let Some(body) = buf.get(p + 8..p + size) else {
                return false;
            };
            if kind == RECORD_SAMPLE {
                let cpu = layouts.for_sample(body).and_then(|l| l.cpu(body));
                if cpu.is_none_or(|c| c >= cpu_limit) {
                    return false;
                }
            }
            p += size;
        }
        true
    };
    (0..len)
        .step_by(8)
        .find(|&p| whole(p))
        .map(|p| from + p as u64)
}

/// Scans the records that start in `[range.0, range.1)` (the last may run past its end,
/// up to `data_end`).
fn scan_part(
    path: &Path,
    range: (u64, u64),
    data_end: u64,
    layouts: &Layouts,
    cpu_limit: u32,
) -> Result<Part> {
    let mut r = Records::open(path, range.0, data_end)?.window_bytes(SCAN_WINDOW);
    let mut part = Part {
        slots: Slots::default(),
        comms: HashMap::new(),
        end: 0,
        inflated: false,
    };
    while r.position() < range.1 {
        // Nearly every record: those whole in the window, in one loop.
        let mut err = None;
        let walked = r.walk(range.1, |at, _, kind, b| {
            match part.see(at, kind, b, layouts, cpu_limit) {
                Ok(()) => true,
                Err(e) => {
                    err = Some(e);
                    false
                }
            }
        });
        if let Some(e) = err {
            return Err(e);
        }
        if walked {
            continue;
        }
        // A window to move, a record to check or decompress.
        let Some((at, kind, b)) = r.next()? else {
            break;
        };
        part.see(at, kind, b, layouts, cpu_limit)?;
    }
    part.end = r.position();
    part.inflated = r.inflated();
    Ok(part)
}

impl Part {
    /// Takes in the record at offset `at`; CPU numbers are checked against `cpu_limit`.
    #[inline(always)]
    fn see(
        &mut self,
        at: u64,
        kind: u32,
        b: &[u8],
        layouts: &Layouts,
        cpu_limit: u32,
    ) -> Result<()> {
        let check = |cpu: u32, what: &str| -> Result<u32> {
            if cpu < cpu_limit {
                return Ok(cpu);
            }
            Err(Error::corrupt(
                at,
                format!(
                    "perf.data: {what} record names CPU {cpu}, but the file records {cpu_limit} CPUs"
                ),
            ))
        };
        let end = at + 8 + b.len() as u64;
        match kind {
            RECORD_SAMPLE => {
                let Some(s) = layouts.for_sample(b).and_then(|l| l.sample(b)) else {
                    return Ok(());
                };
                if s.raw.is_none() {
                    return Ok(());
                }
                let c = self.slots.get(check(s.cpu, "sample")?);
                c.order.see(s.ts, at, 8 + b.len() as u64);
                c.min = c.min.min(s.ts);
                if c.bytes >= c.next_mark {
                    c.marks.push((s.ts, at));
                    c.next_mark = c.bytes + MARK_BYTES;
                }
                c.bytes += 8 + b.len() as u64;
                c.covers(at, end);
            }
            RECORD_LOST => {
                if let Some(cpu) = layouts.for_other(b).and_then(|l| l.trailer_cpu(b)) {
                    self.slots.get(check(cpu, "lost-events")?).covers(at, end);
                }
            }
            RECORD_COMM if b.len() >= 8 => {
                let tid = Endian::Little.r32(&b[4..]) as i32;
                let name = &b[8..];
                let name = &name[..name.iter().position(|&c| c == 0).unwrap_or(name.len())];
                self.comms
                    .insert(tid, String::from_utf8_lossy(name).into_owned());
            }
            _ => {}
        }
        Ok(())
    }
}

/// What the scan of the whole data section (ending at `data_end`) tells readers.
fn finish(part: Part, path: &Path, data_end: u64, layouts: &Layouts) -> Result<Scan> {
    let mut cpus_seen = part.slots.seen;
    cpus_seen.sort_by_key(|c| c.0);
    let cpus: Vec<(u32, u64)> = cpus_seen.iter().map(|(c, e)| (*c, e.bytes)).collect();
    let mut in_order = true;
    let mut stretches = HashMap::new();
    for (c, e) in &mut cpus_seen {
        let s = match e.order.stretches() {
            None => {
                in_order = false;
                continue;
            }
            Some([]) => continue,
            // Offsets do not locate compressed records: the look-back's starts stay.
            Some(found) if part.inflated => found.iter().map(|f| (f.start, f.last)).collect(),
            Some(found) => narrow(path, data_end, layouts, *c, found)?,
        };
        outside(&mut e.marks, &s);
        stretches.insert(*c, Stretches::from(s));
    }
    let places = (!part.inflated).then(|| {
        cpus_seen
            .into_iter()
            .map(|(c, e)| {
                let places = Places {
                    runs: Arc::from(e.runs),
                    marks: Arc::from(e.marks),
                };
                (c, places)
            })
            .collect()
    });
    Ok(Scan {
        cpus,
        comms: part.comms,
        in_order,
        stretches,
        places,
    })
}

/// The stretches `found` of `cpu`'s records, each from its first record later than the
/// earliest record that belongs before some of it: the look-back placed its start up to a
/// step early, where it depends on where the scan began (one part or several); the
/// first later record does not, and the stretch's records before it are in order.
fn narrow(
    path: &Path,
    data_end: u64,
    layouts: &Layouts,
    cpu: u32,
    found: &[Found],
) -> Result<Vec<(u64, u64)>> {
    let from = found.first().map_or(data_end, |f| f.start);
    let mut r = Records::open(path, from, data_end)?.raw();
    let mut out = Vec::with_capacity(found.len());
    for f in found {
        r.seek(f.start);
        let mut start = f.start;
        while let Some((at, kind, b)) = r.next()? {
            if at >= f.last {
                break;
            }
            let later = kind == RECORD_SAMPLE
                && layouts
                    .for_sample(b)
                    .and_then(|l| l.sample(b))
                    .is_some_and(|s| s.cpu == cpu && s.raw.is_some() && s.ts > f.low);
            if later {
                start = at;
                break;
            }
        }
        out.push((start, f.last));
    }
    Ok(out)
}

/// Drops the marks after the first that lie inside one of `stretches` (both in file
/// order): a reader starting inside a stretch would miss its earlier records, and a
/// record there may be later than records after it.
fn outside(marks: &mut Vec<(u64, u64)>, stretches: &[(u64, u64)]) {
    let mut s = stretches.iter().peekable();
    let mut k = 0;
    marks.retain(|&(_, at)| {
        k += 1;
        while s.next_if(|x| x.1 < at).is_some() {}
        k == 1 || s.peek().is_none_or(|x| at < x.0)
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::perf::stream::{SampleLayout, S_CPU, S_RAW, S_TIME};

    /// One SAMPLE record (TIME, CPU, RAW) on `cpu`.
    fn sample(cpu: u32, ts: u64) -> Vec<u8> {
        let raw = [1u8, 0, 0, 0, 7, 0, 0, 0];
        let mut b = Vec::new();
        b.extend_from_slice(&RECORD_SAMPLE.to_le_bytes());
        b.extend_from_slice(&0u16.to_le_bytes());
        b.extend_from_slice(&((8 + 8 + 8 + 4 + raw.len() + 4) as u16).to_le_bytes());
        b.extend_from_slice(&ts.to_le_bytes());
        b.extend_from_slice(&cpu.to_le_bytes());
        b.extend_from_slice(&0u32.to_le_bytes());
        b.extend_from_slice(&(raw.len() as u32 + 4).to_le_bytes());
        b.extend_from_slice(&raw);
        b.extend_from_slice(&[0; 4]);
        b
    }

    /// A file whose header claims 2^32 CPUs and whose samples name CPU 2^31 and 3: the
    /// scan's tables hold the two CPUs seen, not one entry per CPU number (the fuzzer's
    /// perfdirect target ran out of memory on such a file), and each CPU's stretches are
    /// where its records are.
    #[test]
    fn scan_sizes_its_tables_by_the_cpus_seen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("data");
        let mut b = sample(1 << 31, 10);
        let one = b.len() as u64;
        b.extend(sample(3, 20));
        b.extend(sample(1 << 31, 30));
        std::fs::write(&path, &b).unwrap();
        let layouts = Layouts::One(SampleLayout::new(S_TIME | S_CPU | S_RAW, 0, false));
        let s = scan(
            &path,
            (0, b.len() as u64),
            &layouts,
            u32::MAX,
            &OpenOptions::default(),
        )
        .unwrap();
        assert_eq!(s.cpus, vec![(3, one), (1 << 31, 2 * one)]);
        assert!(s.in_order);
        let places = s.places.unwrap();
        assert_eq!(&places[&3].runs[..], &[(one, 2 * one)]);
        // The other CPU's one record between its two is passed over, not a new stretch.
        assert_eq!(&places[&(1 << 31)].runs[..], &[(0, 3 * one)]);
    }

    /// A record of `kind` with `body` and the sample id perf appends (TIME, CPU).
    fn other(kind: u32, body: &[u8], cpu: u32, ts: u64) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&kind.to_le_bytes());
        b.extend_from_slice(&0u16.to_le_bytes());
        b.extend_from_slice(&((8 + body.len() + 16) as u16).to_le_bytes());
        b.extend_from_slice(body);
        b.extend_from_slice(&ts.to_le_bytes());
        b.extend_from_slice(&cpu.to_le_bytes());
        b.extend_from_slice(&0u32.to_le_bytes());
        b
    }

    /// Two CPUs' samples in runs of up to 3000 records (some longer than [`RUN_GAP`]),
    /// command names, losses, and a copy of every 997th sample of a CPU written after
    /// its next 5 (as perf 6.x writes some twice); with the offset of every record.
    fn recording() -> (Vec<u8>, Vec<u64>) {
        let (mut b, mut starts) = (Vec::new(), Vec::new());
        let mut put = |b: &mut Vec<u8>, r: Vec<u8>| {
            starts.push(b.len() as u64);
            b.extend(r);
        };
        let mut seed = 7u64;
        let mut rand = |n: u64| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) % n
        };
        let mut ts = [0u64; 2];
        let mut held: Vec<(u32, u32, Vec<u8>)> = Vec::new();
        let mut samples = 0;
        for seg in 0..60u32 {
            let cpu = seg % 2;
            for _ in 0..1 + rand(3000) {
                ts[cpu as usize] += 1 + rand(50);
                let r = sample(cpu, ts[cpu as usize]);
                put(&mut b, r.clone());
                samples += 1;
                for h in held.iter_mut().filter(|h| h.0 == cpu) {
                    h.1 -= 1;
                }
                while let Some(i) = held.iter().position(|h| h.1 == 0) {
                    put(&mut b, held.remove(i).2);
                }
                if samples % 997 == 0 {
                    held.push((cpu, 5, r));
                }
                if rand(500) == 0 {
                    let mut name = [0u8; 24];
                    name[..4].copy_from_slice(&(samples as u32).to_le_bytes());
                    name[4..8].copy_from_slice(&(samples as u32).to_le_bytes());
                    let n = format!("t{}", samples % 7);
                    name[8..8 + n.len()].copy_from_slice(n.as_bytes());
                    put(&mut b, other(RECORD_COMM, &name, cpu, ts[cpu as usize]));
                }
                if rand(2000) == 0 {
                    let lost = [[0u8; 8], 3u64.to_le_bytes()].concat();
                    put(&mut b, other(RECORD_LOST, &lost, cpu, ts[cpu as usize]));
                }
            }
        }
        (b, starts)
    }

    /// [`recording`] in a file, and how its records are read.
    fn written() -> (
        tempfile::TempDir,
        std::path::PathBuf,
        Vec<u8>,
        Vec<u64>,
        Layouts,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("data");
        let (b, starts) = recording();
        std::fs::write(&path, &b).unwrap();
        let layouts = Layouts::One(SampleLayout::new(S_TIME | S_CPU | S_RAW, 0, true));
        (dir, path, b, starts, layouts)
    }

    /// The data section scanned in 2 to 6 parts gives what one scan gives (marks aside,
    /// which only say where a reader may start), wherever parts could be joined; where a
    /// cut fell among records out of order, the parts are not joined.
    #[test]
    fn a_scan_in_parts_is_the_one_scan() {
        let (_dir, path, b, starts, layouts) = written();
        let data = (0, b.len() as u64);
        let one = finish(
            scan_part(&path, (0, u64::MAX), data.1, &layouts, 8).unwrap(),
            &path,
            data.1,
            &layouts,
        )
        .unwrap();
        assert_eq!(one.cpus.len(), 2);
        assert!(one.in_order);
        assert_eq!(one.stretches.len(), 2, "both CPUs have copies to sort");
        for (cpu, st) in &one.stretches {
            assert_eq!(
                &st[..],
                &exact_stretches(&b, &starts, *cpu)[..],
                "cpu {cpu}"
            );
        }
        assert!(one.comms.len() > 20, "{} names", one.comms.len());
        let places = one.places.as_ref().unwrap();
        assert!(
            places.values().all(|p| p.runs.len() > 3),
            "runs split by RUN_GAP"
        );
        let mut joined = 0;
        for parts in 2..=6 {
            let Some(p) = scan_parts(&path, data, &layouts, 8, parts) else {
                continue;
            };
            joined += 1;
            let p = finish(p, &path, data.1, &layouts).unwrap();
            assert_eq!(p.cpus, one.cpus, "{parts} parts");
            assert_eq!(p.comms, one.comms, "{parts} parts");
            assert_eq!(p.in_order, one.in_order, "{parts} parts");
            assert_eq!(p.stretches, one.stretches, "{parts} parts");
            for (cpu, mine) in p.places.as_ref().unwrap() {
                assert_eq!(mine.runs, places[cpu].runs, "{parts} parts, cpu {cpu}");
                // Marks: the CPU's first record first, then samples of its in time order,
                // none inside a stretch to sort.
                assert_eq!(mine.marks[0], places[cpu].marks[0]);
                assert!(mine
                    .marks
                    .windows(2)
                    .all(|w| w[0].0 <= w[1].0 && w[0].1 < w[1].1));
                for &(_, at) in &mine.marks[1..] {
                    assert!(starts.binary_search(&at).is_ok());
                    let s = &p.stretches[cpu];
                    assert!(!s.iter().any(|x| x.0 <= at && at <= x.1));
                }
            }
        }
        assert!(joined >= 3, "only {joined} of 5 cuts joined");
        // A cut inside a stretch to sort: the part after holds a record earlier than one
        // before, and the two are not joined.
        let (first, last) = one.stretches[&0][0];
        let cut = starts[starts.binary_search(&first).unwrap() + 1];
        assert!(cut <= last);
        let mut before = scan_part(&path, (0, cut), data.1, &layouts, 8).unwrap();
        let after = scan_part(&path, (cut, u64::MAX), data.1, &layouts, 8).unwrap();
        assert_eq!(before.end, cut);
        assert!(!before.append(after));
    }

    /// The stretches of `cpu`'s samples in `b` (records at `starts`) found the long way:
    /// each record earlier than one before it opens a stretch at the first record later
    /// than it, and stretches that overlap are one.
    fn exact_stretches(b: &[u8], starts: &[u64], cpu: u32) -> Vec<(u64, u64)> {
        let at =
            |o: u64, k: usize| u64::from_le_bytes(b[o as usize + k..][..8].try_into().unwrap());
        let mine: Vec<(u64, u64)> = starts
            .iter()
            .filter(|&&o| at(o, 0) as u32 == RECORD_SAMPLE && at(o, 16) as u32 == cpu)
            .map(|&o| (at(o, 8), o))
            .collect();
        // The latest time up to each record: the first later one by bisection.
        let latest: Vec<u64> = mine
            .iter()
            .scan(0, |m, r| {
                *m = r.0.max(*m);
                Some(*m)
            })
            .collect();
        let mut out: Vec<(u64, u64)> = Vec::new();
        for (i, &(ts, o)) in mine.iter().enumerate() {
            let first = latest[..i].partition_point(|&m| m <= ts);
            if first == i {
                continue;
            }
            let first = mine[first].1;
            match out.last_mut() {
                Some(s) if s.1 >= first => s.1 = o,
                _ => out.push((first, o)),
            }
        }
        out
    }

    /// Where a part is guessed to start: always where a record starts, found from any
    /// offset (a sample's fields do not pass for a chain of records).
    #[test]
    fn parts_start_where_records_start() {
        let (_dir, path, b, starts, layouts) = written();
        let file = std::fs::File::open(&path).unwrap();
        for from in (0..b.len() as u64 / 2).step_by(8 * 1009) {
            let at = record_start(&file, from, b.len() as u64, &layouts, 8).unwrap();
            assert!(starts.binary_search(&at).is_ok(), "{at} from {from}");
            assert!(at - from < 64, "{at} from {from}");
        }
    }
}
