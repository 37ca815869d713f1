//! A raw tracefs capture in a directory: the layout `kstate record` uses for scratch and
//! what tools like schedviz save. Two spellings of the same content are accepted:
//!
//! | content        | tracefs layout                    | schedviz layout        |
//! |----------------|-----------------------------------|------------------------|
//! | page header    | `header_page` or `events/header_page` | `formats/header_page` |
//! | event formats  | `events/SYSTEM/EVENT/format`      | `formats/SYSTEM/EVENT/format` |
//! | CPU N's pages  | `per_cpu/cpuN/trace_pipe_raw`     | `traces/cpuN`          |
//!
//! Optional files: `saved_cmdlines` (pid comm), `trace_clock`, `kallsyms`, `printk_formats`,
//! and kstate's own sections a recorder keeps there (`kstate-recording`,
//! `kstate-processes`: [`crate::sections::CAPTURE_SECTIONS`]).
//! A capture has no byte-order mark: it is read in this machine's order, where it was made.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::bytes::Endian;
use crate::error::{Error, Result};
use crate::event_format::EventFormat;
use crate::layout::PageLayout;
use crate::trace::{ClockMap, Container, CpuData, DataLoc, EventTable, Trace, MAX_CPUS};

const NATIVE: Endian = if cfg!(target_endian = "big") {
    Endian::Big
} else {
    Endian::Little
};

pub fn open(dir: &Path) -> Result<Trace> {
    let header_page = first_existing(
        dir,
        &["header_page", "events/header_page", "formats/header_page"],
    )
    .ok_or_else(|| {
        Error::unsupported(
            None,
            "not a trace capture: no header_page, events/header_page or formats/header_page",
        )
        .in_file(dir)
    })?;
    let text = read(&header_page)?;
    let layout = PageLayout::parse(&text, NATIVE, None).map_err(|e| e.in_file(&header_page))?;
    let long_size = layout.commit_size;

    let mut events = EventTable::default();
    let mut format_texts = Vec::new();
    for root in ["events", "formats"] {
        let root = dir.join(root);
        let Ok(systems) = std::fs::read_dir(&root) else {
            continue;
        };
        for sys in sorted(systems) {
            let Ok(evs) = std::fs::read_dir(&sys) else {
                continue;
            };
            let sysname = sys
                .file_name()
                .and_then(|s| s.to_str())
                .unwrap_or_default()
                .to_string();
            for ev in sorted(evs) {
                let f = ev.join("format");
                if !f.is_file() {
                    continue;
                }
                let text = read(&f)?;
                let ev =
                    EventFormat::parse(&text, &sysname, long_size).map_err(|e| e.in_file(&f))?;
                // A capture may hold the same event under events/ and formats/.
                if events.get(ev.id).is_none() {
                    format_texts.push((sysname.clone(), text));
                }
                events.insert(ev);
            }
        }
    }

    let mut cpu_data = Vec::new();
    for (cpu, path) in cpu_files(dir) {
        let size = std::fs::metadata(&path)
            .map_err(|e| Error::io(&path, e))?
            .len();
        if size > 0 {
            cpu_data.push(CpuData {
                cpu,
                file_bytes: size,
                loc: DataLoc::Plain {
                    path,
                    offset: 0,
                    size,
                },
            });
        }
    }
    cpu_data.sort_by_key(|c| c.cpu);
    let cpu_count = cpu_data.last().map_or(0, |c| c.cpu + 1);

    let optional = |name: &str| std::fs::read(dir.join(name)).ok();
    let clock = optional("trace_clock").and_then(|t| selected_clock(&String::from_utf8_lossy(&t)));
    Ok(Trace {
        path: dir.to_path_buf(),
        container: Container::RawDir,
        endian: NATIVE,
        long_size,
        layout,
        events,
        header_page: Some(text),
        format_texts,
        comms: optional("saved_cmdlines")
            .map(|t| parse_cmdlines(&t))
            .unwrap_or_default(),
        clock,
        clock_map: ClockMap::default(),
        time_shift: None,
        trace_cmd_unreadable: None,
        uname: None,
        tool_version: None,
        kallsyms: optional("kallsyms"),
        printk_formats: optional("printk_formats"),
        cpu_count,
        cpu_data,
        extra_options: crate::sections::CAPTURE_SECTIONS
            .iter()
            .filter_map(|&(id, name)| Some((id, optional(name)?)))
            .collect(),
        truncated: None,
        cut_short: None,
        lost_sections: Vec::new(),
        spool: None,
        perf: None,
    })
}

/// `pid comm` lines, as in tracefs `saved_cmdlines` and trace.dat's cmdlines section.
pub fn parse_cmdlines(text: &[u8]) -> HashMap<i32, String> {
    String::from_utf8_lossy(text)
        .lines()
        .filter_map(|l| {
            let (pid, comm) = l.trim_start().split_once(' ')?;
            Some((pid.parse().ok()?, comm.to_string()))
        })
        .collect()
}

/// The clock in brackets in tracefs's `trace_clock` listing: `[local] global counter ...`.
pub fn selected_clock(listing: &str) -> Option<String> {
    let start = listing.find('[')? + 1;
    let end = start + listing[start..].find(']')?;
    Some(listing[start..end].to_string())
}

fn cpu_files(dir: &Path) -> Vec<(u32, PathBuf)> {
    let mut out = Vec::new();
    let cpu_num = |p: &Path| {
        p.file_name()?
            .to_str()?
            .strip_prefix("cpu")?
            .parse::<u32>()
            .ok()
            // A name past any real CPU is not a CPU's file (and must not size tables).
            .filter(|&n| n < MAX_CPUS)
    };
    if let Ok(rd) = std::fs::read_dir(dir.join("per_cpu")) {
        for p in sorted(rd) {
            if let Some(n) = cpu_num(&p) {
                out.push((n, p.join("trace_pipe_raw")));
            }
        }
    }
    if let Ok(rd) = std::fs::read_dir(dir.join("traces")) {
        for p in sorted(rd) {
            if let Some(n) = cpu_num(&p) {
                out.push((n, p));
            }
        }
    }
    out.retain(|(_, p)| p.is_file());
    out
}

fn sorted(rd: std::fs::ReadDir) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
    v.sort();
    v
}

fn first_existing(dir: &Path, names: &[&str]) -> Option<PathBuf> {
    names.iter().map(|n| dir.join(n)).find(|p| p.is_file())
}

fn read(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| Error::io(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_and_cmdlines() {
        assert_eq!(
            selected_clock("local [global] counter\n").as_deref(),
            Some("global")
        );
        let m = parse_cmdlines(b"1 systemd\n42 kworker/0:1 x\nbad\n");
        assert_eq!(m.get(&42).map(String::as_str), Some("kworker/0:1 x"));
        assert_eq!(m.len(), 2);
    }
}
