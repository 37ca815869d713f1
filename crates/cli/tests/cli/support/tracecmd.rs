//! Parsers for the text that `trace-cmd` (3.1.x, libtraceevent 1.7.x) prints:
//!
//! * `trace-cmd report -t -R` event lines
//!   (`COMM-PID [CPU] SECS.NSECS: EVENT: name=value name=value ...`),
//! * `trace-cmd dump --events` / `--ftrace-events` format files,
//! * the `print fmt:` of a format (which conversion prints which field),
//! * `trace-cmd dump --kallsyms`,
//! * `trace-cmd dump --summary` (endianness).
//!
//! How libtraceevent prints an event with `-R` (`print_selected_fields()` in
//! `src/event-parse.c`): for every non-common field, in format-file order, it
//! writes `" NAME="` followed by the value. The value is printed by
//! `print_field()`: when the field is a plain scalar that appears as a direct
//! argument (after type casts) of the event's `print fmt`, the conversion of
//! that argument is used (`%lu` -> decimal, `%x` -> hex, `%ps` -> symbol, ...);
//! otherwise, and always for arrays and strings, `print_field_raw()` is used:
//! printable char arrays / `__data_loc char[]` as `%s`, other arrays as
//! `ARRAY[xx, xx, ...]` (bytes, in trace-file byte order), pointers as
//! `0x%llx`, signed as `%d`/`%lld` (`%2d`/`%1d` for 2/1-byte fields; a signed
//! 4-byte `long` as `0x%x`), unsigned `long` as `0x%llx`, other unsigned as
//! `%llu`. The value text may therefore contain spaces and `=`; it is split
//! using the event's known field names (see [`split_known_fields`]).

use std::collections::HashMap;

/// One event line of `trace-cmd report -t -R`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventLine {
    /// 1-based line number in the report output.
    pub line_no: usize,
    /// The whole line as printed (continuation lines joined with `\n`).
    pub text: String,
    pub comm: String,
    pub pid: i64,
    pub cpu: u32,
    pub ts_ns: u64,
    pub event: String,
    /// `(field name, value text)` in printed order.
    pub fields: Vec<(String, String)>,
    /// Whether `fields` was split with the event's known field names.
    pub split_by_format: bool,
}

/// A `CPU:N [LOST N EVENTS]` / `CPU:N [N EVENTS DROPPED]` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LostLine {
    pub line_no: usize,
    pub cpu: u32,
    pub count: Option<u64>,
}

/// The whole parsed `trace-cmd report -t -R` output.
#[derive(Debug, Default)]
pub struct Report {
    /// From the `cpus=N` header line.
    pub cpus: Option<u32>,
    pub events: Vec<EventLine>,
    pub lost: Vec<LostLine>,
    /// Informational lines that are not events (e.g. `CPU 3 is empty`).
    pub info: Vec<(usize, String)>,
    /// Lines that did not start an event and were appended to the previous
    /// event (a string value containing a newline, e.g. a trace_marker write).
    pub continuation_lines: usize,
    /// Lines that could not be parsed at all: `(line number, text)`.
    pub unparsed: Vec<(usize, String)>,
}

impl Report {
    /// Number of events per event name.
    pub fn counts(&self) -> std::collections::BTreeMap<String, usize> {
        let mut m = std::collections::BTreeMap::new();
        for e in &self.events {
            *m.entry(e.event.clone()).or_insert(0) += 1;
        }
        m
    }
}

/// The header columns of an event line; `rest` is the text after `EVENT:`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header<'a> {
    pub comm: &'a str,
    pub pid: i64,
    pub cpu: u32,
    pub ts_ns: u64,
    pub event: &'a str,
    pub rest: &'a str,
}

fn leading_digits(s: &str) -> usize {
    s.bytes().take_while(u8::is_ascii_digit).count()
}

/// Parses `SECS.FRAC` (FRAC of 1..=9 digits) into nanoseconds.
pub fn parse_timestamp(s: &str) -> Option<u64> {
    let (secs, frac) = s.split_once('.')?;
    if secs.is_empty() || frac.is_empty() || frac.len() > 9 {
        return None;
    }
    if leading_digits(secs) != secs.len() || leading_digits(frac) != frac.len() {
        return None;
    }
    let scale = 10u64.pow(9 - frac.len() as u32);
    let secs: u64 = secs.parse().ok()?;
    let frac: u64 = frac.parse().ok()?;
    secs.checked_mul(1_000_000_000)?.checked_add(frac * scale)
}

/// Formats nanoseconds the way `trace-cmd report -t` does (`SECS.NNNNNNNNN`).
pub fn format_timestamp(ts_ns: u64) -> String {
    format!("{}.{:09}", ts_ns / 1_000_000_000, ts_ns % 1_000_000_000)
}

/// Parses the header columns of an event line:
/// `%16s-%-5d [%03d] SECS.NSECS: EVENT:<padding> fields`.
///
/// The comm may contain anything (spaces, `-`, `:`, `[`), so every `[` is
/// tried as the CPU column and the first position where the rest of the
/// header is well formed wins; the pid is the digits after the comm's last `-`.
pub fn parse_header(line: &str) -> Option<Header<'_>> {
    for (i, _) in line.match_indices('[') {
        if let Some(h) = parse_header_at(line, i) {
            return Some(h);
        }
    }
    None
}

fn parse_header_at(line: &str, bracket: usize) -> Option<Header<'_>> {
    let before = line[..bracket].trim_end();
    if before.len() == line[..bracket].len() {
        return None; // there is always at least one space before `[`
    }
    let (comm, pid) = before.rsplit_once('-')?;
    if pid.is_empty() || leading_digits(pid) != pid.len() {
        return None;
    }
    let pid: i64 = pid.parse().ok()?;
    let comm = comm.trim_start();

    let after = &line[bracket + 1..];
    let nd = leading_digits(after);
    if nd == 0 || !after[nd..].starts_with(']') {
        return None;
    }
    let cpu: u32 = after[..nd].parse().ok()?;
    let after = &after[nd + 1..];
    if !after.starts_with(' ') {
        return None;
    }
    let after = after.trim_start_matches(' ');
    let colon = after.find(": ")?;
    let ts_ns = parse_timestamp(&after[..colon])?;
    let after = &after[colon + 2..];
    let end = after.find(':')?;
    let event = &after[..end];
    if event.is_empty() || event.contains(char::is_whitespace) {
        return None;
    }
    Some(Header {
        comm,
        pid,
        cpu,
        ts_ns,
        event,
        rest: &after[end + 1..],
    })
}

/// Parses `CPU:N [LOST N EVENTS]`, `CPU:N [N EVENTS DROPPED]` or
/// `CPU:N [EVENTS DROPPED]`.
pub fn parse_lost(line: &str) -> Option<(u32, Option<u64>)> {
    let s = line.trim().strip_prefix("CPU:")?;
    let nd = leading_digits(s);
    let cpu: u32 = s[..nd].parse().ok()?;
    let inner = s[nd..]
        .trim_start()
        .strip_prefix('[')?
        .strip_suffix(']')?
        .trim();
    if inner == "EVENTS DROPPED" {
        return Some((cpu, None));
    }
    let n = inner
        .strip_prefix("LOST ")
        .and_then(|x| x.strip_suffix(" EVENTS"))
        .or_else(|| inner.strip_suffix(" EVENTS DROPPED"))?;
    Some((cpu, Some(n.trim().parse().ok()?)))
}

/// Splits the field text of an event (the text after `EVENT:`) with the
/// event's field names, in format order. libtraceevent writes `" NAME="`
/// before every value, so value i ends at an occurrence of
/// `" NAME(i+1)="`; since a value may itself contain such text (comms and
/// strings are free-form), every occurrence is tried, with backtracking, and
/// the first split that accounts for all fields wins. The last value runs to
/// the end of the line (trailing spaces are kept).
pub fn split_known_fields<S: AsRef<str>>(rest: &str, names: &[S]) -> Option<Vec<(String, String)>> {
    let text = rest.trim_start_matches(' ');
    if names.is_empty() {
        return text.trim().is_empty().then(Vec::new);
    }
    let value = text.strip_prefix(names[0].as_ref())?.strip_prefix('=')?;
    let mut out = Vec::with_capacity(names.len());
    split_rec(value, names, &mut out).then_some(out)
}

fn split_rec<S: AsRef<str>>(s: &str, names: &[S], out: &mut Vec<(String, String)>) -> bool {
    if names.len() == 1 {
        out.push((names[0].as_ref().to_string(), s.to_string()));
        return true;
    }
    let delim = format!(" {}=", names[1].as_ref());
    for (pos, _) in s.match_indices(&delim) {
        out.push((names[0].as_ref().to_string(), s[..pos].to_string()));
        if split_rec(&s[pos + delim.len()..], &names[1..], out) {
            return true;
        }
        out.pop();
    }
    false
}

/// Splits field text without knowing the field names: a new field starts
/// at every `" IDENT="`. Used only when an event's format is unknown (or
/// the known names do not fit); values containing `" x="` are split wrongly.
pub fn split_fields_heuristic(rest: &str) -> Vec<(String, String)> {
    let text = rest.trim_start_matches(' ');
    let bytes = text.as_bytes();
    let is_ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    // Start offsets of "IDENT=" tokens.
    let mut starts = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if i == 0 || bytes[i - 1] == b' ' {
            let n = bytes[i..].iter().take_while(|&&b| is_ident(b)).count();
            if n > 0 && !bytes[i].is_ascii_digit() && bytes.get(i + n) == Some(&b'=') {
                starts.push((i, i + n));
            }
        }
        i += 1;
    }
    let mut out = Vec::new();
    for (k, &(s, eq)) in starts.iter().enumerate() {
        let end = starts.get(k + 1).map(|&(n, _)| n - 1).unwrap_or(text.len());
        out.push((text[s..eq].to_string(), text[eq + 1..end].to_string()));
    }
    out
}

/// Parses the whole stdout of `trace-cmd report -t -R`. Field text is split
/// with the field names from `formats` (falling back to
/// [`split_fields_heuristic`] for unknown events; see
/// [`EventLine::split_by_format`]).
pub fn parse_report(text: &str, formats: &Formats) -> Report {
    let mut rep = Report::default();
    // Raw events: header data + rest text (continuations appended).
    struct Pending {
        line_no: usize,
        text: String,
        comm: String,
        pid: i64,
        cpu: u32,
        ts_ns: u64,
        event: String,
        rest: String,
    }
    let mut pending: Vec<Pending> = Vec::new();
    let mut last_was_event = false;
    for (idx, line) in text.lines().enumerate() {
        let line_no = idx + 1;
        if let Some(h) = parse_header(line) {
            pending.push(Pending {
                line_no,
                text: line.to_string(),
                comm: h.comm.to_string(),
                pid: h.pid,
                cpu: h.cpu,
                ts_ns: h.ts_ns,
                event: h.event.to_string(),
                rest: h.rest.to_string(),
            });
            last_was_event = true;
        } else if let Some(n) = line
            .strip_prefix("cpus=")
            .and_then(|n| n.trim().parse().ok())
        {
            rep.cpus = Some(n);
            last_was_event = false;
        } else if let Some((cpu, count)) = parse_lost(line) {
            rep.lost.push(LostLine {
                line_no,
                cpu,
                count,
            });
            last_was_event = false;
        } else if is_info_line(line) {
            rep.info.push((line_no, line.to_string()));
            last_was_event = false;
        } else if last_was_event {
            let p = pending.last_mut().expect("last_was_event implies an event");
            p.text.push('\n');
            p.text.push_str(line);
            p.rest.push('\n');
            p.rest.push_str(line);
            rep.continuation_lines += 1;
        } else {
            rep.unparsed.push((line_no, line.to_string()));
        }
    }
    for p in pending {
        let known = formats
            .candidates(&p.event)
            .iter()
            .find_map(|f| split_known_fields(&p.rest, &f.field_names()));
        let split_by_format = known.is_some();
        let fields = known.unwrap_or_else(|| split_fields_heuristic(&p.rest));
        rep.events.push(EventLine {
            line_no: p.line_no,
            text: p.text,
            comm: p.comm,
            pid: p.pid,
            cpu: p.cpu,
            ts_ns: p.ts_ns,
            event: p.event,
            fields,
            split_by_format,
        });
    }
    rep
}

fn is_info_line(line: &str) -> bool {
    // `CPU 3 is empty` (trace-cmd prints it for CPUs without data).
    line.strip_prefix("CPU ")
        .and_then(|s| s.strip_suffix(" is empty"))
        .is_some_and(|n| !n.is_empty() && leading_digits(n) == n.len())
}

// ---------------------------------------------------------------------------
// Event formats
// ---------------------------------------------------------------------------

/// One `field:` line of a format file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldFormat {
    pub name: String,
    /// The declaration as written, e.g. `char prev_comm[16]`, `__data_loc char[] path`.
    pub decl: String,
    pub offset: usize,
    pub size: usize,
    pub signed: bool,
    /// `[N]` / `[]` suffix or `__data_loc` / `__rel_loc`.
    pub is_array: bool,
    /// `__data_loc` / `__rel_loc`.
    pub is_dynamic: bool,
    /// libtraceevent's `field_is_string()`: an array of char / u8 / s8.
    pub is_string: bool,
    /// `*` in the type.
    pub is_pointer: bool,
}

/// How `print fmt` prints a field that is a direct argument of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conversion {
    /// The conversion as written, e.g. `%lu`, `%ps`, `%08x`.
    pub spec: String,
    /// The conversion character: `d i u x X o c s p`.
    pub conv: char,
    /// Width of the C type the value is cast to by the length modifier
    /// (`hh` 8, `h` 16, none 32, `l`/`ll`/`z` 64).
    pub bits: u32,
    /// For `%p`: the extension letter (`s`, `S`, `f`, `F`, `M`, ...).
    pub pointer_ext: Option<char>,
}

/// One event format (from `trace-cmd dump --events` / `--ftrace-events`).
#[derive(Debug, Clone, Default)]
pub struct EventFormat {
    pub name: String,
    /// `ftrace` for the formats from `dump --ftrace-events`, else unknown
    /// (`dump --events` does not name the system of each event).
    pub system: Option<String>,
    pub id: Option<u32>,
    /// Non-common fields, in format-file order.
    pub fields: Vec<FieldFormat>,
    pub print_fmt: String,
    /// Field name -> the `print fmt` conversion that prints it, for scalar
    /// fields that appear (after casts) as a direct `REC->field` argument.
    pub conversions: HashMap<String, Conversion>,
}

impl EventFormat {
    pub fn field_names(&self) -> Vec<&str> {
        self.fields.iter().map(|f| f.name.as_str()).collect()
    }

    pub fn field(&self, name: &str) -> Option<&FieldFormat> {
        self.fields.iter().find(|f| f.name == name)
    }
}

/// All formats of a trace file, by event name (several systems may define
/// the same event name; report lines do not say which).
#[derive(Debug, Clone, Default)]
pub struct Formats {
    pub by_name: HashMap<String, Vec<EventFormat>>,
}

impl Formats {
    pub fn candidates(&self, event: &str) -> &[EventFormat] {
        self.by_name.get(event).map(Vec::as_slice).unwrap_or(&[])
    }

    /// The format of `event` whose field names match the printed ones.
    pub fn resolve(&self, line: &EventLine) -> Option<&EventFormat> {
        self.candidates(&line.event).iter().find(|f| {
            f.fields.len() == line.fields.len()
                && f.fields
                    .iter()
                    .zip(&line.fields)
                    .all(|(a, (b, _))| a.name == *b)
        })
    }

    pub fn len(&self) -> usize {
        self.by_name.values().map(Vec::len).sum()
    }

    pub fn extend(&mut self, other: Formats) {
        for (name, v) in other.by_name {
            self.by_name.entry(name).or_default().extend(v);
        }
    }
}

/// Parses a `field:` declaration, e.g.
/// `field:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;`.
pub fn parse_field_line(line: &str) -> Option<FieldFormat> {
    let line = line.trim();
    let rest = line.strip_prefix("field:")?;
    let mut parts = rest.split(';').map(str::trim);
    let decl = parts.next()?.to_string();
    let mut offset = None;
    let mut size = None;
    let mut signed = false;
    for p in parts {
        if let Some(v) = p.strip_prefix("offset:") {
            offset = v.trim().parse().ok();
        } else if let Some(v) = p.strip_prefix("size:") {
            size = v.trim().parse().ok();
        } else if let Some(v) = p.strip_prefix("signed:") {
            signed = v.trim() == "1";
        }
    }
    let is_dynamic = decl.starts_with("__data_loc") || decl.starts_with("__rel_loc");
    let (type_and_name, has_brackets) = match decl.strip_suffix(']') {
        Some(d) => (&d[..d.rfind('[')?], true),
        None => (decl.as_str(), false),
    };
    let name_start = type_and_name
        .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .map(|i| i + 1)
        .unwrap_or(0);
    let name = type_and_name[name_start..].to_string();
    let ty = &type_and_name[..name_start];
    if name.is_empty() {
        return None;
    }
    let is_array = has_brackets || is_dynamic;
    let is_string = is_array && (ty.contains("char") || ty.contains("u8") || ty.contains("s8"));
    Some(FieldFormat {
        is_pointer: ty.contains('*'),
        name,
        decl: decl.clone(),
        offset: offset?,
        size: size?,
        signed,
        is_array,
        is_dynamic,
        is_string,
    })
}

/// Parses the output of `trace-cmd dump --events` (or `report --events`).
pub fn parse_formats(text: &str) -> Formats {
    parse_formats_of(text, None)
}

/// Parses the output of `trace-cmd dump --ftrace-events` (system `ftrace`).
pub fn parse_ftrace_formats(text: &str) -> Formats {
    parse_formats_of(text, Some("ftrace"))
}

fn parse_formats_of(text: &str, system: Option<&str>) -> Formats {
    let mut formats = Formats::default();
    let mut cur: Option<EventFormat> = None;
    let finish = |f: Option<EventFormat>, formats: &mut Formats| {
        if let Some(mut f) = f {
            f.conversions = field_conversions(&f);
            formats.by_name.entry(f.name.clone()).or_default().push(f);
        }
    };
    for line in text.lines() {
        if let Some(name) = line.strip_prefix("name: ") {
            finish(cur.take(), &mut formats);
            cur = Some(EventFormat {
                name: name.trim().to_string(),
                system: system.map(str::to_string),
                ..Default::default()
            });
        } else if let Some(f) = cur.as_mut() {
            if let Some(id) = line.strip_prefix("ID: ") {
                f.id = id.trim().parse().ok();
            } else if let Some(pf) = line.strip_prefix("print fmt: ") {
                f.print_fmt = pf.to_string();
            } else if let Some(field) = parse_field_line(line) {
                if !field.name.starts_with("common_") {
                    f.fields.push(field);
                }
            }
        }
    }
    finish(cur.take(), &mut formats);
    formats
}

/// Splits a `print fmt:` value into its format string (adjacent literals
/// concatenated, escapes kept as written) and its top-level arguments.
pub fn split_print_fmt(pf: &str) -> Option<(String, Vec<String>)> {
    let mut chars = pf.trim().char_indices().peekable();
    let mut fmt = String::new();
    let mut end;
    loop {
        match chars.next() {
            Some((_, '"')) => {}
            _ => return None,
        }
        loop {
            match chars.next()? {
                (_, '\\') => {
                    fmt.push('\\');
                    fmt.push(chars.next()?.1);
                }
                (i, '"') => {
                    end = i + 1;
                    break;
                }
                (_, c) => fmt.push(c),
            }
        }
        while chars.peek().is_some_and(|(_, c)| c.is_whitespace()) {
            chars.next();
        }
        if chars.peek().map(|&(_, c)| c) != Some('"') {
            break;
        }
    }
    let rest = pf.trim()[end..].trim_start();
    let rest = match rest.strip_prefix(',') {
        Some(r) => r,
        None if rest.is_empty() => return Some((fmt, Vec::new())),
        None => return None,
    };
    let mut args = Vec::new();
    let mut depth = 0i32;
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for c in rest.chars() {
        if let Some(q) = quote {
            cur.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == q {
                quote = None;
            }
            continue;
        }
        match c {
            '"' | '\'' => {
                quote = Some(c);
                cur.push(c);
            }
            '(' | '[' | '{' => {
                depth += 1;
                cur.push(c);
            }
            ')' | ']' | '}' => {
                depth -= 1;
                cur.push(c);
            }
            ',' if depth == 0 => args.push(std::mem::take(&mut cur).trim().to_string()),
            _ => cur.push(c),
        }
    }
    if !cur.trim().is_empty() {
        args.push(cur.trim().to_string());
    }
    Some((fmt, args))
}

/// The printf conversions of a format string, in order. A `*` width or
/// precision is returned as a pseudo-conversion `'*'` (it consumes an argument).
pub fn conversions(fmt: &str) -> Vec<Conversion> {
    let b: Vec<char> = fmt.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] != '%' {
            i += 1;
            continue;
        }
        let start = i;
        i += 1;
        if b.get(i) == Some(&'%') {
            i += 1;
            continue;
        }
        let mut ls = 0i32;
        while let Some(&c) = b.get(i) {
            match c {
                '-' | '+' | ' ' | '#' | '0'..='9' | '.' => {}
                '*' => out.push(Conversion {
                    spec: "*".into(),
                    conv: '*',
                    bits: 32,
                    pointer_ext: None,
                }),
                'h' => ls -= 1,
                'l' => ls += 1,
                'L' => ls = 2,
                'z' | 'Z' | 'j' | 't' => ls = 1,
                _ => break,
            }
            i += 1;
        }
        let Some(&conv) = b.get(i) else { break };
        i += 1;
        let mut pointer_ext = None;
        if conv == 'p' {
            if let Some(&e) = b.get(i).filter(|c| c.is_ascii_alphabetic()) {
                pointer_ext = Some(e);
                i += 1;
            }
        }
        let bits = match ls {
            i32::MIN..=-2 => 8,
            -1 => 16,
            0 => 32,
            _ => 64,
        };
        out.push(Conversion {
            spec: b[start..i].iter().collect(),
            conv,
            bits,
            pointer_ext,
        });
    }
    out
}

/// Removes leading C casts: `(unsigned long)REC->x` -> `REC->x`.
pub fn strip_casts(arg: &str) -> &str {
    let mut a = arg.trim();
    while a.starts_with('(') {
        let mut depth = 0;
        let mut close = None;
        for (i, c) in a.char_indices() {
            match c {
                '(' => depth += 1,
                ')' => {
                    depth -= 1;
                    if depth == 0 {
                        close = Some(i);
                        break;
                    }
                }
                _ => {}
            }
        }
        let Some(close) = close else { break };
        let inner = &a[1..close];
        let after = a[close + 1..].trim_start();
        let looks_like_type = !inner.is_empty()
            && inner
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ' ' || c == '*');
        if after.is_empty() || !looks_like_type {
            break;
        }
        a = after;
    }
    a
}

/// For each scalar field printed directly by `print fmt` (an argument that
/// is `REC->field` after casts), the conversion that prints it. This is what
/// libtraceevent's `print_field()` uses in raw mode before falling back to
/// `print_field_raw()`. The first matching argument wins (libtraceevent
/// searches cyclically from the argument after the previously printed field,
/// which finds the same one unless a field is printed twice).
///
/// `ftrace:bprint` has none: libtraceevent marks it `TEP_EVENT_FL_ISBPRINT`
/// and builds no print cache for it (its real format is the trace_printk
/// string), so its fields print raw (`ip=0xffffffc0000fbb98`, not a symbol).
pub fn field_conversions(event: &EventFormat) -> HashMap<String, Conversion> {
    let mut map = HashMap::new();
    if event.system.as_deref() == Some("ftrace") && event.name == "bprint" {
        return map;
    }
    let Some((fmt, args)) = split_print_fmt(&event.print_fmt) else {
        return map;
    };
    let mut args = args.iter();
    for conv in conversions(&fmt) {
        let Some(arg) = args.next() else { break };
        if conv.conv == '*' {
            continue;
        }
        let a = strip_casts(arg);
        if let Some(name) = a.strip_prefix("REC->") {
            if let Some(f) = event.field(name.trim()) {
                if !f.is_array && !f.is_string {
                    map.entry(f.name.clone()).or_insert(conv);
                }
            }
        }
    }
    map
}

// ---------------------------------------------------------------------------
// kallsyms, summary
// ---------------------------------------------------------------------------

/// Kernel symbols from `trace-cmd dump --kallsyms`, sorted by address.
#[derive(Debug, Default)]
pub struct Kallsyms {
    syms: Vec<(u64, String)>,
}

impl Kallsyms {
    /// Parses `ADDR TYPE NAME [MODULE]` lines (other lines are ignored).
    pub fn parse(text: &str) -> Kallsyms {
        let mut syms: Vec<(u64, String)> = text
            .lines()
            .filter_map(|l| {
                let mut it = l.split_whitespace();
                let addr = u64::from_str_radix(it.next()?, 16).ok()?;
                let ty = it.next()?;
                if ty.len() != 1 {
                    return None;
                }
                Some((addr, it.next()?.to_string()))
            })
            .collect();
        syms.sort();
        Kallsyms { syms }
    }

    pub fn len(&self) -> usize {
        self.syms.len()
    }

    /// The address of the first symbol called `name`.
    pub fn address_of(&self, name: &str) -> Option<u64> {
        self.syms.iter().find(|(_, n)| n == name).map(|(a, _)| *a)
    }

    /// All symbols starting at the greatest address `<= addr`
    /// (libtraceevent's `find_func()` picks one of them).
    pub fn lookup(&self, addr: u64) -> Option<(u64, Vec<&str>)> {
        let idx = self.syms.partition_point(|(a, _)| *a <= addr);
        let (start, _) = self.syms.get(idx.checked_sub(1)?)?;
        let names = self.syms[..idx]
            .iter()
            .rev()
            .take_while(|(a, _)| a == start)
            .map(|(_, n)| n.as_str())
            .collect();
        Some((*start, names))
    }
}

/// Whether `trace-cmd dump --summary` says the file is big-endian.
pub fn summary_is_big_endian(summary: &str) -> bool {
    summary
        .lines()
        .any(|l| l.trim_end().ends_with("[Big endian]"))
}

// ---------------------------------------------------------------------------
// Unit tests on real trace-cmd 3.1.6 output (lisa-rtapp, lisa-sched_load)
// ---------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use super::*;

    const SCHED_SWITCH_FMT: &str = "name: sched_switch
ID: 95
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;
\tfield:pid_t prev_pid;\toffset:24;\tsize:4;\tsigned:1;
\tfield:int prev_prio;\toffset:28;\tsize:4;\tsigned:1;
\tfield:long prev_state;\toffset:32;\tsize:8;\tsigned:1;
\tfield:char next_comm[16];\toffset:40;\tsize:16;\tsigned:0;
\tfield:pid_t next_pid;\toffset:56;\tsize:4;\tsigned:1;
\tfield:int next_prio;\toffset:60;\tsize:4;\tsigned:1;

print fmt: \"prev_comm=%s prev_pid=%d prev_prio=%d prev_state=%s%s ==> next_comm=%s next_pid=%d next_prio=%d\", REC->prev_comm, REC->prev_pid, REC->prev_prio, REC->prev_state & (4096-1) ? __print_flags(REC->prev_state & (4096-1), \"|\", { 1, \"S\"} , { 2, \"D\" }) : \"R\", REC->prev_state & 4096 ? \"+\" : \"\", REC->next_comm, REC->next_pid, REC->next_prio
";

    const SCHED_LOAD_SE_FMT: &str = "name: sched_load_se
ID: 75
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:int cpu;\toffset:8;\tsize:4;\tsigned:1;
\tfield:__data_loc char[] path;\toffset:12;\tsize:4;\tsigned:0;
\tfield:char comm[16];\toffset:16;\tsize:16;\tsigned:0;
\tfield:pid_t pid;\toffset:32;\tsize:4;\tsigned:1;
\tfield:unsigned long load;\toffset:40;\tsize:8;\tsigned:0;
\tfield:unsigned long util;\toffset:48;\tsize:8;\tsigned:0;

print fmt: \"cpu=%d path=%s comm=%s pid=%d load=%lu util=%lu\", REC->cpu, __get_str(path), REC->comm, REC->pid, REC->load, REC->util
";

    const FTRACE_FMTS: &str = "\t[Ftrace format, 13 events]
name: print
ID: 5
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:unsigned long ip;\toffset:8;\tsize:8;\tsigned:0;
\tfield:char buf;\toffset:16;\tsize:0;\tsigned:0;

print fmt: \"%ps: %s\", (void *)REC->ip, REC->buf

name: bprint
ID: 6
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:unsigned long ip;\toffset:8;\tsize:8;\tsigned:0;
\tfield:const char * fmt;\toffset:16;\tsize:8;\tsigned:0;
\tfield:u32 buf;\toffset:24;\tsize:0;\tsigned:0;

print fmt: \"%ps: %s\", (void *)REC->ip, REC->fmt

name: user_stack
ID: 12
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned int tgid;\toffset:8;\tsize:4;\tsigned:0;
\tfield:unsigned long caller[8];\toffset:16;\tsize:64;\tsigned:0;

print fmt: \"\\t=> (\" \"%016lx\" \")\\n\\t=> (\" \"%016lx\" \")\\n\", REC->caller[0], REC->caller[1]
";

    fn formats() -> Formats {
        let mut f = parse_ftrace_formats(FTRACE_FMTS);
        f.extend(parse_formats(&format!(
            "{SCHED_SWITCH_FMT}\n{SCHED_LOAD_SE_FMT}"
        )));
        f
    }

    #[test]
    fn timestamps_are_seconds_dot_nanoseconds() {
        assert_eq!(
            parse_timestamp("259445.106948920"),
            Some(259_445_106_948_920)
        );
        assert_eq!(parse_timestamp("2084.021442860"), Some(2_084_021_442_860));
        assert_eq!(parse_timestamp("1.5"), Some(1_500_000_000));
        assert_eq!(parse_timestamp("0.000000001"), Some(1));
        assert_eq!(parse_timestamp("1.0000000001"), None);
        assert_eq!(parse_timestamp("1."), None);
        assert_eq!(parse_timestamp("x.1"), None);
        assert_eq!(format_timestamp(2_084_021_442_860), "2084.021442860");
    }

    #[test]
    fn header_of_plain_line() {
        let l = "       trace-cmd-6973  [002] 259445.106948920: bprint:                ip=0xffffffc0000fbb98 fmt=0xffffffc0008f3b50 buf=0";
        let h = parse_header(l).unwrap();
        assert_eq!(h.comm, "trace-cmd");
        assert_eq!(h.pid, 6973);
        assert_eq!(h.cpu, 2);
        assert_eq!(h.ts_ns, 259_445_106_948_920);
        assert_eq!(h.event, "bprint");
        assert_eq!(
            h.rest,
            "                ip=0xffffffc0000fbb98 fmt=0xffffffc0008f3b50 buf=0"
        );
    }

    #[test]
    fn header_with_odd_comms() {
        // Space in the comm, `<idle>`, `<...>` (pid without saved cmdline),
        // ':' and '/' in comms, short timestamp padded with spaces.
        let cases = [
            ("   rs:main Q:Reg-1593  [003]  2084.228241560: sched_load_se:         cpu=3 path=/autogroup-23 comm=(null) pid=-1 load=7 util=1", "rs:main Q:Reg", 1593, 3, 2_084_228_241_560, "sched_load_se"),
            ("          <idle>-0     [002]  2084.021442860: cpu_idle:              state=4294967295 cpu_id=2", "<idle>", 0, 2, 2_084_021_442_860, "cpu_idle"),
            ("           <...>-784   [000] 259453.108202960: cpu_frequency:         state=700000 cpu_id=0", "<...>", 784, 0, 259_453_108_202_960, "cpu_frequency"),
            ("   kworker/u12:2-6698  [001] 259445.108655420: bprint:                ip=0xffffffc0000fbb98 fmt=0xffffffc0008f3b50 buf=0", "kworker/u12:2", 6698, 1, 259_445_108_655_420, "bprint"),
            ("     task_r20_5-60-6984  [003] 259445.9: sched_switch: x=1", "task_r20_5-60", 6984, 3, 259_445_900_000_000, "sched_switch"),
            // A comm that itself looks like a header fragment.
            ("  a-1 [9] b-22  [001] 1.000000001: foo: x=1", "a-1 [9] b", 22, 1, 1_000_000_001, "foo"),
        ];
        for (line, comm, pid, cpu, ts, ev) in cases {
            let h = parse_header(line).unwrap_or_else(|| panic!("no header in {line:?}"));
            assert_eq!(
                (h.comm, h.pid, h.cpu, h.ts_ns, h.event),
                (comm, pid, cpu, ts, ev),
                "{line}"
            );
        }
    }

    #[test]
    fn non_event_lines() {
        assert!(parse_header("cpus=6").is_none());
        assert!(parse_header("CPU:2 [LOST 17 EVENTS]").is_none());
        assert_eq!(parse_lost("CPU:2 [LOST 17 EVENTS]"), Some((2, Some(17))));
        assert_eq!(
            parse_lost("CPU:11 [123 EVENTS DROPPED]"),
            Some((11, Some(123)))
        );
        assert_eq!(parse_lost("CPU:0 [EVENTS DROPPED]"), Some((0, None)));
        assert_eq!(parse_lost("CPU:0 [LOST x EVENTS]"), None);
        assert!(is_info_line("CPU 3 is empty"));
        assert!(!is_info_line("CPU x is empty"));
    }

    #[test]
    fn field_lines() {
        let f = parse_field_line("\tfield:__data_loc char[] path;\toffset:12;\tsize:4;\tsigned:0;")
            .unwrap();
        assert_eq!(
            (f.name.as_str(), f.offset, f.size, f.signed),
            ("path", 12, 4, false)
        );
        assert!(f.is_array && f.is_dynamic && f.is_string && !f.is_pointer);
        let f = parse_field_line("\tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;")
            .unwrap();
        assert_eq!(f.name, "prev_comm");
        assert!(f.is_array && !f.is_dynamic && f.is_string);
        let f =
            parse_field_line("\tfield:unsigned long caller[8];\toffset:16;\tsize:64;\tsigned:0;")
                .unwrap();
        assert!(f.is_array && !f.is_string);
        let f =
            parse_field_line("\tfield:const char * fmt;\toffset:16;\tsize:8;\tsigned:0;").unwrap();
        assert_eq!(f.name, "fmt");
        assert!(f.is_pointer && !f.is_array);
        let f = parse_field_line("\tfield:char buf;\toffset:16;\tsize:0;\tsigned:0;").unwrap();
        assert_eq!((f.name.as_str(), f.size), ("buf", 0));
        assert!(!f.is_array && !f.is_string);
        let f =
            parse_field_line("\tfield:long prev_state;\toffset:32;\tsize:8;\tsigned:1;").unwrap();
        assert!(f.signed);
    }

    #[test]
    fn formats_and_conversions() {
        let fm = formats();
        assert_eq!(fm.len(), 5);
        let ss = &fm.candidates("sched_switch")[0];
        assert_eq!(ss.id, Some(95));
        assert_eq!(
            ss.field_names(),
            [
                "prev_comm",
                "prev_pid",
                "prev_prio",
                "prev_state",
                "next_comm",
                "next_pid",
                "next_prio"
            ]
        );
        // prev_state is an expression argument, so it is printed raw.
        assert!(!ss.conversions.contains_key("prev_state"));
        assert_eq!(ss.conversions["prev_pid"].spec, "%d");
        assert_eq!(ss.conversions["next_prio"].spec, "%d");
        assert!(!ss.conversions.contains_key("prev_comm"));

        let se = &fm.candidates("sched_load_se")[0];
        assert_eq!(se.conversions["load"].spec, "%lu");
        assert_eq!(se.conversions["load"].bits, 64);
        assert_eq!(se.conversions["pid"].bits, 32);

        let pr = &fm.candidates("print")[0];
        assert_eq!(pr.conversions["ip"].conv, 'p');
        assert_eq!(pr.conversions["ip"].pointer_ext, Some('s'));
        // `char buf` (size 0) is no array: printed by its `%s` conversion.
        assert_eq!(pr.conversions["buf"].conv, 's');

        let bp = &fm.candidates("bprint")[0];
        assert_eq!(bp.system.as_deref(), Some("ftrace"));
        assert!(bp.conversions.is_empty(), "bprint prints raw");

        let us = &fm.candidates("user_stack")[0];
        assert!(
            us.conversions.is_empty(),
            "REC->caller[0] is not a plain field"
        );
    }

    #[test]
    fn print_fmt_splitting() {
        let (f, a) = split_print_fmt("\"%ps: %s\", (void *)REC->ip, REC->buf").unwrap();
        assert_eq!(f, "%ps: %s");
        assert_eq!(a, ["(void *)REC->ip", "REC->buf"]);
        let (f, a) = split_print_fmt("\"a\" \"%d, %s\" \"b\", f(REC->x, \"q,\"), REC->y").unwrap();
        assert_eq!(f, "a%d, %sb");
        assert_eq!(a, ["f(REC->x, \"q,\")", "REC->y"]);
        let (f, a) = split_print_fmt("\"no args\"").unwrap();
        assert_eq!((f.as_str(), a.len()), ("no args", 0));
        let c = conversions("%%x=%*d %hhu %lx 0x%08llx %pS %c %s");
        let specs: Vec<&str> = c.iter().map(|c| c.spec.as_str()).collect();
        assert_eq!(
            specs,
            ["*", "%*d", "%hhu", "%lx", "%08llx", "%pS", "%c", "%s"]
        );
        assert_eq!(c[2].bits, 8);
        assert_eq!(c[5].pointer_ext, Some('S'));
        assert_eq!(strip_casts("(unsigned long)REC->state"), "REC->state");
        assert_eq!(strip_casts("(void *)REC->ip"), "REC->ip");
        assert_eq!(strip_casts("(REC->a + 1)"), "(REC->a + 1)");
    }

    #[test]
    fn split_with_known_names() {
        let fm = formats();
        let ss = &fm.candidates("sched_switch")[0];
        let names = ss.field_names();
        let rest = "          prev_comm=rs:main Q:Reg prev_pid=1593 prev_prio=120 prev_state=1 next_comm=systemd-journal next_pid=1478 next_prio=120";
        let f = split_known_fields(rest, &names).unwrap();
        assert_eq!(f[0], ("prev_comm".into(), "rs:main Q:Reg".into()));
        assert_eq!(f[3], ("prev_state".into(), "1".into()));
        assert_eq!(f[6], ("next_prio".into(), "120".into()));

        // A comm that contains the next field's name: backtracking.
        let rest = " prev_comm=a prev_pid=1 prev_pid=2 prev_prio=3 prev_state=4 next_comm=x next_pid=5 next_prio=6";
        let f = split_known_fields(rest, &names).unwrap();
        assert_eq!(f[0].1, "a");
        assert_eq!(f[1].1, "1 prev_pid=2");

        // The last value keeps everything, including '=' and spaces.
        let rest = "                 ip=tracing_mark_write buf=cpu_frequency:        state=450000 cpu_id=0";
        let f = split_known_fields(rest, &["ip", "buf"]).unwrap();
        assert_eq!(f[1].1, "cpu_frequency:        state=450000 cpu_id=0");

        assert!(split_known_fields(" a=1 b=2", &["a", "c"]).is_none());
        assert_eq!(split_known_fields("   ", &[] as &[&str]), Some(vec![]));
        assert_eq!(split_known_fields(" a=", &["a"]).unwrap()[0].1, "");
    }

    #[test]
    fn heuristic_split() {
        let f = split_fields_heuristic(
            "         cpu=2 path=(null) comm=kworker/2:1 pid=2923 load=0 util=0",
        );
        let names: Vec<&str> = f.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["cpu", "path", "comm", "pid", "load", "util"]);
        assert_eq!(f[1].1, "(null)");
    }

    #[test]
    fn whole_report() {
        let text = "cpus=6
       trace-cmd-6973  [002] 259445.106979220: sched_switch:          prev_comm=trace-cmd prev_pid=6973 prev_prio=120 prev_state=64 next_comm=swapper/2 next_pid=0 next_prio=120
              sh-6975  [000] 259445.530470720: print:                 ip=tracing_mark_write buf=TRACE_MARKER_START
         shutils-6977  [002] 259445.764419720: print:                 ip=tracing_mark_write buf=line one
line two
CPU:2 [LOST 3 EVENTS]
   rs:main Q:Reg-1593  [003]  2084.228241560: sched_load_se:         cpu=3 path=/autogroup-23 comm=(null) pid=-1 load=7 util=1
          <idle>-0     [002]  2084.021442860: cpu_idle:              state=4294967295 cpu_id=2
";
        let r = parse_report(text, &formats());
        assert_eq!(r.cpus, Some(6));
        assert!(r.unparsed.is_empty(), "{:?}", r.unparsed);
        assert_eq!(r.continuation_lines, 1);
        assert_eq!(
            r.lost,
            [LostLine {
                line_no: 6,
                cpu: 2,
                count: Some(3)
            }]
        );
        assert_eq!(r.events.len(), 5);
        assert_eq!(r.events[2].fields[1].1, "line one\nline two");
        assert!(r.events[..4].iter().all(|e| e.split_by_format));
        assert!(!r.events[4].split_by_format, "cpu_idle has no format here");
        assert_eq!(
            r.events[4].fields,
            [
                ("state".into(), "4294967295".into()),
                ("cpu_id".into(), "2".into())
            ]
        );
        assert_eq!(r.events[3].fields[2], ("comm".into(), "(null)".into()));
        assert_eq!(r.counts()["print"], 2);
        let fm = formats();
        assert_eq!(fm.resolve(&r.events[0]).unwrap().name, "sched_switch");
        assert!(parse_report("garbage\n", &fm).unparsed.len() == 1);
    }

    #[test]
    fn kallsyms_lookup() {
        let k = Kallsyms::parse(
            "\t[Kallsyms, 2684861 bytes]\nffffffc000080000 t efi_head\nffffffc000080000 T _text\nffffffc000080040 t pe_header\nffffffc000175994 t tracing_mark_write\nffffffc000175a00 t x [mod]\n",
        );
        assert_eq!(k.len(), 5);
        let (a, n) = k.lookup(0xffffffc000175994).unwrap();
        assert_eq!((a, n), (0xffffffc000175994, vec!["tracing_mark_write"]));
        assert_eq!(
            k.lookup(0xffffffc0001759a0).unwrap().1,
            ["tracing_mark_write"]
        );
        let (_, mut n) = k.lookup(0xffffffc000080010).unwrap();
        n.sort();
        assert_eq!(n, ["_text", "efi_head"]);
        assert!(k.lookup(0x10).is_none());
        assert_eq!(k.address_of("pe_header"), Some(0xffffffc000080040));
        assert_eq!(k.address_of("nope"), None);
    }

    #[test]
    fn endianness_from_summary() {
        assert!(!summary_is_big_endian(
            "\t\t0\t[Little endian]\n\t\t8\t[Bytes in a long]"
        ));
        assert!(summary_is_big_endian("\t\t1\t[Big endian]\n"));
    }
}
