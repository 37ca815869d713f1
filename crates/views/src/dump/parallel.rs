//! One file's events formatted on several threads: time slices formatted side by side
//! ([`kstate_analyze::slices::ordered`]), written in order, with the one pass's bytes.

use std::io::Write;

use kstate_analyze::slices::{ordered, Seams, ShortSlices};
use kstate_format::stream::merge::IdFilter;
use kstate_format::Trace;

use super::{step, Input, Request, SliceCount, Step};

/// How the threads' part of a dump ended.
pub(super) enum Parallel {
    /// The dump cannot be cut into slices: the one pass writes it all.
    Unsuited,
    /// Written to the end (or to `to`, or to an event without a format: the failure).
    Done(Option<kstate_format::Error>),
    /// The output failed.
    Stdout(std::io::Error),
    /// A slice met what only the one pass writes right (a CPU's events out of time
    /// order, function-tracer events): it goes on after the `events` events written so
    /// far.
    GoOn { events: u64 },
}

/// Slices of about this many bytes of pages: the 4 MiB window a page source maps at a
/// time (a smaller slice still maps and populates a whole window). About 10 MB of text
/// waits per slice made and not yet written.
pub const SLICE_BYTES: usize = 4 << 20;

/// One slice formatted on a worker thread.
enum SliceOut {
    Done {
        text: Vec<u8>,
        /// Events the slice's walk delivered (written or filtered).
        events: u64,
        state: Box<kstate_format::print_fmt::SliceState>,
        end: Option<Step>,
        /// Where the slice began and ended in each CPU's stream.
        seams: Box<Seams>,
    },
    Cannot,
}

/// Writes the events of one file on `req.threads` threads: time slices formatted side by
/// side, written in order. The text is the one pass's: a slice's lines depend on earlier
/// events only through comms the sched plugins learnt, and a slice whose lines used a comm
/// learnt before it is formatted again here, by the formatter that has taken in every
/// slice before ([`kstate_format::print_fmt::TextFormatter::slice_agrees`]). Also says
/// how many slices there were, when the file could be cut.
pub(super) fn write(
    trace: &Trace,
    filter: &IdFilter,
    req: &Request,
    input: &mut Input,
    line: &mut Vec<u8>,
    out: &mut impl Write,
) -> (Parallel, Option<SliceCount>) {
    let threads = req.threads;
    let Some(slices) = ShortSlices::plan(trace, req.slice_bytes) else {
        return (Parallel::Unsuited, None);
    };
    // The function plugin indents by call stacks learnt event by event: a slice holding
    // such events is left to the one pass (which has seen none before it).
    let function = trace.events.find("ftrace:function").map(|f| f.id);
    // A function graph entry prints with the record after it, which may be in the next
    // slice: the one pass writes from there.
    let graph = trace.events.find("ftrace:funcgraph_entry").map(|f| f.id);
    // Formats slice `k` with `input`'s formatter as it stands.
    let print_slice = |input: &mut Input, k: usize, text: &mut Vec<u8>| {
        let Ok(mut walk) = slices.walk(trace, filter.clone(), k) else {
            return None;
        };
        let (mut events, mut end) = (0u64, None);
        loop {
            match walk.next() {
                Ok(Some(ev)) => {
                    if Some(ev.id) == function || Some(ev.id) == graph {
                        return None;
                    }
                    events += 1;
                    match step(input, &ev, req, false, text) {
                        Step::Next => {}
                        s => {
                            end = Some(s);
                            break;
                        }
                    }
                }
                Ok(None) => break,
                Err(_) => return None,
            }
        }
        Some((events, end, Box::new(walk.seams().ok()?)))
    };
    let mut result = Parallel::Done(None);
    let (mut events, mut again) = (0u64, 0usize);
    let mut before: Option<Seams> = None;
    let name = input.name.clone();
    // Text buffers go back and forth between the threads (no fresh pages per slice).
    let spare: std::sync::Mutex<Vec<Vec<u8>>> = std::sync::Mutex::new(Vec::new());
    let take = || {
        spare
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop()
            .unwrap_or_default()
    };
    ordered(
        slices.len(),
        threads,
        // One slice waiting beside each thread's: the writer never starves, and the text
        // held stays a few slices' worth.
        threads + 1,
        || Input::new(trace, req, &name, String::new()),
        |w, k| {
            w.text.start_slice();
            let mut text = take();
            match print_slice(w, k, &mut text) {
                Some((events, end, seams)) => SliceOut::Done {
                    text,
                    events,
                    state: Box::new(w.text.end_slice()),
                    end,
                    seams,
                },
                None => SliceOut::Cannot,
            }
        },
        |k, slice| {
            let SliceOut::Done {
                text,
                events: n,
                state,
                mut end,
                seams,
            } = slice
            else {
                result = Parallel::GoOn { events };
                return false;
            };
            // A slice that does not begin where the one before ended (a CPU's pages out
            // of time order) holds other events than the one pass's next ones.
            if before.as_ref().is_some_and(|b: &Seams| !b.meet(&seams)) {
                result = Parallel::GoOn { events };
                return false;
            }
            before = Some(*seams);
            if input.text.slice_agrees(&state) {
                input.text.absorb_slice(*state);
                // Straight to the output, after what waits in `line`.
                let written = out.write_all(line).and_then(|_| out.write_all(&text));
                line.clear();
                let mut text = text;
                text.clear();
                spare.lock().unwrap_or_else(|e| e.into_inner()).push(text);
                if let Err(e) = written {
                    result = Parallel::Stdout(e);
                    return false;
                }
            } else {
                // Formatted again by the formatter that knows what came before.
                again += 1;
                let mut redo = take();
                match print_slice(input, k, &mut redo) {
                    Some((_, e, _)) => end = e,
                    None => {
                        // Nothing of this slice is written: the one pass goes on at it.
                        result = Parallel::GoOn { events };
                        return false;
                    }
                }
                line.extend_from_slice(&redo);
                redo.clear();
                spare.lock().unwrap_or_else(|e| e.into_inner()).push(redo);
            }
            events += n;
            if line.len() >= 1 << 16 {
                if let Err(e) = out.write_all(line) {
                    result = Parallel::Stdout(e);
                    return false;
                }
                line.clear();
            }
            match end {
                None | Some(Step::Next) => true,
                Some(Step::End) => false,
                Some(Step::Failed(e)) => {
                    result = Parallel::Done(Some(e));
                    false
                }
            }
        },
    );
    let count = SliceCount {
        slices: slices.len(),
        again,
    };
    (result, Some(count))
}
