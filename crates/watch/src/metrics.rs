//! `--metrics ADDR`: the watch's figures for Prometheus at `http://ADDR/metrics`, counted
//! from the start of the watch: per analyzer (and keying) and key the samples as a
//! histogram (count, sum, buckets); per CPU the events, the events lost and the ring
//! buffer's unread fill; the alarms fired per rule; the intervals analysed.
//!
//! OpenMetrics text for scrapers that ask for it (Prometheus does), the classic text
//! format (0.0.4, what `promtool check metrics` reads) otherwise; the two differ only in
//! how counters are declared and the `# EOF` end.
//!
//! Histogram buckets are decades (1 us .. 10 s for times, 1 .. 1024 for counts): each
//! sample is counted in the first bucket whose bound is at or above the upper edge of
//! its log-linear bucket (`kstate_analyze::hist`), so a sample within 1/128 below a bound
//! may count in the next. Keys per analyzer are bounded (`KEYS`): the least recently seen
//! key is folded into `key="(other)"`, so memory and the series Prometheus stores stay
//! bounded over hours of new pids.
//!
//! The server is a plain `std::net` listener on a thread of its own: one request at a
//! time, each read with a timeout and a size cap, nothing but `GET /metrics`. A scrape
//! every few seconds needs no more, and it adds no runtime and no dependency.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::alarm::Firing;
use kstate_analyze::analyzer::Unit;
use kstate_analyze::live::Interval;
use kstate_analyze::stats::Agg;
use kstate_format::sections::RingStats;

/// Keys kept per analyzer and keying before the least recently seen is folded into
/// "(other)".
const KEYS: usize = 50;

/// Bucket bounds: ns for times (1 us .. 10 s: LKST's decades from 1 us), plain for
/// counts.
const TIME_BOUNDS: &[u64; 8] = match kstate_analyze::hist::DECADE_UPPER_NS.split_first() {
    Some((_, rest)) => match rest.first_chunk::<8>() {
        Some(b) => b,
        None => panic!("eight decades from 1 us"),
    },
    None => panic!("eight decades from 1 us"),
};
const COUNT_BOUNDS: [u64; 8] = [1, 2, 4, 16, 64, 256, 1024, 4096];

/// One key's samples since the start: per bucket (not yet cumulative), the rest.
#[derive(Clone, Default)]
struct Hist {
    buckets: [u64; 9],
    count: u64,
    sum: u64,
    /// The interval in which it was last seen (for folding the stalest).
    seen: u64,
}

impl Hist {
    fn add(&mut self, a: &Agg, bounds: &[u64; 8]) {
        for (_, hi, c) in a.hist.buckets() {
            let i = bounds.iter().position(|&b| hi <= b).unwrap_or(8);
            self.buckets[i] += c;
        }
        self.count += a.count;
        self.sum = self.sum.saturating_add(a.total);
    }

    fn merge(&mut self, o: &Hist) {
        for (a, b) in self.buckets.iter_mut().zip(o.buckets) {
            *a += b;
        }
        self.count += o.count;
        self.sum = self.sum.saturating_add(o.sum);
    }
}

/// One analyzer and keying.
struct Family {
    name: &'static str,
    by: String,
    time: bool,
    about: &'static str,
    keys: HashMap<String, Hist>,
    other: Hist,
}

#[derive(Default)]
struct Cpu {
    events: u64,
    lost: u64,
    fill: Option<f64>,
}

/// Everything counted since the start.
#[derive(Default)]
pub struct State {
    intervals: u64,
    families: Vec<Family>,
    cpus: BTreeMap<u32, Cpu>,
    alarms: BTreeMap<String, u64>,
    /// Seconds from an interval's end to its alarms being acted on, the last one.
    alarm_latency: Option<f64>,
}

impl State {
    /// Adds one interval and the alarms it fired.
    pub fn interval(&mut self, iv: &Interval, fired: &[Firing]) {
        self.intervals += 1;
        let n = self.intervals;
        for o in &iv.outcomes {
            let time = o.info.unit == Unit::Ns;
            let f = match self
                .families
                .iter_mut()
                .position(|f| f.name == o.info.name && f.by == o.by)
            {
                Some(i) => &mut self.families[i],
                None => {
                    self.families.push(Family {
                        name: o.info.name,
                        by: o.by.to_string(),
                        time,
                        about: o.info.about,
                        keys: HashMap::new(),
                        other: Hist::default(),
                    });
                    let last = self.families.len() - 1;
                    &mut self.families[last]
                }
            };
            let bounds = if time { TIME_BOUNDS } else { &COUNT_BOUNDS };
            for r in &o.rows {
                if !f.keys.contains_key(&r.key) && f.keys.len() >= KEYS {
                    fold_stalest(f);
                }
                let h = f.keys.entry(r.key.clone()).or_default();
                h.add(&r.agg, bounds);
                h.seen = n;
            }
        }
        for c in &iv.cpus {
            let e = self.cpus.entry(c.cpu).or_default();
            e.events += c.events;
            // A loss the kernel did not count is at least one event.
            e.lost += c.lost.unwrap_or(1);
        }
        for f in fired {
            *self.alarms.entry(f.rule.clone()).or_default() += 1;
        }
    }

    /// The ring buffers' unread fill now.
    pub fn ring(&mut self, ring: &[RingStats], buffer_bytes: u64) {
        for r in ring {
            if buffer_bytes > 0 {
                self.cpus.entry(r.cpu).or_default().fill =
                    Some((r.bytes as f64 / buffer_bytes as f64).min(1.0));
            }
        }
    }

    pub fn alarm_latency(&mut self, secs: f64) {
        self.alarm_latency = Some(secs);
    }

    /// The text of a scrape: OpenMetrics, or the classic format.
    pub fn render(&self, open_metrics: bool) -> String {
        let mut out = String::new();
        let counter = |out: &mut String, name: &str, help: &str| {
            // OpenMetrics names the family without its _total; the classic format names
            // the sample.
            let family = match open_metrics {
                true => name.to_string(),
                false => format!("{name}_total"),
            };
            let _ = writeln!(out, "# HELP {family} {help}");
            let _ = writeln!(out, "# TYPE {family} counter");
        };
        counter(
            &mut out,
            "kstate_watch_intervals",
            "Intervals analysed since the start.",
        );
        let _ = writeln!(out, "kstate_watch_intervals_total {}", self.intervals);
        for f in &self.families {
            let name = match f.time {
                true => format!("kstate_{}_seconds", f.name),
                false => format!("kstate_{}", f.name),
            };
            let _ = writeln!(
                out,
                "# HELP {name} {}: samples that completed since the start, by {}.",
                escape_help(f.about),
                escape_help(&f.by)
            );
            let _ = writeln!(out, "# TYPE {name} histogram");
            if f.time {
                let _ = writeln!(out, "# UNIT {name} seconds");
            }
            let mut keys: Vec<(&String, &Hist)> = f.keys.iter().collect();
            keys.sort_by(|a, b| a.0.cmp(b.0));
            let other = "(other)".to_string();
            if f.other.count > 0 {
                keys.push((&other, &f.other));
            }
            let bounds = if f.time { TIME_BOUNDS } else { &COUNT_BOUNDS };
            for (key, h) in keys {
                let labels = format!("by=\"{}\",key=\"{}\"", escape(&f.by), escape(key));
                let mut cum = 0;
                for (i, b) in bounds.iter().enumerate() {
                    cum += h.buckets[i];
                    let le = match f.time {
                        true => fmt_float(*b as f64 / 1e9),
                        false => fmt_float(*b as f64),
                    };
                    let _ = writeln!(out, "{name}_bucket{{{labels},le=\"{le}\"}} {cum}");
                }
                let _ = writeln!(out, "{name}_bucket{{{labels},le=\"+Inf\"}} {}", h.count);
                let _ = writeln!(out, "{name}_count{{{labels}}} {}", h.count);
                let sum = match f.time {
                    true => h.sum as f64 / 1e9,
                    false => h.sum as f64,
                };
                let _ = writeln!(out, "{name}_sum{{{labels}}} {}", fmt_float(sum));
            }
        }
        counter(
            &mut out,
            "kstate_watch_cpu_events",
            "Events recorded per CPU since the start.",
        );
        for (cpu, c) in &self.cpus {
            let _ = writeln!(
                out,
                "kstate_watch_cpu_events_total{{cpu=\"{cpu}\"}} {}",
                c.events
            );
        }
        counter(
            &mut out,
            "kstate_watch_cpu_lost_events",
            "Events the kernel dropped per CPU since the start (an uncounted loss counts one).",
        );
        for (cpu, c) in &self.cpus {
            let _ = writeln!(
                out,
                "kstate_watch_cpu_lost_events_total{{cpu=\"{cpu}\"}} {}",
                c.lost
            );
        }
        let _ = writeln!(
            out,
            "# HELP kstate_watch_cpu_buffer_fill_ratio Unread part of each CPU's ring buffer at the last interval."
        );
        let _ = writeln!(out, "# TYPE kstate_watch_cpu_buffer_fill_ratio gauge");
        for (cpu, c) in &self.cpus {
            if let Some(f) = c.fill {
                let _ = writeln!(
                    out,
                    "kstate_watch_cpu_buffer_fill_ratio{{cpu=\"{cpu}\"}} {}",
                    fmt_float(f)
                );
            }
        }
        counter(
            &mut out,
            "kstate_watch_alarms_fired",
            "Alarm firings per rule since the start.",
        );
        for (rule, n) in &self.alarms {
            let _ = writeln!(
                out,
                "kstate_watch_alarms_fired_total{{rule=\"{}\"}} {n}",
                escape(rule)
            );
        }
        if let Some(l) = self.alarm_latency {
            let _ = writeln!(
                out,
                "# HELP kstate_watch_alarm_latency_seconds From the end of the last interval that fired an alarm to the alarm being acted on."
            );
            let _ = writeln!(out, "# TYPE kstate_watch_alarm_latency_seconds gauge");
            if open_metrics {
                let _ = writeln!(out, "# UNIT kstate_watch_alarm_latency_seconds seconds");
            }
            let _ = writeln!(out, "kstate_watch_alarm_latency_seconds {}", fmt_float(l));
        }
        if open_metrics {
            out.push_str("# EOF\n");
        }
        out
    }
}

/// Folds the key seen longest ago into "(other)".
fn fold_stalest(f: &mut Family) {
    let Some(k) = f
        .keys
        .iter()
        .min_by(|a, b| a.1.seen.cmp(&b.1.seen).then_with(|| a.0.cmp(b.0)))
        .map(|(k, _)| k.clone())
    else {
        return;
    };
    if let Some(h) = f.keys.remove(&k) {
        f.other.merge(&h);
    }
}

/// A label value: backslash, double quote and newline escaped.
fn escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// HELP text: backslash and newline escaped.
fn escape_help(s: &str) -> String {
    s.replace('\\', "\\\\").replace('\n', "\\n")
}

/// A float as the text formats take it: `0.001`, `1e-06`, `10`.
fn fmt_float(v: f64) -> String {
    if v == v.trunc() && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

/// Locks the state; a thread that panicked holding it left it as it was.
pub fn lock(s: &Mutex<State>) -> MutexGuard<'_, State> {
    s.lock().unwrap_or_else(|e| e.into_inner())
}

/// The listening thread; stopped and joined when dropped.
pub struct Server {
    stop: Arc<AtomicBool>,
    addr: SocketAddr,
    thread: Option<JoinHandle<()>>,
}

/// The longest a client may take to send its request.
const READ_TIMEOUT: Duration = Duration::from_secs(2);
/// The largest request read.
const REQUEST_MAX: usize = 8 << 10;

impl Server {
    /// Listens on `addr` (refused there: the reason) and serves `state`.
    pub fn start(addr: SocketAddr, state: Arc<Mutex<State>>) -> Result<Server, String> {
        let listener = TcpListener::bind(addr)
            .map_err(|e| format!("--metrics {addr}: cannot listen there: {e}"))?;
        let addr = listener.local_addr().unwrap_or(addr);
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let thread = std::thread::Builder::new()
            .name("kstate-metrics".into())
            .spawn(move || {
                for conn in listener.incoming() {
                    if stopping.load(Ordering::SeqCst) {
                        return;
                    }
                    if let Ok(c) = conn {
                        serve(c, &state);
                    }
                }
            })
            .map_err(|e| format!("--metrics: starting its thread: {e}"))?;
        Ok(Server {
            stop,
            addr,
            thread: Some(thread),
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accept.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Answers one request.
fn serve(mut c: TcpStream, state: &Mutex<State>) {
    let _ = c.set_read_timeout(Some(READ_TIMEOUT));
    let _ = c.set_write_timeout(Some(READ_TIMEOUT));
    let mut req = Vec::new();
    let mut buf = [0u8; 1024];
    while !req.windows(4).any(|w| w == b"\r\n\r\n") && req.len() < REQUEST_MAX {
        match c.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => req.extend_from_slice(&buf[..n]),
        }
    }
    let text = String::from_utf8_lossy(&req);
    let mut first = text.lines().next().unwrap_or("").split_whitespace();
    let (method, path) = (first.next().unwrap_or(""), first.next().unwrap_or(""));
    let open_metrics = text.lines().any(|l| {
        l.to_ascii_lowercase().starts_with("accept:")
            && l.to_ascii_lowercase()
                .contains("application/openmetrics-text")
    });
    let (status, ctype, body) = match (method, path.split('?').next().unwrap_or("")) {
        ("GET", "/metrics") => {
            let body = lock(state).render(open_metrics);
            let ctype = match open_metrics {
                true => "application/openmetrics-text; version=1.0.0; charset=utf-8",
                false => "text/plain; version=0.0.4; charset=utf-8",
            };
            ("200 OK", ctype, body)
        }
        ("GET", _) => (
            "404 Not Found",
            "text/plain; charset=utf-8",
            "kstate watch serves /metrics only\n".to_string(),
        ),
        _ => (
            "405 Method Not Allowed",
            "text/plain; charset=utf-8",
            "GET /metrics\n".to_string(),
        ),
    };
    let _ = write!(
        c,
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
}
