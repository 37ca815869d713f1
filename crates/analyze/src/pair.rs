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

/// The most recent start is kept out of the map: most pairs end before another starts
/// under a different key (a thread's system call returns before the next one begins), so
/// the common case touches no hash table.
#[derive(Debug, Clone)]
pub struct Pairs<K, V> {
    hot: Option<(K, Open<V>)>,
    open: FxMap<K, Open<V>>,
}

impl<K: Hash + Eq, V> Default for Pairs<K, V> {
    fn default() -> Self {
        Pairs {
            hot: None,
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
        let replaced = match self.hot.take() {
            Some((hk, _)) if hk == k => true,
            Some((hk, ho)) => {
                self.open.insert(hk, ho);
                self.open.remove(&k).is_some()
            }
            None => !self.open.is_empty() && self.open.remove(&k).is_some(),
        };
        if replaced {
            out.unmatched();
        }
        self.hot = Some((k, o));
    }
    /// Opens a pair unless one is open under `k` already (keeps the first start).
    #[inline]
    pub fn begin_first(&mut self, k: K, cpu: u32, v: V, out: &mut Out) {
        if !self.contains(k) {
            self.begin(k, cpu, v, out);
        }
    }
    /// Closes the pair under `k`, if one is open.
    #[inline]
    pub fn end(&mut self, k: K) -> Option<Open<V>> {
        match &self.hot {
            Some((hk, _)) if *hk == k => self.hot.take().map(|x| x.1),
            _ if self.open.is_empty() => None,
            _ => self.open.remove(&k),
        }
    }
    #[inline]
    pub fn get_mut(&mut self, k: K) -> Option<&mut Open<V>> {
        match &mut self.hot {
            Some((hk, o)) if *hk == k => Some(o),
            _ => self.open.get_mut(&k),
        }
    }
    #[inline]
    pub fn contains(&self, k: K) -> bool {
        matches!(&self.hot, Some((hk, _)) if *hk == k) || self.open.contains_key(&k)
    }
    /// Whether a pair that started in [from, to] is open.
    pub fn open_in(&self, from: u64, to: u64) -> bool {
        let inside = |o: &Open<V>| (from..=to).contains(&o.start);
        self.hot.as_ref().is_some_and(|(_, o)| inside(o)) || self.open.values().any(inside)
    }
    /// Takes every open pair out (in no particular order).
    pub fn take_all(&mut self) -> Vec<(K, Open<V>)> {
        let mut v: Vec<(K, Open<V>)> = self.open.drain().collect();
        v.extend(self.hot.take());
        v
    }
    /// Every open pair.
    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut Open<V>> {
        self.hot
            .iter_mut()
            .map(|(_, o)| o)
            .chain(self.open.values_mut())
    }
    /// Puts back an open pair taken out with [`Pairs::take_all`] or [`Pairs::end`].
    pub fn put(&mut self, k: K, o: Open<V>) {
        if let Some((hk, ho)) = self.hot.take() {
            self.open.insert(hk, ho);
        }
        self.open.remove(&k);
        self.hot = Some((k, o));
    }
    pub fn len(&self) -> usize {
        self.open.len() + self.hot.is_some() as usize
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
