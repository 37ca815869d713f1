//! What a file holds, told from its first bytes: one of the traces kstate reads, a
//! compressed stream kstate unpacks (gzip, zstd, xz: by magic, never by name), or something
//! else, named plainly so that the user learns what they passed rather than which bytes
//! were wrong.

/// How many bytes the decision looks at (and what a "not a trace" message describes).
pub const HEAD: usize = 4096;

const TRACE_DAT: &[u8] = b"\x17\x08\x44tracing";
const PERF_DATA: &[u8] = b"PERFILE2";

/// The compressed containers kstate unpacks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Packing {
    Gzip,
    Zstd,
    Xz,
}

impl Packing {
    pub fn name(self) -> &'static str {
        match self {
            Packing::Gzip => "gzip",
            Packing::Zstd => "zstd",
            Packing::Xz => "xz",
        }
    }
    fn magic(self) -> &'static [u8] {
        match self {
            Packing::Gzip => b"\x1f\x8b",
            Packing::Zstd => b"\x28\xb5\x2f\xfd",
            Packing::Xz => b"\xfd7zXZ\x00",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Empty,
    /// trace.dat, or a file too short to be anything else (its reader says where it ends).
    TraceDat,
    PerfData,
    Packed(Packing),
    Other,
}

pub fn kind(head: &[u8]) -> Kind {
    let starts = |magic: &[u8]| {
        let n = head.len().min(magic.len());
        head[..n] == magic[..n]
    };
    if head.is_empty() {
        return Kind::Empty;
    }
    for p in [Packing::Gzip, Packing::Zstd, Packing::Xz] {
        if head.len() >= p.magic().len() && head.starts_with(p.magic()) {
            return Kind::Packed(p);
        }
    }
    // A zstd stream may open with a skippable frame (pzstd writes one first).
    if head.len() >= 4 && head[0] & 0xf0 == 0x50 && head[1..4] == *b"\x2a\x4d\x18" {
        return Kind::Packed(Packing::Zstd);
    }
    if head.len() >= PERF_DATA.len() && head.starts_with(PERF_DATA) {
        Kind::PerfData
    } else if starts(TRACE_DAT) {
        Kind::TraceDat
    } else {
        Kind::Other
    }
}

/// The message for a file that is not a trace: what it seems to be, from `head` (its
/// first bytes; `whole` when that is all of it).
pub fn not_a_trace(head: &[u8], whole: bool) -> String {
    format!(
        "not a trace: {}; expected trace.dat, perf.data or a capture directory",
        describe(head, whole)
    )
}

/// What `head` looks like, in words.
pub fn describe(head: &[u8], whole: bool) -> String {
    let n = head.len();
    let extent = if whole { "" } else { " at the start" };
    if n == 0 {
        return "no data".into();
    }
    if head.iter().all(|&b| b == 0) {
        return format!("{n} zero bytes{extent}");
    }
    if let Kind::Packed(p) = kind(head) {
        return format!("{}-compressed data inside", p.name());
    }
    let magic = |m: &[u8]| head.starts_with(m);
    if magic(b"\x7fELF") {
        return "an ELF file (a program, library or core dump)".into();
    }
    if magic(b"PERFFILE") {
        return "perf.data version 1 (magic PERFFILE), which kstate does not read; \
                perf has written version 2 (PERFILE2) since Linux 2.6.32"
            .into();
    }
    if magic(b"BZh") {
        return "bzip2-compressed data (kstate unpacks gzip, zstd and xz)".into();
    }
    if magic(b"\x04\x22\x4d\x18") {
        return "lz4-compressed data (kstate unpacks gzip, zstd and xz)".into();
    }
    if magic(b"PK\x03\x04") {
        return "a zip archive (unzip it and name the trace inside)".into();
    }
    if head.get(257..262) == Some(b"ustar") {
        return "a tar archive (unpack it and name the trace or capture directory inside)".into();
    }
    if let Some(line) = text_start(head) {
        return format!("text, starting {line:?}");
    }
    let shown = &head[..n.min(16)];
    format!("{n} bytes{extent}, beginning {}", shown.escape_ascii())
}

/// The first line of `head` when it reads as text (UTF-8 with no control characters but
/// whitespace; a character cut at the end of `head` is allowed).
fn text_start(head: &[u8]) -> Option<String> {
    let s = match std::str::from_utf8(head) {
        Ok(s) => s,
        Err(e) if e.error_len().is_none() => std::str::from_utf8(&head[..e.valid_up_to()]).ok()?,
        Err(_) => return None,
    };
    if s.chars().any(|c| c.is_control() && !c.is_whitespace()) {
        return None;
    }
    let line = s.trim_start().lines().next().unwrap_or("");
    Some(line.chars().take(60).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds() {
        assert_eq!(kind(b""), Kind::Empty);
        assert_eq!(kind(b"\x17\x08\x44"), Kind::TraceDat);
        assert_eq!(kind(b"\x17\x08\x44tracing6\0"), Kind::TraceDat);
        assert_eq!(kind(b"PERFILE2\x68\0"), Kind::PerfData);
        assert_eq!(kind(b"\x1f\x8b\x08\0"), Kind::Packed(Packing::Gzip));
        assert_eq!(kind(b"\x28\xb5\x2f\xfd\x04"), Kind::Packed(Packing::Zstd));
        assert_eq!(kind(b"\xfd7zXZ\0\0\x04"), Kind::Packed(Packing::Xz));
        assert_eq!(kind(b"\x1f"), Kind::Other);
        assert_eq!(kind(b"# tracer: nop"), Kind::Other);
    }

    #[test]
    fn descriptions() {
        assert_eq!(
            not_a_trace(&[0; HEAD], false),
            "not a trace: 4096 zero bytes at the start; expected trace.dat, perf.data or a \
             capture directory"
        );
        assert_eq!(describe(&[0; 10], true), "10 zero bytes");
        assert_eq!(
            describe(b"cpus=6\n  <idle>-0 ...", true),
            "text, starting \"cpus=6\""
        );
        // A multi-byte character cut by the end of the head is still text.
        assert_eq!(
            describe("ab\u{e9}".as_bytes()[..3].as_ref(), false),
            "text, starting \"ab\""
        );
        assert!(describe(b"\x7fELF\x02\x01", true).contains("ELF"));
        assert_eq!(
            describe(b"\x01\x02\x03", true),
            "3 bytes, beginning \\x01\\x02\\x03"
        );
    }
}
