//! The flight recorder of `kstate watch --keep`: only the last N seconds (or bytes) of
//! pages are kept, and a window around a moment (an alarm) can be written out as a normal
//! trace.dat.
//!
//! The capture's page files keep growing in length (the live analysis reads them by
//! offset), but pages older than the window are punched out of them
//! (`FALLOC_FL_PUNCH_HOLE`), which gives their space back: the pages kept stay within the
//! window's worth. The files are in memory (`reader::Store::Memory`: nothing is written
//! to disk until a save) or, for windows larger than memory, on disk. Each page's place
//! and first timestamp are indexed as the readers write them.

use std::collections::VecDeque;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use kstate_format::writer::{write_from_trace, WriterConfig};
use kstate_format::{DataLoc, PageLayout, Trace};

use crate::error::{Error, Result};
use crate::watch::Ongoing;

pub struct Flight {
    keep_ns: u64,
    /// `--keep SIZE` (or the memory a time window may take): the pages kept, every CPU's
    /// together, take no more bytes, except those a save to come holds (up to twice).
    keep_bytes: Option<u64>,
    layout: PageLayout,
    cpus: Vec<CpuPages>,
    /// Pages and bytes given back so far.
    pub dropped_pages: u64,
    pub dropped_bytes: u64,
}

struct CpuPages {
    cpu: u32,
    file: File,
    /// Bytes indexed so far.
    indexed: u64,
    /// Pages on disk: offset and the page header's timestamp.
    pages: VecDeque<(u64, u64)>,
    /// Everything before this offset has been punched out.
    punched: u64,
    /// `punched` as the live analysis sees it, raised before the space is given back:
    /// pages it had yet to read are skipped, not read as zeros.
    given_back: Arc<AtomicU64>,
}

impl CpuPages {
    /// Punches out the first page indexed (and anything before it); false when the
    /// file system refused, which leaves it on disk.
    fn drop_first(&mut self, ps: u64, pages: &mut u64, bytes: &mut u64) -> bool {
        let Some(&(off, _)) = self.pages.front() else {
            return false;
        };
        let end = off + ps;
        self.given_back.store(end, Ordering::Release);
        // SAFETY: fallocate on our own descriptor with a valid range.
        let r = unsafe {
            libc::fallocate(
                self.file.as_raw_fd(),
                libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                self.punched as libc::off_t,
                (end - self.punched) as libc::off_t,
            )
        };
        if r != 0 {
            return false;
        }
        self.pages.pop_front();
        *bytes += end - self.punched;
        *pages += 1;
        self.punched = end;
        true
    }
}

impl Flight {
    pub fn new(ongoing: &Ongoing, keep_ns: u64) -> Result<Flight> {
        let header = std::fs::read(ongoing.dir.join("header_page"))
            .map_err(|e| Error::io("reading", &ongoing.dir.join("header_page"), e))?;
        let endian = if cfg!(target_endian = "big") {
            kstate_format::Endian::Big
        } else {
            kstate_format::Endian::Little
        };
        let layout = PageLayout::parse(&header, endian, None)?;
        let cpus = ongoing
            .cpus
            .iter()
            .map(|c| {
                let file = std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open(&c.path)
                    .map_err(|e| Error::io("opening", &c.path, e))?;
                Ok(CpuPages {
                    cpu: c.cpu,
                    file,
                    indexed: 0,
                    pages: VecDeque::new(),
                    punched: 0,
                    given_back: Arc::new(AtomicU64::new(0)),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Flight {
            keep_ns,
            keep_bytes: None,
            layout,
            cpus,
            dropped_pages: 0,
            dropped_bytes: 0,
        })
    }

    /// Bounds the pages kept in bytes too (`--keep 50M`, or the memory a time window may
    /// take): the oldest pages of any CPU go first, except those a save to come holds,
    /// which stay until the pages kept reach twice the bound (a save that lost its start
    /// says so).
    pub fn bounded_by_bytes(mut self, bytes: u64) -> Flight {
        self.keep_bytes = Some(bytes);
        self
    }

    /// Per CPU, where the pages given back end (see `CpuPages::given_back`), for the live
    /// analysis that reads the same files.
    pub fn given_back(&self, cpu: u32) -> Option<Arc<AtomicU64>> {
        let c = self.cpus.iter().find(|c| c.cpu == cpu)?;
        Some(Arc::clone(&c.given_back))
    }

    /// Bytes of pages on disk now (written and not given back).
    pub fn kept_bytes(&self) -> u64 {
        self.cpus.iter().map(|c| c.indexed - c.punched).sum()
    }

    /// Indexes the pages written since the last call, and gives back the space of pages
    /// older than the window before `horizon` and before `hold` (a save to come). Pages
    /// from `unread` on (the live analysis has yet to read them, in the same files) stay
    /// until a size bound is exceeded twice (the analysis then skips them).
    pub fn update(
        &mut self,
        ongoing: &Ongoing,
        horizon: u64,
        hold: Option<u64>,
        unread: Option<u64>,
    ) {
        let ps = self.layout.page_size as u64;
        let unread = unread.unwrap_or(u64::MAX);
        let keep_from = horizon
            .saturating_sub(self.keep_ns)
            .min(hold.unwrap_or(u64::MAX))
            .min(unread);
        let mut head = vec![0u8; self.layout.data_offset];
        for (c, o) in self.cpus.iter_mut().zip(&ongoing.cpus) {
            let written = o.tap.written();
            while c.indexed + ps <= written {
                if c.file.read_exact_at(&mut head, c.indexed).is_err() {
                    break;
                }
                let ts = self
                    .layout
                    .endian
                    .uint(&head, self.layout.ts_offset, 8)
                    .unwrap_or(0);
                c.pages.push_back((c.indexed, ts));
                c.indexed += ps;
            }
            // A page may hold events up to the next page's start: drop it only when the
            // next one starts before the window.
            while c.pages.len() >= 2 && c.pages[1].1 < keep_from {
                if !c.drop_first(ps, &mut self.dropped_pages, &mut self.dropped_bytes) {
                    break;
                }
            }
        }
        let Some(bound) = self.keep_bytes else {
            return;
        };
        // Over the size: the page whose events ended longest ago goes, until the rest
        // fits. A page's events end where the CPU's next page starts; a CPU's last page
        // holds its newest events however early it started (a quiet CPU's one page may
        // span the whole burst of another CPU: choosing by start gave back the page that
        // held an alarm's call). Pages are counted once indexed (whole pages), so a
        // partly written one beyond them is at most a page per CPU more on disk.
        let hold = hold.unwrap_or(u64::MAX);
        while self.kept_bytes() > bound {
            let over_twice = self.kept_bytes() > bound.saturating_mul(2);
            let Some(c) = self
                .cpus
                .iter_mut()
                .filter(|c| !c.pages.is_empty())
                .min_by_key(|c| c.pages.get(1).map_or(u64::MAX, |p| p.1))
            else {
                break;
            };
            // A save to come holds its pages, the analysis those it has yet to read, up
            // to twice the bound: past it the analysis skips them (and says so).
            let next = c.pages.get(1).map_or(u64::MAX, |p| p.1);
            if (next >= unread || next >= hold) && !over_twice {
                break;
            }
            if !c.drop_first(ps, &mut self.dropped_pages, &mut self.dropped_bytes) {
                break;
            }
        }
    }

    /// From when every CPU's pages are still on disk: the latest first kept page start of
    /// the CPUs that gave pages back, None when none has. (The earliest would claim a
    /// stretch for which a CPU whose older pages were given back holds nothing: a save
    /// said it began before a call whose start it had lost.) A CPU that has given nothing
    /// back holds everything since the start, however late its first page began: a CPU
    /// quiet until 0.796 s made a save of an alarm at 0.750 s begin after it.
    pub fn oldest(&self) -> Option<u64> {
        self.cpus
            .iter()
            .filter(|c| c.punched > 0)
            .filter_map(|c| c.pages.front().map(|p| p.1))
            .max()
    }

    /// Writes the pages covering [from, to] (ns on the trace clock) of every CPU as a
    /// trace.dat at `out`, with the capture's metadata and kstate `sections` (id,
    /// payload). The file appears whole or not at all.
    /// `comms` (pid -> name) adds to the names the capture had at its start.
    pub fn save(
        &self,
        capture: &Path,
        from: u64,
        to: u64,
        out: &Path,
        sections: Vec<(u16, Vec<u8>)>,
        comms: &[(i32, String)],
    ) -> Result<()> {
        let mut trace = Trace::open(capture)?;
        // The save's own sections replace the capture's of the same kind: the capture's
        // RECORDING (kept current every second for `kstate recover`) spans the whole
        // recording up to its last refresh, and a reader takes the first of a kind (a
        // save claimed to stop before events it held, and to start before its pages).
        trace
            .extra_options
            .retain(|(id, _)| !sections.iter().any(|(s, _)| s == id));
        trace.extra_options.extend(sections);
        trace.comms.extend(comms.iter().cloned());
        // Pages in memory are not in the capture's directory, which then counts none.
        let cpus = self.cpus.iter().map(|c| c.cpu + 1).max().unwrap_or(0);
        trace.cpu_count = trace.cpu_count.max(cpus);
        let ps = self.layout.page_size as u64;
        trace.cpu_data.clear();
        for c in &self.cpus {
            // From the last page starting at or before `from` (it may hold events after
            // it) to the last page starting at or before `to`.
            let first = c.pages.iter().rposition(|p| p.1 <= from).unwrap_or(0);
            let Some(last) = c.pages.iter().rposition(|p| p.1 <= to) else {
                continue;
            };
            if last < first {
                continue;
            }
            let offset = c.pages[first].0;
            let size = c.pages[last].0 + ps - offset;
            trace.cpu_data.push(kstate_format::CpuData {
                cpu: c.cpu,
                file_bytes: size,
                loc: DataLoc::Plain {
                    // Through our own descriptor: the reader's (a memory file's only
                    // name) is closed once the recording has stopped.
                    path: PathBuf::from(format!("/proc/self/fd/{}", c.file.as_raw_fd())),
                    offset,
                    size,
                },
            });
        }
        let cfg = WriterConfig::new(self.layout.page_size);
        write_from_trace(&trace, out, cfg, None)?;
        Ok(())
    }
}
