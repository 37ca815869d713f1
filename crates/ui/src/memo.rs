//! Answers shared between the server's threads: a bounded cache ([`Cache`]) that also
//! computes each missing answer once. Requests that ask for an answer being computed wait
//! for it rather than start a second pass over the trace (the page's panels and the
//! comparison of every analyzer ask for the same statistics at the same moment).
//! An error is handed to whoever waited, and not kept: the next request tries again.

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use crate::cache::Cache;

/// One answer being computed, and those waiting for it.
struct Flight<V> {
    done: Mutex<Option<Result<V, String>>>,
    cv: Condvar,
}

struct Inner<V> {
    cache: Cache<V>,
    flying: HashMap<String, Arc<Flight<V>>>,
}

pub struct Memo<V> {
    inner: Mutex<Inner<V>>,
}

/// A poisoned lock only means another request panicked while holding it; the cache's
/// state is still consistent (every mutation is one call).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl<V: Clone> Memo<V> {
    /// At most `cap` answers and about `bytes` bytes.
    pub fn new(cap: usize, bytes: usize) -> Memo<V> {
        Memo {
            inner: Mutex::new(Inner {
                cache: Cache::new(cap, bytes),
                flying: HashMap::new(),
            }),
        }
    }

    /// The cached answer, if any (without computing it).
    #[cfg(test)]
    pub fn peek(&self, key: &str) -> Option<V> {
        lock(&self.inner).cache.get(key)
    }

    /// The answer for `key`: cached, or awaited from the request computing it, or made
    /// here by `make` (no lock held meanwhile) and kept with its `size` in bytes.
    pub fn get_or(
        &self,
        key: &str,
        size: impl Fn(&V) -> usize,
        make: impl FnOnce() -> Result<V, String>,
    ) -> Result<V, String> {
        let flight = {
            let mut g = lock(&self.inner);
            if let Some(v) = g.cache.get(key) {
                return Ok(v);
            }
            match g.flying.get(key) {
                Some(f) => Some(f.clone()),
                None => {
                    let f = Arc::new(Flight {
                        done: Mutex::new(None),
                        cv: Condvar::new(),
                    });
                    g.flying.insert(key.to_string(), f);
                    None
                }
            }
        };
        if let Some(f) = flight {
            let mut done = lock(&f.done);
            while done.is_none() {
                done = f.cv.wait(done).unwrap_or_else(|p| p.into_inner());
            }
            return done.clone().expect("set before notifying");
        }
        // Whatever happens in `make` (an error, a panic), the waiters are released.
        struct Land<'a, V: Clone> {
            memo: &'a Memo<V>,
            key: &'a str,
            result: Option<Result<V, String>>,
            size: usize,
        }
        impl<V: Clone> Drop for Land<'_, V> {
            fn drop(&mut self) {
                let result = self
                    .result
                    .take()
                    .unwrap_or_else(|| Err("the answer failed while being computed".into()));
                let mut g = lock(&self.memo.inner);
                if let Ok(v) = &result {
                    g.cache.put(self.key.to_string(), v.clone(), self.size);
                }
                if let Some(f) = g.flying.remove(self.key) {
                    *lock(&f.done) = Some(result);
                    f.cv.notify_all();
                }
            }
        }
        let mut land = Land {
            memo: self,
            key,
            result: None,
            size: 0,
        };
        let r = make();
        if let Ok(v) = &r {
            land.size = size(v);
        }
        land.result = Some(r.clone());
        drop(land);
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn one_computation_for_concurrent_askers() {
        let memo = Arc::new(Memo::<u64>::new(8, 1 << 20));
        let made = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let (memo, made) = (memo.clone(), made.clone());
                std::thread::spawn(move || {
                    memo.get_or(
                        "k",
                        |_| 8,
                        || {
                            made.fetch_add(1, Ordering::SeqCst);
                            std::thread::sleep(std::time::Duration::from_millis(50));
                            Ok(42)
                        },
                    )
                })
            })
            .collect();
        for t in threads {
            assert_eq!(t.join().unwrap(), Ok(42));
        }
        assert_eq!(made.load(Ordering::SeqCst), 1);
        assert_eq!(memo.peek("k"), Some(42));
        // Errors reach the asker but are not kept.
        assert!(memo.get_or("e", |_| 8, || Err("no".into())).is_err());
        assert_eq!(memo.get_or("e", |_| 8, || Ok(1)), Ok(1));
    }
}
