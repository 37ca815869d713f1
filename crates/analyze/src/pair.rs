//! Open pairs: a start waiting for its end, keyed by whatever identifies the pair (a
//! thread id for system calls and wake-ups). Each start keeps the loss mark it was seen
//! with, so the end can tell whether events were lost in between ([`crate::analyzer::Out::pair`]).
//! Memory is one entry per open pair.

use std::hash::Hash;

use crate::analyzer::Out;
use crate::fxmap::FxMap;
use crate::merge::LossMark;

#[derive(Debug, Clone, Copy)]
pub struct Open<V> {
    pub start: u64,
    pub mark: LossMark,
    pub cpu: u32,
    /// What the analyzer keeps from the start event.
    pub v: V,
}

#[derive(Debug, Clone)]
pub struct Pairs<K, V> {
    open: FxMap<K, Open<V>>,
}

impl<K: Hash + Eq, V> Default for Pairs<K, V> {
    fn default() -> Self {
        Pairs {
            open: FxMap::default(),
        }
    }
}

impl<K: Hash + Eq + Copy, V> Pairs<K, V> {
    /// Opens a pair at the current event. A pair already open under `k` lost its end (or
    /// its start was never its own): it is replaced and counted as unmatched.
    #[inline]
    pub fn begin(&mut self, k: K, cpu: u32, v: V, out: &mut Out) {
        let o = Open {
            start: out.now(),
            mark: out.mark(),
            cpu,
            v,
        };
        if self.open.insert(k, o).is_some() {
            out.unmatched();
        }
    }
    /// Opens a pair unless one is open under `k` already (keeps the first start).
    #[inline]
    pub fn begin_first(&mut self, k: K, cpu: u32, v: V, out: &mut Out) {
        let (start, mark) = (out.now(), out.mark());
        self.open.entry(k).or_insert(Open {
            start,
            mark,
            cpu,
            v,
        });
    }
    /// Closes the pair under `k`, if one is open.
    #[inline]
    pub fn end(&mut self, k: K) -> Option<Open<V>> {
        self.open.remove(&k)
    }
    #[inline]
    pub fn get_mut(&mut self, k: K) -> Option<&mut Open<V>> {
        self.open.get_mut(&k)
    }
    #[inline]
    pub fn contains(&self, k: K) -> bool {
        self.open.contains_key(&k)
    }
    pub fn len(&self) -> usize {
        self.open.len()
    }
    pub fn is_empty(&self) -> bool {
        self.open.is_empty()
    }
}
