//! Escalation rules of `kstate watch --escalate 'RULE -> EVENTS [for TIME]'`: when the
//! alarm RULE fires, the heavier EVENTS (presets, systems, `system:event`, comma
//! separated, as `-e` takes them) are turned on for TIME (default 10 s; a new firing
//! while they are on extends it), then off again.

use crate::alarm::{parse_duration, Rule};

/// How long escalated events stay on when the rule says nothing.
pub const DEFAULT_FOR_NS: u64 = 10_000_000_000;

#[derive(Debug, Clone)]
pub struct Escalation {
    /// The whole rule as given.
    pub text: String,
    pub rule: Rule,
    /// Event specs, as `-e` takes them.
    pub events: Vec<String>,
    pub for_ns: u64,
}

impl Escalation {
    pub fn parse(text: &str) -> Result<Escalation, String> {
        let bad = |why: String| format!("escalation {text:?}: {why}");
        let Some((rule, then)) = text.split_once("->") else {
            return Err(bad("expected RULE -> EVENTS [for TIME]".into()));
        };
        let rule = Rule::parse(rule.trim()).map_err(bad)?;
        let mut words = then.split_whitespace();
        let events: Vec<String> = words
            .next()
            .ok_or_else(|| bad("no events after ->".into()))?
            .split(',')
            .filter(|e| !e.is_empty())
            .map(String::from)
            .collect();
        let for_ns = match (words.next(), words.next(), words.next()) {
            (None, _, _) => DEFAULT_FOR_NS,
            (Some("for"), Some(t), None) => parse_duration(t).map_err(bad)?,
            (Some(w), _, _) => {
                return Err(bad(format!(
                    "{w:?} after the events: expected `for TIME` or nothing"
                )))
            }
        };
        if events.is_empty() || for_ns == 0 {
            return Err(bad("no events, or a zero time".into()));
        }
        Ok(Escalation {
            text: text.to_string(),
            rule,
            events,
            for_ns,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escalations_parse() {
        let e = Escalation::parse("syscall.max{name=read} > 200ms -> bio,sched for 3s").unwrap();
        assert_eq!(e.rule.text, "syscall.max{name=read} > 200ms");
        assert_eq!(e.events, ["bio", "sched"]);
        assert_eq!(e.for_ns, 3_000_000_000);
        let e = Escalation::parse("lost > 0 -> block:block_rq_issue").unwrap();
        assert_eq!(e.events, ["block:block_rq_issue"]);
        assert_eq!(e.for_ns, DEFAULT_FOR_NS);
    }

    #[test]
    fn bad_escalations_say_why() {
        for (text, why) in [
            ("runq.p99 > 5ms", "expected RULE -> EVENTS"),
            ("runq.p99 > 5ms ->", "no events after ->"),
            ("runq.p98 > 5ms -> bio", "no statistic \"p98\""),
            ("runq.p99 > 5ms -> bio for", "expected `for TIME`"),
            ("runq.p99 > 5ms -> bio for 3", "needs a time unit"),
            (
                "runq.p99 > 5ms -> bio during 3s",
                "\"during\" after the events",
            ),
        ] {
            let e = Escalation::parse(text).unwrap_err();
            assert!(e.contains(why), "{text}: {e}");
        }
    }
}
