//! One event as a line of raw fields (`trace-cmd report -R`) or of NDJSON.

use std::io::Write;

use kstate_analyze::filter::fmt_secs;
use kstate_format::print_fmt::TextFormatter;
use kstate_format::stream::merge::Event;
use kstate_format::value::{write_json_str, PrintSpec};
use kstate_format::{EventFormat, Trace};

fn comm(trace: &Trace, pid: i32) -> &str {
    if pid == 0 {
        return "<idle>";
    }
    trace.comms.get(&pid).map(String::as_str).unwrap_or("<...>")
}

pub(super) fn text_line(
    out: &mut Vec<u8>,
    ev: &Event,
    pid: i32,
    fmt: &EventFormat,
    specs: &[Option<PrintSpec>],
    trace: &Trace,
) {
    let _ = write!(
        out,
        "{:>16}-{:<5} [{:03}] {}: {}:",
        comm(trace, pid),
        pid,
        ev.cpu,
        fmt_secs(ev.ts),
        fmt.name
    );
    // trace-cmd pads "name:" to 22 columns, then a space.
    out.resize(
        out.len() + 22usize.saturating_sub(fmt.name.len() + 1) + 1,
        b' ',
    );
    for (i, f) in fmt.fields.iter().enumerate() {
        if i > 0 {
            out.push(b' ');
        }
        f.write_raw_text(
            ev.payload,
            ev.endian,
            trace.long_size,
            specs.get(i).and_then(Option::as_ref),
            out,
        );
    }
    out.push(b'\n');
}

pub(super) fn json_line(
    out: &mut Vec<u8>,
    ev: &Event,
    pid: i32,
    fmt: &EventFormat,
    text: &mut TextFormatter,
    file: Option<&str>,
) {
    out.push(b'{');
    if let Some(f) = file {
        out.extend_from_slice(b"\"file\":");
        write_json_str(f, out);
        out.push(b',');
    }
    let _ = write!(
        out,
        "\"ts\":{},\"cpu\":{},\"pid\":{},\"event\":",
        ev.ts, ev.cpu, pid
    );
    write_json_str(&fmt.name, out);
    out.extend_from_slice(b",\"fields\":{");
    for (i, f) in fmt.fields.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_json_str(&f.name, out);
        out.push(b':');
        f.value(ev.payload, ev.endian).write_json(out);
    }
    out.extend_from_slice(b"},\"text\":");
    let mut msg = Vec::new();
    if text.write_message(&mut msg, ev.ts, ev.cpu, ev.id, ev.payload, ev.endian) {
        if msg.last() == Some(&b'\n') {
            msg.pop();
        }
        write_json_str(&String::from_utf8_lossy(&msg), out);
    } else {
        out.extend_from_slice(b"null");
    }
    out.extend_from_slice(b"}\n");
}
