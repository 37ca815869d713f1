//! Times in requests: seconds from the file's first event (as the page's axis counts
//! them), refused outside the recording (a time past its end was wrapped around u64 and
//! answered with an empty span).

use kstate_analyze::filter::parse_dur_or_secs;

use crate::api::App;
use crate::params::Params;

impl App {
    /// Seconds parameter `name` as trace-clock ns of file `f`, refused (400) outside the
    /// recording.
    pub(crate) fn time_param(&self, f: usize, p: &Params, name: &str) -> Result<u64, String> {
        let (start, end) = self.files[f].range;
        let rel = parse_dur_or_secs(p.need(name)?).map_err(|e| format!("{name}: {e}"))?;
        let span = end - start;
        // The page sends times it computed in floating point: a microsecond of slack.
        if rel > span.saturating_add(1000) {
            return Err(format!(
                "{name}: {} s lies outside the recording (0 to {} s)",
                kstate_analyze::filter::fmt_secs(rel),
                kstate_analyze::filter::fmt_secs(span)
            ));
        }
        Ok(start + rel.min(span))
    }

    /// `from` and `to` of a view, which must end after it starts.
    pub(crate) fn span_params(&self, f: usize, p: &Params) -> Result<(u64, u64), String> {
        let (from, to) = (self.time_param(f, p, "from")?, self.time_param(f, p, "to")?);
        if to <= from {
            return Err(format!(
                "to ({}) must be later than from ({})",
                p.need("to")?,
                p.need("from")?
            ));
        }
        Ok((from, to))
    }
}
