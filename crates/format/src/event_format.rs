//! Event format files (`events/SYSTEM/EVENT/format`): an event's id, name and field
//! layout. Parsed once per event type; after that a field is read by offset and size.

use crate::error::{Error, Result};

/// Event ids are the ring buffer's 16-bit `common_type`; tables indexed by id stay this small.
pub const MAX_EVENT_ID: u32 = u16::MAX as u32;

/// How a field's bytes are laid out in the record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldKind {
    /// A scalar integer (or pointer) of `Field::size` bytes: 1, 2, 4 or 8.
    Int,
    /// A fixed-size array of `len` elements of `elem` bytes; `char[N]` arrays are strings.
    Array {
        len: usize,
        elem: usize,
        string: bool,
    },
    /// `__data_loc` / `__rel_loc`: a 4-byte word (2 bytes in very old kernels) whose low 16
    /// bits are the offset of the data and high 16 bits its length. For `__rel_loc` the
    /// offset counts from the end of the word.
    Dynamic {
        elem: usize,
        string: bool,
        relative: bool,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    pub name: String,
    /// The declared C type without the field name, e.g. `unsigned long`, `char[16]`,
    /// `__data_loc char[]`.
    pub type_name: String,
    pub offset: usize,
    pub size: usize,
    pub signed: bool,
    pub kind: FieldKind,
}

/// Where an event's format text is in its trace file (for messages about the format).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FormatAt {
    /// At this offset of the file.
    File(u64),
    /// At byte `at` of the compressed section whose data starts at offset `section` (v7).
    Section { section: u64, at: u64 },
}

impl std::fmt::Display for FormatAt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FormatAt::File(at) => write!(f, "offset {at}"),
            FormatAt::Section { section, at } => write!(
                f,
                "byte {at} of the compressed event formats at offset {section}"
            ),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventFormat {
    pub id: u32,
    pub system: String,
    pub name: String,
    /// The `common_*` fields every event starts with.
    pub common: Vec<Field>,
    /// The event's own fields, in file order.
    pub fields: Vec<Field>,
    pub print_fmt: String,
    /// Where the format's text is in the trace file, when it came from one.
    pub at: Option<FormatAt>,
}

impl EventFormat {
    /// Parses a format file's text. `long_size` (4 or 8) sizes `long` elements of dynamic
    /// arrays, whose element size the file does not state.
    pub fn parse(text: &[u8], system: &str, long_size: usize) -> Result<EventFormat> {
        let text = std::str::from_utf8(text).map_err(|e| {
            Error::corrupt(e.valid_up_to() as u64, "event format is not UTF-8 text")
        })?;
        let mut name = None;
        let mut id = None;
        let mut print_fmt = String::new();
        let mut common = Vec::new();
        let mut fields = Vec::new();
        let mut at = 0u64;
        for raw in text.split_inclusive('\n') {
            let line_at = at;
            at += raw.len() as u64;
            let line = raw.trim();
            if let Some(v) = line.strip_prefix("name:") {
                name = Some(v.trim().to_string());
            } else if let Some(v) = line.strip_prefix("ID:") {
                let v = v.trim();
                // The ring buffer stores ids in 16 bits; a larger one would size id tables.
                id = Some(
                    v.parse::<u32>()
                        .ok()
                        .filter(|&id| id <= MAX_EVENT_ID)
                        .ok_or_else(|| {
                            Error::corrupt(
                                line_at,
                                format!("event format: ID {v:?} is not a 16-bit event id"),
                            )
                        })?,
                );
            } else if let Some(v) = line.strip_prefix("field:") {
                let f = parse_field(v, long_size).map_err(|msg| {
                    Error::corrupt(line_at, format!("event format: {msg} in {line:?}"))
                })?;
                if f.name.starts_with("common_") {
                    common.push(f);
                } else {
                    fields.push(f);
                }
            } else if let Some(v) = line.strip_prefix("print fmt:") {
                print_fmt = v.trim().to_string();
            }
        }
        let Some(name) = name else {
            return Err(Error::corrupt(0, "event format has no \"name:\" line"));
        };
        let Some(id) = id else {
            return Err(Error::corrupt(
                0,
                format!("event format of {name} has no \"ID:\" line"),
            ));
        };
        Ok(EventFormat {
            id,
            system: system.to_string(),
            name,
            common,
            fields,
            print_fmt,
            at: None,
        })
    }

    /// Looks a field up by name among the event's own fields, then the common ones.
    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields
            .iter()
            .chain(self.common.iter())
            .find(|f| f.name == name)
    }
}

/// Parses the part of a field line after `field:`, e.g.
/// `char prev_comm[16];\toffset:8;\tsize:16;\tsigned:1;`.
fn parse_field(decl: &str, long_size: usize) -> std::result::Result<Field, String> {
    let mut parts = decl.split(';').map(str::trim);
    let c_decl = parts.next().unwrap_or_default();
    let (mut offset, mut size, mut signed) = (None, None, None);
    for p in parts {
        let num = |v: &str| {
            v.trim()
                .parse::<usize>()
                .map_err(|_| format!("bad number {v:?}"))
        };
        if let Some(v) = p.strip_prefix("offset:") {
            offset = Some(num(v)?);
        } else if let Some(v) = p.strip_prefix("size:") {
            size = Some(num(v)?);
        } else if let Some(v) = p.strip_prefix("signed:") {
            signed = Some(num(v)? != 0);
        }
    }
    let offset = offset.ok_or("field has no offset")?;
    let size = size.ok_or("field has no size")?;
    if offset.checked_add(size).is_none_or(|end| end > 1 << 20) {
        return Err(format!(
            "field offset {offset} + size {size} is implausible"
        ));
    }

    // The name is the last identifier; an array suffix may follow it (`comm[16]`) or,
    // for dynamic arrays, sit on the type (`__data_loc char[] name`).
    let (head, suffix) = match c_decl.rfind('[') {
        Some(b) if c_decl.ends_with(']') => (&c_decl[..b], Some(&c_decl[b + 1..c_decl.len() - 1])),
        _ => (c_decl, None),
    };
    let head = head.trim_end();
    let split = head
        .char_indices()
        .rev()
        .find(|&(_, c)| !(c.is_ascii_alphanumeric() || c == '_'))
        .map_or(0, |(i, c)| i + c.len_utf8());
    let name = &head[split..];
    if name.is_empty() {
        return Err("field has no name".into());
    }
    let ctype = head[..split].trim();
    let dynamic = ctype.starts_with("__data_loc") || ctype.starts_with("__rel_loc");
    let relative = ctype.starts_with("__rel_loc");
    let base = ctype
        .trim_start_matches("__data_loc")
        .trim_start_matches("__rel_loc")
        .trim()
        .trim_end_matches("[]")
        .trim();
    let type_name = match suffix {
        Some(n) => format!("{ctype}[{n}]"),
        None => ctype.to_string(),
    };
    let elem = elem_size(base, long_size);
    let string = is_char(base);
    let kind = if dynamic {
        if size != 4 && size != 2 {
            return Err(format!("dynamic field has size {size}, expected 4 (or 2)"));
        }
        FieldKind::Dynamic {
            elem: elem.unwrap_or(1),
            string,
            relative,
        }
    } else if let Some(n) = suffix {
        // The element count may be a macro name the kernel did not expand; the size decides.
        let elem = match (n.trim().parse::<usize>(), elem) {
            (Ok(len), _) if len > 0 && size % len == 0 => size / len,
            (_, Some(e)) => e,
            _ => 1,
        };
        let len = size.checked_div(elem).unwrap_or(0);
        FieldKind::Array { len, elem, string }
    } else {
        if !matches!(size, 1 | 2 | 4 | 8) {
            // Structs embedded by value: expose their bytes rather than fail the event.
            // ftrace's own `char buf;` of size 0 is a string running to the end of the record.
            return Ok(Field {
                name: name.to_string(),
                type_name,
                offset,
                size,
                signed: false,
                kind: FieldKind::Array {
                    len: size,
                    elem: 1,
                    string: is_char(base),
                },
            });
        }
        FieldKind::Int
    };
    let signed = signed.unwrap_or_else(|| !base.contains("unsigned") && !base.starts_with('u'));
    Ok(Field {
        name: name.to_string(),
        type_name,
        offset,
        size,
        signed,
        kind,
    })
}

fn is_char(base: &str) -> bool {
    matches!(
        base,
        "char" | "const char" | "unsigned char" | "signed char"
    )
}

/// Element size of a C base type where the format file does not give it (dynamic arrays).
fn elem_size(base: &str, long_size: usize) -> Option<usize> {
    if base.ends_with('*') {
        return Some(long_size);
    }
    let base = base
        .trim_start_matches("const ")
        .trim_start_matches("unsigned ")
        .trim_start_matches("signed ");
    Some(match base {
        "char" | "u8" | "s8" | "__u8" | "__s8" | "bool" | "_Bool" => 1,
        "short" | "u16" | "s16" | "__u16" | "__s16" | "__be16" | "__le16" => 2,
        "int" | "u32" | "s32" | "__u32" | "__s32" | "pid_t" | "gfp_t" | "__be32" | "__le32" => 4,
        "long long" | "u64" | "s64" | "__u64" | "__s64" | "__be64" | "__le64" => 8,
        "long" | "cpumask_t" | "size_t" | "ssize_t" => long_size,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SWITCH: &str = "name: sched_switch\nID: 297\nformat:\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:1;\n\tfield:long prev_state;\toffset:32;\tsize:8;\tsigned:1;\n\tfield:__data_loc char[] name;\toffset:56;\tsize:4;\tsigned:1;\n\tfield:__rel_loc u32[] ids;\toffset:60;\tsize:4;\tsigned:0;\n\tfield:u8 mac[6];\toffset:64;\tsize:6;\tsigned:0;\n\tfield:char buf[];\toffset:70;\tsize:0;\tsigned:1;\n\nprint fmt: \"prev_comm=%s\", REC->prev_comm\n";

    #[test]
    fn parses_every_field_kind() {
        let ev = EventFormat::parse(SWITCH.as_bytes(), "sched", 8).unwrap();
        assert_eq!(
            (ev.id, ev.name.as_str(), ev.system.as_str()),
            (297, "sched_switch", "sched")
        );
        assert_eq!(ev.common.len(), 2);
        let kinds: Vec<_> = ev
            .fields
            .iter()
            .map(|f| (f.name.as_str(), f.kind, f.signed))
            .collect();
        assert_eq!(
            kinds,
            vec![
                (
                    "prev_comm",
                    FieldKind::Array {
                        len: 16,
                        elem: 1,
                        string: true
                    },
                    true
                ),
                ("prev_state", FieldKind::Int, true),
                (
                    "name",
                    FieldKind::Dynamic {
                        elem: 1,
                        string: true,
                        relative: false
                    },
                    true
                ),
                (
                    "ids",
                    FieldKind::Dynamic {
                        elem: 4,
                        string: false,
                        relative: true
                    },
                    false
                ),
                (
                    "mac",
                    FieldKind::Array {
                        len: 6,
                        elem: 1,
                        string: false
                    },
                    false
                ),
                (
                    "buf",
                    FieldKind::Array {
                        len: 0,
                        elem: 1,
                        string: true
                    },
                    true
                ),
            ]
        );
        assert_eq!(ev.field("common_pid").unwrap().offset, 4);
        assert_eq!(ev.field("name").unwrap().type_name, "__data_loc char[]");
        assert!(ev.print_fmt.starts_with("\"prev_comm"));
    }

    #[test]
    fn errors_name_the_line() {
        let bad = "name: x\nID: 1\nformat:\n\tfield:int a;\toffset:zz;\tsize:4;\n";
        let e = EventFormat::parse(bad.as_bytes(), "s", 8).unwrap_err();
        assert_eq!(e.offset, Some(22));
        assert!(e.msg.contains("bad number"), "{e}");
        assert!(EventFormat::parse(b"name: x\n", "s", 8)
            .unwrap_err()
            .msg
            .contains("ID"));
        assert!(EventFormat::parse(b"ID: 3\n", "s", 8)
            .unwrap_err()
            .msg
            .contains("name"));
    }
}

impl EventFormat {
    /// For each of the event's own fields, the printf conversion its print fmt applies to
    /// it when the argument is the bare field (`REC->x`, possibly behind a cast) — the
    /// conversion trace-cmd's raw output uses for that field.
    pub fn print_specs(&self) -> Vec<Option<crate::value::PrintSpec>> {
        let by_field = print_fmt_conversions(&self.print_fmt);
        self.fields
            .iter()
            .map(|f| {
                by_field
                    .iter()
                    .find(|(name, _)| *name == f.name)
                    .and_then(|(_, conv)| crate::value::PrintSpec::parse(conv))
            })
            .collect()
    }
}

/// Pairs the conversions of a print fmt (`"a=%d b=0x%lx", REC->a, (long)REC->b`) with the
/// field each bare `REC->field` argument names.
fn print_fmt_conversions(print_fmt: &str) -> Vec<(&str, &str)> {
    let Some(rest) = print_fmt.strip_prefix('"') else {
        return Vec::new();
    };
    let Some(end) = find_closing_quote(rest) else {
        return Vec::new();
    };
    let (fmt, args) = (&rest[..end], &rest[end + 1..]);
    let convs = conversions(fmt);
    let args = split_top_level(args.trim_start().strip_prefix(',').unwrap_or(""));
    convs
        .into_iter()
        .zip(args)
        .filter_map(|(conv, arg)| {
            let mut a = arg.trim();
            // Strip leading casts: `(unsigned long)REC->x`.
            while let Some(r) = a.strip_prefix('(') {
                let close = r.find(')')?;
                if r[..close].contains("REC->") {
                    return None;
                }
                a = r[close + 1..].trim_start();
            }
            let name = a.strip_prefix("REC->")?;
            name.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_')
                .then_some((name, conv))
        })
        .collect()
}

fn find_closing_quote(s: &str) -> Option<usize> {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            b'"' => return Some(i),
            _ => i += 1,
        }
    }
    None
}

/// The conversions of a printf format, each with a literal `0x` before it kept.
fn conversions(fmt: &str) -> Vec<&str> {
    let b = fmt.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'%' {
            i += 1;
            continue;
        }
        if b.get(i + 1) == Some(&b'%') {
            i += 2;
            continue;
        }
        let start = if i >= 2 && &b[i - 2..i] == b"0x" {
            i - 2
        } else {
            i
        };
        let mut j = i + 1;
        while j < b.len() && b"-+ #0123456789.*hlLzZjt".contains(&b[j]) {
            j += 1;
        }
        if j < b.len() {
            j += 1;
            // %p takes letter suffixes (%ps, %pS, %pI4, ...).
            if b[j - 1] == b'p' {
                while j < b.len() && b[j].is_ascii_alphanumeric() {
                    j += 1;
                }
            }
        }
        out.push(&fmt[start..j]);
        i = j;
    }
    out
}

/// Splits a C argument list at commas outside parentheses, braces and strings.
fn split_top_level(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut in_str, mut start) = (0i32, false, 0);
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'\\' if in_str => i += 1,
            b'"' => in_str = !in_str,
            b'(' | b'{' | b'[' if !in_str => depth += 1,
            b')' | b'}' | b']' if !in_str => depth -= 1,
            b',' if !in_str && depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
        i += 1;
    }
    if start < s.len() {
        out.push(&s[start..]);
    }
    out
}

#[cfg(test)]
mod print_fmt_tests {
    use super::*;

    #[test]
    fn pairs_conversions_with_bare_fields() {
        let f = r#""cpu=%d path=%s load=%lu util=0x%lx fl=%s", REC->cpu, __get_str(path), (unsigned long)REC->load, REC->util, __print_flags(REC->f, "|", {1, "A"})"#;
        assert_eq!(
            print_fmt_conversions(f),
            vec![("cpu", "%d"), ("load", "%lu"), ("util", "0x%lx")]
        );
        assert_eq!(conversions("%% a=%ps b=%5.2llx"), vec!["%ps", "%5.2llx"]);
    }
}
