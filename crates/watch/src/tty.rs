//! `kstate watch` on a terminal: a dashboard redrawn every interval (ratatui on
//! crossterm). Keys: p pause, s sort (total, count, max, p99), Tab or 1-8 pick a panel
//! (0 or a: all), Up/Down/PgUp/PgDn/Home scroll the alarms, w save now (flight
//! recorder), q or Ctrl-C quit (as Ctrl-C does in `kstate record`).
//!
//! The title line is pinned; the CPU table, the panels and the alarms share the rest. In
//! a panel the key column shrinks before any figure does (at 80 columns p99 and max stay).
//! The alarms' panel lists alarms, escalations and shedding, newest first, scrollable;
//! the kernel's losses are one summary line above them. kstate's own threads are left
//! out of every panel (they are the watch, not the system watched).

use std::collections::BTreeSet;
use std::io::Stdout;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::alarm::Firing;
use crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use crossterm::{execute, terminal};
use kstate_analyze::analyzer::{Cell, Outcome, Row as KeyRow, Unit};
use kstate_analyze::live::Interval;
use kstate_analyze::stats::Agg;
use ratatui::backend::CrosstermBackend;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Paragraph, Row, Table};
use ratatui::{Frame, Terminal};

const SORTS: [&str; 4] = ["total", "count", "max", "p99"];

/// Alarm lines kept (the newest; the count says how many there were).
const ALARMS_KEPT: usize = 1000;

/// The kernel's losses, summed for one line.
#[derive(Default)]
struct Losses {
    notices: u64,
    events: u64,
    uncounted: u64,
    cpus: BTreeSet<u32>,
    last: u64,
}

/// What the dashboard shows; shared with the thread that reads keys.
struct View {
    term: Option<Terminal<CrosstermBackend<Stdout>>>,
    paused: bool,
    sort: usize,
    /// 0: every panel; i: the i-th analyzer's panel alone.
    panel: usize,
    last: Option<Interval>,
    start: u64,
    buffer_bytes: u64,
    /// Newest last; `alarm_count` counts those no longer kept too.
    alarms: Vec<String>,
    alarm_count: u64,
    /// Lines scrolled down from the newest alarm.
    scroll: usize,
    losses: Losses,
    /// kstate's own threads, left out of the panels.
    own: BTreeSet<String>,
    /// A line about the last thing done (a save asked for, ...).
    status: String,
    can_save: bool,
}

pub struct Dashboard {
    view: Arc<Mutex<View>>,
    save_asked: Arc<AtomicBool>,
}

fn lock(v: &Mutex<View>) -> MutexGuard<'_, View> {
    v.lock().unwrap_or_else(|e| e.into_inner())
}

impl Dashboard {
    /// Takes over the terminal (standard input and output). `can_save`: the flight
    /// recorder is on (the w key saves).
    pub fn start(start: u64, buffer_bytes: u64, can_save: bool) -> Dashboard {
        let mut out = std::io::stdout();
        let term = terminal::enable_raw_mode()
            .and_then(|_| execute!(out, terminal::EnterAlternateScreen))
            .and_then(|_| Terminal::new(CrosstermBackend::new(std::io::stdout())))
            .ok();
        let view = Arc::new(Mutex::new(View {
            term,
            paused: false,
            sort: 0,
            panel: 0,
            last: None,
            start,
            buffer_bytes,
            alarms: Vec::new(),
            alarm_count: 0,
            scroll: 0,
            losses: Losses::default(),
            own: BTreeSet::new(),
            status: String::new(),
            can_save,
        }));
        let save_asked = Arc::new(AtomicBool::new(false));
        let (keys, asked) = (Arc::clone(&view), Arc::clone(&save_asked));
        // Reads keys until the terminal is given back; the process ending ends it.
        let _ = std::thread::Builder::new()
            .name("kstate-keys".into())
            .spawn(move || read_keys(&keys, &asked));
        draw(&mut lock(&view));
        Dashboard { view, save_asked }
    }

    /// Whether `w` was pressed since the last call.
    pub fn save_asked(&self) -> bool {
        self.save_asked.swap(false, Ordering::SeqCst)
    }

    /// Shows a new interval (unless paused) with the alarms it fired; `own`: kstate's
    /// threads now.
    pub fn update(&self, iv: Interval, fired: &[Firing], own: &[i32]) {
        let mut v = lock(&self.view);
        for f in fired {
            let at = f.end.saturating_sub(v.start) as f64 / 1e9;
            let line = format!(
                "{at:8.3}s  {}: {}{}{}",
                f.rule,
                f.value_text,
                f.key.as_ref().map_or(String::new(), |k| format!(" at {k}")),
                crate::held_back(f)
            );
            push_alarm(&mut v, line);
        }
        v.own = own.iter().map(|t| t.to_string()).collect();
        if !v.paused {
            v.last = Some(iv);
        }
        // Whole every interval: what the watched command wrote to the terminal is
        // painted over (a redraw of what changed alone would leave it).
        if let Some(t) = v.term.as_mut() {
            let _ = t.clear();
        }
        draw(&mut v);
    }

    /// A line of the watch log: losses add to their summary, the rest (escalations,
    /// shedding, saves, hooks) join the alarms.
    pub fn note(&self, ts: u64, kind: &str, text: &str) {
        let mut v = lock(&self.view);
        if kind == kstate_format::sections::watch_log::Kind::LOST {
            let l = &mut v.losses;
            l.notices += 1;
            l.last = l.last.max(ts);
            // "cpu N: K events lost" or "cpu N: events lost (uncounted)".
            let mut words = text.split_whitespace();
            if let Some(cpu) = words
                .nth(1)
                .and_then(|c| c.trim_end_matches(':').parse::<u32>().ok())
            {
                l.cpus.insert(cpu);
            }
            match words.next().and_then(|n| n.parse::<u64>().ok()) {
                Some(n) => l.events += n,
                None => l.uncounted += 1,
            }
        } else {
            let at = ts.saturating_sub(v.start) as f64 / 1e9;
            push_alarm(&mut v, format!("{at:8.3}s  {} {text}", kind.to_uppercase()));
        }
        draw(&mut v);
    }

    /// A status line (e.g. what became of a save).
    pub fn status(&self, text: String) {
        let mut v = lock(&self.view);
        v.status = text;
        draw(&mut v);
    }
}

fn push_alarm(v: &mut View, line: String) {
    v.alarms.push(line);
    v.alarm_count += 1;
    if v.alarms.len() > ALARMS_KEPT {
        v.alarms.drain(..v.alarms.len() - ALARMS_KEPT);
    }
    // Scrolled back: the lines stay where they were.
    if v.scroll > 0 {
        v.scroll += 1;
    }
}

impl Drop for Dashboard {
    fn drop(&mut self) {
        let mut v = lock(&self.view);
        if let Some(mut t) = v.term.take() {
            let _ = t.show_cursor();
            let _ = execute!(t.backend_mut(), terminal::LeaveAlternateScreen);
            let _ = terminal::disable_raw_mode();
        }
    }
}

fn read_keys(view: &Mutex<View>, save_asked: &AtomicBool) {
    loop {
        let Ok(ev) = event::read() else {
            return;
        };
        let mut v = lock(view);
        if v.term.is_none() {
            return;
        }
        let panels = v.last.as_ref().map_or(0, |iv| iv.outcomes.len());
        match ev {
            Event::Key(k) if k.kind != KeyEventKind::Release => match k.code {
                KeyCode::Char('c') if k.modifiers.contains(KeyModifiers::CONTROL) => quit(),
                KeyCode::Char('q' | 'Q') => quit(),
                KeyCode::Char('p' | 'P' | ' ') => v.paused = !v.paused,
                KeyCode::Char('s' | 'S') => v.sort = (v.sort + 1) % SORTS.len(),
                KeyCode::Tab => v.panel = (v.panel + 1) % (panels + 1),
                KeyCode::Char('0' | 'a') => v.panel = 0,
                KeyCode::Char(c @ '1'..='9') if (c as usize - '0' as usize) <= panels => {
                    v.panel = c as usize - '0' as usize
                }
                KeyCode::Up => v.scroll = v.scroll.saturating_sub(1),
                KeyCode::Down => v.scroll = (v.scroll + 1).min(v.alarms.len().saturating_sub(1)),
                KeyCode::PageUp => v.scroll = v.scroll.saturating_sub(10),
                KeyCode::PageDown => {
                    v.scroll = (v.scroll + 10).min(v.alarms.len().saturating_sub(1))
                }
                KeyCode::Home => v.scroll = 0,
                KeyCode::Char('w' | 'W') => {
                    v.status = match v.can_save {
                        true => {
                            save_asked.store(true, Ordering::SeqCst);
                            "save asked for: written at the next interval".into()
                        }
                        false => "no flight recorder to save from (--keep)".into(),
                    };
                }
                _ => continue,
            },
            Event::Resize(..) => {}
            _ => continue,
        }
        draw(&mut v);
    }
}

/// Ends the watch as Ctrl-C does: the recorder stops and cleans up.
fn quit() {
    // SAFETY: signals our own process.
    unsafe { libc::kill(libc::getpid(), libc::SIGINT) };
}

fn draw(v: &mut View) {
    let Some(mut term) = v.term.take() else {
        return;
    };
    let _ = term.draw(|f| screen(f, v));
    v.term = Some(term);
}

fn screen(f: &mut Frame, v: &View) {
    let area = f.area();
    let Some(iv) = &v.last else {
        f.render_widget(
            Paragraph::new("kstate watch: waiting for the first interval... (q quits)"),
            area,
        );
        return;
    };
    let panel_name = match v.panel {
        0 => "all".to_string(),
        i => iv
            .outcomes
            .get(i - 1)
            .map_or("all".into(), |o| o.info.name.to_string()),
    };
    let title = format!(
        "kstate watch  {:.1} s{}   p pause  s sort: {}  Tab/1-{} panel: {}  {}q quit",
        iv.end.saturating_sub(v.start) as f64 / 1e9,
        if v.paused { "  [PAUSED]" } else { "" },
        SORTS[v.sort],
        iv.outcomes.len(),
        panel_name,
        if v.can_save { "w save  " } else { "" }
    );
    let cpu_rows = iv.cpus.len() as u16 + 1;
    let alarm_rows = (v.alarms.len() as u16 + 2).clamp(3, (area.height / 4).max(3));
    let [title_area, cpu_area, panels_area, alarms_area] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(cpu_rows),
        Constraint::Min(0),
        Constraint::Length(alarm_rows),
    ])
    .areas(area);
    f.render_widget(
        Paragraph::new(title).style(Style::default().add_modifier(Modifier::REVERSED)),
        title_area,
    );
    cpus(f, cpu_area, iv, v.buffer_bytes);
    let shown: Vec<(usize, &Outcome)> = iv
        .outcomes
        .iter()
        .enumerate()
        .filter(|(i, _)| v.panel == 0 || v.panel == i + 1)
        .collect();
    panels(f, panels_area, &shown, SORTS[v.sort], &v.own);
    alarms(f, alarms_area, v);
}

fn cpus(f: &mut Frame, area: Rect, iv: &Interval, buffer_bytes: u64) {
    let secs = (iv.end - iv.start) as f64 / 1e9;
    let rows: Vec<Row> = iv
        .cpus
        .iter()
        .map(|c| {
            let bps = c.bytes as f64 / secs.max(1e-9);
            Row::new(vec![
                format!("{:>4}", c.cpu),
                format!("{:>12.0}", c.events as f64 / secs.max(1e-9)),
                format!("{:>10.2}", bps / (1 << 20) as f64),
                match bps > 0.0 {
                    true => format!("{:>14}", format!("{:.1} s", buffer_bytes as f64 / bps)),
                    false => format!("{:>14}", "-"),
                },
                format!("{:>10}", c.lost.map_or("?".into(), |n| n.to_string())),
            ])
        })
        .collect();
    let widths = [
        Constraint::Length(4),
        Constraint::Length(12),
        Constraint::Length(10),
        Constraint::Length(14),
        Constraint::Length(10),
    ];
    let header = Row::new(vec![
        format!("{:>4}", "CPU"),
        format!("{:>12}", "events/s"),
        format!("{:>10}", "MiB/s"),
        format!("{:>14}", "buffer lasts"),
        format!("{:>10}", "lost"),
    ]);
    f.render_widget(Table::new(rows, widths).header(header), area);
}

/// The panels share `area`: each first its title, tables and key header, then the keys
/// as many as fit, the same number each.
fn panels(
    f: &mut Frame,
    area: Rect,
    shown: &[(usize, &Outcome)],
    sort: &str,
    own: &BTreeSet<String>,
) {
    if shown.is_empty() || area.height == 0 {
        return;
    }
    let fixed: Vec<u16> = shown.iter().map(|(_, o)| 3 + table_lines(o)).collect();
    let left = area.height.saturating_sub(fixed.iter().sum::<u16>());
    let keys = (left / shown.len() as u16).max(1);
    let constraints: Vec<Constraint> = fixed
        .iter()
        .map(|&h| Constraint::Length(h + keys))
        .collect();
    let areas = Layout::vertical(constraints).split(area);
    for ((n, o), a) in shown.iter().zip(areas.iter()) {
        panel(f, *a, n + 1, o, sort, own);
    }
}

/// The lines an analyzer's tables take: each a header and its rows.
fn table_lines(o: &Outcome) -> u16 {
    o.tables
        .iter()
        .filter(|t| !t.rows.is_empty())
        .map(|t| t.rows.len() as u16 + 1)
        .sum()
}

/// Whether a key names one of kstate's own threads (`comm-tid`).
fn is_own(key: &str, own: &BTreeSet<String>) -> bool {
    key.rsplit_once('-')
        .is_some_and(|(_, id)| own.contains(id.split(' ').next().unwrap_or(id)))
}

/// One analyzer: a title with the figures of every key together, its tables whole (e.g.
/// runq's run-queue length, one row per CPU: a handful of lines that the keys, often
/// hundreds, must not crowd out), then the top keys.
fn panel(f: &mut Frame, area: Rect, n: usize, o: &Outcome, sort: &str, own: &BTreeSet<String>) {
    let unit = o.info.unit;
    let fmt = |v: u64| match unit {
        Unit::Ns => kstate_analyze::filter::fmt_dur(v),
        _ => v.to_string(),
    };
    let rows: Vec<&KeyRow> = o.rows.iter().filter(|r| !is_own(&r.key, own)).collect();
    let mut all = Agg::default();
    for r in &rows {
        all.merge(&r.agg);
    }
    let pct = |a: &Agg, p: f64| if a.count > 0 { a.percentile(p) } else { 0 };
    let mut lines = vec![
        Line::from(""),
        Line::styled(
            format!(
                "{n} {} by {} ({}): {} in {} keys, p50 {}, p99 {}, max {}",
                o.info.name.to_uppercase(),
                o.by,
                o.info.value,
                all.count,
                rows.len(),
                fmt(pct(&all, 50.0)),
                fmt(pct(&all, 99.0)),
                fmt(all.max)
            ),
            Style::default().add_modifier(Modifier::BOLD),
        ),
    ];
    for t in o.tables.iter().filter(|t| !t.rows.is_empty()) {
        lines.push(Line::from(format!(
            "   {}: {}",
            t.name,
            t.columns.join("  ")
        )));
        for row in &t.rows {
            let cells: Vec<String> = row
                .iter()
                .map(|c| match c {
                    Cell::Int(i) => i.to_string(),
                    Cell::Float(f) => format!("{f:.2}"),
                    Cell::Text(s) => s.clone(),
                })
                .collect();
            lines.push(Line::from(format!("   {}", cells.join("  "))));
        }
    }
    let head = lines.len() as u16;
    let [head_area, keys_area] =
        Layout::vertical([Constraint::Length(head), Constraint::Min(0)]).areas(area);
    f.render_widget(Paragraph::new(lines), head_area);

    let mut sorted = rows;
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
    let shown = keys_area.height.saturating_sub(1) as usize;
    let num = |s: String, w: usize| format!("{s:>w$}");
    let body: Vec<Row> = sorted
        .iter()
        .take(shown)
        .map(|r| {
            Row::new(vec![
                format!("   {}", r.key),
                num(r.agg.count.to_string(), 9),
                num(fmt(r.agg.total), 12),
                num(fmt(pct(&r.agg, 50.0)), 11),
                num(fmt(pct(&r.agg, 99.0)), 11),
                num(fmt(r.agg.max), 11),
            ])
        })
        .collect();
    // The key column is as wide as its longest key, and takes what the figures leave: on
    // a narrow terminal it shrinks (its keys are cut) before any figure goes.
    let longest = sorted
        .iter()
        .take(shown)
        .map(|r| r.key.chars().count() + 3)
        .max()
        .unwrap_or(0)
        .clamp(8, 64);
    let widths = [
        Constraint::Max(longest as u16),
        Constraint::Length(9),
        Constraint::Length(12),
        Constraint::Length(11),
        Constraint::Length(11),
        Constraint::Length(11),
    ];
    let header = Row::new(vec![
        "   key".to_string(),
        num("count".into(), 9),
        num("total".into(), 12),
        num("p50".into(), 11),
        num("p99".into(), 11),
        num("max".into(), 11),
    ]);
    f.render_widget(Table::new(body, widths).header(header), keys_area);
}

fn alarms(f: &mut Frame, area: Rect, v: &View) {
    let l = &v.losses;
    let mut lines = vec![Line::styled(
        format!(
            "ALARMS ({})  Up/Down scroll{}",
            v.alarm_count,
            match v.status.is_empty() {
                true => String::new(),
                false => format!("   {}", v.status),
            }
        ),
        Style::default().add_modifier(Modifier::REVERSED),
    )];
    lines.push(Line::from(match l.notices {
        0 => "   lost: none".to_string(),
        n => format!(
            "   lost: {} events{} on cpu {} in {n} intervals, the last at {:.3} s",
            l.events,
            match l.uncounted {
                0 => String::new(),
                u => format!(" (and uncounted losses in {u})"),
            },
            l.cpus
                .iter()
                .map(|c| c.to_string())
                .collect::<Vec<_>>()
                .join(","),
            l.last.saturating_sub(v.start) as f64 / 1e9
        ),
    }));
    let room = area.height.saturating_sub(2) as usize;
    lines.extend(
        v.alarms
            .iter()
            .rev()
            .skip(v.scroll)
            .take(room)
            .map(|a| Line::from(a.clone())),
    );
    f.render_widget(Paragraph::new(lines), area);
}
