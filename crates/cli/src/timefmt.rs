//! Timestamps as users type and read them: seconds with up to nine decimals, exact to the
//! nanosecond (parsed as decimal text, never through a float).

/// `259445.106948920` -> 259445106948920.
pub fn parse_secs(s: &str) -> Result<u64, String> {
    let bad = || format!("invalid time {s:?}: expected seconds like 259445.106948920");
    let (int, frac) = s.trim().split_once('.').unwrap_or((s.trim(), ""));
    if frac.len() > 9
        || !frac.bytes().all(|b| b.is_ascii_digit())
        || int.is_empty() && frac.is_empty()
    {
        return Err(bad());
    }
    let secs: u64 = if int.is_empty() {
        0
    } else {
        int.parse().map_err(|_| bad())?
    };
    let nanos: u64 = if frac.is_empty() {
        0
    } else {
        format!("{frac:0<9}").parse().map_err(|_| bad())?
    };
    secs.checked_mul(1_000_000_000)
        .and_then(|n| n.checked_add(nanos))
        .ok_or_else(bad)
}

pub use kstate_render::utc::fmt_utc;

#[cfg(test)]
mod tests {
    use super::*;
    // What `kstate dump` prints (kstate-views' dump formats with it).
    use kstate_analyze::filter::fmt_secs;

    #[test]
    fn round_trips_exactly() {
        assert_eq!(parse_secs("259445.106948920"), Ok(259_445_106_948_920));
        assert_eq!(parse_secs("1.5"), Ok(1_500_000_000));
        assert_eq!(parse_secs("3"), Ok(3_000_000_000));
        assert_eq!(fmt_secs(259_445_106_948_920), "259445.106948920");
        assert!(parse_secs("1.0000000001").is_err());
        assert!(parse_secs("x").is_err());
        assert!(parse_secs("-1").is_err());
    }
}
