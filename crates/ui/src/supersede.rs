//! Dropping questions the page no longer waits for. The page numbers its requests per
//! slot (`slot=PAGE:timeline&seq=17`: that page's timeline's 17th view; PAGE is random per
//! page load); a request whose slot has seen a newer one is superseded (the user panned
//! on, brushed again, clicked another key). A superseded request still waiting for a CPU
//! is answered at once with 204 (no content) instead of being computed, and the engine's
//! own loops ([`Ticket::cancelled`]) stop early.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// The newest request number seen per slot.
#[derive(Default)]
pub struct Slots {
    latest: Mutex<HashMap<String, Arc<AtomicU64>>>,
}

/// One request's place in its slot.
#[derive(Clone, Default)]
pub struct Ticket {
    seq: u64,
    latest: Option<Arc<AtomicU64>>,
}

impl Slots {
    /// Registers request `seq` of `slot` (a request without them is never superseded).
    pub fn ticket(&self, slot: Option<&str>, seq: Option<u64>) -> Ticket {
        let (Some(slot), Some(seq)) = (slot, seq) else {
            return Ticket::default();
        };
        let mut m = self.latest.lock().unwrap_or_else(|p| p.into_inner());
        // Slots are the page's few panels and views; a client that invents thousands of
        // names only costs this map a few bytes each, bounded here.
        if m.len() > 4096 && !m.contains_key(slot) {
            m.clear();
        }
        let latest = m.entry(slot.to_string()).or_default().clone();
        latest.fetch_max(seq, Ordering::SeqCst);
        Ticket {
            seq,
            latest: Some(latest),
        }
    }
}

impl Ticket {
    /// A newer request of the same slot has arrived.
    pub fn cancelled(&self) -> bool {
        self.latest
            .as_ref()
            .is_some_and(|l| l.load(Ordering::Relaxed) > self.seq)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newer_requests_supersede_older_ones_of_their_slot() {
        let s = Slots::default();
        let a = s.ticket(Some("timeline"), Some(1));
        let other = s.ticket(Some("panel-syscall"), Some(1));
        assert!(!a.cancelled());
        let b = s.ticket(Some("timeline"), Some(2));
        assert!(a.cancelled() && !b.cancelled() && !other.cancelled());
        // An older number arriving late does not revive anything.
        let late = s.ticket(Some("timeline"), Some(1));
        assert!(late.cancelled() && !b.cancelled());
        assert!(!s.ticket(None, Some(5)).cancelled());
    }
}
