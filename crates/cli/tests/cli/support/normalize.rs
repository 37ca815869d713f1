//! Comparison of a `kstate dump --json` field value with the text
//! `trace-cmd report -R` printed for it.
//!
//! The rules follow libtraceevent 1.7's raw printing (`print_field()` /
//! `print_field_raw()` in `src/event-parse.c`, see `tracecmd.rs`):
//!
//! * Scalar printed through its `print fmt` conversion:
//!   `%d %i %u` decimal, `%x %X` hex (with or without a literal `0x` before
//!   it), `%o` octal, `%c` one character; the value is cast to the
//!   conversion's length (`hh` 8, `h` 16, none 32, `l`/`ll`/`z` 64 bits), so
//!   JSON and text are compared modulo `2^min(8*size, cast bits)`. For
//!   example `cpu_idle.state` is a `u32` printed with `(unsigned long)` `%lu`:
//!   `4294967295` must equal JSON `4294967295`, and a signed `pid_t` printed
//!   `%d` as `-1` must equal JSON `-1`.
//! * `%ps %pS %pf %pF` (`print.ip`): the kernel symbol containing the address
//!   (`name`, or `name+0xoff` for `S`/`F`), or `0x...` when the address is
//!   not in kallsyms. The symbol is checked against `trace-cmd dump
//!   --kallsyms` of the same file: the JSON address must fall in that symbol.
//!   Plain `%p` is glibc's `%p`: `0x...` or `(nil)`.
//! * Scalar printed raw: pointers and unsigned `long` as `0x%llx`, signed as
//!   `%d`/`%lld` (`%2d`/`%1d` for 2/1-byte fields, so leading spaces are
//!   trimmed), signed 4-byte `long` as `0x%x`, other unsigned as `%llu`. The
//!   text is parsed as hex when it starts with `0x`, else decimal, and
//!   compared modulo `2^(8*size)` with `size` from the format file. This makes
//!   the signedness of the printing irrelevant while still checking every bit
//!   of the field: JSON `-1` for an `s32` and `0xffffffff` compare equal mod
//!   2^32, and they denote the same bits.
//! * Strings (printable char arrays, `__data_loc char[]`, and the size-0
//!   `char buf` of ftrace `print`): printed with `%s` up to the first NUL.
//!   Trailing NULs and newlines of the JSON string are ignored (trace-cmd
//!   drops the trailing newline of a line: a trace_marker write
//!   "TRACE_MARKER_START\n" in lisa-rtapp prints as `buf=TRACE_MARKER_START`).
//! * Non-printable strings and all other arrays print as `ARRAY[xx, xx]`: the
//!   bytes of the array in the file's byte order. A JSON array of integers is
//!   compared element by element: element size = byte count / element count,
//!   each element modulo 2^(8*element size). A JSON string is compared with
//!   the bytes up to the first NUL. A `u8`/`s8` array that happens to be
//!   printable is printed as a string by trace-cmd; its JSON array bytes (up to
//!   the first NUL) are compared with the text.

use super::tracecmd::{Conversion, EventFormat, EventLine, FieldFormat, Kallsyms};
use serde_json::{Map, Value};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Match,
    /// Why the values differ.
    Mismatch(String),
    /// The text cannot be checked against the value (e.g. a scalar printed
    /// with `%s`, which libtraceevent resolves through trace_printk formats).
    Unverified(String),
}

/// Per-file facts the comparison needs.
pub struct Ctx<'a> {
    pub kallsyms: &'a Kallsyms,
    pub big_endian: bool,
}

/// Parses `ARRAY[xx, xx, ...]` into bytes.
pub fn parse_array_text(text: &str) -> Option<Vec<u8>> {
    let inner = text.strip_prefix("ARRAY[")?.strip_suffix(']')?;
    if inner.is_empty() {
        return Some(Vec::new());
    }
    inner
        .split(", ")
        .map(|b| {
            (b.len() == 2)
                .then(|| u8::from_str_radix(b, 16).ok())
                .flatten()
        })
        .collect()
}

/// Parses an integer as printed: optional `-`, `0x` hex, else `radix`.
pub fn parse_int(text: &str, radix: u32) -> Option<i128> {
    let t = text.trim();
    let (neg, t) = match t.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, t),
    };
    let (digits, radix) = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(h) => (h, 16),
        None => (t, radix),
    };
    if digits.is_empty() || digits.starts_with(['+', '-']) {
        return None;
    }
    let v = u128::from_str_radix(digits, radix).ok()?;
    let v = i128::try_from(v).ok()?;
    Some(if neg { -v } else { v })
}

pub fn json_int(v: &Value) -> Option<i128> {
    v.as_i64()
        .map(i128::from)
        .or_else(|| v.as_u64().map(i128::from))
}

/// `a == b (mod 2^bits)`; `bits == 0` (a size-0 field) compares nothing.
pub fn eq_mod(a: i128, b: i128, bits: u32) -> bool {
    if bits == 0 {
        return true;
    }
    let m = 1i128 << bits.min(64);
    a.rem_euclid(m) == b.rem_euclid(m)
}

fn c_string(bytes: &[u8]) -> &[u8] {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    &bytes[..end]
}

fn show(v: &Value) -> String {
    v.to_string()
}

/// Compares one field. `conv` is the `print fmt` conversion of the field,
/// if it has one (see `tracecmd::field_conversions`).
pub fn compare_field(
    field: &FieldFormat,
    conv: Option<&Conversion>,
    json: &Value,
    text: &str,
    ctx: &Ctx<'_>,
) -> Verdict {
    let expected = expected_kind(field, conv);
    match (json, expected) {
        (Value::Number(_), Kind::Integer) => compare_scalar(field, conv, json, text, ctx),
        (Value::String(s), Kind::String) => compare_string(s, text),
        (Value::Array(items), Kind::Array) => compare_array(items, text, ctx),
        (other, _) => Verdict::Mismatch(format!(
            "`{}` should be a JSON {expected:?}, got {} (trace-cmd: `{text}`)",
            field.decl,
            show(other)
        )),
    }
}

/// The JSON type `kstate dump --json` must use for a field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Integer,
    String,
    Array,
}

/// Char arrays and `__data_loc char[]` are strings, other arrays are arrays
/// of integers, scalars are integers — except a non-pointer `char` scalar
/// printed with `%s` (the size-0 `char buf` of ftrace `print`: the rest of
/// the record is a string).
pub fn expected_kind(field: &FieldFormat, conv: Option<&Conversion>) -> Kind {
    let is_char = field.decl.contains("char");
    if field.is_array {
        if is_char {
            Kind::String
        } else {
            Kind::Array
        }
    } else if is_char && !field.is_pointer && conv.is_some_and(|c| c.conv == 's') {
        Kind::String
    } else {
        Kind::Integer
    }
}

fn compare_scalar(
    field: &FieldFormat,
    conv: Option<&Conversion>,
    json: &Value,
    text: &str,
    ctx: &Ctx<'_>,
) -> Verdict {
    let Some(v) = json_int(json) else {
        return Verdict::Mismatch(format!("JSON number {} is not an integer", show(json)));
    };
    if field.is_array {
        return Verdict::Mismatch(format!(
            "`{}` is an array, JSON has the scalar {v}",
            field.decl
        ));
    }
    let size_bits = (field.size * 8).min(64) as u32;
    let mut bits = size_bits;
    let mut radix = 10;
    match conv {
        None => {}
        Some(c) => match c.conv {
            'd' | 'i' | 'u' => bits = bits.min(c.bits),
            'x' | 'X' => {
                bits = bits.min(c.bits);
                radix = 16;
            }
            'o' => {
                bits = bits.min(c.bits);
                radix = 8;
            }
            'c' => {
                let mut chars = text.chars();
                return match (chars.next(), chars.next()) {
                    (Some(ch), None) if eq_mod(v, ch as i128, bits.min(8)) => Verdict::Match,
                    _ => {
                        Verdict::Mismatch(format!("`{text}` ({}) is not the character {v}", c.spec))
                    }
                };
            }
            'p' => {
                if text.trim() == "(nil)" {
                    return verdict_int(v, 0, size_bits, text, "%p (nil)");
                }
                if let (Some(ext @ ('s' | 'S' | 'f' | 'F')), None) =
                    (c.pointer_ext, parse_int(text, 16))
                {
                    return compare_symbol(v, size_bits, text, ext, ctx);
                }
                radix = 16;
            }
            _ => {
                return Verdict::Unverified(format!(
                    "scalar `{}` printed with {}: `{text}`",
                    field.decl, c.spec
                ))
            }
        },
    }
    match parse_int(text, radix) {
        Some(t) => verdict_int(v, t, bits, text, conv.map_or("raw", |c| c.spec.as_str())),
        None => Verdict::Mismatch(format!(
            "`{text}` is not an integer (field `{}`, {}), JSON has {v}",
            field.decl,
            conv.map_or("raw", |c| c.spec.as_str())
        )),
    }
}

fn verdict_int(v: i128, t: i128, bits: u32, text: &str, how: &str) -> Verdict {
    if eq_mod(v, t, bits) {
        Verdict::Match
    } else {
        Verdict::Mismatch(format!(
            "JSON {v} != trace-cmd `{text}` ({how}, compared mod 2^{bits})"
        ))
    }
}

fn compare_symbol(v: i128, size_bits: u32, text: &str, ext: char, ctx: &Ctx<'_>) -> Verdict {
    let addr = v.rem_euclid(1i128 << size_bits.clamp(1, 64)) as u64;
    let (name, off) = match (ext, text.rsplit_once("+0x")) {
        ('S' | 'F', Some((n, o))) => match u64::from_str_radix(o, 16) {
            Ok(o) => (n, Some(o)),
            Err(_) => (text, None),
        },
        _ => (text, None),
    };
    let Some((start, names)) = ctx.kallsyms.lookup(addr) else {
        return Verdict::Mismatch(format!("trace-cmd printed symbol `{text}`, but JSON address {addr:#x} is below every kallsyms entry"));
    };
    if !names.contains(&name) {
        return Verdict::Mismatch(format!(
            "trace-cmd printed symbol `{text}`, JSON address {addr:#x} is in {names:?} (starting {start:#x})"
        ));
    }
    if let Some(off) = off {
        if addr - start != off {
            return Verdict::Mismatch(format!(
                "trace-cmd printed `{text}`, JSON address {addr:#x} is {name}+{:#x}",
                addr - start
            ));
        }
    }
    Verdict::Match
}

fn compare_string(s: &str, text: &str) -> Verdict {
    let s_norm = s.trim_end_matches(['\0', '\n']);
    if s_norm == text || s == text {
        return Verdict::Match;
    }
    if let Some(bytes) = parse_array_text(text) {
        if c_string(&bytes) == s_norm.as_bytes() {
            return Verdict::Match;
        }
    }
    Verdict::Mismatch(format!(
        "JSON string {} != trace-cmd `{text}`",
        show(&Value::String(s.to_string()))
    ))
}

fn compare_array(items: &[Value], text: &str, ctx: &Ctx<'_>) -> Verdict {
    let Some(ints) = items.iter().map(json_int).collect::<Option<Vec<i128>>>() else {
        return Verdict::Mismatch(format!(
            "JSON array {} has non-integer elements",
            show(&Value::Array(items.to_vec()))
        ));
    };
    let Some(bytes) = parse_array_text(text) else {
        // Printed with %s: an array of char/u8/s8 whose content was printable.
        if ints.iter().all(|&v| (-128..=255).contains(&v)) {
            let b: Vec<u8> = ints.iter().map(|&v| v as u8).collect();
            if c_string(&b) == text.as_bytes() {
                return Verdict::Match;
            }
        }
        return Verdict::Mismatch(format!("JSON array {ints:?} != trace-cmd `{text}`"));
    };
    if ints.is_empty() || bytes.is_empty() {
        return if ints.is_empty() && bytes.is_empty() {
            Verdict::Match
        } else {
            Verdict::Mismatch(format!(
                "JSON array {ints:?} != trace-cmd `{text}` ({} bytes)",
                bytes.len()
            ))
        };
    }
    let elem = bytes.len() / ints.len();
    if bytes.len() % ints.len() != 0 || elem > 8 {
        return Verdict::Mismatch(format!(
            "JSON array has {} elements but trace-cmd printed {} bytes: `{text}`",
            ints.len(),
            bytes.len()
        ));
    }
    for (i, (chunk, &v)) in bytes.chunks(elem).zip(&ints).enumerate() {
        let mut x: u64 = 0;
        if ctx.big_endian {
            for &b in chunk {
                x = (x << 8) | u64::from(b);
            }
        } else {
            for &b in chunk.iter().rev() {
                x = (x << 8) | u64::from(b);
            }
        }
        if !eq_mod(v, i128::from(x), (elem * 8) as u32) {
            return Verdict::Mismatch(format!(
                "element {i}: JSON {v} != {x:#x} from trace-cmd `{text}` ({elem}-byte elements)"
            ));
        }
    }
    Verdict::Match
}

/// The JSON value that trace-cmd's `text` stands for, built only from the
/// text (a symbol becomes its kallsyms address plus offset). Used to check
/// that [`compare_field`] accepts every value trace-cmd prints, i.e. that
/// the normalisation covers all printing conventions found in a trace.
pub fn json_from_text(
    field: &FieldFormat,
    conv: Option<&Conversion>,
    text: &str,
    ctx: &Ctx<'_>,
) -> Option<Value> {
    Some(match expected_kind(field, conv) {
        Kind::String => Value::String(match parse_array_text(text) {
            Some(b) => String::from_utf8(c_string(&b).to_vec()).ok()?,
            None => text.to_string(),
        }),
        Kind::Array => Value::Array(match parse_array_text(text) {
            Some(b) => b.into_iter().map(Value::from).collect(),
            None => text.bytes().map(Value::from).collect(),
        }),
        Kind::Integer => {
            let radix = match conv.map(|c| c.conv) {
                Some('x' | 'X' | 'p') => 16,
                Some('o') => 8,
                _ => 10,
            };
            let v = match (
                conv.map(|c| (c.conv, c.pointer_ext)),
                parse_int(text, radix),
            ) {
                (_, Some(v)) => v,
                (Some(('p', _)), None) if text.trim() == "(nil)" => 0,
                (Some(('c', _)), None) if text.chars().count() == 1 => text.chars().next()? as i128,
                (Some(('p', Some('s' | 'S' | 'f' | 'F'))), None) => {
                    let (name, off) = match text.rsplit_once("+0x") {
                        Some((n, o)) => (n, u64::from_str_radix(o, 16).ok()?),
                        None => (text, 0),
                    };
                    i128::from(ctx.kallsyms.address_of(name)? + off)
                }
                _ => return None,
            };
            // Same bits, as the signed/unsigned JSON integer of the field size.
            let bits = (field.size * 8).clamp(1, 64) as u32;
            let u = v.rem_euclid(1i128 << bits);
            if field.signed && u >= 1i128 << (bits - 1) {
                Value::from((u - (1i128 << bits)) as i64)
            } else {
                Value::from(u as u64)
            }
        }
    })
}

/// Result of comparing all fields of one event.
#[derive(Debug, Default)]
pub struct EventDiff {
    pub mismatches: Vec<String>,
    pub unverified: Vec<String>,
}

/// Compares the `fields` object of a JSON event with a trace-cmd line:
/// the same field names (common_* excluded by both) and equal values.
pub fn compare_event(
    fmt: &EventFormat,
    line: &EventLine,
    json: &Map<String, Value>,
    ctx: &Ctx<'_>,
) -> EventDiff {
    let mut d = EventDiff::default();
    for (name, text) in &line.fields {
        let Some(field) = fmt.field(name) else {
            d.mismatches.push(format!(
                "trace-cmd field `{name}` is not in the format of {}",
                fmt.name
            ));
            continue;
        };
        let Some(v) = json.get(name) else {
            d.mismatches.push(format!(
                "field `{name}` missing from JSON (trace-cmd: `{text}`)"
            ));
            continue;
        };
        match compare_field(field, fmt.conversions.get(name), v, text, ctx) {
            Verdict::Match => {}
            Verdict::Mismatch(m) => d.mismatches.push(format!("field `{name}`: {m}")),
            Verdict::Unverified(u) => d.unverified.push(format!("field `{name}`: {u}")),
        }
    }
    for k in json.keys() {
        if !line.fields.iter().any(|(n, _)| n == k) {
            d.mismatches.push(format!(
                "JSON has field `{k}` that trace-cmd does not print"
            ));
        }
    }
    d
}

#[cfg(test)]
mod tests {
    use super::super::tracecmd::{parse_field_line, Kallsyms};
    use super::*;
    use serde_json::json;

    fn field(line: &str) -> FieldFormat {
        parse_field_line(line).unwrap()
    }

    fn conv(spec: &str) -> Conversion {
        super::super::tracecmd::conversions(spec).pop().unwrap()
    }

    fn ctx(k: &Kallsyms) -> Ctx<'_> {
        Ctx {
            kallsyms: k,
            big_endian: false,
        }
    }

    #[test]
    fn integers_as_trace_cmd_prints_them() {
        let k = Kallsyms::default();
        let c = ctx(&k);
        let u32f = field("field:u32 state;\toffset:8;\tsize:4;\tsigned:0;");
        let lu = conv("%lu");
        // cpu_idle: state=4294967295 (u32 -1), printed via (unsigned long) %lu.
        assert_eq!(
            compare_field(&u32f, Some(&lu), &json!(4294967295u64), "4294967295", &c),
            Verdict::Match
        );
        assert_eq!(
            compare_field(&u32f, Some(&lu), &json!(-1), "4294967295", &c),
            Verdict::Match
        );
        assert!(matches!(
            compare_field(&u32f, Some(&lu), &json!(4294967294u64), "4294967295", &c),
            Verdict::Mismatch(_)
        ));
        // sched_load_se: pid=-1 (pid_t, %d).
        let pid = field("field:pid_t pid;\toffset:32;\tsize:4;\tsigned:1;");
        assert_eq!(
            compare_field(&pid, Some(&conv("%d")), &json!(-1), "-1", &c),
            Verdict::Match
        );
        // sched_switch prev_state: signed long printed raw %lld.
        let st = field("field:long prev_state;\toffset:32;\tsize:8;\tsigned:1;");
        assert_eq!(
            compare_field(&st, None, &json!(64), "64", &c),
            Verdict::Match
        );
        assert!(matches!(
            compare_field(&st, None, &json!(65), "64", &c),
            Verdict::Mismatch(_)
        ));
        // bprint: fmt (const char *) raw 0x%llx; ip unsigned long %ps unresolved.
        let fmtf = field("field:const char * fmt;\toffset:16;\tsize:8;\tsigned:0;");
        assert_eq!(
            compare_field(
                &fmtf,
                None,
                &json!(0xffffffc0008f3b50u64),
                "0xffffffc0008f3b50",
                &c
            ),
            Verdict::Match
        );
        let ip = field("field:unsigned long ip;\toffset:8;\tsize:8;\tsigned:0;");
        assert_eq!(
            compare_field(
                &ip,
                Some(&conv("%ps")),
                &json!(0xffffffc0000fbb98u64),
                "0xffffffc0000fbb98",
                &c
            ),
            Verdict::Match
        );
        // JSON may hold a 64-bit pointer as a negative i64; same bits.
        assert_eq!(
            compare_field(&fmtf, None, &json!(-1), "0xffffffffffffffff", &c),
            Verdict::Match
        );
        // %2d of a short, %x without 0x, 0x%x of a signed 4-byte long.
        let s16 = field("field:short v;\toffset:8;\tsize:2;\tsigned:1;");
        assert_eq!(
            compare_field(&s16, None, &json!(5), " 5", &c),
            Verdict::Match
        );
        let u16f = field("field:u16 v;\toffset:8;\tsize:2;\tsigned:0;");
        assert_eq!(
            compare_field(&u16f, Some(&conv("%x")), &json!(31), "1f", &c),
            Verdict::Match
        );
        let l32 = field("field:long v;\toffset:8;\tsize:4;\tsigned:1;");
        assert_eq!(
            compare_field(&l32, None, &json!(-2), "0xfffffffe", &c),
            Verdict::Match
        );
        // %hhu truncates to 8 bits.
        let u32g = field("field:unsigned int v;\toffset:8;\tsize:4;\tsigned:0;");
        assert_eq!(
            compare_field(&u32g, Some(&conv("%hhu")), &json!(0x1ff), "255", &c),
            Verdict::Match
        );
        assert!(matches!(
            compare_field(&u32g, None, &json!(1), "x", &c),
            Verdict::Mismatch(_)
        ));
        assert!(matches!(
            compare_field(&u32g, None, &json!("1"), "1", &c),
            Verdict::Mismatch(_)
        ));
        assert!(matches!(
            compare_field(&u32g, None, &json!([1]), "1", &c),
            Verdict::Mismatch(_)
        ));
        // `const char *` is a pointer (an integer), even with a %s conversion.
        assert!(matches!(
            compare_field(&fmtf, Some(&conv("%s")), &json!(16), "0x10", &c),
            Verdict::Unverified(_)
        ));
        assert!(matches!(
            compare_field(&fmtf, Some(&conv("%s")), &json!("x"), "x", &c),
            Verdict::Mismatch(_)
        ));
    }

    #[test]
    fn symbols_checked_against_kallsyms() {
        let k =
            Kallsyms::parse("ffffffc000175994 t tracing_mark_write\nffffffc000175a80 t other\n");
        let c = ctx(&k);
        let ip = field("field:unsigned long ip;\toffset:8;\tsize:8;\tsigned:0;");
        let ps = conv("%ps");
        assert_eq!(
            compare_field(
                &ip,
                Some(&ps),
                &json!(0xffffffc0001759a0u64),
                "tracing_mark_write",
                &c
            ),
            Verdict::Match
        );
        assert!(matches!(
            compare_field(
                &ip,
                Some(&ps),
                &json!(0xffffffc000175a90u64),
                "tracing_mark_write",
                &c
            ),
            Verdict::Mismatch(_)
        ));
        let pss = conv("%pS");
        assert_eq!(
            compare_field(
                &ip,
                Some(&pss),
                &json!(0xffffffc0001759a0u64),
                "tracing_mark_write+0xc",
                &c
            ),
            Verdict::Match
        );
        assert!(matches!(
            compare_field(
                &ip,
                Some(&pss),
                &json!(0xffffffc0001759a0u64),
                "tracing_mark_write+0xd",
                &c
            ),
            Verdict::Mismatch(_)
        ));
        assert_eq!(
            compare_field(&ip, Some(&conv("%p")), &json!(0), "(nil)", &c),
            Verdict::Match
        );
    }

    #[test]
    fn strings_and_arrays() {
        let k = Kallsyms::default();
        let c = ctx(&k);
        let comm = field("field:char comm[16];\toffset:16;\tsize:16;\tsigned:0;");
        assert_eq!(
            compare_field(&comm, None, &json!("rs:main Q:Reg"), "rs:main Q:Reg", &c),
            Verdict::Match
        );
        assert_eq!(
            compare_field(&comm, None, &json!("(null)"), "(null)", &c),
            Verdict::Match
        );
        assert!(matches!(
            compare_field(&comm, None, &json!("sh"), "bash", &c),
            Verdict::Mismatch(_)
        ));
        assert!(matches!(
            compare_field(&comm, None, &json!([98, 0]), "b", &c),
            Verdict::Mismatch(_)
        ));
        let path = field("field:__data_loc char[] path;\toffset:12;\tsize:4;\tsigned:0;");
        assert_eq!(
            compare_field(&path, None, &json!("/autogroup-23"), "/autogroup-23", &c),
            Verdict::Match
        );
        // Non-printable char array.
        assert_eq!(
            compare_field(&comm, None, &json!("\u{1}a"), "ARRAY[01, 61, 00, 00]", &c),
            Verdict::Match
        );
        // ftrace print buf with its trailing newline.
        let buf = field("field:char buf;\toffset:16;\tsize:0;\tsigned:0;");
        assert_eq!(
            compare_field(
                &buf,
                Some(&conv("%s")),
                &json!("TRACE_MARKER_START\n"),
                "TRACE_MARKER_START",
                &c
            ),
            Verdict::Match
        );
        // unsigned long caller[2], little endian.
        let arr = field("field:unsigned long caller[2];\toffset:16;\tsize:16;\tsigned:0;");
        let text = "ARRAY[98, bb, 0f, 00, c0, ff, ff, ff, 01, 00, 00, 00, 00, 00, 00, 00]";
        assert_eq!(
            compare_field(&arr, None, &json!([0xffffffc0000fbb98u64, 1]), text, &c),
            Verdict::Match
        );
        assert!(matches!(
            compare_field(&arr, None, &json!([0xffffffc0000fbb98u64, 2]), text, &c),
            Verdict::Mismatch(_)
        ));
        assert!(matches!(
            compare_field(&arr, None, &json!([1, 2, 3]), text, &c),
            Verdict::Mismatch(_)
        ));
        let be = Ctx {
            kallsyms: &k,
            big_endian: true,
        };
        assert_eq!(
            compare_field(
                &arr,
                None,
                &json!([0x1020304u32]),
                "ARRAY[01, 02, 03, 04]",
                &be
            ),
            Verdict::Match
        );
        // A printable u8 array is printed as a string.
        let mac = field("field:u8 addr[4];\toffset:8;\tsize:4;\tsigned:0;");
        assert_eq!(
            compare_field(&mac, None, &json!([65, 66, 0, 0]), "AB", &c),
            Verdict::Match
        );
        assert_eq!(
            compare_field(&mac, None, &json!([]), "ARRAY[]", &c),
            Verdict::Match
        );
        assert_eq!(parse_array_text("ARRAY[0g]"), None);
    }

    #[test]
    fn int_parsing() {
        assert_eq!(parse_int("0xff", 10), Some(255));
        assert_eq!(parse_int("-12", 10), Some(-12));
        assert_eq!(parse_int("ff", 16), Some(255));
        assert_eq!(parse_int("17", 8), Some(15));
        assert_eq!(
            parse_int("18446744073709551615", 10),
            Some(u64::MAX as i128)
        );
        assert_eq!(parse_int("--1", 10), None);
        assert_eq!(parse_int("", 10), None);
        assert!(eq_mod(-1, 0xffff_ffff, 32));
        assert!(!eq_mod(-1, 0xffff_ffff, 64));
        assert!(eq_mod(1, 2, 0));
    }
}
