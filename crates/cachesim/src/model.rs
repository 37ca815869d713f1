//! Seed 001's model of cache colouring. Structures `stride` bytes apart (task_structs in
//! 8 KiB kernel stacks) put a given field in only a few sets: the field's addresses,
//! taken modulo a way's span, take `way / gcd(stride, way)` values, each a set with
//! `ways` lines. Colouring shifts each structure by one of `c` multiples of the line
//! size, so `c` times as many structures keep their field cached. With `p` structures
//! walked, the gain saturates when `c >= p / fit`: the seed's `c >= p / (s / stride)`,
//! which is the same number whenever the stride is at most one way's span (then
//! `fit = ways * way / stride = s / stride`); a larger stride leaves `fit = ways`.

use crate::Level;

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// How many structures `stride` bytes apart keep one hot field in `level` with one colour.
pub fn fit_per_colour(level: &Level, stride: u64) -> u64 {
    let way = level.way_size();
    level.ways * (way / gcd(stride.max(1), way)).max(1)
}

/// The least colour count at which `p` structures' hot field fits: `ceil(p / fit)`.
pub fn threshold(p: u64, level: &Level, stride: u64) -> u64 {
    p.div_ceil(fit_per_colour(level, stride)).max(1)
}

/// The seed's formula as printed, `p / (s / stride)` (a fraction).
pub fn seed_formula(p: u64, level: &Level, stride: u64) -> f64 {
    p as f64 / (level.size as f64 / stride.max(1) as f64)
}

/// The colours that would spread `lines` lines from `used_sets` sets of `ways` lines each
/// into enough sets to hold them.
pub fn colours_needed(lines: u64, used_sets: u64, ways: u64) -> u64 {
    lines.div_ceil(used_sets.max(1) * ways.max(1)).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_seeds_examples() {
        // Seed 001 §4.3: 512 KB and 1,024 KB 4-way L2 caches (32 B lines on the Pentium
        // Pro), 8 KB stacks: 256, 512, 1,024 processes need 4, 8, 16 and 2, 4, 8 colours.
        let l512 = Level::new(2, 512 << 10, 4, 32).unwrap();
        let l1m = Level::new(2, 1 << 20, 4, 32).unwrap();
        let got: Vec<u64> = [256, 512, 1024]
            .iter()
            .flat_map(|&p| [threshold(p, &l512, 8192), threshold(p, &l1m, 8192)])
            .collect();
        assert_eq!(got, [4, 2, 8, 4, 16, 8]);
        assert_eq!(seed_formula(1024, &l512, 8192), 16.0);
        assert_eq!(fit_per_colour(&l512, 8192), 64);
    }

    #[test]
    fn a_stride_beyond_one_way_keeps_only_the_ways() {
        // 48 KiB 12-way L1 (4 KiB per way): 8 KiB apart, every structure is in one set.
        let l1 = Level::new(1, 48 << 10, 12, 64).unwrap();
        assert_eq!(fit_per_colour(&l1, 8192), 12);
        assert_eq!(threshold(1024, &l1, 8192), 86);
        // A stride that is not a power of two reaches more sets: 3 KiB apart modulo 4 KiB
        // takes 4 values.
        assert_eq!(fit_per_colour(&l1, 3072), 48);
        assert_eq!(colours_needed(1024, 16, 16), 4);
        assert_eq!(colours_needed(10, 16, 16), 1);
    }
}
