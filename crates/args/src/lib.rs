//! Range-checked numbers for command-line options. Every number a user types is checked
//! where it is parsed, so a value out of range is refused with a message that names the
//! option and the range (clap prefixes "invalid value 'V' for '--OPTION <N>'") instead of
//! overflowing, allocating without bound or running for ever further on.

mod filter;

pub use filter::FilterArgs;

use std::ops::RangeInclusive;
use std::time::Duration;

use clap::builder::RangedU64ValueParser;

/// Ring-buffer sizes `-b` takes, in KiB (64 KiB to 16 GiB per CPU).
pub const BUFFER_KIB: RangeInclusive<u64> = 64..=16 * 1024 * 1024;
/// Memory snapshot intervals, in ms (0: off; at most an hour).
pub const SYSINFO_MS: RangeInclusive<u64> = 0..=3_600_000;
/// The largest process id Linux gives (PID_MAX_LIMIT on 64-bit).
pub const PID_MAX: u64 = 4 * 1024 * 1024;

/// A whole number in `range`, of type `T` (`usize`, `u32`, ...).
pub fn int<T>(range: RangeInclusive<u64>) -> RangedU64ValueParser<T>
where
    T: TryFrom<u64> + Clone + Send + Sync + 'static,
    <T as TryFrom<u64>>::Error: std::error::Error + Send + Sync + 'static,
{
    RangedU64ValueParser::<T>::new().range(range)
}

/// A finite decimal number in `range` (NaN and infinities refused).
pub fn float(range: RangeInclusive<f64>) -> impl Fn(&str) -> Result<f64, String> + Clone {
    move |s: &str| {
        let v: f64 = s
            .trim()
            .parse()
            .map_err(|_| format!("not a number (expected {})", show(&range)))?;
        if !v.is_finite() || !range.contains(&v) {
            return Err(format!("out of range (expected {})", show(&range)));
        }
        Ok(v)
    }
}

fn show(r: &RangeInclusive<f64>) -> String {
    format!("a number from {} to {}", r.start(), r.end())
}

/// The longest recording `--duration` takes: a year.
const MAX_DURATION_S: u64 = 365 * 24 * 3600;

/// `--duration`: seconds (`1.5`) or a duration with a unit (`250ms`, `2s`), more than
/// zero and at most a year.
pub fn duration(s: &str) -> Result<Duration, String> {
    let ns = kstate_analyze::filter::parse_dur_or_secs(s).map_err(|_| {
        format!(
            "expected seconds (1.5) or a duration (250ms, 2s), up to {MAX_DURATION_S} s (a year)"
        )
    })?;
    if ns == 0 || ns > MAX_DURATION_S * 1_000_000_000 {
        return Err(format!(
            "out of range: more than 0 and at most {MAX_DURATION_S} s (a year)"
        ));
    }
    Ok(Duration::from_nanos(ns))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_take_units_and_refuse_the_rest() {
        assert_eq!(duration("1.5").unwrap(), Duration::from_millis(1500));
        assert_eq!(duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(duration("2s").unwrap(), Duration::from_secs(2));
        for bad in [
            "0",
            "-1",
            "1e20",
            "NaN",
            "inf",
            "1e20s",
            "99999999999",
            "",
            "5 parsecs",
        ] {
            assert!(duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn floats_are_finite_and_in_range() {
        let f = float(0.0..=100.0);
        assert_eq!(f("12.5").unwrap(), 12.5);
        for bad in ["NaN", "inf", "-inf", "-1", "100.5", "1e20", "x"] {
            assert!(f(bad).is_err(), "{bad}");
        }
    }
}
