//! Protocol-buffer wire format, written by hand: a field is a key (field number << 3 | wire
//! type) followed by a varint (wire type 0) or a length and bytes (wire type 2). Nested
//! messages reserve a 4-byte length and patch it afterwards, as Perfetto's own protozero
//! writer does (a varint may carry redundant continuation bytes; every decoder accepts
//! that), so a message is written in one pass without knowing its size first.

const VARINT: u64 = 0;
const LEN: u64 = 2;

#[inline]
pub fn varint(b: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        b.push((v as u8) | 0x80);
        v >>= 7;
    }
    b.push(v as u8);
}

#[inline]
fn key(b: &mut Vec<u8>, field: u32, wire: u64) {
    varint(b, (u64::from(field) << 3) | wire);
}

/// uint32/uint64/enum/bool fields.
#[inline]
pub fn uint(b: &mut Vec<u8>, field: u32, v: u64) {
    key(b, field, VARINT);
    varint(b, v);
}

/// int32/int64 fields: two's complement in 64 bits (negative values take 10 bytes).
#[inline]
pub fn int(b: &mut Vec<u8>, field: u32, v: i64) {
    uint(b, field, v as u64);
}

#[inline]
pub fn bytes(b: &mut Vec<u8>, field: u32, data: &[u8]) {
    key(b, field, LEN);
    varint(b, data.len() as u64);
    b.extend_from_slice(data);
}

#[inline]
pub fn string(b: &mut Vec<u8>, field: u32, s: &str) {
    bytes(b, field, s.as_bytes());
}

/// Starts a nested message; pass the returned mark to [`end`].
#[inline]
pub fn begin(b: &mut Vec<u8>, field: u32) -> usize {
    key(b, field, LEN);
    b.extend_from_slice(&[0x80, 0x80, 0x80, 0x00]);
    b.len()
}

/// Ends the message begun at `mark`: its length as a 4-byte varint (messages < 256 MiB).
#[inline]
pub fn end(b: &mut [u8], mark: usize) {
    let n = b.len() - mark;
    assert!(n < 1 << 28, "protobuf message over 256 MiB");
    let l = &mut b[mark - 4..mark];
    l[0] = (n as u8 & 0x7f) | 0x80;
    l[1] = ((n >> 7) as u8 & 0x7f) | 0x80;
    l[2] = ((n >> 14) as u8 & 0x7f) | 0x80;
    l[3] = (n >> 21) as u8 & 0x7f;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_and_nested_lengths() {
        let mut b = Vec::new();
        uint(&mut b, 1, 150);
        assert_eq!(b, [0x08, 0x96, 0x01]);
        b.clear();
        int(&mut b, 2, -1);
        assert_eq!(b.len(), 1 + 10);
        b.clear();
        let m = begin(&mut b, 3);
        string(&mut b, 1, "hi");
        end(&mut b, m);
        assert_eq!(b, [0x1a, 0x84, 0x80, 0x80, 0x00, 0x0a, 0x02, b'h', b'i']);
    }
}
