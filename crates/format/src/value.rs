//! Reading field values out of an event's payload, and printing them.
//!
//! Three levels, cheapest first:
//!
//! * [`FieldRef`] (and [`Field::uint`] / [`Field::int`]): integers, for analyzers that read
//!   a few fields of tens of millions of events. No allocation, no panics; a field that does
//!   not fit the payload reads as `None`.
//! * [`Field::data`] / [`Field::str`]: the bytes of an array or of the data a `__data_loc` /
//!   `__rel_loc` word points at, bounds-checked.
//! * [`Field::value`] -> [`Value`]: a typed value for generic consumers (`kstate dump`),
//!   printed as JSON by [`Value::write_json`] or as `trace-cmd report -R` text by
//!   [`Field::write_raw_text`].
//!
//! The payload is the record's data as the ring buffer stores it: it starts with the
//! `common_*` fields, and field offsets count from its first byte.

use std::borrow::Cow;

use crate::bytes::Endian;
use crate::event_format::{Field, FieldKind};
use crate::print_fmt::cfmt::Conv;

/// A scalar field reduced to what reading it needs: made once per event type (from a
/// [`Field`]) and then read for every record. 8 bytes, `Copy`.
///
/// A field whose size is not 1, 2, 4 or 8, or whose offset does not fit in 32 bits, is
/// kept with size 0 and always reads as `None`; that keeps the read a single match.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldRef {
    pub offset: u32,
    /// 1, 2, 4 or 8; 0 for a field that cannot be read as an integer. Nothing else: a
    /// FieldRef built by hand must keep to these (`From<&Field>` does).
    pub size: u8,
    /// What the format file says; [`FieldRef::get_i64`] always sign-extends and
    /// [`FieldRef::get_u64`] never does, so this tells callers which one means the value.
    pub signed: bool,
}

impl From<&Field> for FieldRef {
    fn from(f: &Field) -> FieldRef {
        let readable = matches!(f.size, 1 | 2 | 4 | 8);
        match u32::try_from(f.offset) {
            Ok(offset) if readable => FieldRef {
                offset,
                size: f.size as u8,
                signed: f.signed,
            },
            _ => FieldRef {
                offset: 0,
                size: 0,
                signed: f.signed,
            },
        }
    }
}

impl FieldRef {
    /// The field zero-extended to 64 bits; `None` if it does not fit the payload.
    #[inline]
    pub fn get_u64(self, payload: &[u8], e: Endian) -> Option<u64> {
        // Slicing from the offset then taking a fixed-size chunk needs no overflow check
        // and compiles to one bounds check per size.
        let rest = payload.get(self.offset as usize..)?;
        if let Some(v) = self.word(rest, e) {
            let shift = 64 - 8 * self.size as u32;
            return Some((v << shift) >> shift);
        }
        Some(match self.size {
            1 => *rest.first()? as u64,
            2 => e.u16(*rest.first_chunk()?) as u64,
            4 => e.u32(*rest.first_chunk()?) as u64,
            8 => e.u64(*rest.first_chunk()?),
            _ => return None,
        })
    }

    /// The field sign-extended from its size to 64 bits; `None` if it does not fit.
    #[inline]
    pub fn get_i64(self, payload: &[u8], e: Endian) -> Option<i64> {
        let rest = payload.get(self.offset as usize..)?;
        if let Some(v) = self.word(rest, e) {
            return Some(sign_extend(v, self.size as usize));
        }
        Some(match self.size {
            1 => *rest.first()? as i8 as i64,
            2 => e.u16(*rest.first_chunk()?) as i16 as i64,
            4 => e.u32(*rest.first_chunk()?) as i32 as i64,
            8 => e.u64(*rest.first_chunk()?) as i64,
            _ => return None,
        })
    }

    /// The field's bytes at the start of `rest` read as a little-endian word of 8 bytes
    /// (the field in its low `size` bytes), where the payload holds 8 bytes there: one
    /// load and a shift instead of a branch per size and byte order, for nearly every
    /// field read. None for a big-endian trace, an unreadable field, or a field too near
    /// the payload's end (the caller reads it by its size).
    #[inline(always)]
    fn word(self, rest: &[u8], e: Endian) -> Option<u64> {
        match (e, rest.first_chunk::<8>()) {
            (Endian::Little, Some(w)) if self.size != 0 => {
                // (Only `size`'s valid values reach here: see the field. A check of them
                // all, per read, cost 3 % of `syscall --stat`.)
                debug_assert!(
                    matches!(self.size, 1 | 2 | 4 | 8),
                    "FieldRef size {}",
                    self.size
                );
                Some(u64::from_le_bytes(*w))
            }
            _ => None,
        }
    }
}

/// Sign-extends the low `size` bytes of `v` (`size` in 1..=8).
#[inline(always)]
fn sign_extend(v: u64, size: usize) -> i64 {
    let shift = 64 - 8 * size as u32;
    ((v << shift) as i64) >> shift
}

/// The bytes of `s` before its first NUL (all of `s` if it has none).
#[inline]
fn until_nul(s: &[u8]) -> &[u8] {
    match s.iter().position(|&c| c == 0) {
        Some(n) => &s[..n],
        None => s,
    }
}

impl Field {
    /// The field's own bytes as an unsigned integer, zero-extended; `None` if its size is
    /// not 1, 2, 4 or 8 or it does not fit the payload. (For a `__data_loc` field this is the
    /// raw location word.) For per-record reads of a known field prefer [`FieldRef`].
    #[inline]
    pub fn uint(&self, payload: &[u8], e: Endian) -> Option<u64> {
        e.uint(payload, self.offset, self.size)
    }

    /// Like [`Field::uint`] but sign-extended from the field's size, whatever the format
    /// file's `signed` says (callers that want "the value" check `self.signed`).
    #[inline]
    pub fn int(&self, payload: &[u8], e: Endian) -> Option<i64> {
        let v = e.uint(payload, self.offset, self.size)?;
        Some(sign_extend(v, self.size))
    }

    /// The field's bytes, bounds-checked; `None` when any part lies outside the payload.
    ///
    /// * Fixed arrays and scalars: `size` bytes at `offset`.
    /// * A field of size 0 (`char buf[]` flexible arrays, ftrace's `char buf; size:0`) is
    ///   "the rest of the record": everything from `offset` to the end of the payload.
    /// * `__data_loc` (4-byte word): low 16 bits are the data's offset from the payload
    ///   start, high 16 bits its length. `__rel_loc`: the offset counts from the end of the
    ///   word, i.e. from `offset + size`.
    /// * Old kernels' 2-byte `__data_loc` holds only the offset; the length is unknown, so
    ///   strings run up to and including their NUL (as the 4-byte form's length does) and
    ///   other data to the end of the payload.
    #[inline]
    pub fn data<'a>(&self, payload: &'a [u8], e: Endian) -> Option<&'a [u8]> {
        let (start, end) = self.extent(payload, e)?;
        let data = payload.get(start..end)?;
        match self.kind {
            FieldKind::Dynamic { string: true, .. } if self.size == 2 => {
                let end = data
                    .iter()
                    .position(|&c| c == 0)
                    .map_or(data.len(), |n| n + 1);
                Some(&data[..end])
            }
            _ => Some(data),
        }
    }

    /// Where the field's data lies, as `start..end` within the payload; `None` if outside.
    /// An old 2-byte `__data_loc` extends to the end of the payload (libtraceevent's view).
    #[inline]
    fn extent(&self, payload: &[u8], e: Endian) -> Option<(usize, usize)> {
        let (start, end) = match self.kind {
            FieldKind::Int | FieldKind::Array { .. } if self.size == 0 => {
                (self.offset, payload.len())
            }
            FieldKind::Int | FieldKind::Array { .. } => {
                (self.offset, self.offset.checked_add(self.size)?)
            }
            FieldKind::Dynamic { relative, .. } => {
                let word = payload.get(self.offset..)?;
                let base = if relative {
                    self.offset.checked_add(self.size)?
                } else {
                    0
                };
                match self.size {
                    4 => {
                        let loc = e.u32(*word.first_chunk()?);
                        let start = base.checked_add((loc & 0xffff) as usize)?;
                        (start, start.checked_add((loc >> 16) as usize)?)
                    }
                    2 => {
                        let start = base.checked_add(e.u16(*word.first_chunk()?) as usize)?;
                        (start, payload.len())
                    }
                    _ => return None,
                }
            }
        };
        (start <= end && end <= payload.len()).then_some((start, end))
    }

    /// The field's data as a C string: up to the first NUL, invalid UTF-8 replaced by
    /// U+FFFD. Borrows from the payload unless a replacement was needed.
    #[inline]
    pub fn str<'a>(&self, payload: &'a [u8], e: Endian) -> Option<Cow<'a, str>> {
        Some(String::from_utf8_lossy(until_nul(self.data(payload, e)?)))
    }

    /// Whether the field holds text: `char[N]`, `__data_loc char[]`, old 2-byte data_loc
    /// (always strings), and ftrace's size-0 `char buf` rest-of-record fields.
    fn is_text(&self) -> bool {
        match self.kind {
            FieldKind::Array { string, .. } => string,
            FieldKind::Dynamic { string, .. } => string || self.size == 2,
            FieldKind::Int => self.size == 0 && self.type_name.contains("char"),
        }
    }

    /// The field's value, typed by the format file: integers by `signed`, text fields as
    /// strings, other arrays as integer arrays of the declared element size. A field that
    /// does not fit the payload is [`Value::Missing`], so one short record cannot make a
    /// dump lie about a value.
    pub fn value<'a>(&self, payload: &'a [u8], e: Endian) -> Value<'a> {
        if let FieldKind::Int = self.kind {
            if matches!(self.size, 1 | 2 | 4 | 8) {
                return match e.uint(payload, self.offset, self.size) {
                    Some(v) if self.signed => Value::Int(sign_extend(v, self.size)),
                    Some(v) => Value::UInt(v),
                    None => Value::Missing,
                };
            }
        }
        let Some(data) = self.data(payload, e) else {
            return Value::Missing;
        };
        if self.is_text() {
            return Value::Str(String::from_utf8_lossy(until_nul(data)));
        }
        let elem = match self.kind {
            FieldKind::Array { elem, .. } | FieldKind::Dynamic { elem, .. } => elem,
            // Scalars of odd sizes (e.g. 16-byte) and non-text rest-of-record fields.
            FieldKind::Int => 0,
        };
        match ArrayRef::new(data, elem, self.signed, e) {
            Some(a) => Value::Array(a),
            None => Value::Bytes(data),
        }
    }
}

/// A field's value. Borrowed from the payload where possible: building one allocates only
/// for a string with invalid UTF-8.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value<'a> {
    /// The field does not fit the record (truncated or corrupt record). JSON `null`.
    Missing,
    Int(i64),
    UInt(u64),
    Str(Cow<'a, str>),
    /// A fixed or dynamic array of 1-, 2-, 4- or 8-byte integers.
    Array(ArrayRef<'a>),
    /// Data with no integer element size (odd-sized scalars, binary rest-of-record data).
    Bytes(&'a [u8]),
}

/// An integer array still in its payload bytes; elements are decoded when iterated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArrayRef<'a> {
    data: &'a [u8],
    elem: u8,
    signed: bool,
    endian: Endian,
}

impl<'a> ArrayRef<'a> {
    /// `None` unless `elem` is 1, 2, 4 or 8 and divides the data's length.
    pub fn new(data: &'a [u8], elem: usize, signed: bool, endian: Endian) -> Option<ArrayRef<'a>> {
        // elem is a power of two, so the mask tests divisibility (and needs no newer std).
        if !matches!(elem, 1 | 2 | 4 | 8) || data.len() & (elem - 1) != 0 {
            return None;
        }
        Some(ArrayRef {
            data,
            elem: elem as u8,
            signed,
            endian,
        })
    }

    pub fn len(&self) -> usize {
        self.data.len() / self.elem as usize
    }

    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// Element size in bytes.
    pub fn elem_size(&self) -> usize {
        self.elem as usize
    }

    /// The elements, as [`Value::Int`] when the field is signed and [`Value::UInt`] otherwise.
    pub fn iter(&self) -> impl Iterator<Item = Value<'static>> + 'a {
        let (elem, signed, e) = (self.elem as usize, self.signed, self.endian);
        self.data.chunks_exact(elem).map(move |c| {
            // chunks_exact yields exactly `elem` bytes, so this read cannot fail.
            let v = e.uint(c, 0, elem).unwrap_or(0);
            if signed {
                Value::Int(sign_extend(v, elem))
            } else {
                Value::UInt(v)
            }
        })
    }
}

impl Value<'_> {
    /// Appends the value as JSON: integers as integers, strings escaped (`"`, `\` and control
    /// characters; U+0000..U+001F as `\u00XX`), arrays and bytes as arrays of integers,
    /// `Missing` as `null`. Output is always valid UTF-8 JSON.
    pub fn write_json(&self, out: &mut Vec<u8>) {
        match self {
            Value::Missing => out.extend_from_slice(b"null"),
            Value::Int(v) => write_i64(*v, out),
            Value::UInt(v) => write_u64(*v, out),
            Value::Str(s) => write_json_str(s, out),
            Value::Array(a) => {
                out.push(b'[');
                for (i, v) in a.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    v.write_json(out);
                }
                out.push(b']');
            }
            Value::Bytes(b) => {
                out.push(b'[');
                for (i, &v) in b.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    write_u64(v as u64, out);
                }
                out.push(b']');
            }
        }
    }
}

#[inline]
fn write_u64(mut v: u64, out: &mut Vec<u8>) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    out.extend_from_slice(&buf[i..]);
}

#[inline]
fn write_i64(v: i64, out: &mut Vec<u8>) {
    if v < 0 {
        out.push(b'-');
    }
    write_u64(v.unsigned_abs(), out);
}

/// Writes `s` as a JSON string. Copies runs of plain characters at once; escapes only what
/// RFC 8259 requires (`"`, `\`, U+0000..U+001F).
pub fn write_json_str(s: &str, out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let b = s.as_bytes();
    out.push(b'"');
    let mut run = 0;
    for (i, &c) in b.iter().enumerate() {
        if c >= 0x20 && c != b'"' && c != b'\\' {
            continue;
        }
        out.extend_from_slice(&b[run..i]);
        match c {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            _ => out.extend_from_slice(&[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[(c >> 4) as usize],
                HEX[(c & 15) as usize],
            ]),
        }
        run = i + 1;
    }
    out.extend_from_slice(&b[run..]);
    out.push(b'"');
}

/// A printf conversion from an event's print fmt (`%d`, `%03d`, `%lu`, `0x%lx`, `%s`, ...),
/// for [`Field::write_raw_text`].
///
/// libtraceevent (1.x, which `trace-cmd report -R` uses) prints a scalar field that the
/// print fmt names directly (`REC->field`, possibly behind a cast) with that argument's
/// conversion instead of its type-based default; e.g. `unsigned long load` printed with
/// `%lu` shows `load=0`, not `load=0x0`. Finding which conversion belongs to which field
/// is the print fmt parser's job; this type only formats. `*` widths and `%p` conversions
/// are not supported (`parse` returns `None`; fall back to the default).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PrintSpec {
    /// The format text had a literal `0x` right before the conversion, which libtraceevent
    /// prints along with the value.
    hex_prefix: bool,
    conv: Conv,
}

impl PrintSpec {
    /// Parses one conversion, optionally preceded by a literal `0x`: `%[flags][width]
    /// [.precision][hh|h|l|ll|L|z|Z](d|i|u|x|X|o|c|s)`. The whole text must be the conversion.
    pub fn parse(text: &str) -> Option<PrintSpec> {
        let (hex_prefix, text) = match text.strip_prefix("0x") {
            Some(rest) => (true, rest),
            None => (false, text),
        };
        let conv = Conv::parse(text.as_bytes())?;
        if conv.conv == b'p' || conv.has_star() {
            return None;
        }
        Some(PrintSpec { hex_prefix, conv })
    }

    /// Formats `val` (the field's bytes, zero-extended) as C's printf would after
    /// libtraceevent casts it to the conversion's integer type.
    fn write_int(&self, val: u64, out: &mut Vec<u8>) {
        if self.hex_prefix {
            out.extend_from_slice(b"0x");
        }
        self.conv.write_int(val, None, out);
    }

    fn write_str(&self, s: &[u8], out: &mut Vec<u8>) {
        if self.hex_prefix {
            out.extend_from_slice(b"0x");
        }
        self.conv.write_str(s, None, out);
    }
}

/// C's `isprint(c) || isspace(c)` in the C locale, as libtraceevent tests string fields.
#[inline]
fn printable(c: u8) -> bool {
    (0x20..0x7f).contains(&c) || (b'\t'..=b'\r').contains(&c)
}

impl Field {
    /// Appends `name=value` the way `trace-cmd report -R` (libtraceevent's raw field
    /// printing) does, so that kstate's text dump can be diffed against trace-cmd's.
    ///
    /// `spec` is the print fmt's conversion for this field when the print fmt names it
    /// directly (see [`PrintSpec`]); libtraceevent ignores it for array and `__data_loc`
    /// fields, and so do we. `long_size` (4 or 8) matters only for `%s` of a pointer-sized
    /// scalar, which libtraceevent treats as a `const char *` into the kernel.
    ///
    /// Without a spec (libtraceevent's `print_field_raw`):
    /// * a string field (char array, `__data_loc char[]`) whose bytes before the first NUL
    ///   are all printable or whitespace prints as text, from its start up to the first NUL
    ///   (like C's `%s`, which may run past the declared length, never past the payload);
    ///   any other array prints its raw bytes as `ARRAY[0a, 1b]`, whatever the element size;
    /// * a pointer (`*` in the type) prints as `0x%llx`;
    /// * a signed field: size 4 as `%d`, or `0x%x` if its type mentions `long`; size 2 as
    ///   `%2d` (padded to 2 columns); size 1 as `%d`; other sizes as `%lld`;
    /// * an unsigned field: `0x%llx` if its type mentions `long`, else `%llu`;
    /// * a scalar whose size is not 1, 2, 4 or 8 (ftrace's `u32 buf; size:0`) reads as 0.
    ///
    /// A field that does not fit the payload prints nothing after the `=`; libtraceevent
    /// would read past the record or print 0, neither of which we want to imitate. One
    /// libtraceevent quirk is deliberately not reproduced: after a string field once fails
    /// the printable test it prints as `ARRAY[..]` for every later record of that event.
    pub fn write_raw_text(
        &self,
        payload: &[u8],
        e: Endian,
        long_size: usize,
        spec: Option<&PrintSpec>,
        out: &mut Vec<u8>,
    ) {
        out.extend_from_slice(self.name.as_bytes());
        out.push(b'=');
        match self.kind {
            FieldKind::Int => self.write_raw_scalar(payload, e, long_size, spec, out),
            FieldKind::Array { .. } | FieldKind::Dynamic { .. } => {
                self.write_raw_array(payload, e, out)
            }
        }
    }

    fn write_raw_scalar(
        &self,
        payload: &[u8],
        e: Endian,
        long_size: usize,
        spec: Option<&PrintSpec>,
        out: &mut Vec<u8>,
    ) {
        use std::io::Write;
        match self.offset.checked_add(self.size) {
            Some(end) if end <= payload.len() => {}
            _ => return,
        }
        // libtraceevent's tep_read_number: sizes other than 1, 2, 4, 8 read as 0.
        let val = e.uint(payload, self.offset, self.size).unwrap_or(0);
        if let Some(spec) = spec {
            if spec.conv.conv != b's' {
                spec.write_int(val, out);
            } else if self.size == long_size {
                // A kernel `const char *`: trace-cmd prints the string only when the trace
                // carries it (printk formats); without it, bare hex.
                let _ = write!(out, "{val:x}");
            } else {
                // Size 0 means the rest of the record (ftrace's `char buf; size:0`).
                let bytes = self.data(payload, e).unwrap_or_default();
                spec.write_str(until_nul(bytes), out);
            }
            return;
        }
        let is_long = self.type_name.contains("long");
        let _ = if self.type_name.contains('*') {
            write!(out, "0x{val:x}")
        } else if self.signed {
            match self.size {
                4 if is_long => write!(out, "0x{:x}", val as u32),
                4 => write!(out, "{}", val as u32 as i32),
                2 => write!(out, "{:2}", val as u16 as i16),
                1 => write!(out, "{}", val as u8 as i8),
                _ => write!(out, "{}", val as i64),
            }
        } else if is_long {
            write!(out, "0x{val:x}")
        } else {
            write!(out, "{val}")
        };
    }

    fn write_raw_array(&self, payload: &[u8], e: Endian, out: &mut Vec<u8>) {
        // libtraceevent's extent: the declared bytes (0 for a flexible `x[]`), the data_loc's
        // length, or for an old 2-byte data_loc everything to the end of the record.
        let (start, end) = match self.kind {
            FieldKind::Array { .. } => (self.offset, self.offset.saturating_add(self.size)),
            _ => match self.extent(payload, e) {
                Some(x) => x,
                None => return,
            },
        };
        let Some(region) = payload.get(start..end) else {
            return;
        };
        let string = match self.kind {
            FieldKind::Array { string, .. } => string,
            FieldKind::Dynamic { string, .. } => string || self.size == 2,
            FieldKind::Int => false,
        };
        if string && until_nul(region).iter().all(|&c| printable(c)) {
            // Like C's %s from the region's start: up to the first NUL, even past the
            // region's end, but never past the payload.
            out.extend_from_slice(until_nul(&payload[start..]));
            return;
        }
        const HEX: &[u8; 16] = b"0123456789abcdef";
        out.extend_from_slice(b"ARRAY[");
        for (i, &c) in region.iter().enumerate() {
            if i > 0 {
                out.extend_from_slice(b", ");
            }
            out.extend_from_slice(&[HEX[(c >> 4) as usize], HEX[(c & 15) as usize]]);
        }
        out.push(b']');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LE: Endian = Endian::Little;

    fn int(name: &str, type_name: &str, offset: usize, size: usize, signed: bool) -> Field {
        Field {
            name: name.into(),
            type_name: type_name.into(),
            offset,
            size,
            signed,
            kind: FieldKind::Int,
        }
    }

    fn chars(name: &str, offset: usize, len: usize) -> Field {
        Field {
            name: name.into(),
            type_name: format!("char[{len}]"),
            offset,
            size: len,
            signed: false,
            kind: FieldKind::Array {
                len,
                elem: 1,
                string: true,
            },
        }
    }

    fn data_loc(name: &str, offset: usize, size: usize, relative: bool) -> Field {
        let kw = if relative { "__rel_loc" } else { "__data_loc" };
        Field {
            name: name.into(),
            type_name: format!("{kw} char[]"),
            offset,
            size,
            signed: false,
            kind: FieldKind::Dynamic {
                elem: 1,
                string: true,
                relative,
            },
        }
    }

    fn put(p: &mut [u8], off: usize, b: &[u8]) {
        p[off..off + b.len()].copy_from_slice(b);
    }

    fn raw(f: &Field, p: &[u8], spec: Option<&str>) -> String {
        let spec = spec.map(|s| PrintSpec::parse(s).expect("spec parses"));
        let mut out = Vec::new();
        f.write_raw_text(p, LE, 8, spec.as_ref(), &mut out);
        String::from_utf8(out).expect("utf-8")
    }

    fn json(v: &Value) -> String {
        let mut out = Vec::new();
        v.write_json(&mut out);
        String::from_utf8(out).expect("utf-8")
    }

    /// sched_switch as the lisa-rtapp trace (arm64) declares it, and the record that
    /// `trace-cmd report -R` shows as `prev_comm=trace-cmd prev_pid=6973 prev_prio=120
    /// prev_state=64 next_comm=swapper/2 next_pid=0 next_prio=120`. The print fmt prints
    /// the pids and prios with `%d` and prev_state through __print_flags (so: default).
    #[test]
    fn sched_switch_matches_trace_cmd() {
        let fields = [
            (chars("prev_comm", 8, 16), None),
            (int("prev_pid", "pid_t", 24, 4, true), Some("%d")),
            (int("prev_prio", "int", 28, 4, true), Some("%d")),
            (int("prev_state", "long", 32, 8, true), None),
            (chars("next_comm", 40, 16), None),
            (int("next_pid", "pid_t", 56, 4, true), Some("%d")),
            (int("next_prio", "int", 60, 4, true), Some("%d")),
        ];
        let mut p = vec![0u8; 64];
        put(&mut p, 0, &98u16.to_le_bytes());
        put(&mut p, 4, &6973i32.to_le_bytes());
        put(&mut p, 8, b"trace-cmd");
        put(&mut p, 24, &6973i32.to_le_bytes());
        put(&mut p, 28, &120i32.to_le_bytes());
        put(&mut p, 32, &64i64.to_le_bytes());
        put(&mut p, 40, b"swapper/2");
        put(&mut p, 60, &120i32.to_le_bytes());
        let text: Vec<String> = fields.iter().map(|(f, s)| raw(f, &p, *s)).collect();
        assert_eq!(
            text.join(" "),
            "prev_comm=trace-cmd prev_pid=6973 prev_prio=120 prev_state=64 \
             next_comm=swapper/2 next_pid=0 next_prio=120"
        );
        // Without the print fmt's conversions the defaults give the same text here.
        let text: Vec<String> = fields.iter().map(|(f, _)| raw(f, &p, None)).collect();
        assert!(text
            .join(" ")
            .starts_with("prev_comm=trace-cmd prev_pid=6973"));

        let pid = FieldRef::from(&fields[1].0);
        assert_eq!(pid.get_i64(&p, LE), Some(6973));
        assert_eq!(fields[3].0.int(&p, LE), Some(64));
        assert_eq!(fields[0].0.str(&p, LE).as_deref(), Some("trace-cmd"));
        let values: Vec<String> = fields.iter().map(|(f, _)| json(&f.value(&p, LE))).collect();
        assert_eq!(
            values.join(","),
            r#""trace-cmd",6973,120,64,"swapper/2",0,120"#
        );
    }

    /// sched_load_se from the lisa-sched_load trace: `cpu=2 path=/autogroup-12 comm=(null)
    /// pid=-1 load=0 util=0`. `unsigned long` defaults to hex; trace-cmd prints `load=0`
    /// because the print fmt says `%lu`.
    #[test]
    fn sched_load_se_data_loc_and_long() {
        let cpu = int("cpu", "int", 8, 4, true);
        let path = data_loc("path", 12, 4, false);
        let comm = chars("comm", 16, 16);
        let pid = int("pid", "pid_t", 32, 4, true);
        let load = int("load", "unsigned long", 40, 8, false);
        let mut p = vec![0u8; 56 + 16];
        put(&mut p, 8, &2i32.to_le_bytes());
        put(&mut p, 12, &((14u32 << 16) | 56).to_le_bytes());
        put(&mut p, 56, b"/autogroup-12\0");
        put(&mut p, 16, b"(null)");
        put(&mut p, 32, &(-1i32).to_le_bytes());
        assert_eq!(raw(&cpu, &p, Some("%d")), "cpu=2");
        assert_eq!(raw(&path, &p, None), "path=/autogroup-12");
        assert_eq!(raw(&comm, &p, Some("%s")), "comm=(null)");
        assert_eq!(raw(&pid, &p, Some("%d")), "pid=-1");
        assert_eq!(raw(&load, &p, Some("%lu")), "load=0");
        assert_eq!(raw(&load, &p, None), "load=0x0");

        assert_eq!(path.data(&p, LE), Some(&b"/autogroup-12\0"[..]));
        assert_eq!(path.str(&p, LE).as_deref(), Some("/autogroup-12"));
        assert_eq!(json(&path.value(&p, LE)), r#""/autogroup-12""#);
        assert_eq!(json(&pid.value(&p, LE)), "-1");
        assert_eq!(pid.uint(&p, LE), Some(0xffff_ffff));
        // The loc word pointing past the record: no data, a null, an empty raw value.
        put(&mut p, 12, &((14u32 << 16) | 60).to_le_bytes());
        assert_eq!(path.data(&p, LE), None);
        assert_eq!(path.value(&p, LE), Value::Missing);
        assert_eq!(json(&path.value(&p, LE)), "null");
        assert_eq!(raw(&path, &p, None), "path=");
    }

    /// cpu_idle's `u32 state` holds (u32)-1 when leaving idle; trace-cmd shows
    /// `state=4294967295` both by default and through the print fmt's `%lu`.
    #[test]
    fn cpu_idle_u32() {
        let state = int("state", "u32", 8, 4, false);
        let mut p = vec![0u8; 16];
        put(&mut p, 8, &u32::MAX.to_le_bytes());
        assert_eq!(raw(&state, &p, None), "state=4294967295");
        assert_eq!(raw(&state, &p, Some("%lu")), "state=4294967295");
        assert_eq!(state.uint(&p, LE), Some(4294967295));
        assert_eq!(state.int(&p, LE), Some(-1));
        assert_eq!(state.value(&p, LE), Value::UInt(4294967295));
        let r = FieldRef::from(&state);
        assert_eq!(
            (r.get_u64(&p, LE), r.get_i64(&p, LE)),
            (Some(u32::MAX as u64), Some(-1))
        );
        assert_eq!(r.get_u64(&p[..11], LE), None);
    }

    /// `FieldRef` reads a field with one 8-byte load where the payload holds 8 bytes at
    /// its offset, and by its size otherwise: both give what `Field::uint` and
    /// `Field::int` read byte by byte, for every size, offset and byte order, up to the
    /// payload's end and past it.
    #[test]
    fn field_ref_reads_as_field_does_at_every_offset() {
        let p: Vec<u8> = (0u8..24).map(|i| i.wrapping_mul(151) ^ 0x85).collect();
        for size in [1, 2, 4, 8, 3, 0] {
            for offset in 0..=p.len() + 1 {
                let f = int("f", "s64", offset, size, true);
                let r = FieldRef::from(&f);
                for e in [Endian::Little, Endian::Big] {
                    let readable = matches!(size, 1 | 2 | 4 | 8);
                    let (u, i) = match readable {
                        true => (f.uint(&p, e), f.int(&p, e)),
                        false => (None, None),
                    };
                    assert_eq!(r.get_u64(&p, e), u, "size {size} at {offset}, {e:?}");
                    assert_eq!(r.get_i64(&p, e), i, "size {size} at {offset}, {e:?}");
                }
            }
        }
        // The near-end path is taken: a 4-byte field in a payload's last 4 bytes.
        let f = int("f", "s32", 20, 4, true);
        assert!(FieldRef::from(&f).get_i64(&p, Endian::Little).is_some());
    }

    /// ftrace's `print` (`char buf; size:0`, the rest of the record) and `bprint` (`const
    /// char * fmt`, `u32 buf; size:0`) as lisa-rtapp declares them. trace-cmd prints
    /// `buf=TRACE_MARKER_START` for print (print fmt `%s`) and `fmt=0xffffffc0008f3b50
    /// buf=0` for bprint (defaults: pointer hex, size-0 number reads 0).
    #[test]
    fn ftrace_print_and_bprint() {
        let buf = int("buf", "char", 16, 0, false);
        let mut p = vec![0u8; 16];
        p.extend_from_slice(b"TRACE_MARKER_START\n\0\0");
        assert_eq!(raw(&buf, &p, Some("%s")), "buf=TRACE_MARKER_START\n");
        assert_eq!(raw(&buf, &p, None), "buf=0");
        assert_eq!(buf.value(&p, LE), Value::Str("TRACE_MARKER_START\n".into()));

        let ip = int("ip", "unsigned long", 8, 8, false);
        let fmt = int("fmt", "const char *", 16, 8, false);
        let bbuf = int("buf", "u32", 24, 0, false);
        let mut p = vec![0u8; 32];
        put(&mut p, 8, &0xffffffc0000fbb98u64.to_le_bytes());
        put(&mut p, 16, &0xffffffc0008f3b50u64.to_le_bytes());
        assert_eq!(raw(&ip, &p, None), "ip=0xffffffc0000fbb98");
        assert_eq!(raw(&fmt, &p, None), "fmt=0xffffffc0008f3b50");
        assert_eq!(raw(&fmt, &p, Some("%s")), "fmt=ffffffc0008f3b50");
        assert_eq!(raw(&bbuf, &p, None), "buf=0");
        assert_eq!(json(&bbuf.value(&p, LE)), "[0,0,0,0,0,0,0,0]");
    }

    #[test]
    fn rel_loc_and_old_data_loc() {
        // __rel_loc at 8: offset counts from 12, the end of the word.
        let f = data_loc("name", 8, 4, true);
        let mut p = vec![0u8; 12];
        put(&mut p, 8, &(4u32 << 16).to_le_bytes());
        p.extend_from_slice(b"abc\0");
        assert_eq!(f.data(&p, LE), Some(&b"abc\0"[..]));
        assert_eq!(raw(&f, &p, None), "name=abc");
        put(&mut p, 8, &((4u32 << 16) | 1).to_le_bytes());
        assert_eq!(f.data(&p, LE), None);

        // 2-byte data_loc: offset only; strings end at their NUL.
        let old = data_loc("comm", 8, 2, false);
        let mut p = vec![0u8; 12];
        put(&mut p, 8, &12u16.to_le_bytes());
        p.extend_from_slice(b"sshd\0junk");
        assert_eq!(old.data(&p, LE), Some(&b"sshd\0"[..]));
        assert_eq!(old.str(&p, LE).as_deref(), Some("sshd"));
        assert_eq!(raw(&old, &p, None), "comm=sshd");
        let bin = Field {
            kind: FieldKind::Dynamic {
                elem: 1,
                string: false,
                relative: false,
            },
            ..old.clone()
        };
        assert_eq!(bin.data(&p, LE), Some(&b"sshd\0junk"[..]));
    }

    #[test]
    fn arrays() {
        let f = Field {
            name: "args".into(),
            type_name: "unsigned long[2]".into(),
            offset: 8,
            size: 16,
            signed: false,
            kind: FieldKind::Array {
                len: 2,
                elem: 8,
                string: false,
            },
        };
        let mut p = vec![0u8; 24];
        put(&mut p, 8, &1u64.to_le_bytes());
        put(&mut p, 16, &u64::MAX.to_le_bytes());
        assert_eq!(json(&f.value(&p, LE)), "[1,18446744073709551615]");
        assert_eq!(
            raw(&f, &p, Some("%lu")),
            "args=ARRAY[01, 00, 00, 00, 00, 00, 00, 00, ff, ff, ff, ff, ff, ff, ff, ff]"
        );
        let s = Field {
            signed: true,
            ..f.clone()
        };
        assert_eq!(json(&s.value(&p, LE)), "[1,-1]");
        if let Value::Array(a) = s.value(&p, LE) {
            assert_eq!((a.len(), a.elem_size()), (2, 8));
        } else {
            panic!("not an array");
        }
        assert_eq!(f.value(&p[..23], LE), Value::Missing);

        // A dynamic u32 array of 3 elements.
        let d = Field {
            name: "cpus".into(),
            type_name: "__data_loc u32[]".into(),
            offset: 8,
            size: 4,
            signed: false,
            kind: FieldKind::Dynamic {
                elem: 4,
                string: false,
                relative: false,
            },
        };
        let mut p = vec![0u8; 12];
        put(&mut p, 8, &((12u32 << 16) | 12).to_le_bytes());
        for v in [1u32, 2, 3] {
            p.extend_from_slice(&v.to_le_bytes());
        }
        assert_eq!(json(&d.value(&p, LE)), "[1,2,3]");
        // A length that is not a whole number of elements: plain bytes.
        put(&mut p, 8, &((6u32 << 16) | 12).to_le_bytes());
        assert_eq!(json(&d.value(&p, LE)), "[1,0,0,0,2,0]");

        // A char array that is not printable prints as bytes; JSON still gets a string.
        let c = chars("c", 0, 4);
        assert_eq!(raw(&c, b"a\x01b\0", None), "c=ARRAY[61, 01, 62, 00]");
        assert_eq!(raw(&c, b"a\tb\0", None), "c=a\tb");
        assert_eq!(json(&c.value(b"a\x01b\0", LE)), r#""a\u0001b""#);
        // No NUL inside the array: %s runs on to the payload's next NUL, as trace-cmd does.
        assert_eq!(raw(&c, b"abcdef\0", None), "c=abcdef");
        assert_eq!(c.str(b"abcdef\0", LE).as_deref(), Some("abcd"));
    }

    #[test]
    fn default_integer_styles() {
        let mut p = vec![0u8; 8];
        put(&mut p, 0, &(-2i16).to_le_bytes());
        put(&mut p, 2, &5i16.to_le_bytes());
        p[4] = 0xff;
        assert_eq!(raw(&int("a", "short", 0, 2, true), &p, None), "a=-2");
        assert_eq!(raw(&int("b", "short", 2, 2, true), &p, None), "b= 5");
        assert_eq!(raw(&int("c", "s8", 4, 1, true), &p, None), "c=-1");
        assert_eq!(raw(&int("d", "u8", 4, 1, false), &p, None), "d=255");
        put(&mut p, 4, &(-1i32).to_le_bytes());
        assert_eq!(raw(&int("e", "long", 4, 4, true), &p, None), "e=0xffffffff");
        assert_eq!(
            raw(&int("f", "void *", 4, 4, false), &p, None),
            "f=0xffffffff"
        );
        assert_eq!(raw(&int("g", "int", 4, 4, true), &p, None), "g=-1");
        assert_eq!(raw(&int("h", "int", 6, 4, true), &p, None), "h=");
    }

    #[test]
    fn big_endian() {
        let f = int("pid", "pid_t", 4, 4, true);
        let p = [0, 0, 0, 0, 0xff, 0xff, 0xff, 0xfe];
        assert_eq!(f.int(&p, Endian::Big), Some(-2));
        assert_eq!(FieldRef::from(&f).get_i64(&p, Endian::Big), Some(-2));
        let d = data_loc("s", 0, 4, false);
        let p = [0x00, 0x02, 0x00, 0x04, b'h', b'i'];
        assert_eq!(d.data(&p, Endian::Big), Some(&b"hi"[..]));
    }

    #[test]
    fn print_spec() {
        let f = |spec: &str, v: u64| {
            let mut out = Vec::new();
            PrintSpec::parse(spec).expect(spec).write_int(v, &mut out);
            String::from_utf8(out).expect("utf-8")
        };
        assert_eq!(f("%03d", 2), "002");
        assert_eq!(f("%d", 0xffff_ffff), "-1");
        assert_eq!(f("%ld", 0xffff_ffff), "4294967295");
        assert_eq!(f("%lld", u64::MAX), "-1");
        assert_eq!(f("%llu", u64::MAX), "18446744073709551615");
        assert_eq!(f("%hhd", 255), "-1");
        assert_eq!(f("%hu", 65537), "1");
        assert_eq!(f("%-5d", 42), "42   ");
        assert_eq!(f("%+d", 7), "+7");
        assert_eq!(f("% d", 7), " 7");
        assert_eq!(f("%5d", 0xffff_fffe), "   -2");
        assert_eq!(f("%05d", 0xffff_fffe), "-0002");
        assert_eq!(f("%.3u", 7), "007");
        assert_eq!(f("%.0u", 0), "");
        assert_eq!(f("%#x", 255), "0xff");
        assert_eq!(f("%#x", 0), "0");
        assert_eq!(f("%#o", 8), "010");
        assert_eq!(f("%08lX", 0xabc), "00000ABC");
        assert_eq!(f("0x%lx", 0xabc), "0xabc");
        assert_eq!(f("%c", b'A' as u64), "A");
        assert_eq!(f("%3c", b'A' as u64), "  A");
        for bad in [
            "", "%", "d", "%*d", "%p", "%ps", "%d ", "%99999d", "%.5000d", "%q",
        ] {
            assert_eq!(PrintSpec::parse(bad), None, "{bad:?}");
        }
        let mut out = Vec::new();
        PrintSpec::parse("%-6.2s|")
            .map(|s| s.write_str(b"abc", &mut out))
            .unwrap_or_default();
        assert!(out.is_empty(), "trailing text is not a conversion");
        PrintSpec::parse("%-6.2s")
            .expect("parses")
            .write_str(b"abc", &mut out);
        assert_eq!(out, b"ab    ");
    }

    #[test]
    fn json_strings_round_trip_through_serde() {
        let mut cases: Vec<Vec<u8>> = vec![
            b"".to_vec(),
            b"plain".to_vec(),
            b"quote\" back\\slash /".to_vec(),
            b"\n\r\t\x08\x0c\x00\x01\x1f\x7f".to_vec(),
            "unicode: é € 😀 \u{2028}".as_bytes().to_vec(),
            b"bad utf-8: \xff\xfe \xc3 end".to_vec(),
        ];
        cases.push((0u8..=255).collect());
        for bytes in cases {
            let expect = String::from_utf8_lossy(&bytes).into_owned();
            let mut out = Vec::new();
            Value::Str(String::from_utf8_lossy(&bytes)).write_json(&mut out);
            let text = std::str::from_utf8(&out).expect("JSON output is UTF-8");
            let back: String = serde_json::from_str(text).expect("valid JSON string");
            assert_eq!(back, expect);
            assert!(
                !text[1..text.len() - 1].bytes().any(|c| c < 0x20),
                "raw control character in {text:?}"
            );
        }
        for v in [i64::MIN, -1, 0, 1, i64::MAX] {
            let mut out = Vec::new();
            Value::Int(v).write_json(&mut out);
            assert_eq!(serde_json::from_slice::<i64>(&out).expect("int"), v);
        }
        for v in [0, 9, 10, u64::MAX] {
            let mut out = Vec::new();
            Value::UInt(v).write_json(&mut out);
            assert_eq!(serde_json::from_slice::<u64>(&out).expect("uint"), v);
        }
    }

    /// Every accessor on every kind of field over short and garbage payloads: no panics,
    /// and the JSON always parses.
    #[test]
    fn garbage_never_panics() {
        let mut fields = vec![
            int("a", "int", 0, 4, true),
            int("b", "unsigned long", 3, 8, false),
            int("c", "char", 5, 0, false),
            int("d", "u32", 6, 0, false),
            int("e", "__u128", 2, 16, false),
            int("f", "int", usize::MAX, 4, true),
            int("g", "int", usize::MAX - 1, 0, true),
            chars("h", 4, 8),
            chars("i", usize::MAX, 8),
            data_loc("j", 0, 4, false),
            data_loc("k", 4, 4, true),
            data_loc("l", 2, 2, false),
            data_loc("m", usize::MAX - 2, 4, true),
            data_loc("n", 0, 3, false),
        ];
        for elem in [0, 1, 2, 3, 4, 8] {
            for signed in [false, true] {
                fields.push(Field {
                    name: "o".into(),
                    type_name: "u16[3]".into(),
                    offset: 1,
                    size: 6,
                    signed,
                    kind: FieldKind::Array {
                        len: 3,
                        elem,
                        string: false,
                    },
                });
                fields.push(Field {
                    name: "p".into(),
                    type_name: "__rel_loc int[]".into(),
                    offset: 0,
                    size: 4,
                    signed,
                    kind: FieldKind::Dynamic {
                        elem,
                        string: false,
                        relative: signed,
                    },
                });
            }
        }
        let specs: Vec<Option<PrintSpec>> = [None, Some("%d"), Some("%s"), Some("%#llx")]
            .iter()
            .map(|s| s.and_then(PrintSpec::parse))
            .collect();
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        for len in 0..48 {
            for _ in 0..40 {
                let p: Vec<u8> = (0..len)
                    .map(|_| {
                        seed ^= seed << 13;
                        seed ^= seed >> 7;
                        seed ^= seed << 17;
                        // Bias towards small bytes so data_loc words often point inside.
                        if seed % 3 < 1 {
                            (seed >> 8) as u8 % 24
                        } else {
                            (seed >> 8) as u8
                        }
                    })
                    .collect();
                for f in &fields {
                    for e in [Endian::Little, Endian::Big] {
                        let _ = (f.uint(&p, e), f.int(&p, e), f.data(&p, e), f.str(&p, e));
                        let r = FieldRef::from(f);
                        let _ = (r.get_u64(&p, e), r.get_i64(&p, e));
                        let mut out = Vec::new();
                        f.value(&p, e).write_json(&mut out);
                        serde_json::from_slice::<serde_json::Value>(&out).expect("valid JSON");
                        for s in &specs {
                            out.clear();
                            f.write_raw_text(&p, e, 8, s.as_ref(), &mut out);
                        }
                    }
                }
            }
        }
    }
}
