//! `kstate watch` on a terminal: a dashboard redrawn every interval. Keys: p pause, s
//! sort (total, count, max, p99), Tab or 1-8 pick a panel (0 or a: all), q quit; Ctrl-C
//! stops as in `kstate record`.
//!
//! Plain ANSI escapes on the alternate screen, the terminal in non-canonical mode (keys
//! arrive one by one, Ctrl-C still signals); both undone when the dashboard is dropped.

use std::fmt::Write as _;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::sync::{Arc, Mutex};

use crate::alarm::Firing;
use kstate_analyze::analyzer::{Cell, Outcome, Row, Unit};
use kstate_analyze::live::Interval;
use kstate_analyze::stats::Agg;

const SORTS: [&str; 4] = ["total", "count", "max", "p99"];

/// What the dashboard shows; shared with the thread that reads keys.
struct View {
    paused: bool,
    sort: usize,
    /// 0: every panel; i: the i-th analyzer's panel alone.
    panel: usize,
    last: Option<Interval>,
    start: u64,
    buffer_bytes: u64,
    alarms: Vec<String>,
}

pub struct Dashboard {
    view: Arc<Mutex<View>>,
    saved: Option<libc::termios>,
}

impl Dashboard {
    /// Takes over the terminal (standard input and output).
    pub fn start(start: u64, buffer_bytes: u64) -> Dashboard {
        let saved = raw_mode();
        print!("\x1b[?1049h\x1b[?25l\x1b[2J");
        let _ = std::io::stdout().flush();
        let view = Arc::new(Mutex::new(View {
            paused: false,
            sort: 0,
            panel: 0,
            last: None,
            start,
            buffer_bytes,
            alarms: Vec::new(),
        }));
        let keys = Arc::clone(&view);
        // Reads keys until standard input closes; the process ending ends it.
        let _ = std::thread::Builder::new()
            .name("kstate-keys".into())
            .spawn(move || read_keys(&keys));
        Dashboard { view, saved }
    }

    /// Shows a new interval (unless paused) with the alarms it fired.
    pub fn update(&self, iv: Interval, fired: &[Firing]) {
        let Ok(mut v) = self.view.lock() else {
            return;
        };
        for f in fired {
            let at = f.end.saturating_sub(v.start) as f64 / 1e9;
            v.alarms.push(format!(
                "{at:8.3}s  {}: {}{}{}",
                f.rule,
                f.value_text,
                f.key.as_ref().map_or(String::new(), |k| format!(" at {k}")),
                crate::held_back(f)
            ));
        }
        if !v.paused {
            v.last = Some(iv);
        }
        draw(&v);
    }

    /// Adds a line of the watch log (an escalation, shedding, a loss) to the alarms'.
    pub fn note(&self, ts: u64, kind: &str, text: &str) {
        let Ok(mut v) = self.view.lock() else {
            return;
        };
        let at = ts.saturating_sub(v.start) as f64 / 1e9;
        v.alarms
            .push(format!("{at:8.3}s  {} {text}", kind.to_uppercase()));
        draw(&v);
    }
}

impl Drop for Dashboard {
    fn drop(&mut self) {
        print!("\x1b[?25h\x1b[?1049l");
        let _ = std::io::stdout().flush();
        if let Some(t) = &self.saved {
            // SAFETY: restores the attributes read from the same descriptor.
            unsafe { libc::tcsetattr(std::io::stdin().as_raw_fd(), libc::TCSANOW, t) };
        }
    }
}

/// Non-canonical, no echo; signals (Ctrl-C) kept. Returns the attributes to restore.
fn raw_mode() -> Option<libc::termios> {
    let fd = std::io::stdin().as_raw_fd();
    // SAFETY: termios is plain data; tcgetattr fills it or fails.
    let mut t: libc::termios = unsafe { std::mem::zeroed() };
    // SAFETY: a valid descriptor and a valid pointer.
    if unsafe { libc::tcgetattr(fd, &mut t) } != 0 {
        return None;
    }
    let saved = t;
    t.c_lflag &= !(libc::ICANON | libc::ECHO);
    t.c_cc[libc::VMIN] = 1;
    t.c_cc[libc::VTIME] = 0;
    // SAFETY: as above.
    unsafe { libc::tcsetattr(fd, libc::TCSANOW, &t) };
    Some(saved)
}

fn read_keys(view: &Mutex<View>) {
    let mut b = [0u8; 1];
    loop {
        // SAFETY: reads one byte into a valid buffer.
        let n = unsafe { libc::read(std::io::stdin().as_raw_fd(), b.as_mut_ptr().cast(), 1) };
        if n <= 0 {
            return;
        }
        let Ok(mut v) = view.lock() else {
            return;
        };
        let panels = v.last.as_ref().map_or(0, |iv| iv.outcomes.len());
        match b[0] {
            b'q' | b'Q' => {
                // Ends the watch as Ctrl-C does: the recorder stops and cleans up.
                // SAFETY: signals our own process.
                unsafe { libc::kill(libc::getpid(), libc::SIGINT) };
                return;
            }
            b'p' | b'P' | b' ' => v.paused = !v.paused,
            b's' | b'S' => v.sort = (v.sort + 1) % SORTS.len(),
            b'\t' => v.panel = (v.panel + 1) % (panels + 1),
            b'0' | b'a' => v.panel = 0,
            c @ b'1'..=b'9' if ((c - b'0') as usize) <= panels => v.panel = (c - b'0') as usize,
            _ => continue,
        }
        draw(&v);
    }
}

fn term_size() -> (usize, usize) {
    // SAFETY: winsize is plain data; the ioctl fills it or fails.
    let mut w: libc::winsize = unsafe { std::mem::zeroed() };
    // SAFETY: TIOCGWINSZ with a valid pointer.
    let ok = unsafe { libc::ioctl(std::io::stdout().as_raw_fd(), libc::TIOCGWINSZ, &mut w) } == 0;
    match ok && w.ws_col > 0 && w.ws_row > 0 {
        true => (w.ws_col as usize, w.ws_row as usize),
        false => (100, 40),
    }
}

fn draw(v: &View) {
    let (cols, rows) = term_size();
    let mut lines = screen(v, rows);
    lines.truncate(rows);
    let mut out = String::from("\x1b[H");
    for l in &lines {
        let cut: String = l.chars().take(cols).collect();
        let _ = write!(out, "{cut}\x1b[K\r\n");
    }
    out.push_str("\x1b[J");
    let mut so = std::io::stdout().lock();
    let _ = so.write_all(out.as_bytes()).and_then(|_| so.flush());
}

fn screen(v: &View, rows: usize) -> Vec<String> {
    let mut l = Vec::new();
    let Some(iv) = &v.last else {
        l.push("kstate watch: waiting for the first interval... (q quits)".into());
        return l;
    };
    let secs = (iv.end - iv.start) as f64 / 1e9;
    let panel_name = match v.panel {
        0 => "all".to_string(),
        i => iv
            .outcomes
            .get(i - 1)
            .map_or("all".into(), |o| o.info.name.to_string()),
    };
    l.push(format!(
        "kstate watch  {:.1} s{}   p pause  s sort: {}  Tab/1-{} panel: {}  q quit",
        iv.end.saturating_sub(v.start) as f64 / 1e9,
        if v.paused { "  [PAUSED]" } else { "" },
        SORTS[v.sort],
        iv.outcomes.len(),
        panel_name
    ));
    l.push(String::new());
    l.push(format!(
        "{:>4} {:>12} {:>10} {:>14} {:>10}",
        "CPU", "events/s", "MiB/s", "buffer lasts", "lost"
    ));
    for c in &iv.cpus {
        let bps = c.bytes as f64 / secs.max(1e-9);
        l.push(format!(
            "{:>4} {:>12.0} {:>10.2} {:>14} {:>10}",
            c.cpu,
            c.events as f64 / secs.max(1e-9),
            bps / (1 << 20) as f64,
            if bps > 0.0 {
                format!("{:.1} s", v.buffer_bytes as f64 / bps)
            } else {
                "-".into()
            },
            c.lost.map_or("?".into(), |n| n.to_string())
        ));
    }
    let alarm_rows = v.alarms.len().min(4);
    let shown: Vec<(usize, &Outcome)> = iv
        .outcomes
        .iter()
        .enumerate()
        .filter(|(i, _)| v.panel == 0 || v.panel == i + 1)
        .collect();
    // Each panel's fixed lines (a blank, its title, its tables, the keys' header) come
    // first; the keys share what is left, at least one row each.
    let fixed: usize = shown.iter().map(|(_, o)| 3 + table_lines(o)).sum();
    let left = rows.saturating_sub(l.len() + fixed + 2 + alarm_rows);
    let keys = (left / shown.len().max(1)).max(1);
    for (i, o) in shown {
        l.push(String::new());
        l.extend(panel(i + 1, o, SORTS[v.sort], keys));
    }
    l.push(String::new());
    l.push(format!("ALARMS ({})", v.alarms.len()));
    l.extend(v.alarms.iter().rev().take(alarm_rows).cloned());
    l
}

/// The lines an analyzer's tables take: each a header and its rows.
fn table_lines(o: &Outcome) -> usize {
    o.tables
        .iter()
        .filter(|t| !t.rows.is_empty())
        .map(|t| t.rows.len() + 1)
        .sum()
}

/// One analyzer: a title with the figures of every key together, its tables whole (e.g.
/// runq's run-queue length, one row per CPU: a handful of lines that the keys, often
/// hundreds, must not crowd out), then the top `keys` keys.
fn panel(n: usize, o: &Outcome, sort: &str, keys: usize) -> Vec<String> {
    let unit = o.info.unit;
    let fmt = |v: u64| match unit {
        Unit::Ns => kstate_analyze::filter::fmt_dur(v),
        _ => v.to_string(),
    };
    let mut all = Agg::default();
    for r in &o.rows {
        all.merge(&r.agg);
    }
    let pct = |a: &Agg, p: f64| if a.count > 0 { a.percentile(p) } else { 0 };
    let mut l = vec![format!(
        "{n} {} by {} ({}): {} in {} keys, p50 {}, p99 {}, max {}",
        o.info.name.to_uppercase(),
        o.by,
        o.info.value,
        all.count,
        o.rows.len(),
        fmt(pct(&all, 50.0)),
        fmt(pct(&all, 99.0)),
        fmt(all.max)
    )];
    for t in o.tables.iter().filter(|t| !t.rows.is_empty()) {
        l.push(format!("   {}: {}", t.name, t.columns.join("  ")));
        for row in &t.rows {
            let cells: Vec<String> = row
                .iter()
                .map(|c| match c {
                    Cell::Int(i) => i.to_string(),
                    Cell::Float(f) => format!("{f:.2}"),
                    Cell::Text(s) => s.clone(),
                })
                .collect();
            l.push(format!("   {}", cells.join("  ")));
        }
    }
    let mut sorted: Vec<&Row> = o.rows.iter().collect();
    let key = |a: &Agg| match sort {
        "count" => a.count,
        "max" => a.max,
        "p99" => pct(a, 99.0),
        _ => a.total,
    };
    sorted.sort_by(|a, b| {
        key(&b.agg)
            .cmp(&key(&a.agg))
            .then_with(|| a.key.cmp(&b.key))
    });
    l.push(format!(
        "   {:<32} {:>9} {:>12} {:>12} {:>12} {:>12}",
        "key", "count", "total", "p50", "p99", "max"
    ));
    for r in sorted.iter().take(keys) {
        l.push(format!(
            "   {:<32} {:>9} {:>12} {:>12} {:>12} {:>12}",
            r.key,
            r.agg.count,
            fmt(r.agg.total),
            fmt(pct(&r.agg, 50.0)),
            fmt(pct(&r.agg, 99.0)),
            fmt(r.agg.max)
        ));
    }
    l
}
