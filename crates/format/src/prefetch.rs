//! One CPU's events decoded on a thread of their own, ahead of the reader: the walk
//! through a perf.data's records (finding the CPU's samples among the others, parsing
//! each sample, mapping the file) runs on another core while the reader merges and
//! analyses. Events are copied into batches of about 256 KiB; two batches are in flight,
//! so memory stays bounded whatever the file's size.

use std::path::{Path, PathBuf};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};

use crate::error::Result;
use crate::events::{CpuEvents, Item};

/// Bytes of events per batch: large enough that handing a batch over costs little per
/// event, small enough to stay in the cache shared by the two cores.
const BATCH_BYTES: usize = 256 << 10;

/// Batches decoded ahead of the reader.
const AHEAD: usize = 2;

#[derive(Default)]
struct Batch {
    bytes: Vec<u8>,
    /// Each item, an event's `start` pointing into `bytes`.
    items: Vec<Item>,
}

/// `src` read on its own thread. The thread ends with the stream, on an error (handed
/// to the reader after the events before it), or when the reader is dropped.
pub fn prefetched(src: Box<dyn CpuEvents>) -> Box<dyn CpuEvents> {
    let path = src.path().to_path_buf();
    let (tx, rx) = sync_channel(AHEAD);
    let (back_tx, back_rx) = sync_channel(AHEAD + 1);
    std::thread::spawn(move || decode(src, tx, back_rx));
    Box::new(Prefetched {
        rx,
        back: back_tx,
        batch: Batch::default(),
        path,
    })
}

fn decode(mut src: Box<dyn CpuEvents>, tx: SyncSender<Result<Batch>>, back: Receiver<Batch>) {
    let mut items = Vec::new();
    loop {
        let mut b = back.try_recv().unwrap_or_default();
        b.bytes.clear();
        b.items.clear();
        let mut end = None;
        while b.bytes.len() < BATCH_BYTES {
            if let Err(e) = src.fill(&mut items) {
                end = Some(Some(e));
                break;
            }
            if items.is_empty() {
                end = Some(None);
                break;
            }
            for &item in &items {
                b.items.push(match item {
                    Item::Event { ts, start, len, at } => {
                        let copied = b.bytes.len();
                        b.bytes.extend_from_slice(&src.bytes()[start..start + len]);
                        Item::Event {
                            ts,
                            start: copied,
                            len,
                            at,
                        }
                    }
                    lost => lost,
                });
            }
        }
        if !b.items.is_empty() && tx.send(Ok(b)).is_err() {
            return;
        }
        match end {
            None => {}
            Some(None) => return,
            Some(Some(e)) => {
                let _ = tx.send(Err(e));
                return;
            }
        }
    }
}

struct Prefetched {
    rx: Receiver<Result<Batch>>,
    /// Batches read, back to the decoder for reuse.
    back: SyncSender<Batch>,
    batch: Batch,
    path: PathBuf,
}

impl CpuEvents for Prefetched {
    fn fill(&mut self, out: &mut Vec<Item>) -> Result<()> {
        out.clear();
        // The stream ended (the decoder hung up) or failed.
        let Ok(b) = self.rx.recv() else {
            return Ok(());
        };
        let mut old = std::mem::replace(&mut self.batch, b?);
        // The items go to the reader as they are; its old buffer goes back to the
        // decoder with the bytes read, for reuse.
        old.items = std::mem::replace(out, std::mem::take(&mut self.batch.items));
        let _ = self.back.try_send(old);
        Ok(())
    }

    #[inline]
    fn bytes(&self) -> &[u8] {
        &self.batch.bytes
    }

    fn path(&self) -> &Path {
        &self.path
    }
}
