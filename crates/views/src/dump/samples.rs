//! A perf.data's samples in file order, as `perf script` prints them without symbols:
//! `COMM PID/TID [CPU] TIME: PERIOD EVENT: IP`, and with a call chain its addresses below,
//! one a line, and an empty line. [`Style::Json`]: one object per sample.

use std::io::Write;

use kstate_analyze::filter::fmt_secs;
use kstate_format::perf::decode::{record, PerfRecord, RecordSource, CONTEXT_MAX};
use kstate_format::value::write_json_str;
use kstate_format::{ErrorKind, Trace};
use kstate_symbols::Comms;

use super::{Dumped, Error, Request, Style};

/// Writes the samples of `trace`, a perf.data, to `out` as `req` asks (its style and
/// filters; `threads` and `slice_bytes` are for tracepoint pages), and flushes it.
pub(super) fn write<W: Write>(trace: &Trace, req: &Request, out: &mut W) -> Result<Dumped, Error> {
    let pf = trace.perf.as_deref().expect("a perf.data");
    let headers = pf.events();
    for e in &req.events {
        if !headers.iter().any(|h| h.event == *e) {
            let have: Vec<&str> = headers.iter().map(|h| h.event.as_str()).collect();
            return Err(Error::Trace(
                kstate_format::Error::unsupported(
                    None,
                    format!(
                        "no event {e:?} in this perf.data; it has {}",
                        have.join(", ")
                    ),
                )
                .in_file(&trace.path),
            ));
        }
    }
    let wanted: Vec<bool> = headers
        .iter()
        .map(|h| req.events.is_empty() || req.events.contains(&h.event))
        .collect();
    let comms = Comms::of_samples(trace)?.expect("a perf.data has samples");
    let (from, to) = (req.from.unwrap_or(0), req.to.unwrap_or(u64::MAX));
    let mut line: Vec<u8> = Vec::with_capacity(1 << 17);
    let mut closed = None;
    let walk = pf.visit(&mut |r| {
        if r.kind != record::SAMPLE || !wanted[r.event] {
            return Ok(());
        }
        let PerfRecord::Sample(s) = r.parse(headers)? else {
            return Ok(());
        };
        if s.time < from
            || s.time > to
            || (!req.cpus.is_empty() && !req.cpus.contains(&s.cpu))
            || req.pid.is_some_and(|p| p != s.pid as i32)
        {
            return Ok(());
        }
        let comm = comms.get(s.tid, s.time).unwrap_or(":-1");
        let event = &headers[r.event].event;
        let chain = s.callchain.iter().filter(|&&a| a < CONTEXT_MAX);
        if req.style == Style::Json {
            let _ = write!(
                line,
                "{{\"ts\":{},\"cpu\":{},\"pid\":{},\"tid\":{},\"comm\":",
                s.time, s.cpu, s.pid, s.tid
            );
            write_json_str(comm, &mut line);
            line.extend_from_slice(b",\"event\":");
            write_json_str(event, &mut line);
            let _ = write!(
                line,
                ",\"period\":{},\"ip\":{},\"callchain\":[",
                s.period, s.ip
            );
            for (i, a) in chain.enumerate() {
                let _ = write!(line, "{}{a}", if i > 0 { "," } else { "" });
            }
            line.extend_from_slice(b"]}\n");
        } else {
            let _ = writeln!(
                line,
                "{comm:>16} {:>7}/{:<7} [{:03}] {}: {:>10} {event}: {:16x}",
                s.pid,
                s.tid,
                s.cpu,
                fmt_secs(s.time),
                s.period,
                s.ip
            );
            if !s.callchain.is_empty() {
                for a in chain {
                    let _ = writeln!(line, "\t{a:16x}");
                }
                line.push(b'\n');
            }
        }
        if line.len() >= 1 << 16 {
            if let Err(e) = out.write_all(&line) {
                closed = Some(e);
                return Err(kstate_format::Error::new(
                    ErrorKind::Io,
                    None,
                    "stdout closed",
                ));
            }
            line.clear();
        }
        Ok(())
    });
    if let Some(e) = closed {
        return Err(Error::Write(e));
    }
    out.write_all(&line)
        .and_then(|_| out.flush())
        .map_err(Error::Write)?;
    walk?;
    Ok(Dumped {
        failure: trace.truncated.clone(),
        ..Dumped::default()
    })
}
