//! A map of a recording's pages, made once per open by a front end that asks many
//! questions of one file (`kstate ui`): per CPU and page, the time of its first event and
//! which event ids it holds (a set of `id mod 64`). With it a pass skips, without walking
//! their records, the pages that hold none of its events (a scheduler analysis of a
//! system-call storm reads one page in thirty), and a window query of an analyzer whose
//! samples are pairs of events inside the window starts at the window ([`PageIndex::seek`]).
//! Both skip only what the full walk would have read and dropped, so results are the same.
//!
//! Memory: 16 bytes a page (2 MB for an 11 M-event trace). Containers that build pages on
//! demand (Parquet) build only the wanted events already and get no index.

use crate::page::{read_header, PageCursor};
use crate::trace::DataLoc;
use crate::{Result, Trace};

/// One page of one CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageInfo {
    /// Trace-clock ns of its first event (of its header where it holds none); never
    /// earlier than the page before's.
    pub first_ns: u64,
    /// Bit `id % 64` set for each event id it holds.
    pub ids: u64,
    /// Its header flags events lost before it.
    pub lost: bool,
}

/// The pages of every CPU, in the order of `trace.cpu_data`.
#[derive(Debug, Clone, Default)]
pub struct PageIndex {
    /// `None` for a CPU whose pages are built on demand.
    cpus: Vec<Option<Vec<PageInfo>>>,
    /// Per CPU, its first and last event (trace-clock ns), as the merge times them; `None`
    /// for a CPU with no event read (or whose pages are built on demand).
    events: Vec<Option<(u64, u64)>>,
}

/// The id set of `ids`, as pages record it.
pub fn id_bits(ids: impl IntoIterator<Item = u32>) -> u64 {
    ids.into_iter().fold(0, |b, id| b | 1 << (id % 64))
}

impl PageIndex {
    /// Walks every page of `trace` once. A CPU whose pages are damaged is indexed up to
    /// the damage; the passes report it when they get there.
    pub fn build(trace: &Trace) -> Result<PageIndex> {
        let layout = trace.layout;
        let mut cpus = Vec::with_capacity(trace.cpu_data.len());
        let mut events = Vec::with_capacity(trace.cpu_data.len());
        for (i, cd) in trace.cpu_data.iter().enumerate() {
            if matches!(cd.loc, DataLoc::Built(_)) {
                cpus.push(None);
                events.push(None);
                continue;
            }
            let mut src = trace.pages_for(i, None)?;
            let mut pages = Vec::new();
            let mut last = 0;
            let mut span: Option<(u64, u64)> = None;
            while let Ok(true) = src.advance() {
                let page = src.page();
                let Ok(h) = read_header(page, &layout) else {
                    break;
                };
                let mut cursor = PageCursor::new(&h, &layout);
                let (mut first, mut ids) = (None, 0u64);
                let mut page_last = None;
                let mut damaged = false;
                loop {
                    match cursor.next(page, layout.endian) {
                        Ok(Some(r)) => {
                            first.get_or_insert(r.ts);
                            page_last = Some(r.ts);
                            let id = layout.endian.uint(page, r.start, 2).unwrap_or(0) as u32;
                            ids |= 1 << (id % 64);
                        }
                        Ok(None) => break,
                        Err(_) => {
                            damaged = true;
                            break;
                        }
                    }
                }
                if damaged {
                    break;
                }
                // As the merge times events: a guest's shift, then the clock mapping.
                let ns = |raw: u64| {
                    let raw = trace
                        .time_shift
                        .as_ref()
                        .map_or(raw, |t| t.apply(cd.cpu, raw));
                    trace.clock_map.to_ns(raw)
                };
                last = ns(first.unwrap_or(h.timestamp)).max(last);
                if let Some(l) = page_last {
                    let s = span.get_or_insert((last, last));
                    s.1 = ns(l).max(s.1).max(last);
                }
                pages.push(PageInfo {
                    first_ns: last,
                    ids,
                    lost: h.lost.is_some(),
                });
            }
            cpus.push(Some(pages));
            events.push(span);
        }
        Ok(PageIndex { cpus, events })
    }

    /// The first and last event of the file (trace-clock ns) without reading it again:
    /// `None` when some CPU's pages are built on demand, or no CPU has an event.
    pub fn event_span(&self) -> Option<(u64, u64)> {
        if self.cpus.iter().any(Option::is_none) {
            return None;
        }
        let spans = self.events.iter().flatten();
        let first = spans.clone().map(|s| s.0).min()?;
        let last = spans.map(|s| s.1).max()?;
        Some((first, last))
    }

    /// The pages of CPU stream `i` (as in `trace.cpu_data`), if indexed.
    pub fn pages(&self, i: usize) -> Option<&[PageInfo]> {
        self.cpus.get(i).and_then(|p| p.as_deref())
    }

    /// Pages of CPU stream `i` that lie wholly before `from` (ns): the pages before the
    /// first whose successor starts at or after it, found by bisection.
    pub fn seek(&self, i: usize, from: u64) -> usize {
        match self.pages(i) {
            Some(p) if p.len() > 1 => p[1..].partition_point(|x| x.first_ns < from),
            _ => 0,
        }
    }

    /// How many pages from page `k` of CPU stream `i` on a pass may pass over unread:
    /// those before `seek` (see [`PageIndex::seek`]), then those that hold none of the
    /// events in `bits` and flag no loss.
    ///
    /// The seek never passes the CPU's last page that holds one of `bits`: a window past
    /// the last such event still reads that page, so that a pass over a trace that has
    /// the events finds some (and answers "none in the window", not "none recorded").
    pub fn skippable(&self, i: usize, k: usize, seek: usize, bits: u64) -> usize {
        let Some(p) = self.pages(i) else {
            return 0;
        };
        // Only the first call of a stream is still before its seek point: one scan.
        let seek = match k < seek {
            true => p
                .iter()
                .rposition(|x| x.ids & bits != 0)
                .map_or(seek, |l| seek.min(l)),
            false => seek,
        };
        let mut j = k.max(seek.min(p.len()));
        while j < p.len() && p[j].ids & bits == 0 && !p[j].lost {
            j += 1;
        }
        j - k.min(j)
    }

    /// Pages in all.
    pub fn len(&self) -> usize {
        self.cpus.iter().flatten().map(Vec::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stream::merge::{IdFilter, Merger};

    #[test]
    fn pages_hold_what_the_merge_reads() {
        let path = kstate_testdata::path("lisa-sched_load/trace.dat");
        let trace = Trace::open(&path).unwrap();
        let index = PageIndex::build(&trace).unwrap();
        assert!(index.len() > 10);
        // Every event lies in a page that says it holds its id, at or after the page's time.
        let mut m = Merger::new(&trace, None, IdFilter::all()).unwrap();
        let mut n = 0u64;
        let mut span = None;
        while let Some(ev) = m.next().unwrap() {
            span.get_or_insert((ev.ts, ev.ts)).1 = ev.ts;
            let i = trace.cpu_data.iter().position(|c| c.cpu == ev.cpu).unwrap();
            let pages = index.pages(i).unwrap();
            let k = pages.partition_point(|p| p.first_ns <= ev.ts) - 1;
            assert!(
                pages[k..]
                    .iter()
                    .take_while(|p| p.first_ns <= ev.ts)
                    .any(|p| p.ids & id_bits([ev.id]) != 0),
                "event {n} (id {}) at {} in no page of CPU {}",
                ev.id,
                ev.ts,
                ev.cpu
            );
            n += 1;
        }
        // The first and last event, as the merge delivers them.
        assert!(n > 1000);
        assert_eq!(index.event_span(), span);
        // Seeking: no page before the seek point reaches the time asked for.
        for i in 0..trace.cpu_data.len() {
            let p = index.pages(i).unwrap();
            let mid = p[p.len() / 2].first_ns;
            let k = index.seek(i, mid);
            assert!(k < p.len() && p[k].first_ns <= mid, "cpu {i}");
            assert!(p.get(k + 1).is_none_or(|x| x.first_ns >= mid), "cpu {i}");
            assert_eq!(index.seek(i, 0), 0);
            // A window past the end still reads the last page that holds the events.
            let bits = p[0].ids;
            let last = p.iter().rposition(|x| x.ids & bits != 0).unwrap();
            let past = index.seek(i, u64::MAX);
            assert_eq!(index.skippable(i, 0, past, bits), last, "cpu {i}");
        }
    }
}
