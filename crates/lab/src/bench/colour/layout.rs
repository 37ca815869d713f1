//! The walked list: N structures `stride` bytes apart, each with a few hot fields at
//! fixed offsets, linked in a fixed pseudo-random order (so the walk is a chain of
//! dependent loads no prefetcher predicts, like a run queue's task_structs). Colouring
//! shifts a structure by `colour * line` bytes; the colour comes from the address bits
//! above one way's span of the target cache, as the seed's `get_current` takes it from the
//! bits above the cache index: neighbours in a set get different colours.

use std::ptr::NonNull;

use crate::Error;

/// Where every field of every structure is, relative to the region's start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    pub nodes: u64,
    pub stride: u64,
    pub fields: u64,
    /// Bytes between hot fields: room for `spacing / line` colours without two fields
    /// of different structures meeting in a line.
    pub spacing: u64,
    pub line: u64,
    /// Structures per way span of the target cache: consecutive ones share a colour.
    pub group: u64,
    pub colours: u64,
}

impl Layout {
    pub fn new(
        nodes: u64,
        stride: u64,
        fields: u64,
        line: u64,
        way_size: u64,
        colours: u64,
    ) -> Result<Layout, Error> {
        let bad = |m: String| Error::usage(m);
        if stride == 0 || !stride.is_multiple_of(4096) {
            return Err(bad(format!(
                "--stride {stride}: a multiple of the 4096-byte page"
            )));
        }
        let spacing = stride / fields.max(1) / line * line;
        let l = Layout {
            nodes,
            stride,
            fields: fields.max(1),
            spacing,
            line,
            group: (way_size / stride).max(1),
            colours: colours.max(1),
        };
        if l.colours > l.max_colours() {
            return Err(bad(format!(
                "--colours {}: too many: {} hot fields in {stride} bytes leave room for {} colours of {line} B",
                l.colours,
                l.fields,
                l.max_colours()
            )));
        }
        Ok(l)
    }

    pub fn max_colours(&self) -> u64 {
        (self.spacing / self.line).max(1)
    }

    pub fn colour(&self, i: u64) -> u64 {
        (i / self.group) % self.colours
    }

    /// Offset of field `f` of structure `i`; field 0 holds the link to the next one.
    pub fn field(&self, i: u64, f: u64) -> u64 {
        i * self.stride + self.colour(i) * self.line + f * self.spacing
    }

    pub fn bytes(&self) -> u64 {
        self.nodes * self.stride
    }

    /// The walk order: a permutation of the structures, the same for every colouring.
    pub fn order(&self) -> Vec<u64> {
        let mut v: Vec<u64> = (0..self.nodes).collect();
        let mut s = 0x9e37_79b9_7f4a_7c15u64;
        for i in (1..v.len()).rev() {
            s = splitmix(s);
            v.swap(i, (s % (i as u64 + 1)) as usize);
        }
        v
    }

    /// The offsets one pass reads, in the walk's order (fields 1.. then the link).
    pub fn pass_addresses(&self) -> impl Iterator<Item = u64> + '_ {
        let order = self.order();
        (0..self.nodes).flat_map(move |k| {
            let i = order[k as usize];
            (1..self.fields).chain([0]).map(move |f| self.field(i, f))
        })
    }
}

/// splitmix64's output function: a fixed pseudo-random mix of `x`.
pub(crate) fn splitmix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// An anonymous mapping aligned to 2 MiB and advised to use transparent huge pages, so
/// that (when the kernel grants them) virtual and physical addresses agree on every set
/// index bit below 2 MiB.
pub struct Region {
    ptr: NonNull<u8>,
    map: *mut libc::c_void,
    map_len: usize,
    pub len: usize,
}

// SAFETY: the region is plain memory; walkers only read it while no one writes.
unsafe impl Send for Region {}
unsafe impl Sync for Region {}

const HUGE: usize = 2 << 20;

impl Region {
    pub fn new(len: usize) -> Result<Region, Error> {
        let map_len = len + HUGE;
        // SAFETY: an anonymous private mapping; checked for failure below.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(Error::failed(format!(
                "mmap of {map_len} bytes: {}",
                std::io::Error::last_os_error()
            )));
        }
        let start = (map as usize).div_ceil(HUGE) * HUGE;
        // SAFETY: [start, start + len) lies inside the mapping; advice failure only
        // means 4 KiB pages, which `huge_bytes` reports.
        unsafe { libc::madvise(start as *mut libc::c_void, len, libc::MADV_HUGEPAGE) };
        // The pages come on first touch, when `link` writes the fields (zeroed memory:
        // nothing else needs writing, and under valgrind a memset would be most of the trace).
        let ptr = NonNull::new(start as *mut u8).expect("mmap returned a non-null mapping");
        Ok(Region {
            ptr,
            map,
            map_len,
            len,
        })
    }

    pub fn base(&self) -> u64 {
        self.ptr.as_ptr() as u64
    }

    /// Links the structures of `l` in walk order (a ring) and fills the other hot
    /// fields; returns the first structure's link field address.
    pub fn link(&mut self, l: &Layout) -> *const u8 {
        assert!(
            l.bytes() as usize <= self.len,
            "layout larger than the region"
        );
        let base = self.ptr.as_ptr();
        let order = l.order();
        for (k, &i) in order.iter().enumerate() {
            let next = order[(k + 1) % order.len()];
            // SAFETY: every field offset is below nodes * stride <= len and 8-aligned
            // (multiples of the line size plus multiples of `spacing`, itself a multiple
            // of the line size).
            unsafe {
                let at = base.add(l.field(i, 0) as usize) as *mut u64;
                at.write(base.add(l.field(next, 0) as usize) as u64);
                for f in 1..l.fields {
                    (base.add(l.field(i, f) as usize) as *mut u64).write(i * 31 + f);
                }
            }
        }
        // SAFETY: within the region, as above.
        unsafe { base.add(l.field(order[0], 0) as usize) }
    }

    /// Bytes of the region the kernel backs with huge pages (from /proc/self/smaps).
    pub fn huge_bytes(&self) -> Option<u64> {
        let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
        let me = self.map as u64;
        let mut inside = false;
        for line in smaps.lines() {
            if let Some((range, _)) = line.split_once(' ') {
                if let Some((a, b)) = range.split_once('-') {
                    if let (Ok(a), Ok(b)) = (u64::from_str_radix(a, 16), u64::from_str_radix(b, 16))
                    {
                        inside = a <= me && me < b;
                        continue;
                    }
                }
            }
            if inside {
                if let Some(v) = line.strip_prefix("AnonHugePages:") {
                    let kib: u64 = v.trim().trim_end_matches("kB").trim().parse().ok()?;
                    return Some(kib * 1024);
                }
            }
        }
        None
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: unmapping our own mapping once.
        unsafe { libc::munmap(self.map, self.map_len) };
    }
}

/// Follows the ring from `head` for `visits` structures, reading `fields - 1` hot fields
/// `spacing` apart at each; returns their sum (so the reads are not optimized away).
///
/// # Safety
/// `head` must come from [`Region::link`] with a layout of the same `fields` and
/// `spacing`, and the region must be alive and unchanged.
#[inline(never)]
pub unsafe fn walk(head: *const u8, fields: u64, spacing: u64, visits: u64) -> u64 {
    let mut p = head;
    let mut sum = 0u64;
    for _ in 0..visits {
        for f in 1..fields {
            sum = sum.wrapping_add(std::ptr::read_volatile(
                p.add((f * spacing) as usize) as *const u64
            ));
        }
        p = std::ptr::read_volatile(p as *const *const u8);
    }
    sum
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colours_follow_the_bits_above_the_way() {
        // 128 KiB ways, 8 KiB stride: 16 structures per colour run.
        let l = Layout::new(64, 8192, 3, 64, 128 << 10, 4).unwrap();
        assert_eq!(l.spacing, 2688);
        assert_eq!(l.max_colours(), 42);
        let colours: Vec<u64> = [0, 15, 16, 31, 32, 48, 64].map(|i| l.colour(i)).to_vec();
        assert_eq!(colours, [0, 0, 1, 1, 2, 3, 0]);
        assert_eq!(l.field(17, 2), 17 * 8192 + 64 + 2 * 2688);
        let mut o = l.order();
        assert_ne!(o, (0..64).collect::<Vec<_>>());
        o.sort();
        assert_eq!(o, (0..64).collect::<Vec<_>>());
        assert_eq!(l.pass_addresses().count(), 64 * 3);
        assert!(Layout::new(64, 8192, 3, 64, 128 << 10, 43).is_err());
        assert!(Layout::new(64, 5000, 3, 64, 128 << 10, 1).is_err());
    }

    #[test]
    fn the_walk_reads_what_link_wrote() {
        let l = Layout::new(100, 4096, 2, 64, 4096, 3).unwrap();
        let mut r = Region::new(l.bytes() as usize).unwrap();
        let head = r.link(&l);
        // One lap visits every structure once: the sum of i * 31 + 1 over all i.
        let want: u64 = (0..100).map(|i| i * 31 + 1).sum();
        // SAFETY: head from link with the same layout; the region lives.
        assert_eq!(unsafe { walk(head, l.fields, l.spacing, 100) }, want);
        // The addresses the walk reads are the layout's, in its order.
        let first = l.order()[0];
        assert_eq!(head as u64 - r.base(), l.field(first, 0));
    }
}
