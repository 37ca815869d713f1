//! Reads valgrind cachegrind's output file (`cachegrind.out.PID`), the counts of a
//! simulated cache per source line, summed here per function.
//!
//! The format is text, one item a line:
//!
//! ```text
//! desc: D1 cache:  32768 B, 64 B, 8-way associative     (any number)
//! cmd: ./prog arg
//! events: Ir I1mr ILmr Dr D1mr DLmr Dw D1mw DLmw
//! fl=src/file.c                                           (file of the lines below)
//! fn=function                                             (function of the lines below)
//! 12 3 1 1 0 0 0 0 0 0                                    (line number, then counts;
//!                                                           missing trailing counts are 0)
//! summary: 123 4 ...                                      (the totals)
//! ```
//!
//! Names may be compressed as callgrind does (`fl=(3) name` the first time, `fl=(3)`
//! after); both forms are read. Anything else (`positions:`, `version:`, comments) is
//! skipped.

use std::collections::HashMap;

use kstate_format::{Error, ErrorKind};

use kstate_views::profile::compare::Counts;

/// Counts of one function in one source file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Function {
    pub file: String,
    pub name: String,
    /// One per event of [`Cachegrind::events`].
    pub counts: Vec<u64>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Cachegrind {
    /// The `desc:` lines: the simulated caches' configuration.
    pub desc: Vec<String>,
    pub cmd: String,
    pub events: Vec<String>,
    /// The `summary:` line, or the sum of the functions when there is none.
    pub summary: Vec<u64>,
    /// In file order of first appearance.
    pub functions: Vec<Function>,
}

impl Cachegrind {
    /// The index of an event, e.g. `D1mr`.
    pub fn event(&self, name: &str) -> Option<usize> {
        self.events.iter().position(|e| e == name)
    }

    /// The counts summed per function over its files (`cg_annotate` shows one row per
    /// `file:function`; a function's inlined code comes from other files), with the file
    /// that has most of its first event (instructions): where it is written.
    pub fn by_function(&self) -> Vec<Function> {
        let mut out: Vec<Function> = Vec::new();
        let mut at: HashMap<&str, (usize, u64)> = HashMap::new();
        for f in &self.functions {
            let first = f.counts.first().copied().unwrap_or(0);
            match at.get_mut(f.name.as_str()) {
                Some((i, best)) => {
                    let g = &mut out[*i];
                    for (a, b) in g.counts.iter_mut().zip(&f.counts) {
                        *a = a.saturating_add(*b);
                    }
                    if first > *best {
                        *best = first;
                        g.file = f.file.clone();
                    }
                }
                None => {
                    at.insert(&f.name, (out.len(), first));
                    out.push(f.clone());
                }
            }
        }
        out
    }

    /// The cache-pollution comparison's counts: data references (Dr+Dw) as the base, D1
    /// and LL data misses (read + write) as the tested counts.
    pub fn data_counts(&self) -> Result<(Counts, Vec<Counts>), Error> {
        let idx = |e: &str| {
            self.event(e).ok_or_else(|| {
                Error::new(
                    ErrorKind::Unsupported,
                    None,
                    format!(
                        "cachegrind output has no {e} event (events: {}); it needs --cache-sim=yes",
                        self.events.join(" ")
                    ),
                )
            })
        };
        let pairs = [
            ("data refs", "Dr", "Dw"),
            ("D1 misses", "D1mr", "D1mw"),
            ("LL misses", "DLmr", "DLmw"),
        ];
        let fns = self.by_function();
        let mut all = Vec::new();
        for (name, r, w) in pairs {
            let (r, w) = (idx(r)?, idx(w)?);
            all.push(Counts {
                name: name.into(),
                total: self.summary[r].saturating_add(self.summary[w]),
                unit: "",
                by_symbol: fns
                    .iter()
                    .map(|f| {
                        (
                            (f.name.clone(), f.file.clone()),
                            f.counts[r].saturating_add(f.counts[w]),
                        )
                    })
                    .collect(),
            });
        }
        let base = all.remove(0);
        Ok((base, all))
    }
}

fn bad(line: usize, msg: impl Into<String>) -> Error {
    Error::new(
        ErrorKind::Corrupt,
        None,
        format!("cachegrind output, line {line}: {}", msg.into()),
    )
}

/// `(N) name` / `(N)` / `name`, with the table of compressed names.
fn name(v: &str, table: &mut HashMap<String, String>, line: usize) -> Result<String, Error> {
    let v = v.trim();
    let Some(rest) = v.strip_prefix('(') else {
        return Ok(v.to_string());
    };
    // `(below main)` is a name, `(12)` a number.
    let Some((id, tail)) = rest
        .split_once(')')
        .filter(|(id, _)| !id.is_empty() && id.bytes().all(|c| c.is_ascii_digit()))
    else {
        return Ok(v.to_string());
    };
    let tail = tail.trim();
    if tail.is_empty() {
        table
            .get(id)
            .cloned()
            .ok_or_else(|| bad(line, format!("name ({id}) used before it is defined")))
    } else {
        table.insert(id.to_string(), tail.to_string());
        Ok(tail.to_string())
    }
}

fn numbers(s: &str, n: usize, line: usize) -> Result<Vec<u64>, Error> {
    let mut v = Vec::with_capacity(n);
    for t in s.split_ascii_whitespace() {
        v.push(
            t.parse::<u64>()
                .map_err(|_| bad(line, format!("{t:?} is not a count")))?,
        );
    }
    if v.len() > n {
        return Err(bad(line, format!("{} counts for {n} events", v.len())));
    }
    v.resize(n, 0);
    Ok(v)
}

pub fn parse(text: &str) -> Result<Cachegrind, Error> {
    let mut cg = Cachegrind::default();
    let mut files: HashMap<String, String> = HashMap::new();
    let mut fns: HashMap<String, String> = HashMap::new();
    let mut index: HashMap<(String, String), usize> = HashMap::new();
    let mut file = String::new();
    let mut current: Option<usize> = None;
    let mut summary = None;
    let mut have_events = false;
    for (i, raw) in text.lines().enumerate() {
        let ln = i + 1;
        let line = raw.trim_end();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some(v) = line.strip_prefix("desc:") {
            cg.desc.push(v.trim().to_string());
        } else if let Some(v) = line.strip_prefix("cmd:") {
            cg.cmd = v.trim().to_string();
        } else if let Some(v) = line.strip_prefix("events:") {
            cg.events = v.split_ascii_whitespace().map(String::from).collect();
            if cg.events.is_empty() {
                return Err(bad(ln, "no events named"));
            }
            have_events = true;
        } else if let Some(v) = line
            .strip_prefix("fl=")
            .or_else(|| line.strip_prefix("fi="))
            .or_else(|| line.strip_prefix("fe="))
        {
            file = name(v, &mut files, ln)?;
            current = None;
        } else if let Some(v) = line.strip_prefix("fn=") {
            let f = name(v, &mut fns, ln)?;
            let n = cg.events.len();
            let k = (file.clone(), f.clone());
            let at = *index.entry(k).or_insert_with(|| {
                cg.functions.push(Function {
                    file: file.clone(),
                    name: f,
                    counts: vec![0; n],
                });
                cg.functions.len() - 1
            });
            current = Some(at);
        } else if let Some(v) = line
            .strip_prefix("summary:")
            .or_else(|| line.strip_prefix("totals:"))
        {
            if !have_events {
                return Err(bad(ln, "summary before the events: line"));
            }
            summary = Some(numbers(v, cg.events.len(), ln)?);
        } else if line.starts_with(|c: char| c.is_ascii_digit()) {
            if !have_events {
                return Err(bad(ln, "counts before the events: line"));
            }
            let Some(at) = current else {
                return Err(bad(ln, "counts before any fn= line"));
            };
            let (_line_no, rest) = line.split_once(' ').unwrap_or((line, ""));
            let v = numbers(rest, cg.events.len(), ln)?;
            for (a, b) in cg.functions[at].counts.iter_mut().zip(v) {
                *a = a.saturating_add(b);
            }
        }
        // Other headers (version:, creator:, positions:, pid:) carry nothing used here.
    }
    if !have_events {
        return Err(Error::new(
            ErrorKind::Corrupt,
            None,
            "cachegrind output: no events: line (is this a cachegrind.out file?)",
        ));
    }
    cg.summary = summary.unwrap_or_else(|| {
        let mut s = vec![0u64; cg.events.len()];
        for f in &cg.functions {
            for (a, b) in s.iter_mut().zip(&f.counts) {
                *a = a.saturating_add(*b);
            }
        }
        s
    });
    Ok(cg)
}

#[cfg(test)]
mod tests {
    use super::*;

    const OUT: &str = "\
desc: I1 cache:         32768 B, 64 B, 8-way associative
desc: D1 cache:         49152 B, 64 B, 12-way associative
desc: LL cache:         33554432 B, 64 B, 16-way associative
cmd: ./prog 1
events: Ir I1mr ILmr Dr D1mr DLmr Dw D1mw DLmw
fl=/src/a.rs
fn=prog::stream
10 5 1 1 2 2 2
11 5 0 0 2 1
fn=prog::hot
20 100 0 0 50 0 0 10
fl=/src/inlined.rs
fn=prog::stream
3 1 0 0 1 1 1 0 0 0
summary: 111 1 1 55 4 4 10 0 0
";

    #[test]
    fn reads_functions_and_summary() {
        let cg = parse(OUT).unwrap();
        assert_eq!(cg.desc.len(), 3);
        assert_eq!(cg.cmd, "./prog 1");
        assert_eq!(cg.event("D1mr"), Some(4));
        assert_eq!(cg.functions.len(), 3);
        assert_eq!(cg.functions[0].counts, vec![10, 1, 1, 4, 3, 2, 0, 0, 0]);
        assert_eq!(cg.summary[0], 111);
        let f = cg.by_function();
        assert_eq!(
            (f[0].name.as_str(), f[0].file.as_str()),
            ("prog::stream", "/src/a.rs")
        );
        assert_eq!(f[0].counts, vec![11, 1, 1, 5, 4, 3, 0, 0, 0]);
        assert_eq!(f[1].counts[3], 50);
        let (base, tested) = cg.data_counts().unwrap();
        assert_eq!((base.name.as_str(), base.total), ("data refs", 65));
        let stream = |c: &Counts| {
            c.by_symbol
                .iter()
                .find(|x| x.0 .0 == "prog::stream")
                .unwrap()
                .1
        };
        assert_eq!(
            (stream(&base), stream(&tested[0]), stream(&tested[1])),
            (5, 4, 3)
        );
        assert_eq!(tested[0].total, 4);
    }

    #[test]
    fn compressed_names_and_errors() {
        let t = "events: Dr D1mr\nfl=(1) /a.c\nfn=(1) f\n1 4 2\nfn=(2) g\n2 1\nfl=(1)\nfn=(1)\n3 1 1\nfn=(below main)\n4 0\n";
        let cg = parse(t).unwrap();
        assert_eq!(cg.by_function()[0].counts, vec![5, 3]);
        assert_eq!(cg.by_function()[2].name, "(below main)");
        assert_eq!(cg.summary, vec![6, 3]);
        assert!(cg
            .data_counts()
            .unwrap_err()
            .to_string()
            .contains("--cache-sim=yes"));
        for (text, want) in [
            ("", "no events"),
            ("events: A\nfn=f\n1 x\n", "not a count"),
            ("events: A\nfn=f\n1 1 2\n", "2 counts for 1 events"),
            ("events: A\n1 1\n", "before any fn="),
            ("events: A\nfn=(4)\n", "used before"),
            ("fn=f\n1 1\n", "before the events"),
        ] {
            let e = parse(text).unwrap_err();
            assert!(e.to_string().contains(want), "{text:?}: {e}");
        }
    }
}
