//! What the targets that open whole files share.
use kstate_format::stream::merge::{IdFilter, Merger};
use kstate_format::Trace;
use std::path::Path;

/// Opens `path` and streams every event through the merge; errors end a CPU's stream, and
/// the loop must still terminate.
pub fn open_and_read(path: &Path) {
    if let Ok(trace) = Trace::open(path) {
        if let Ok(mut m) = Merger::new(&trace, None, IdFilter::all()) {
            for _ in 0..1_000_000 {
                match m.next() {
                    Ok(Some(_)) | Err(_) => {}
                    Ok(None) => break,
                }
            }
        }
    }
}
