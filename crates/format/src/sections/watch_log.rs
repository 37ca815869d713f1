//! kstate's WATCH_LOG section (`sections::ids::WATCH_LOG`): what `kstate watch` did and saw
//! while the recording was made, each on the trace clock, so that readers can put it on
//! the time axis beside the events.
//!
//! Layout: the line `kstate-watch-log 1`, then one line per entry, `TS KIND TEXT`: TS in
//! ns on the trace clock, KIND one word (see [`Kind`]; a reader keeps kinds it does not
//! know as they are), TEXT the rest of the line, escaped like every kstate text section.

use crate::error::{Error, Result};
use crate::sections::{check_version_line, escape_into, int_at, lines, unescape, utf8};

const MAGIC: &str = "kstate-watch-log";
const VERSION: u32 = 1;

/// The kinds `kstate watch` writes.
pub struct Kind;

impl Kind {
    /// A rule became true: the rule, its value and key.
    pub const ALARM: &'static str = "alarm";
    /// Events enabled after an alarm (`--escalate`), and for how long.
    pub const ESCALATE: &'static str = "escalate";
    /// The escalation's time is over: its events are off again.
    pub const RELAX: &'static str = "relax";
    /// Events turned off because the readers fell behind the kernel.
    pub const SHED: &'static str = "shed";
    /// Shed events turned back on.
    pub const RESTORE: &'static str = "restore";
    /// The kernel dropped events (a CPU's buffer was full).
    pub const LOST: &'static str = "lost";
    /// The live analysis fell behind the recording (or caught up again): its alarms come
    /// late; the flight recorder keeps no more than twice its window and --after for them.
    pub const BEHIND: &'static str = "behind";
    /// The flight recorder gave back the disk space of pages older than its window.
    pub const DROPPED: &'static str = "dropped";
    /// A flight-recorder save: written (its file), or not made (--max-saves, --save-gap).
    pub const SAVE: &'static str = "save";
    /// An --on-alarm command that failed or ran past its timeout.
    pub const HOOK: &'static str = "hook";
}

/// One entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// ns on the trace clock.
    pub ts: u64,
    pub kind: String,
    pub text: String,
}

pub fn encode(entries: &[Entry]) -> Vec<u8> {
    let mut s = format!("{MAGIC} {VERSION}\n");
    for e in entries {
        s.push_str(&format!("{} {} ", e.ts, e.kind));
        escape_into(&mut s, &e.text);
        s.push('\n');
    }
    s.into_bytes()
}

pub fn decode(b: &[u8]) -> Result<Vec<Entry>> {
    let start = check_version_line(b, MAGIC)?;
    let text = utf8(b, "watch log")?;
    let mut out = Vec::new();
    for line in lines(text, start, "watch log") {
        let (at, line) = line?;
        let words: Vec<&str> = line.splitn(3, ' ').collect();
        if words.len() < 3 || words[1].is_empty() {
            return Err(Error::corrupt(
                (at + line.len()) as u64,
                "watch log section: a line is not TS KIND TEXT",
            ));
        }
        let ts = int_at(words[0], at, "watch log time")?;
        out.push(Entry {
            ts,
            kind: words[1].to_string(),
            text: unescape(words[2], at + words[0].len() + words[1].len() + 2)?,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_come_back() {
        let e = vec![
            Entry {
                ts: 12,
                kind: Kind::ALARM.into(),
                text: "syscall.max{name=read} > 1ms: 3 ms\nsecond line".into(),
            },
            Entry {
                ts: 40,
                kind: "future-kind".into(),
                text: String::new(),
            },
        ];
        assert_eq!(decode(&encode(&e)).unwrap(), e);
    }

    #[test]
    fn damage_is_named_with_its_offset() {
        let err = decode(b"kstate-watch-log 1\n12 alarm x\nzz alarm y\n").unwrap_err();
        assert_eq!(err.offset, Some(30), "{err}");
        let err = decode(b"kstate-watch-log 1\n12 alarm").unwrap_err();
        assert!(err.msg.contains("truncated"), "{err}");
        let err = decode(b"kstate-watch-log 1\n12alarm\n").unwrap_err();
        assert!(err.msg.contains("TS KIND TEXT"), "{err}");
        assert!(decode(b"kstate-ring-stats 1\n").is_err());
    }
}
