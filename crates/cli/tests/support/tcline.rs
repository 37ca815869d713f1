//! The lines of `trace-cmd report -t`, the oracle the analyzer tests compute from:
//! `comm-pid [cpu] secs.nsecs: event: fields`.

/// One event line.
#[derive(Debug)]
pub struct Line<'a> {
    pub pid: i64,
    pub cpu: u32,
    pub ts: u64,
    pub event: &'a str,
    /// The fields, trimmed.
    pub rest: &'a str,
}

pub fn parse_line(line: &str) -> Option<Line<'_>> {
    // The CPU column is the first `[digits]` followed by a nanosecond timestamp and a
    // colon; a comm may hold ` [` itself.
    for (i, _) in line.match_indices(" [") {
        let after = &line[i + 2..];
        let Some(close) = after.find(']') else {
            continue;
        };
        let Ok(cpu) = after[..close].parse::<u32>() else {
            continue;
        };
        let rest = after[close + 1..].trim_start();
        let Some(colon) = rest.find(": ") else {
            continue;
        };
        let Some((s, ns)) = rest[..colon].split_once('.') else {
            continue;
        };
        let (Ok(s), Ok(ns_v)) = (s.parse::<u64>(), ns.parse::<u64>()) else {
            continue;
        };
        if ns.len() != 9 {
            continue;
        }
        let Some(pid) = line[..i]
            .trim()
            .rsplit_once('-')
            .and_then(|x| x.1.parse().ok())
        else {
            continue;
        };
        let rest = &rest[colon + 2..];
        let end = rest.find(':')?;
        return Some(Line {
            pid,
            cpu,
            ts: s * 1_000_000_000 + ns_v,
            event: rest[..end].trim(),
            rest: rest[end + 1..].trim(),
        });
    }
    None
}

/// The value of `name=` (or `name: `, as system-call events print) in a field list, up
/// to the next space or comma.
pub fn field<'a>(rest: &'a str, name: &str) -> &'a str {
    let t = rest.trim_start();
    for pat in [format!("{name}="), format!("{name}: ")] {
        let at = if t.starts_with(&pat) {
            Some(0)
        } else {
            t.find(&format!(" {pat}")).map(|i| i + 1)
        };
        if let Some(at) = at {
            let v = &t[at + pat.len()..];
            return v.split([' ', ',']).next().unwrap_or("");
        }
    }
    panic!("no {name} in {rest:?}")
}

/// A numeric field, decimal or 0x-hexadecimal.
pub fn num(rest: &str, name: &str) -> i64 {
    let f = field(rest, name);
    let r = match f.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).map(|v| v as i64),
        None => f.parse(),
    };
    r.unwrap_or_else(|_| panic!("{name} is not a number in {rest:?}"))
}
