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

/// An event line of `trace-cmd report -t`, through the one header parser the oracle
/// tests share ([`super::tracecmd::parse_header`]).
pub fn parse_line(line: &str) -> Option<Line<'_>> {
    let h = super::tracecmd::parse_header(line)?;
    Some(Line {
        pid: h.pid,
        cpu: h.cpu,
        ts: h.ts_ns,
        event: h.event.trim(),
        rest: h.rest.trim(),
    })
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
