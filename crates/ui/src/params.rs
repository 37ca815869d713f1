//! The page's state as it travels in request URLs: percent-decoded `name=value` pairs,
//! and the filters among them parsed by the same functions as the command line's flags
//! (`window`, `not_window`, `pid`, `tid`, `comm`, `cpu`, `key`, `min`, `max`).

use kstate_analyze::filter::{parse_dur, parse_window, Filters};

/// The query string of a request, decoded.
#[derive(Debug, Clone, Default)]
pub struct Params(Vec<(String, String)>);

impl Params {
    pub fn parse(query: &str) -> Result<Params, String> {
        let mut v = Vec::new();
        for part in query.split('&').filter(|p| !p.is_empty()) {
            let (k, val) = part.split_once('=').unwrap_or((part, ""));
            v.push((decode(k)?, decode(val)?));
        }
        Ok(Params(v))
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// A required parameter.
    pub fn need(&self, name: &str) -> Result<&str, String> {
        self.get(name)
            .ok_or_else(|| format!("the request lacks its {name:?} parameter"))
    }

    /// Parameter `name` as a number (`what` says which kind, for the message); `default`
    /// when absent or empty, required when `default` is None.
    pub fn number<T: std::str::FromStr>(
        &self,
        name: &str,
        what: &str,
        default: Option<T>,
    ) -> Result<T, String> {
        match (self.get(name), default) {
            (None | Some(""), Some(d)) => Ok(d),
            (None | Some(""), None) => Err(format!("the request lacks its {name:?} parameter")),
            (Some(s), _) => s
                .parse()
                .map_err(|_| format!("{name}: {s:?} is not {what}")),
        }
    }

    /// Comma-separated values of `name`, each parsed by `f`.
    fn list<T>(&self, name: &str, f: impl Fn(&str) -> Result<T, String>) -> Result<Vec<T>, String> {
        match self.get(name) {
            None | Some("") => Ok(Vec::new()),
            Some(s) => s.split(',').map(|x| f(x.trim())).collect(),
        }
    }

    /// The filters, parsed as `kstate analyze` parses its flags.
    pub fn filters(&self) -> Result<Filters, String> {
        let window = |n: &str| -> Result<_, String> {
            match self.get(n) {
                None | Some("") => Ok(None),
                Some(w) => parse_window(w).map(Some).map_err(|e| format!("{n}: {e}")),
            }
        };
        let int = |what: &'static str| {
            move |s: &str| -> Result<i32, String> {
                s.parse()
                    .map_err(|_| format!("{what}: {s:?} is not a number"))
            }
        };
        let dur = |n: &str| -> Result<Option<u64>, String> {
            match self.get(n) {
                None | Some("") => Ok(None),
                Some(d) => parse_dur(d).map(Some).map_err(|e| format!("{n}: {e}")),
            }
        };
        Ok(Filters {
            window: window("window")?,
            not_window: window("not_window")?,
            pids: self.list("pid", int("pid"))?,
            tids: self.list("tid", int("tid"))?,
            comms: self.list("comm", |s| Ok(s.to_string()))?,
            cpus: self.list("cpu", |s| {
                s.parse()
                    .map_err(|_| format!("cpu: {s:?} is not a CPU number"))
            })?,
            keys: self.list("key", |s| Ok(s.to_string()))?,
            min: dur("min")?,
            max: dur("max")?,
        })
    }
}

/// One key for caches: the filters as `describe` prints them (one canonical text).
pub fn filters_key(f: &Filters) -> String {
    f.describe()
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("&")
}

fn decode(s: &str) -> Result<String, String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = b
                    .get(i + 1..i + 3)
                    .and_then(|h| std::str::from_utf8(h).ok())
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                    .ok_or_else(|| format!("malformed URL: bad escape in {s:?}"))?;
                out.push(hex);
                i += 2;
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8(out).map_err(|_| format!("malformed URL: {s:?} is not UTF-8"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decoding_and_filters() {
        let p =
            Params::parse("a=syscall&window=0.5%3A1.25&comm=kstate,dd&pid=12&min=10us&x").unwrap();
        assert_eq!(p.get("a"), Some("syscall"));
        assert_eq!(p.get("x"), Some(""));
        let f = p.filters().unwrap();
        assert_eq!(f.window.unwrap().resolve(0), (500_000_000, 1_250_000_000));
        assert_eq!(f.comms, ["kstate", "dd"]);
        assert_eq!((f.pids.as_slice(), f.min), (&[12][..], Some(10_000)));
        assert!(Params::parse("a=%zz").is_err());
        let e = Params::parse("window=2:1").unwrap().filters().unwrap_err();
        assert!(e.contains("ends before it starts"), "{e}");
        assert!(Params::parse("pid=abc").unwrap().filters().is_err());
    }
}
