//! Open pairs: a start waiting for its end, keyed by whatever identifies the pair (a
//! thread id for system calls and wake-ups). Each start keeps the loss mark it was seen
//! with, so the end can tell whether events were lost in between ([`crate::analyzer::Out::pair`]).
//! Memory is one entry per open pair.

use std::hash::Hash;

use crate::analyzer::Out;
use crate::fxmap::FxMap;
use kstate_format::stream::merge::LossMark;

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
/// the common case touches no hash table. The slot keeps its key after its pair ends, and
/// that key is never in the map: the same key's next start needs no look-up either, even
/// while the map holds pairs that stay open (a task asleep in a call the whole trace).
#[derive(Debug, Clone)]
pub struct Pairs<K, V> {
    hot: Option<(K, Option<Open<V>>)>,
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
            Some((hk, ho)) if hk == k => ho.is_some(),
            other => {
                if let Some((hk, Some(ho))) = other {
                    self.open.insert(hk, ho);
                }
                !self.open.is_empty() && self.open.remove(&k).is_some()
            }
        };
        if replaced {
            out.unmatched();
        }
        self.hot = Some((k, Some(o)));
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
        match &mut self.hot {
            Some((hk, o)) if *hk == k => o.take(),
            _ if self.open.is_empty() => None,
            _ => self.open.remove(&k),
        }
    }
    #[inline]
    pub fn get_mut(&mut self, k: K) -> Option<&mut Open<V>> {
        match &mut self.hot {
            Some((hk, o)) if *hk == k => o.as_mut(),
            _ => self.open.get_mut(&k),
        }
    }
    #[inline]
    pub fn contains(&self, k: K) -> bool {
        match &self.hot {
            Some((hk, o)) if *hk == k => o.is_some(),
            _ => self.open.contains_key(&k),
        }
    }
    /// Whether a pair that started in [from, to] is open.
    pub fn open_in(&self, from: u64, to: u64) -> bool {
        let inside = |o: &Open<V>| (from..=to).contains(&o.start);
        self.hot_open().is_some_and(inside) || self.open.values().any(inside)
    }
    /// Takes every open pair out (in no particular order).
    pub fn take_all(&mut self) -> Vec<(K, Open<V>)> {
        let mut v: Vec<(K, Open<V>)> = self.open.drain().collect();
        if let Some((k, Some(o))) = self.hot.take() {
            v.push((k, o));
        }
        v
    }
    /// Every open pair.
    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut Open<V>> {
        self.hot
            .iter_mut()
            .filter_map(|(_, o)| o.as_mut())
            .chain(self.open.values_mut())
    }
    /// Puts back an open pair taken out with [`Pairs::take_all`] or [`Pairs::end`].
    pub fn put(&mut self, k: K, o: Open<V>) {
        match self.hot.take() {
            Some((hk, Some(ho))) if hk != k => {
                self.open.insert(hk, ho);
            }
            _ => {}
        }
        self.open.remove(&k);
        self.hot = Some((k, Some(o)));
    }
    pub fn len(&self) -> usize {
        self.open.len() + self.hot_open().is_some() as usize
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    fn hot_open(&self) -> Option<&Open<V>> {
        self.hot.as_ref().and_then(|(_, o)| o.as_ref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Starts and ends of three threads: one asleep in a call the whole time (its pair
    /// stays in the map), one calling again and again (the hot slot), one interleaved
    /// with it. Every end finds its own start, and a second start replaces the first.
    #[test]
    fn each_end_finds_its_own_start() {
        let mut p: Pairs<i32, u32> = Pairs::default();
        let mut out = Out::at(10);
        p.begin(1, 0, 100, &mut out); // asleep to the end
        for call in 0..3u32 {
            out.set_now(20 + call as u64);
            p.begin(2, 0, call, &mut out);
            assert!(p.contains(2) && p.contains(1));
            assert_eq!(p.len(), 2);
            let o = p.end(2).expect("its own start");
            assert_eq!((o.v, o.start), (call, 20 + call as u64));
            assert!(!p.contains(2) && p.end(2).is_none());
        }
        // Thread 3 starts while 2 is open: both go on, each ends its own.
        p.begin(2, 0, 7, &mut out);
        p.begin(3, 1, 8, &mut out);
        assert_eq!(p.end(2).map(|o| o.v), Some(7));
        p.begin(2, 0, 9, &mut out);
        assert_eq!(p.end(3).map(|o| (o.v, o.cpu)), Some((8, 1)));
        assert_eq!(p.get_mut(2).map(|o| o.v), Some(9));
        // A second start under 2 replaces the first, once in the slot, once in the map.
        p.begin(2, 0, 10, &mut out);
        assert_eq!(out.counts.unmatched, 1);
        p.begin(3, 0, 11, &mut out);
        p.begin(2, 0, 12, &mut out);
        assert_eq!(out.counts.unmatched, 2);
        assert_eq!(p.end(2).map(|o| o.v), Some(12));
        assert!(p.open_in(10, 10) && !p.open_in(11, 19));
        let mut left: Vec<(i32, u32)> = p.take_all().into_iter().map(|(k, o)| (k, o.v)).collect();
        left.sort();
        assert_eq!(left, [(1, 100), (3, 11)]);
        assert!(p.is_empty());
    }

    /// A pair put back goes to the slot; the one it displaces stays open in the map.
    #[test]
    fn a_pair_put_back_displaces_the_slot() {
        let mut p: Pairs<i32, u32> = Pairs::default();
        let mut out = Out::at(5);
        p.begin(4, 0, 1, &mut out);
        let o = p.end(4).unwrap();
        p.begin(5, 0, 2, &mut out);
        p.put(4, o);
        assert_eq!(p.len(), 2);
        assert_eq!(p.end(5).map(|o| o.v), Some(2));
        assert_eq!(p.end(4).map(|o| o.v), Some(1));
        assert!(p.is_empty() && out.counts.unmatched == 0);
    }
}
