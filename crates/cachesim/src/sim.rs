//! A small set-associative cache simulation: each level keeps, per set, its lines in
//! least-recently-used order; a hierarchy passes a level's misses to the next. No
//! prefetching, no write-back traffic, addresses taken as physical: what is left is the
//! placement effect colouring is about. Sets are created when first touched, so a large
//! last-level cache costs only the sets a stream uses.

use crate::Level;
use kstate_format::fxmap::FxMap;

/// One simulated cache.
#[derive(Debug, Clone)]
pub struct Cache {
    pub geometry: Level,
    /// Per set, its lines' numbers (address / line size), most recently used first.
    sets: FxMap<u64, Vec<u64>>,
    pub accesses: u64,
    pub misses: u64,
}

impl Cache {
    pub fn new(geometry: Level) -> Cache {
        Cache {
            geometry,
            sets: FxMap::default(),
            accesses: 0,
            misses: 0,
        }
    }

    /// Touches the line holding `addr`; true on a hit.
    pub fn access(&mut self, addr: u64) -> bool {
        let g = self.geometry;
        let line = addr / g.line;
        let set = self.sets.entry(line % g.sets).or_default();
        self.accesses += 1;
        if let Some(i) = set.iter().position(|&l| l == line) {
            set[..=i].rotate_right(1);
            return true;
        }
        self.misses += 1;
        if set.len() as u64 >= g.ways {
            set.pop();
        }
        set.insert(0, line);
        false
    }

    /// Sets that hold at least one line.
    pub fn sets_touched(&self) -> u64 {
        self.sets.values().filter(|s| !s.is_empty()).count() as u64
    }

    /// Zeroes the counters, keeping the contents (after a warm-up pass).
    pub fn reset_counts(&mut self) {
        self.accesses = 0;
        self.misses = 0;
    }
}

/// Levels innermost first; an access goes down until a level hits.
#[derive(Debug, Clone)]
pub struct Hierarchy {
    pub levels: Vec<Cache>,
}

impl Hierarchy {
    pub fn new(levels: &[Level]) -> Hierarchy {
        Hierarchy {
            levels: levels.iter().copied().map(Cache::new).collect(),
        }
    }

    /// The index of the level that hit, or `levels.len()` for memory.
    pub fn access(&mut self, addr: u64) -> usize {
        for (i, c) in self.levels.iter_mut().enumerate() {
            if c.access(addr) {
                return i;
            }
        }
        self.levels.len()
    }

    pub fn reset_counts(&mut self) {
        self.levels.iter_mut().for_each(Cache::reset_counts);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lvl(size: u64, ways: u64, line: u64) -> Level {
        Level::new(2, size, ways, line).unwrap()
    }

    #[test]
    fn direct_mapped_conflict() {
        // 4 sets of 64 B lines: 0 and 256 share set 0 and evict each other.
        let mut c = Cache::new(lvl(256, 1, 64));
        for _ in 0..3 {
            c.access(0);
            c.access(256);
        }
        assert_eq!((c.accesses, c.misses), (6, 6));
        // 0 and 64 are in different sets: two cold misses, then hits.
        let mut c = Cache::new(lvl(256, 1, 64));
        for _ in 0..3 {
            c.access(0);
            c.access(64 + 8);
        }
        assert_eq!((c.misses, c.sets_touched()), (2, 2));
    }

    #[test]
    fn lru_cycle_longer_than_the_ways_always_misses() {
        // One set, 2 ways: A B A B hits after the first two; A B C A B C misses every time
        // under LRU, and A B A C A keeps A (recently used) and evicts B.
        let mut c2 = Cache::new(lvl(128, 2, 64));
        for a in [0u64, 128, 0, 128] {
            c2.access(a);
        }
        assert_eq!(c2.misses, 2);
        let mut c3 = Cache::new(lvl(128, 2, 64));
        for a in [0u64, 128, 256, 0, 128, 256] {
            c3.access(a);
        }
        assert_eq!(c3.misses, 6);
        let mut c4 = Cache::new(lvl(128, 2, 64));
        let hits: Vec<bool> = [0u64, 128, 0, 256, 0, 128]
            .iter()
            .map(|&a| c4.access(a))
            .collect();
        assert_eq!(hits, [false, false, true, false, true, false]);
    }

    #[test]
    fn hierarchy_passes_misses_down() {
        // L1: one 64 B line; L2: two lines in one set. A B A B: L1 misses all four,
        // L2 misses only the first two.
        let l1 = Level::new(1, 64, 1, 64).unwrap();
        let l2 = Level::new(2, 128, 2, 64).unwrap();
        let mut h = Hierarchy::new(&[l1, l2]);
        let hit: Vec<usize> = [0u64, 64, 0, 64].iter().map(|&a| h.access(a)).collect();
        assert_eq!(hit, [2, 2, 1, 1]);
        assert_eq!((h.levels[0].misses, h.levels[1].misses), (4, 2));
        assert_eq!(h.levels[1].accesses, 4);
        h.reset_counts();
        assert_eq!(h.access(0), 1);
        assert_eq!((h.levels[0].accesses, h.levels[1].misses), (1, 0));
    }
}
