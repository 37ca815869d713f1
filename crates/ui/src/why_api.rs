//! The critical path of a thread as a lane of the timeline (issue 36's `kstate why` in the
//! page). The walk and the lane are [`kstate_views::why`]'s; only the JSON is this crate's.
//!
//! `api/why?f=FILE&tid=T&from=S&to=S[&w=COLS]` (times in seconds from the file's first
//! event, as the other timeline requests): the path of thread T over [from, to], as
//! `kstate why FILE --tid T --window FROM:TO --format json` walks it (the same window, the
//! same segments kept):
//! `{tid, comm, from, to, window: [a_ns, b_ns], wall_ns, by_state: [{state, ns}],
//! segments_total, segments_left_out, max_segments, notes, px_ns, merged, depth,
//! segments: [{start_ns, end_ns, start, end, tid, comm, state, detail, depth, merged}],
//! wakes: [{t_ns, t, from, from_comm, from_depth, to, to_comm, to_depth}], wakes_left_out}`
//! (`start`, `end`, `t`: seconds from the file's first event). With `w`, segments shorter
//! than a column of the view (`(to - from) / w`) are merged into runs of at most a column
//! (`merged` > 1) and one wake-up per column is kept: the answer is bounded by the
//! columns, not by the path. Without it the segments are the CLI's, one for one.

use std::fmt::Write;

use kstate_analyze::critical::{WalkQuery, Who, MAX_SEGMENTS};
use kstate_analyze::filter::{TimeSpec, WindowSpec};
use kstate_views::why::{self, lane};

use crate::api::{js, App};
use crate::params::Params;

impl App {
    pub(crate) fn why_lane(&self, p: &Params) -> Result<Vec<u8>, String> {
        let f = self.file(p)?;
        let (from, to) = self.span_params(f, p)?;
        let tid: i32 = p.number("tid", "a thread id", None)?;
        let cols: usize = p.number("w", "a number of columns", Some(0))?;
        if cols > 8192 {
            return Err(format!("w: {cols} columns asked, at most 8192"));
        }
        let source = self.files[f].source().ok_or("no source")?;
        let mut q = WalkQuery::new(Who::Tid(tid));
        q.window = Some(WindowSpec {
            from: Some(TimeSpec::Abs(from)),
            to: Some(TimeSpec::Abs(to)),
        });
        q.tgids = source.tgids().clone();
        q.max_segments = MAX_SEGMENTS;
        let w =
            why::view(source.trace(), &q).map_err(|e| format!("{}: {e}", self.files[f].label))?;
        let px_ns = match cols {
            0 => 0,
            c => ((to - from) / c as u64).max(1),
        };
        let l = lane::lane(&w, px_ns);
        let start = self.files[f].range.0;
        let rel = |ns: u64| ns.saturating_sub(start) as f64 / 1e9;
        let comm = |t: i32| w.names.get(&t).map_or("<...>", String::as_str).to_string();
        let path = &w.path;
        let mut s = String::with_capacity(256 + l.segments.len() * 160);
        let _ = write!(
            s,
            "{{\"tid\":{},\"comm\":{},\"from\":{:.9},\"to\":{:.9},\"window\":[{},{}],\"wall_ns\":{},\"by_state\":[{}],\"segments_total\":{},\"segments_left_out\":{},\"max_segments\":{},\"notes\":[{}],\"px_ns\":{px_ns},\"merged\":{},\"depth\":{},\"segments\":[",
            path.tid,
            js(&path.comm),
            rel(from),
            rel(to),
            path.window.0,
            path.window.1,
            path.wall_ns,
            path.by_state
                .iter()
                .map(|(st, ns)| format!("{{\"state\":\"{}\",\"ns\":{ns}}}", st.name()))
                .collect::<Vec<_>>()
                .join(","),
            w.segments.total,
            w.segments.left_out,
            w.segments.max,
            w.notes.iter().map(|n| js(n)).collect::<Vec<_>>().join(","),
            l.cut.merged,
            l.depth,
        );
        for (i, x) in l.segments.iter().enumerate() {
            let _ = write!(
                s,
                "{}{{\"start_ns\":{},\"end_ns\":{},\"start\":{:.9},\"end\":{:.9},\"tid\":{},\"comm\":{},\"state\":\"{}\",\"detail\":{},\"depth\":{},\"merged\":{}}}",
                if i > 0 { "," } else { "" },
                x.start,
                x.end,
                rel(x.start),
                rel(x.end),
                x.tid,
                js(&comm(x.tid)),
                x.state.name(),
                js(&x.detail),
                x.depth,
                x.merged
            );
        }
        s.push_str("],\"wakes\":[");
        for (i, x) in l.wakes.iter().enumerate() {
            let _ = write!(
                s,
                "{}{{\"t_ns\":{},\"t\":{:.9},\"from\":{},\"from_comm\":{},\"from_depth\":{},\"to\":{},\"to_comm\":{},\"to_depth\":{}}}",
                if i > 0 { "," } else { "" },
                x.at,
                rel(x.at),
                x.from,
                js(&comm(x.from)),
                x.from_depth,
                x.to,
                js(&comm(x.to)),
                x.to_depth
            );
        }
        let _ = write!(s, "],\"wakes_left_out\":{}}}", l.cut.wakes);
        Ok(s.into_bytes())
    }
}
