//! Wall-clock times as people read them.

/// Nanoseconds since the Unix epoch as UTC ISO-8601, `2023-11-14T22:13:20.000000000Z`;
/// None outside years 0000..=9999.
pub fn fmt_utc(ns: i128) -> Option<String> {
    const NS: i128 = 1_000_000_000;
    let secs = ns.div_euclid(NS);
    let nanos = ns.rem_euclid(NS);
    let days = secs.div_euclid(86_400);
    let tod = secs.rem_euclid(86_400);
    // Howard Hinnant's civil_from_days: the proleptic Gregorian calendar in 400-year eras
    // of 146097 days, counted from 0000-03-01 so the leap day ends each year.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097); // day of era, 0..=146096
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365; // 0..=399
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // 0..=365, from March 1st
    let mp = (5 * doy + 2) / 153; // month from March, 0..=11
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i128::from(month <= 2);
    if !(0..=9999).contains(&year) {
        return None;
    }
    Some(format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{nanos:09}Z",
        tod / 3600,
        tod / 60 % 60,
        tod % 60
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_dates() {
        assert_eq!(fmt_utc(0).unwrap(), "1970-01-01T00:00:00.000000000Z");
        assert_eq!(fmt_utc(-1).unwrap(), "1969-12-31T23:59:59.999999999Z");
        assert_eq!(
            fmt_utc(1_700_000_000_123_456_789).unwrap(),
            "2023-11-14T22:13:20.123456789Z"
        );
        assert_eq!(
            fmt_utc(951_782_400 * 1_000_000_000).unwrap(),
            "2000-02-29T00:00:00.000000000Z"
        );
        assert_eq!(
            fmt_utc(253_402_300_799 * 1_000_000_000).unwrap(),
            "9999-12-31T23:59:59.000000000Z"
        );
        assert_eq!(fmt_utc(253_402_300_800 * 1_000_000_000), None);
        assert_eq!(
            fmt_utc(-62_167_219_200 * 1_000_000_000).unwrap(),
            "0000-01-01T00:00:00.000000000Z"
        );
        assert_eq!(fmt_utc(-62_167_219_201 * 1_000_000_000), None);
    }

    /// Against GNU date for seconds spread over 1600..2400, leap days and year ends.
    #[test]
    fn utc_dates_match_gnu_date() {
        let mut secs: Vec<i64> = Vec::new();
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..400 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            secs.push((x % 25_000_000_000) as i64 - 11_676_096_000);
        }
        // 1900-03-01, 2000-02-29, 2100-02-28 and the seconds around year ends.
        for s in [-2_203_891_200i64, 951_782_400, 4_107_456_000] {
            secs.extend([s - 1, s, s + 86_399, s + 86_400]);
        }
        for y in [1969, 1999, 2000, 2023, 2024, 2099, 2100] {
            secs.push((y - 1970) * 31_556_952); // about new year; exact values vary
        }
        let input: String = secs.iter().map(|s| format!("@{s}\n")).collect();
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("secs");
        std::fs::write(&f, input).unwrap();
        let out = std::process::Command::new("date")
            .args(["-u", "+%Y-%m-%dT%H:%M:%S.000000000Z", "-f"])
            .arg(&f)
            .output()
            .expect("GNU date runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8(out.stdout).unwrap();
        let want: Vec<&str> = text.lines().collect();
        assert_eq!(want.len(), secs.len());
        for (s, w) in secs.iter().zip(want) {
            assert_eq!(fmt_utc(*s as i128 * 1_000_000_000).unwrap(), w, "@{s}");
        }
    }
}
