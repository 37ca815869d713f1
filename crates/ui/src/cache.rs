//! A bounded cache of answers: repeated questions (a window brushed again, a chip removed
//! and put back) are answered without reading the trace. At most `cap` entries and `bytes`
//! bytes; the least recently used go first.

use std::collections::HashMap;

pub struct Cache<V> {
    map: HashMap<String, (u64, usize, V)>,
    clock: u64,
    cap: usize,
    bytes: usize,
    used: usize,
}

impl<V: Clone> Cache<V> {
    pub fn new(cap: usize, bytes: usize) -> Cache<V> {
        Cache {
            map: HashMap::new(),
            clock: 0,
            cap,
            bytes,
            used: 0,
        }
    }

    pub fn get(&mut self, key: &str) -> Option<V> {
        self.clock += 1;
        let now = self.clock;
        self.map.get_mut(key).map(|e| {
            e.0 = now;
            e.2.clone()
        })
    }

    /// Keeps `v` (`size`: its bytes, roughly), evicting the least recently used.
    pub fn put(&mut self, key: String, v: V, size: usize) {
        self.clock += 1;
        if let Some(old) = self.map.insert(key, (self.clock, size, v)) {
            self.used -= old.1;
        }
        self.used += size;
        while self.map.len() > self.cap || (self.used > self.bytes && self.map.len() > 1) {
            let oldest = self
                .map
                .iter()
                .min_by_key(|(_, e)| e.0)
                .map(|(k, _)| k.clone())
                .expect("not empty");
            if let Some(e) = self.map.remove(&oldest) {
                self.used -= e.1;
            }
        }
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.map.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_by_entries_and_bytes() {
        let mut c = Cache::new(2, 100);
        c.put("a".into(), 1, 10);
        c.put("b".into(), 2, 10);
        assert_eq!(c.get("a"), Some(1));
        c.put("c".into(), 3, 10);
        // b was the least recently used.
        assert_eq!((c.get("b"), c.len()), (None, 2));
        c.put("d".into(), 4, 95);
        assert_eq!((c.get("a"), c.get("c"), c.get("d")), (None, None, Some(4)));
    }
}
