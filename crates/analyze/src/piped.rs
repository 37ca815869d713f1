//! One analysis on several threads, for any analyzer: the recording is cut into time
//! slices ([`crate::slices::plan`]), decoder threads each merge one slice's CPUs in time
//! order and copy the wanted records into chunks, and the calling thread hands the chunks
//! to one ordinary pass, slice after slice. The analyzer sees exactly the events of the
//! one-thread pass in exactly its order, so its results are the same by construction,
//! whatever its state; what the threads share is the decoding and merging.
//!
//! Analyzers that can also cut their own state ([`crate::slices::Sliced`]) run fully in
//! parallel instead; this is for the others, whose pairing state (queues, current tasks,
//! wake-ups not yet answered) would need a join of its own.
//!
//! Memory: each decoder keeps at most [`CHUNKS_AHEAD`] chunks of [`CHUNK`] bytes ahead of
//! the pass. One thread runs the plain pass when the trace cannot be cut (see
//! [`crate::slices`]), for `--log` (rows stream as they come) and when a slice meets
//! damage (the pass then reports it with its place in the file).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};

use kstate_format::{Error, Lost, Trace};

use crate::analyzer::{drive, trace_start, Analyzer, Config, LogSink, Mode, NoLog, Outcome, Pass};
use crate::slices::{Cannot, Seams, SliceWalk};
use kstate_format::stream::merge::{Event, IdFilter, LossMark};
use kstate_format::stream::slice_plan::Plan;

/// Bytes a chunk holds before it is handed over: small enough to be read back from the
/// cache it was written to.
const CHUNK: usize = 64 << 10;
/// Chunks a decoder may hold ahead of the pass.
const CHUNKS_AHEAD: usize = 32;
/// Per record: timestamp (8), CPU (4), payload length (4).
const RECORD_HEAD: usize = 16;

enum Msg {
    Records(Vec<u8>),
    /// The slice's records are all sent; where it began and ended.
    End(Seams),
    /// The slice met what only the one-thread pass reports right (damage, loss, a CPU's
    /// events out of time order).
    Cannot,
}

/// Runs analyzer `A` with `cfg.threads` decoder threads feeding one pass; the results
/// are those of [`drive`], which runs instead where the trace cannot be cut.
pub(crate) fn drive_piped<A: Analyzer>(
    trace: &Trace,
    cfg: &Config,
    log: &mut dyn LogSink,
) -> Result<Outcome, Error> {
    if cfg.threads <= 1
        || cfg.mode == Mode::Log
        || cfg.pages.is_some()
        || cfg.probe
        || trace.damage().next().is_some()
    {
        return drive::<A>(trace, cfg, log);
    }
    let Some(plan) = crate::slices::plan(trace, cfg.threads) else {
        return drive::<A>(trace, cfg, log);
    };
    let n = plan.cuts.len();
    let (mut pass, ids) = Pass::<A>::new(trace, cfg, || trace_start(trace))?;
    let mut rxs: Vec<Receiver<Msg>> = Vec::with_capacity(n);
    let mut txs: Vec<Option<SyncSender<Msg>>> = Vec::with_capacity(n);
    for _ in 0..n {
        let (tx, rx) = sync_channel(CHUNKS_AHEAD);
        rxs.push(rx);
        txs.push(Some(tx));
    }
    let txs = std::sync::Mutex::new(txs);
    let next = AtomicUsize::new(0);
    let (txs, next, plan, ids) = (&txs, &next, &plan, &ids);
    let done = std::thread::scope(|s| -> Result<bool, Error> {
        for _ in 0..cfg.threads.min(n) {
            s.spawn(move || loop {
                let k = next.fetch_add(1, Ordering::Relaxed);
                let Some(tx) = txs
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .get_mut(k)
                    .and_then(Option::take)
                else {
                    break;
                };
                if decode(trace, ids, plan, k, &tx).is_err() {
                    // The pass stopped listening: it gave up on the threads.
                    break;
                }
            });
        }
        let endian = trace.layout.endian;
        let declared = trace.damage().count();
        let mut before: Option<Seams> = None;
        for rx in rxs {
            let mut ended = false;
            for msg in rx.iter() {
                let buf = match msg {
                    Msg::Records(buf) => buf,
                    Msg::End(seams) => {
                        // Its events were taken in already: the one pass runs if the
                        // slice does not begin where the one before ended.
                        if before.as_ref().is_some_and(|b| !b.meet(&seams)) {
                            return Ok(false);
                        }
                        before = Some(seams);
                        ended = true;
                        continue;
                    }
                    Msg::Cannot => return Ok(false),
                };
                let mut at = 0;
                while at + RECORD_HEAD <= buf.len() {
                    let ts = u64::from_ne_bytes(buf[at..at + 8].try_into().expect("8 bytes"));
                    let cpu = u32::from_ne_bytes(buf[at + 8..at + 12].try_into().expect("4"));
                    let len =
                        u32::from_ne_bytes(buf[at + 12..at + 16].try_into().expect("4")) as usize;
                    let payload = &buf[at + RECORD_HEAD..at + RECORD_HEAD + len];
                    at += RECORD_HEAD + len;
                    let ev = Event {
                        ts,
                        cpu,
                        id: endian.uint(payload, 0, 2).unwrap_or(u64::MAX) as u32,
                        payload,
                        endian,
                        lost_before: Lost::None,
                        loss: LossMark { gen: 0, open: 0 },
                    };
                    if pass.event(&ev, &mut NoLog)?.is_some() {
                        // A damaged record: the one pass names its place in the file.
                        return Ok(false);
                    }
                }
            }
            if !ended {
                return Ok(false);
            }
        }
        Ok(!pass.met_damage(declared))
    })?;
    if !done || pass.measured_events() == 0 {
        return drive::<A>(trace, cfg, log);
    }
    let o = pass.finish(trace, log)?;
    crate::slices::count_sliced_run();
    Ok(o)
}

/// Copies the wanted records of slice `k` (`cuts[k] <= ts < cuts[k + 1]`), in time
/// order, into chunks sent to `tx`. Err when the pass no longer listens.
fn decode(
    trace: &Trace,
    ids: &[u32],
    plan: &Plan,
    k: usize,
    tx: &SyncSender<Msg>,
) -> Result<(), ()> {
    let cannot = |tx: &SyncSender<Msg>| tx.send(Msg::Cannot).map_err(|_| ());
    let Ok(mut walk) = SliceWalk::new(trace, IdFilter::only(ids.iter().copied()), plan, k) else {
        return cannot(tx);
    };
    let mut buf = Vec::with_capacity(CHUNK + 4096);
    loop {
        let ev = match walk.next() {
            Ok(Some(ev)) => ev,
            Ok(None) => break,
            Err(Cannot) => return cannot(tx),
        };
        buf.extend_from_slice(&ev.ts.to_ne_bytes());
        buf.extend_from_slice(&ev.cpu.to_ne_bytes());
        buf.extend_from_slice(&(ev.payload.len() as u32).to_ne_bytes());
        buf.extend_from_slice(ev.payload);
        if buf.len() >= CHUNK {
            let full = std::mem::replace(&mut buf, Vec::with_capacity(CHUNK + 4096));
            tx.send(Msg::Records(full)).map_err(|_| ())?;
        }
    }
    if !buf.is_empty() {
        tx.send(Msg::Records(buf)).map_err(|_| ())?;
    }
    match walk.seams() {
        Ok(seams) => tx.send(Msg::End(seams)).map_err(|_| ()),
        Err(Cannot) => cannot(tx),
    }
}
