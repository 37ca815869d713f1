//! C `printf` conversions (`%-8.3lx`, `%*d`, `%.*s`, ...) applied to one value, written into
//! a byte buffer without allocating: libtraceevent hands each piece of a print fmt to the C
//! library, so this is the part of glibc's printf that event formats use.

/// A width or precision: absent, written in the format, or taken from an argument (`*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Count {
    None,
    Fixed(u32),
    Star,
}

/// One conversion as C's printf reads it: `%[flags][width][.precision][length]conv`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Conv {
    pub left: bool,
    pub zero: bool,
    pub plus: bool,
    pub space: bool,
    pub alt: bool,
    pub width: Count,
    pub precision: Count,
    /// Length modifier as libtraceevent counts it: -2 `hh`, -1 `h`, 0 none, 1 `l`/`z`, 2 `ll`/`L`.
    pub ls: i8,
    /// The conversion character: one of `d i u x X o c s p`.
    pub conv: u8,
}

/// Widths and precisions beyond this are refused: real formats never come close, and a fuzzed
/// one must not make a single event print megabytes.
pub const MAX_PAD: u32 = 4096;

impl Conv {
    /// Parses `text`, which must be exactly one conversion starting with `%` (for `%p`, the
    /// letters after `p` are not part of it). `None` if C's printf would read it differently.
    pub fn parse(text: &[u8]) -> Option<Conv> {
        let mut b = text.strip_prefix(b"%")?;
        let mut c = Conv {
            left: false,
            zero: false,
            plus: false,
            space: false,
            alt: false,
            width: Count::None,
            precision: Count::None,
            ls: 0,
            conv: 0,
        };
        while let Some((&f, rest)) = b.split_first() {
            match f {
                b'-' => c.left = true,
                b'0' => c.zero = true,
                b'+' => c.plus = true,
                b' ' => c.space = true,
                b'#' => c.alt = true,
                _ => break,
            }
            b = rest;
        }
        c.width = count(&mut b)?;
        if let Some(rest) = b.strip_prefix(b".") {
            b = rest;
            c.precision = match count(&mut b)? {
                Count::None => Count::Fixed(0),
                n => n,
            };
        }
        let (ls, rest): (i8, &[u8]) = match b {
            [b'h', b'h', r @ ..] => (-2, r),
            [b'h', r @ ..] => (-1, r),
            [b'l', b'l', r @ ..] | [b'L', r @ ..] => (2, r),
            [b'l' | b'z' | b'Z', r @ ..] => (1, r),
            _ => (0, b),
        };
        c.ls = ls;
        match rest {
            [x @ (b'd' | b'i' | b'u' | b'x' | b'X' | b'o' | b'c' | b's' | b'p')] => c.conv = *x,
            _ => return None,
        }
        Some(c)
    }

    /// Width in columns and whether to pad on the right, given the `*` argument if any.
    fn resolve_width(&self, star: Option<i64>) -> (usize, bool) {
        match self.width {
            Count::None => (0, self.left),
            Count::Fixed(w) => (w as usize, self.left),
            Count::Star => {
                let w = star.unwrap_or(0);
                // A negative `*` width means left-justified (C99 7.19.6.1).
                (
                    (w.unsigned_abs().min(MAX_PAD as u64)) as usize,
                    self.left || w < 0,
                )
            }
        }
    }

    fn resolve_precision(&self, star: Option<i64>) -> Option<usize> {
        match self.precision {
            Count::None => None,
            Count::Fixed(p) => Some(p as usize),
            // A negative `*` precision is taken as if it were omitted.
            Count::Star => star
                .filter(|&p| p >= 0)
                .map(|p| p.min(MAX_PAD as i64) as usize),
        }
    }

    /// Whether the conversion takes a `*` argument (width or precision).
    pub fn has_star(&self) -> bool {
        self.width == Count::Star || self.precision == Count::Star
    }

    /// Bits of the integer C passes for this length modifier (`long` is 64-bit on the hosts
    /// trace-cmd runs on).
    pub fn bits(&self) -> u32 {
        match self.ls {
            -2 => 8,
            -1 => 16,
            0 => 32,
            _ => 64,
        }
    }

    /// Whether the conversion has no flags, width or precision (the common `%d`, `%lx`).
    #[inline]
    pub fn is_plain(&self) -> bool {
        !(self.left || self.zero || self.plus || self.space || self.alt)
            && self.width == Count::None
            && self.precision == Count::None
    }

    /// Prints `val` (already the argument's bits; only the low `bits()` are used) as C would.
    #[inline]
    pub fn write_int(&self, val: u64, star: Option<i64>, out: &mut Vec<u8>) {
        let bits = self.bits();
        let mask = if bits == 64 {
            u64::MAX
        } else {
            (1u64 << bits) - 1
        };
        let val = val & mask;
        if self.is_plain() {
            match self.conv {
                b'x' => return write_hex(val, out),
                b'u' => return write_dec(val, out),
                b'd' | b'i' => {
                    let shift = 64 - bits;
                    let v = ((val << shift) as i64) >> shift;
                    if v < 0 {
                        out.push(b'-');
                    }
                    return write_dec(v.unsigned_abs(), out);
                }
                _ => {}
            }
        }
        self.write_int_full(val, star, out)
    }

    fn write_int_full(&self, val: u64, star: Option<i64>, out: &mut Vec<u8>) {
        let bits = self.bits();
        let (width, left) = self.resolve_width(star);
        if self.conv == b'c' {
            pad_around(out, &[val as u8], width, left);
            return;
        }
        let signed = matches!(self.conv, b'd' | b'i');
        let (neg, mag) = if signed {
            let shift = 64 - bits;
            let v = ((val << shift) as i64) >> shift;
            (v < 0, v.unsigned_abs())
        } else {
            (false, val)
        };
        let mut digits = [0u8; 24];
        let mut n = 0;
        let radix: u64 = match self.conv {
            b'x' | b'X' => 16,
            b'o' => 8,
            _ => 10,
        };
        let hex: &[u8; 16] = if self.conv == b'X' {
            b"0123456789ABCDEF"
        } else {
            b"0123456789abcdef"
        };
        let mut m = mag;
        while m != 0 {
            digits[n] = hex[(m % radix) as usize];
            m /= radix;
            n += 1;
        }
        let precision = self.resolve_precision(star);
        // C: the default precision is 1, so 0 prints "0" unless the precision is 0.
        let min_digits = precision.unwrap_or(1);
        let mut zeros = min_digits.saturating_sub(n);
        let prefix: &[u8] = match self.conv {
            b'o' if self.alt && zeros == 0 && (n == 0 || digits[n - 1] != b'0') => {
                zeros = 1;
                b""
            }
            b'x' if self.alt && mag != 0 => b"0x",
            b'X' if self.alt && mag != 0 => b"0X",
            _ => b"",
        };
        let sign: &[u8] = if neg {
            b"-"
        } else if signed && self.plus {
            b"+"
        } else if signed && self.space {
            b" "
        } else {
            b""
        };
        let len = sign.len() + prefix.len() + zeros + n;
        let fill = width.saturating_sub(len);
        // C: `0` pads with zeros after the sign, unless left-justified or a precision is given.
        let zero_pad = !left && self.zero && precision.is_none();
        if !left && !zero_pad {
            out.resize(out.len() + fill, b' ');
        }
        out.extend_from_slice(sign);
        out.extend_from_slice(prefix);
        if zero_pad {
            out.resize(out.len() + fill, b'0');
        }
        out.resize(out.len() + zeros, b'0');
        out.extend(digits[..n].iter().rev());
        if left {
            out.resize(out.len() + fill, b' ');
        }
    }

    /// Prints a C string (`s` up to its first NUL) with this conversion's width and precision.
    pub fn write_str(&self, s: &[u8], star: Option<i64>, out: &mut Vec<u8>) {
        let s = until_nul(s);
        let s = match self.resolve_precision(star) {
            Some(p) if p < s.len() => &s[..p],
            _ => s,
        };
        let (width, left) = self.resolve_width(star);
        pad_around(out, s, width, left);
    }
}

fn pad_around(out: &mut Vec<u8>, s: &[u8], width: usize, left: bool) {
    let fill = width.saturating_sub(s.len());
    if !left {
        out.resize(out.len() + fill, b' ');
    }
    out.extend_from_slice(s);
    if left {
        out.resize(out.len() + fill, b' ');
    }
}

/// The bytes of `s` before its first NUL.
#[inline]
pub fn until_nul(s: &[u8]) -> &[u8] {
    match s.iter().position(|&c| c == 0) {
        Some(n) => &s[..n],
        None => s,
    }
}

fn count(b: &mut &[u8]) -> Option<Count> {
    if let Some(rest) = b.strip_prefix(b"*") {
        *b = rest;
        return Some(Count::Star);
    }
    let n = b.iter().take_while(|c| c.is_ascii_digit()).count();
    if n == 0 {
        return Some(Count::None);
    }
    let mut v: u32 = 0;
    for &d in &b[..n] {
        v = v.checked_mul(10)?.checked_add((d - b'0') as u32)?;
    }
    *b = &b[n..];
    (v <= MAX_PAD).then_some(Count::Fixed(v))
}

/// Appends the first `n` bytes of `buf`: a copy of constant size (a few vector moves, no
/// call) and a truncate, cheaper than copying `n` bytes for the short pieces of a line.
#[inline(always)]
pub fn push_fixed<const N: usize>(out: &mut Vec<u8>, buf: &[u8; N], n: usize) {
    let end = out.len() + n.min(N);
    out.extend_from_slice(buf);
    out.truncate(end);
}

/// A short byte string kept ready for [`push_fixed`] (a line's `COMM-PID` and `NAME:`
/// columns), or a longer one copied the ordinary way.
#[derive(Debug, Clone)]
pub enum Column {
    Short([u8; 32], u8),
    Long(Box<[u8]>),
}

impl Column {
    /// How many bytes it holds.
    pub fn len(&self) -> usize {
        match self {
            Column::Short(_, n) => *n as usize,
            Column::Long(s) => s.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn new(s: &[u8]) -> Column {
        if s.len() <= 32 {
            let mut b = [0u8; 32];
            b[..s.len()].copy_from_slice(s);
            Column::Short(b, s.len() as u8)
        } else {
            Column::Long(s.into())
        }
    }

    #[inline(always)]
    pub fn push(&self, out: &mut Vec<u8>) {
        match self {
            Column::Short(b, n) => push_fixed(out, b, *n as usize),
            Column::Long(s) => out.extend_from_slice(s),
        }
    }
}

/// The size of a [`Cursor`]'s buffer.
pub const LINE_ROOM: usize = 512;

/// Writes one line into a fixed buffer with the position in a register: the hot lines
/// (literals and integers only) pay one bounds check per piece instead of the capacity
/// check, length load and store of each `Vec` append, and reach the output in one copy.
///
/// Each write stores up to 32 bytes past the position, so a caller writes lines of at most
/// `LINE_ROOM - 32` bytes (an overrun is a bounds-check panic, never a wrong line).
pub struct Cursor<'a> {
    buf: &'a mut [u8; LINE_ROOM],
    at: usize,
}

impl<'a> Cursor<'a> {
    pub fn new(buf: &'a mut [u8; LINE_ROOM]) -> Cursor<'a> {
        Cursor { buf, at: 0 }
    }

    /// What was written.
    pub fn written(&self) -> &[u8] {
        &self.buf[..self.at]
    }

    #[inline(always)]
    fn put<const N: usize>(&mut self, b: &[u8; N], n: usize) {
        self.buf[self.at..self.at + N].copy_from_slice(b);
        self.at += n.min(N);
    }

    #[inline(always)]
    pub fn byte(&mut self, b: u8) {
        self.buf[self.at] = b;
        self.at += 1;
    }

    /// Drops the last byte when it is `b`.
    #[inline(always)]
    pub fn strip(&mut self, b: u8) {
        if self.at > 0 && self.buf[self.at - 1] == b {
            self.at -= 1;
        }
    }

    #[inline(always)]
    pub fn column(&mut self, c: &Column) {
        match c {
            Column::Short(b, n) => self.put(b, *n as usize),
            Column::Long(s) => {
                self.buf[self.at..self.at + s.len()].copy_from_slice(s);
                self.at += s.len();
            }
        }
    }

    /// [`write_hex`].
    #[inline(always)]
    pub fn hex(&mut self, v: u64) {
        let n = (64 - (v | 1).leading_zeros()).div_ceil(4) as usize;
        let top = v << (4 * (16 - n));
        self.put(&hex16(top), n);
    }

    /// [`write_dec`]: the digits written in place, right to left.
    #[inline(always)]
    pub fn dec(&mut self, v: u64) {
        if v < 10 {
            return self.byte(b'0' + v as u8);
        }
        let n = v.ilog10() as usize + 1;
        let dst = &mut self.buf[self.at..self.at + 20];
        let (mut v, mut i) = (v, n);
        while v >= 100 {
            let r = 2 * (v % 100) as usize;
            v /= 100;
            i -= 2;
            dst[i..i + 2].copy_from_slice(&PAIRS[r..r + 2]);
        }
        if v >= 10 {
            let r = 2 * v as usize;
            dst[0..2].copy_from_slice(&PAIRS[r..r + 2]);
        } else {
            dst[0] = b'0' + v as u8;
        }
        self.at += n;
    }

    /// [`write_frac6`].
    #[inline(always)]
    pub fn frac6(&mut self, v: u32) {
        self.put(&frac6_digits(v), 6);
    }
}

/// Appends `v` in lower-case hex, no prefix.
#[inline]
pub fn write_hex(v: u64, out: &mut Vec<u8>) {
    let n = (64 - (v | 1).leading_zeros()).div_ceil(4) as usize;
    // Shift the significant digits to the top so that all sixteen are formed at once, each
    // 32-bit half spread one nibble per byte (no loop, no table), then keep the first n.
    let top = v << (4 * (16 - n));
    let end = out.len() + n;
    out.extend_from_slice(&hex16(top));
    out.truncate(end);
}

/// The sixteen hex digits of `x` as ASCII, most significant first.
#[inline(always)]
fn hex16(x: u64) -> [u8; 16] {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    {
        // SSE2 (every x86_64 has it): the sixteen nibbles spread one a byte and turned
        // into digits side by side, about a third of the scalar instructions (dumps of
        // system calls print six hex arguments a line).
        use std::arch::x86_64::*;
        // SAFETY: SSE2 is part of the x86_64 baseline (the cfg above); the store writes
        // the 16 bytes of `out`.
        unsafe {
            let bytes = _mm_cvtsi64_si128(x.swap_bytes() as i64);
            let low = _mm_set1_epi8(0x0f);
            let hi = _mm_and_si128(_mm_srli_epi16::<4>(bytes), low);
            let lo = _mm_and_si128(bytes, low);
            let nibbles = _mm_unpacklo_epi8(hi, lo);
            let letters = _mm_and_si128(
                _mm_cmpgt_epi8(nibbles, _mm_set1_epi8(9)),
                _mm_set1_epi8((b'a' - b'0' - 10) as i8),
            );
            let digits = _mm_add_epi8(_mm_add_epi8(nibbles, _mm_set1_epi8(b'0' as i8)), letters);
            let mut out = [0u8; 16];
            _mm_storeu_si128(out.as_mut_ptr().cast(), digits);
            out
        }
    }
    #[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
    {
        let mut out = [0u8; 16];
        out[..8].copy_from_slice(&hex8((x >> 32) as u32).to_be_bytes());
        out[8..].copy_from_slice(&hex8(x as u32).to_be_bytes());
        out
    }
}

/// The eight hex digits of `x` as ASCII bytes, most significant digit in the top byte.
#[cfg_attr(all(target_arch = "x86_64", target_feature = "sse2"), allow(dead_code))]
#[inline(always)]
fn hex8(x: u32) -> u64 {
    let mut x = x as u64;
    x = (x | x << 16) & 0x0000_ffff_0000_ffff;
    x = (x | x << 8) & 0x00ff_00ff_00ff_00ff;
    x = (x | x << 4) & 0x0f0f_0f0f_0f0f_0f0f;
    // Digits above 9 get the distance from '9' + 1 to 'a'.
    let letters = ((x + 0x0606_0606_0606_0606) >> 4) & 0x0101_0101_0101_0101;
    x + 0x3030_3030_3030_3030 + letters * (b'a' - b'0' - 10) as u64
}

/// Appends a short byte string.
#[inline]
pub fn push_short(out: &mut Vec<u8>, s: &[u8]) {
    if s.len() <= 16 {
        let mut buf = [0u8; 16];
        buf[..s.len()].copy_from_slice(s);
        push_fixed(out, &buf, s.len());
    } else {
        out.extend_from_slice(s);
    }
}

/// Pairs of decimal digits, for writing two digits per division.
const PAIRS: &[u8; 200] = b"\
0001020304050607080910111213141516171819\
2021222324252627282930313233343536373839\
4041424344454647484950515253545556575859\
6061626364656667686970717273747576777879\
8081828384858687888990919293949596979899";

/// The decimal digits of `v` at the end of `buf`; returns where they start.
#[inline]
fn dec_digits(mut v: u64, buf: &mut [u8; 20]) -> usize {
    let mut i = buf.len();
    while v >= 100 {
        let r = (v % 100) as usize;
        v /= 100;
        i -= 2;
        buf[i..i + 2].copy_from_slice(&PAIRS[2 * r..2 * r + 2]);
    }
    if v >= 10 {
        i -= 2;
        let r = v as usize;
        buf[i..i + 2].copy_from_slice(&PAIRS[2 * r..2 * r + 2]);
    } else {
        i -= 1;
        buf[i] = b'0' + v as u8;
    }
    i
}

/// Appends `v` in decimal.
#[inline]
pub fn write_dec(v: u64, out: &mut Vec<u8>) {
    // Small values (system call numbers, return values, pids, prios) are formed in a
    // register and stored once.
    if v < 10 {
        out.push(b'0' + v as u8);
        return;
    }
    if v < 100 {
        let r = 2 * v as usize;
        out.extend_from_slice(&[PAIRS[r], PAIRS[r + 1]]);
        return;
    }
    if v < 10_000 {
        let (h, l) = (2 * (v / 100) as usize, 2 * (v % 100) as usize);
        if v < 1000 {
            push_fixed(out, &[PAIRS[h + 1], PAIRS[l], PAIRS[l + 1], 0], 3);
        } else {
            out.extend_from_slice(&[PAIRS[h], PAIRS[h + 1], PAIRS[l], PAIRS[l + 1]]);
        }
        return;
    }
    write_dec_padded(v, 0, false, out)
}

/// Appends `v` (below 1,000,000) as exactly six digits, zero-padded: a timestamp's
/// microseconds, in three pair copies.
#[inline]
pub fn write_frac6(v: u32, out: &mut Vec<u8>) {
    push_fixed(out, &frac6_digits(v), 6);
}

/// The six digits of `v % 1_000_000`, zero-padded, in the first six of eight bytes.
#[inline(always)]
fn frac6_digits(v: u32) -> [u8; 8] {
    let v = v % 1_000_000;
    let (a, r) = ((v / 10_000) as usize, v % 10_000);
    let (b, c) = ((r / 100) as usize, (r % 100) as usize);
    let mut buf = [0u8; 8];
    buf[0..2].copy_from_slice(&PAIRS[2 * a..2 * a + 2]);
    buf[2..4].copy_from_slice(&PAIRS[2 * b..2 * b + 2]);
    buf[4..6].copy_from_slice(&PAIRS[2 * c..2 * c + 2]);
    buf
}

/// Appends `v` in decimal, right-aligned in `width` columns, zero-padded when `zero`.
#[inline]
pub fn write_dec_padded(v: u64, width: usize, zero: bool, out: &mut Vec<u8>) {
    let mut buf = [0u8; 20];
    let i = dec_digits(v, &mut buf);
    let n = buf.len() - i;
    if n < width {
        out.resize(out.len() + width - n, if zero { b'0' } else { b' ' });
    }
    // Left-align the digits so one constant-size copy carries them.
    let mut left = [0u8; 20];
    left[..n].copy_from_slice(&buf[i..]);
    push_fixed(out, &left, n);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_digits_of_every_length_and_nibble() {
        let mut vals = vec![0u64, 1, 9, 10, 15, 16, u64::MAX, 0x0123_4567_89ab_cdef];
        for shift in 0..64 {
            vals.extend([
                1u64 << shift,
                (1u64 << shift) - 1,
                0xa5a5_a5a5_a5a5_a5a5 >> shift,
            ]);
        }
        for nib in 0..16u64 {
            vals.push(nib * 0x1111_1111_1111_1111);
        }
        let mut room = [0u8; LINE_ROOM];
        for v in vals {
            let want = format!("{v:x}");
            let mut out = b"x".to_vec();
            write_hex(v, &mut out);
            assert_eq!(&out[1..], want.as_bytes(), "{v:#x}");
            let mut c = Cursor::new(&mut room);
            c.byte(b'x');
            c.hex(v);
            assert_eq!(&c.written()[1..], want.as_bytes(), "{v:#x}");
            // The portable digits agree with the vector ones.
            let mut both = [0u8; 16];
            both[..8].copy_from_slice(&hex8((v >> 32) as u32).to_be_bytes());
            both[8..].copy_from_slice(&hex8(v as u32).to_be_bytes());
            assert_eq!(both, hex16(v), "{v:#x}");
        }
    }

    fn int(spec: &str, v: u64, star: Option<i64>) -> String {
        let mut out = Vec::new();
        Conv::parse(spec.as_bytes())
            .expect(spec)
            .write_int(v, star, &mut out);
        String::from_utf8(out).unwrap()
    }

    fn s(spec: &str, v: &str, star: Option<i64>) -> String {
        let mut out = Vec::new();
        Conv::parse(spec.as_bytes())
            .expect(spec)
            .write_str(v.as_bytes(), star, &mut out);
        String::from_utf8(out).unwrap()
    }

    /// Expected strings are what glibc's printf prints for the same format and C value.
    #[test]
    fn integers_as_glibc_prints_them() {
        assert_eq!(int("%d", 0xffff_ffff, None), "-1");
        assert_eq!(int("%u", 0xffff_ffff, None), "4294967295");
        assert_eq!(int("%ld", u64::MAX, None), "-1");
        assert_eq!(int("%lu", u64::MAX, None), "18446744073709551615");
        assert_eq!(int("%hhd", 0x1ff, None), "-1");
        assert_eq!(int("%hu", 0x10001, None), "1");
        assert_eq!(int("%05d", (-42i64) as u64, None), "-0042");
        assert_eq!(int("%-5d", 42, None), "42   ");
        assert_eq!(int("%+d", 7, None), "+7");
        assert_eq!(int("% d", 7, None), " 7");
        assert_eq!(int("%.3d", 7, None), "007");
        assert_eq!(int("%8.3d", 7, None), "     007");
        assert_eq!(int("%08.3d", 7, None), "     007");
        assert_eq!(int("%.0d", 0, None), "");
        assert_eq!(int("%#x", 255, None), "0xff");
        assert_eq!(int("%#x", 0, None), "0");
        assert_eq!(int("%#o", 8, None), "010");
        assert_eq!(int("%#o", 0, None), "0");
        assert_eq!(int("%#08x", 255, None), "0x0000ff");
        assert_eq!(int("%08lX", 0xabc, None), "00000ABC");
        assert_eq!(int("%03u", 5, None), "005");
        assert_eq!(int("%c", b'A' as u64, None), "A");
        assert_eq!(int("%3c", b'A' as u64, None), "  A");
        assert_eq!(int("%*d", 5, Some(4)), "   5");
        assert_eq!(int("%*d", 5, Some(-4)), "5   ");
        assert_eq!(s("%s", "abc\0def", None), "abc");
        let mut edges = vec![0u64, 5, 9, 10, 99, 100, 101, 12345, u64::MAX];
        for p in 1..20 {
            edges.extend([10u64.pow(p) - 1, 10u64.pow(p), 10u64.pow(p) + 1]);
        }
        for v in edges {
            let mut out = Vec::new();
            write_dec(v, &mut out);
            assert_eq!(out, v.to_string().as_bytes());
            out.clear();
            write_dec_padded(v, 6, true, &mut out);
            assert_eq!(out, format!("{v:06}").as_bytes());
            out.clear();
            write_hex(v, &mut out);
            assert_eq!(out, format!("{v:x}").as_bytes());
        }
        for v in [0u32, 7, 42, 999_999, 123_456, 10_203] {
            let mut out = Vec::new();
            write_frac6(v, &mut out);
            assert_eq!(out, format!("{v:06}").as_bytes());
        }
        for v in [
            0xau64,
            0xf,
            0x10,
            0x9abc_def0,
            0xffff_ffff_ffff_ffff,
            0x1234_5678_9abc_def0,
        ] {
            let mut out = Vec::new();
            write_hex(v, &mut out);
            assert_eq!(out, format!("{v:x}").as_bytes());
        }
        // The cursor writes what the Vec writers write.
        let mut values = vec![0u64, 1, 9, 10, 99, 100, 101, 999, 1000, u64::MAX];
        for p in 1..20 {
            values.extend([10u64.pow(p) - 1, 10u64.pow(p), 10u64.pow(p) + 1]);
        }
        let mut room = [0u8; LINE_ROOM];
        for chunk in values.chunks(4) {
            let mut cur = Cursor::new(&mut room);
            let mut expect = Vec::new();
            cur.column(&Column::new(&[b'x'; 40]));
            expect.extend_from_slice(&[b'x'; 40]);
            for &v in chunk {
                cur.dec(v);
                cur.byte(b' ');
                cur.hex(v);
                cur.frac6(v as u32);
                write_dec(v, &mut expect);
                expect.push(b' ');
                write_hex(v, &mut expect);
                write_frac6(v as u32, &mut expect);
            }
            cur.byte(b'\n');
            cur.strip(b'\n');
            assert_eq!(cur.written(), &expect[..]);
        }
        assert_eq!(s("%-6.2s", "abc", None), "ab    ");
        assert_eq!(s("%.*s", "abcdef", Some(3)), "abc");
        assert_eq!(s("%.*s", "abcdef", Some(-1)), "abcdef");
        for bad in ["", "%", "%q", "%d ", "%99999d", "%lf", "%5"] {
            assert_eq!(Conv::parse(bad.as_bytes()), None, "{bad:?}");
        }
    }
}
