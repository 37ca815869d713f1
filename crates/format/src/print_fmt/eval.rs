//! Evaluating a parsed print fmt against one record, the way libtraceevent does: numbers are
//! unsigned 64-bit throughout (comparisons included), casts to 8/16/32-bit types mask, a
//! field that does not fit the record reads as 0, and each conversion prints its argument
//! with C's printf after casting it to the conversion's length modifier.
//!
//! Where libtraceevent would print something meaningless (a host pointer, a division by
//! zero, `^`, which it does not evaluate), the evaluation is marked unsupported and the
//! caller prints the raw fields instead.

use std::cell::Cell;

use crate::bytes::Endian;
use crate::event_format::{Field, FieldKind};
use crate::print_fmt::cfmt::{self, Conv};
use crate::print_fmt::parse::{BinOp, Expr, Piece, PtrKind};
use crate::print_fmt::print_funcs::{self, PrintFunc};
use crate::print_fmt::Symbols;

/// An argument of a conversion: an expression of the print fmt, or for `bprint` a value or
/// string decoded from the record's binary buffer.
#[derive(Debug, Clone, Copy)]
pub enum Arg<'a> {
    Expr(&'a Expr),
    Num(u64),
    BStr(&'a [u8]),
}

/// Where a piece's arguments come from: a print fmt's expressions or decoded `bprint`
/// arguments (no per-record list is built for the former).
pub trait Args {
    fn arg(&self, i: usize) -> Arg<'_>;
}

impl Args for [Expr] {
    #[inline]
    fn arg(&self, i: usize) -> Arg<'_> {
        Arg::Expr(&self[i])
    }
}

impl Args for [Arg<'_>] {
    #[inline]
    fn arg(&self, i: usize) -> Arg<'_> {
        self[i]
    }
}

pub struct Eval<'a> {
    pub payload: &'a [u8],
    pub endian: Endian,
    pub long_size: usize,
    pub syms: &'a Symbols,
    /// Set when something was met that is not printed faithfully.
    pub unsupported: Cell<bool>,
}

/// The mask a cast to `ty` applies (libtraceevent's `eval_type_str`): 8, 16 or 32-bit
/// integer types truncate; everything else (long, pointers, structs, bool) keeps the value.
pub(super) fn cast_mask(ty: &str) -> u64 {
    let ty = ty.strip_prefix("unsigned ").unwrap_or(ty);
    match ty {
        "u8" | "s8" | "char" => 0xff,
        "u16" | "s16" | "short" => 0xffff,
        "u32" | "s32" | "int" => 0xffff_ffff,
        _ => u64::MAX,
    }
}

/// The element type of a pointer cast (`u8 *` -> `u8`), for indexing through it.
fn pointee(ty: &str) -> Option<&str> {
    ty.strip_suffix(" *")
}

impl<'a> Eval<'a> {
    fn fail(&self) -> u64 {
        self.unsupported.set(true);
        0
    }

    /// The number of `size` bytes at `off`; 0 when it does not fit the record (as
    /// libtraceevent reads it) or the size is not 1, 2, 4 or 8.
    #[inline]
    fn read(&self, off: usize, size: usize) -> u64 {
        let Some(rest) = self.payload.get(off..) else {
            return 0;
        };
        let e = self.endian;
        match size {
            1 => rest.first().map_or(0, |&b| b as u64),
            2 => rest.first_chunk().map_or(0, |b| e.u16(*b) as u64),
            4 => rest.first_chunk().map_or(0, |b| e.u32(*b) as u64),
            8 => rest.first_chunk().map_or(0, |b| e.u64(*b)),
            _ => 0,
        }
    }

    /// Where a dynamic field's data is: (offset, length), both 0 when the location word
    /// points outside the record (libtraceevent's `dynamic_offset_field`).
    pub fn dyn_loc(&self, f: &Field) -> (usize, usize) {
        let size = self.payload.len();
        if f.offset + f.size > size {
            return (0, 0);
        }
        let val = self.read(f.offset, f.size);
        let o = (val & 0xffff) as usize;
        let l = if f.size == 2 {
            size.saturating_sub(o)
        } else {
            ((val >> 16) & 0xffff) as usize
        };
        let mut off = if o > size { 0 } else { o };
        let len = if o + l > size { 0 } else { l };
        if matches!(f.kind, FieldKind::Dynamic { relative: true, .. }) {
            off += f.offset + f.size;
        }
        (off, len)
    }

    fn elem_size(f: &Field) -> usize {
        match f.kind {
            FieldKind::Array { elem, .. } | FieldKind::Dynamic { elem, .. } => elem,
            FieldKind::Int => f.size,
        }
    }

    pub fn num(&self, e: &Expr) -> u64 {
        match e {
            Expr::Atom { value, .. } => *value,
            Expr::Num(v) => *v,
            Expr::Str(_) => 0,
            Expr::Field(f) => {
                if matches!(f.size, 1 | 2 | 4 | 8) {
                    self.read(f.offset, f.size)
                } else {
                    0
                }
            }
            Expr::Unary(op, r) => {
                let r = self.num(r);
                match op {
                    b'!' => (r == 0) as u64,
                    b'~' => !r,
                    b'-' => 0u64.wrapping_sub(r),
                    _ => r,
                }
            }
            Expr::Binary(op, l, r) => {
                let (l, r) = (self.num(l), self.num(r));
                match op {
                    BinOp::Mul => l.wrapping_mul(r),
                    BinOp::Div if r == 0 => self.fail(),
                    BinOp::Div => l / r,
                    BinOp::Rem if r == 0 => self.fail(),
                    BinOp::Rem => l % r,
                    BinOp::Add => l.wrapping_add(r),
                    BinOp::Sub => l.wrapping_sub(r),
                    BinOp::Shl => l.wrapping_shl(r as u32),
                    BinOp::Shr => l.wrapping_shr(r as u32),
                    BinOp::Lt => (l < r) as u64,
                    BinOp::Gt => (l > r) as u64,
                    BinOp::Le => (l <= r) as u64,
                    BinOp::Ge => (l >= r) as u64,
                    BinOp::Eq => (l == r) as u64,
                    BinOp::Ne => (l != r) as u64,
                    BinOp::And => l & r,
                    // libtraceevent has no case for '^' and prints 0.
                    BinOp::Xor => self.fail(),
                    BinOp::Or => l | r,
                    BinOp::LAnd => (l != 0 && r != 0) as u64,
                    BinOp::LOr => (l != 0 || r != 0) as u64,
                }
            }
            Expr::Cond(c, a, b) => {
                if self.num(c) != 0 {
                    self.num(a)
                } else {
                    self.num(b)
                }
            }
            Expr::Cast(ty, inner) => self.num(inner) & cast_mask(ty),
            Expr::Index(base, idx) => self.index(base, idx),
            Expr::Load { offset, size } => {
                if matches!(size, 1 | 2 | 4 | 8) {
                    self.read(*offset, *size)
                } else {
                    0
                }
            }
            Expr::DynArrayLen(f) => self.dyn_loc(f).1 as u64,
            Expr::Call(func, args) => self.call_value(*func, args),
            // These print; as numbers libtraceevent gives 0 (or a host address: refused).
            Expr::Flags { .. }
            | Expr::Symbolic { .. }
            | Expr::Hex { .. }
            | Expr::IntArray { .. }
            | Expr::GetStr(_)
            | Expr::Bitmask(_)
            | Expr::Cpumask(_) => 0,
            Expr::DynArray(_) => self.fail(),
        }
    }

    /// `base[idx]`: an element of an array field (index in elements) or of a dynamic array
    /// (index in bytes, as libtraceevent computes it), read with the element size, or through
    /// a pointer cast's element type.
    fn index(&self, base: &Expr, idx: &Expr) -> u64 {
        let right = self.num(idx) as usize;
        let mut b = base;
        let mut cast = None;
        while let Expr::Cast(ty, inner) = b {
            cast.get_or_insert(ty);
            b = inner;
        }
        let (off, size) = match b {
            Expr::DynArray(f) => {
                let (off, _) = self.dyn_loc(f);
                let es = Self::elem_size(f);
                (
                    off.saturating_add(right),
                    if es != 0 { es } else { self.long_size },
                )
            }
            Expr::Field(f) => {
                let es = Self::elem_size(f);
                (f.offset.saturating_add(right.saturating_mul(es)), es)
            }
            _ => return self.fail(),
        };
        let v = if matches!(size, 1 | 2 | 4 | 8) {
            self.read(off, size)
        } else {
            0
        };
        match cast {
            Some(ty) => match pointee(ty) {
                Some(t) => v & cast_mask(t),
                None => v,
            },
            None => v,
        }
    }

    fn arg_num(&self, a: Arg<'_>) -> u64 {
        match a {
            Arg::Expr(e) => self.num(e),
            Arg::Num(v) => v,
            Arg::BStr(_) => 0,
        }
    }

    /// Prints the pieces of a format with their arguments.
    pub fn print<A: Args + ?Sized>(&self, pieces: &[Piece], args: &A, out: &mut Vec<u8>) {
        for p in pieces {
            match p {
                Piece::Lit(s) => cfmt::push_short(out, s),
                Piece::Num { conv, arg, star } => {
                    let star = star.map(|s| self.arg_num(args.arg(s)) as i32 as i64);
                    let v = self.arg_num(args.arg(*arg));
                    conv.write_int(v, star, out);
                }
                Piece::Str { conv, arg, star } => {
                    let star = star.map(|s| self.arg_num(args.arg(s)) as i32 as i64);
                    let start = out.len();
                    match args.arg(*arg) {
                        Arg::Expr(e) => self.print_str(e, conv, star, out),
                        Arg::BStr(s) => conv.write_str(s, star, out),
                        Arg::Num(v) => {
                            let mut tmp = [0u8; 24];
                            let n = signed_text(v as i64, &mut tmp);
                            conv.write_str(&tmp[..n], star, out);
                        }
                    }
                    // libtraceevent prints a `%s` into a helper buffer and copies it as a C
                    // string: a NUL in it (a plugin's helper writes one) ends the piece.
                    if let Some(nul) = out[start..].iter().position(|&c| c == 0) {
                        out.truncate(start + nul);
                    }
                }
                Piece::Ptr { kind, arg, star } => {
                    let plen = star.map_or(1, |s| self.arg_num(args.arg(s)) as i32 as i64);
                    self.print_ptr(*kind, args.arg(*arg), plen, out);
                }
            }
        }
    }

    /// `%s` of an expression (libtraceevent's `print_str_arg`).
    fn print_str(&self, e: &Expr, conv: &Conv, star: Option<i64>, out: &mut Vec<u8>) {
        match e {
            Expr::Atom { text, .. } => conv.write_str(text.as_bytes(), star, out),
            Expr::Str(s) => conv.write_str(s.as_bytes(), star, out),
            Expr::Num(_) | Expr::Unary(..) | Expr::Binary(..) | Expr::Cast(..) => {}
            Expr::Index(..) | Expr::Load { .. } | Expr::DynArrayLen(_) => {}
            Expr::Field(f) => {
                let is_array = !matches!(f.kind, FieldKind::Int);
                if !is_array && f.size == self.long_size {
                    // A `const char *` into the kernel: the trace's copy of the string, or hex.
                    let addr = self.read(f.offset, f.size);
                    match self.syms.printk().get(addr) {
                        Some(s) => out.extend_from_slice(s),
                        None => cfmt::write_hex(addr, out),
                    }
                    return;
                }
                // A size of 0 means the rest of the record.
                let start = f.offset.min(self.payload.len());
                let end = if f.size == 0 {
                    self.payload.len()
                } else {
                    f.offset.saturating_add(f.size).min(self.payload.len())
                };
                conv.write_str(&self.payload[start..end.max(start)], star, out);
            }
            Expr::Flags { val, delim, items } => {
                let mut val = self.num(val);
                let mut printed = false;
                for (fv, name) in items {
                    if val == 0 && *fv < 0 {
                        conv.write_str(name.as_bytes(), star, out);
                        break;
                    }
                    let fv = *fv as u64;
                    if (fv as i64) > 0 && val & fv == fv {
                        if printed {
                            out.extend_from_slice(delim.as_bytes());
                        }
                        conv.write_str(name.as_bytes(), star, out);
                        printed = true;
                        val &= !fv;
                    }
                }
                if val != 0 {
                    if printed {
                        out.extend_from_slice(delim.as_bytes());
                    }
                    out.extend_from_slice(b"0x");
                    cfmt::write_hex(val, out);
                }
            }
            Expr::Symbolic { val, items } => {
                let val = self.num(val) as i64;
                match items.iter().find(|(fv, _)| *fv == val) {
                    Some((_, name)) => conv.write_str(name.as_bytes(), star, out),
                    None => {
                        out.extend_from_slice(b"0x");
                        cfmt::write_hex(val as u64, out);
                    }
                }
            }
            Expr::Hex { data, len, spaced } => {
                let Some(start) = self.data_start(data) else {
                    return;
                };
                let len = self.num(len) as i32;
                for i in 0..len.max(0) as usize {
                    let Some(&b) = self.payload.get(start + i) else {
                        self.unsupported.set(true);
                        return;
                    };
                    if i > 0 && *spaced {
                        out.push(b' ');
                    }
                    hex2(b, out);
                }
            }
            Expr::IntArray {
                data,
                count,
                el_size,
            } => {
                let Some(mut at) = self.data_start(data) else {
                    return;
                };
                let len = self.num(count) as i32;
                let mut es = self.num(el_size) as i32 as i64;
                out.push(b'{');
                for i in 0..len.max(0) {
                    if i > 0 {
                        out.push(b',');
                    }
                    if !matches!(es, 1 | 2 | 4 | 8) {
                        // libtraceevent prints "BAD SIZE" and goes on byte by byte.
                        self.unsupported.set(true);
                        es = 1;
                    }
                    let Some(b) = self.payload.get(at..at + es as usize) else {
                        self.unsupported.set(true);
                        break;
                    };
                    // Read in the host's byte order, as libtraceevent dereferences it.
                    let mut v = [0u8; 8];
                    let v = match es {
                        1 => b[0] as u64,
                        2 => u16::from_ne_bytes([b[0], b[1]]) as u64,
                        4 => u32::from_ne_bytes([b[0], b[1], b[2], b[3]]) as u64,
                        _ => {
                            v.copy_from_slice(b);
                            u64::from_ne_bytes(v)
                        }
                    };
                    out.extend_from_slice(b"0x");
                    cfmt::write_hex(v, out);
                    at += es as usize;
                }
                out.push(b'}');
            }
            Expr::GetStr(f) => {
                let (off, len) = self.dyn_loc(f);
                if len == 0 {
                    return;
                }
                conv.write_str(self.payload.get(off..).unwrap_or_default(), star, out);
            }
            Expr::Bitmask(f) => {
                let (off, len) = self.dyn_loc(f);
                let data = self.payload.get(off..off + len).unwrap_or_default();
                let mut tmp = Vec::with_capacity(len * 2 + len / 4 + 1);
                bitmask_text(data, self.endian, &mut tmp);
                conv.write_str(&tmp, star, out);
            }
            Expr::Cpumask(f) => {
                let (off, len) = self.dyn_loc(f);
                let data = self.payload.get(off..off + len).unwrap_or_default();
                let mut tmp = Vec::new();
                cpumask_text(data, self.endian, &mut tmp);
                conv.write_str(&tmp, star, out);
            }
            Expr::Cond(c, a, b) => {
                let pick = if self.num(c) != 0 { a } else { b };
                self.print_str(pick, conv, star, out);
            }
            Expr::DynArray(_) => {
                self.unsupported.set(true);
            }
            Expr::Call(func, args) => self.call_text(*func, args, out),
        }
    }

    /// Where in the record a pointer argument points: a dynamic array's data (libtraceevent
    /// passes its address), through casts. Anything else would be a kernel address to
    /// trace-cmd's plugin: not evaluated.
    fn pointer(&self, e: &Expr) -> Option<usize> {
        let mut e = e;
        while let Expr::Cast(_, inner) = e {
            e = inner;
        }
        match e {
            Expr::DynArray(f) => Some(self.dyn_loc(f).0),
            _ => {
                self.unsupported.set(true);
                None
            }
        }
    }

    /// A helper function's return value (`process_defined_func` as a number).
    fn call_value(&self, func: PrintFunc, args: &[Expr]) -> u64 {
        match func {
            PrintFunc::JiffiesToMsecs => self.num(&args[0]),
            PrintFunc::IsWritablePte => self.num(&args[0]) & 2,
            PrintFunc::Le16ToCpup => match self.pointer(&args[0]) {
                Some(at) => match self.payload.get(at..at + 2) {
                    Some(b) => u16::from_le_bytes([b[0], b[1]]) as u64,
                    None => self.fail(),
                },
                None => 0,
            },
            PrintFunc::Jbd2DevToName | PrintFunc::XenHypercallName | PrintFunc::ScsiParseCdb => 0,
        }
    }

    /// What a helper function prints (as a `%s` argument).
    fn call_text(&self, func: PrintFunc, args: &[Expr], out: &mut Vec<u8>) {
        match func {
            PrintFunc::JiffiesToMsecs => {
                let v = self.num(&args[0]) as i64;
                if v < 0 {
                    out.push(b'-');
                }
                cfmt::write_dec(v.unsigned_abs(), out);
            }
            PrintFunc::Jbd2DevToName => {
                let dev = self.num(&args[0]) as u32;
                cfmt::write_dec((dev >> 20) as u64, out);
                out.push(b':');
                cfmt::write_dec((dev & 0xf_ffff) as u64, out);
            }
            PrintFunc::XenHypercallName => {
                let op = self.num(&args[0]) as u32;
                out.extend_from_slice(print_funcs::xen_hypercall_name(op).as_bytes());
            }
            PrintFunc::ScsiParseCdb => {
                // The plugin reads the block through its address, and ends its text with a
                // NUL character: trace-cmd's line ends there.
                let Some(at) = self.pointer(&args[1]) else {
                    return;
                };
                let cdb = self.payload.get(at..).unwrap_or_default();
                if print_funcs::scsi_parse_cdb(cdb, out).is_none() {
                    self.unsupported.set(true);
                    return;
                }
                out.push(0);
            }
            PrintFunc::Le16ToCpup | PrintFunc::IsWritablePte => {
                self.call_value(func, args);
            }
        }
    }

    /// Where the data of `__print_hex` / `__print_array`'s first argument starts.
    fn data_start(&self, e: &Expr) -> Option<usize> {
        match e {
            Expr::DynArray(f) => Some(self.dyn_loc(f).0),
            Expr::Field(f) => Some(f.offset),
            _ => {
                self.unsupported.set(true);
                None
            }
        }
    }

    /// The field a `%pM` / `%pI4` / ... argument names, through casts.
    fn ptr_field<'e>(&self, a: Arg<'e>) -> Option<&'e Field> {
        let Arg::Expr(mut e) = a else {
            self.unsupported.set(true);
            return None;
        };
        while let Expr::Cast(_, inner) = e {
            e = inner;
        }
        match e {
            Expr::Field(f) => Some(f),
            _ => {
                self.unsupported.set(true);
                None
            }
        }
    }

    fn field_bytes(&self, f: &Field, want: usize) -> Option<&'a [u8]> {
        if f.size != want {
            return None;
        }
        self.payload.get(f.offset..f.offset + want)
    }

    fn print_ptr(&self, kind: PtrKind, a: Arg<'_>, plen: i64, out: &mut Vec<u8>) {
        if let Arg::BStr(s) = a {
            out.extend_from_slice(cfmt::until_nul(s));
            return;
        }
        match kind {
            PtrKind::Plain => {
                let v = self.arg_num(a);
                if v == 0 {
                    out.extend_from_slice(b"(nil)");
                } else {
                    out.extend_from_slice(b"0x");
                    cfmt::write_hex(v, out);
                }
            }
            PtrKind::Func { offset } => {
                let v = self.arg_num(a);
                match self.syms.funcs().find(v) {
                    Some((name, start)) => {
                        out.extend_from_slice(name);
                        if offset {
                            out.extend_from_slice(b"+0x");
                            cfmt::write_hex(v.wrapping_sub(start), out);
                        }
                    }
                    None => {
                        out.extend_from_slice(b"0x");
                        let v = if self.long_size == 4 {
                            v as u32 as u64
                        } else {
                            v
                        };
                        cfmt::write_hex(v, out);
                    }
                }
            }
            PtrKind::Mac { sep, reverse } => {
                let Some(f) = self.ptr_field(a) else { return };
                let Some(b) = self.field_bytes(f, 6) else {
                    out.extend_from_slice(b"INVALIDMAC");
                    return;
                };
                for i in 0..6 {
                    if i > 0 && sep != 0 {
                        out.push(sep);
                    }
                    hex2(if reverse { b[5 - i] } else { b[i] }, out);
                }
            }
            PtrKind::Ip4 { zeros, reverse } => {
                let Some(f) = self.ptr_field(a) else { return };
                let Some(b) = self.field_bytes(f, 4) else {
                    out.extend_from_slice(b"INVALIDIPv4");
                    return;
                };
                ip4(b, zeros, reverse, out);
            }
            PtrKind::Ip6 { colons, compressed } => {
                let Some(f) = self.ptr_field(a) else { return };
                let Some(b) = self.field_bytes(f, 16) else {
                    out.extend_from_slice(b"INVALIDIPv6");
                    return;
                };
                if compressed {
                    ip6_compressed(b, out);
                } else {
                    ip6(b, colons, out);
                }
            }
            PtrKind::IpSock {
                zeros,
                port,
                compressed,
                reverse,
            } => self.print_sockaddr(a, zeros, port, compressed, reverse, out),
            PtrKind::Uuid { upper, guid } => {
                let Some(f) = self.ptr_field(a) else { return };
                let Some(b) = self.field_bytes(f, 16) else {
                    out.extend_from_slice(b"INVALIDUUID");
                    return;
                };
                const GUID: [usize; 16] = [3, 2, 1, 0, 5, 4, 7, 6, 8, 9, 10, 11, 12, 13, 14, 15];
                for i in 0..16 {
                    let byte = b[if guid { GUID[i] } else { i }];
                    let hex: &[u8; 16] = if upper {
                        b"0123456789ABCDEF"
                    } else {
                        b"0123456789abcdef"
                    };
                    out.push(hex[(byte >> 4) as usize]);
                    out.push(hex[(byte & 15) as usize]);
                    if matches!(i, 3 | 5 | 7 | 9) {
                        out.push(b'-');
                    }
                }
            }
            PtrKind::Hex { sep } => {
                let f = match a {
                    Arg::Expr(Expr::DynArray(f)) => f,
                    Arg::Expr(Expr::Call(func, args)) => {
                        self.call_text(*func, args, out);
                        return;
                    }
                    // libtraceevent prints the kind of argument it got (its enum's number).
                    Arg::Expr(e) => {
                        out.extend_from_slice(b"ARG TYPE NOT FIELD BUT ");
                        cfmt::write_dec(arg_type(e), out);
                        return;
                    }
                    _ => {
                        self.unsupported.set(true);
                        return;
                    }
                };
                let (off, len) = self.dyn_loc(f);
                let n = (len as i64).min(plen);
                for i in 0..n.max(0) as usize {
                    if i > 0 {
                        if let Some(s) = sep {
                            out.push(s);
                        }
                    }
                    hex2(self.payload.get(off + i).copied().unwrap_or(0), out);
                }
            }
        }
    }

    fn print_sockaddr(
        &self,
        a: Arg<'_>,
        zeros: bool,
        port: bool,
        compressed: bool,
        reverse: bool,
        out: &mut Vec<u8>,
    ) {
        let (off, len) = match a {
            Arg::Expr(Expr::DynArray(f)) => self.dyn_loc(f),
            _ => match self.ptr_field(a) {
                Some(f) => (f.offset, f.size),
                None => return,
            },
        };
        let Some(sa) = self.payload.get(off..off + len) else {
            self.unsupported.set(true);
            return;
        };
        // sockaddr's family is in the host's byte order.
        let family = sa.get(..2).map(|b| u16::from_ne_bytes([b[0], b[1]]));
        match family {
            Some(2) => {
                if len < 16 {
                    out.extend_from_slice(b"INVALIDIPv4");
                    return;
                }
                ip4(&sa[4..8], zeros, reverse, out);
                if port {
                    out.push(b':');
                    cfmt::write_dec(u16::from_be_bytes([sa[2], sa[3]]) as u64, out);
                }
            }
            Some(10) => {
                if len < 28 {
                    out.extend_from_slice(b"INVALIDIPv6");
                    return;
                }
                if port {
                    out.push(b'[');
                }
                if compressed {
                    ip6_compressed(&sa[8..24], out);
                } else {
                    ip6(&sa[8..24], !zeros, out);
                }
                if port {
                    out.extend_from_slice(b"]:");
                    cfmt::write_dec(u16::from_be_bytes([sa[2], sa[3]]) as u64, out);
                }
            }
            _ => {}
        }
    }
}

/// libtraceevent's `enum tep_print_arg_type` number of what an expression was parsed from.
fn arg_type(e: &Expr) -> u64 {
    match e {
        Expr::Atom { .. } | Expr::Str(_) | Expr::Num(_) => 1,
        Expr::Field(_) => 2,
        Expr::Flags { .. } => 3,
        Expr::Symbolic { .. } => 4,
        Expr::Hex { spaced: true, .. } => 5,
        Expr::Hex { spaced: false, .. } => 15,
        Expr::IntArray { .. } => 6,
        Expr::Cast(..) => 7,
        Expr::GetStr(_) => 8,
        Expr::DynArray(_) => 10,
        Expr::Unary(..)
        | Expr::Binary(..)
        | Expr::Cond(..)
        | Expr::Index(..)
        | Expr::Load { .. } => 11,
        Expr::Call(..) => 12,
        Expr::Bitmask(_) => 13,
        Expr::DynArrayLen(_) => 14,
        Expr::Cpumask(_) => 16,
    }
}

fn signed_text(v: i64, buf: &mut [u8; 24]) -> usize {
    let mut tmp = Vec::with_capacity(24);
    if v < 0 {
        tmp.push(b'-');
    }
    cfmt::write_dec(v.unsigned_abs(), &mut tmp);
    buf[..tmp.len()].copy_from_slice(&tmp);
    tmp.len()
}

#[inline]
fn hex2(b: u8, out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push(HEX[(b >> 4) as usize]);
    out.push(HEX[(b & 15) as usize]);
}

fn ip4(b: &[u8], zeros: bool, reverse: bool, out: &mut Vec<u8>) {
    for i in 0..4 {
        if i > 0 {
            out.push(b'.');
        }
        let v = if reverse { b[3 - i] } else { b[i] } as u64;
        cfmt::write_dec_padded(v, if zeros { 3 } else { 0 }, true, out);
    }
}

fn ip6(b: &[u8], colons: bool, out: &mut Vec<u8>) {
    for j in (0..16).step_by(2) {
        hex2(b[j], out);
        hex2(b[j + 1], out);
        if colons && j < 14 {
            out.push(b':');
        }
    }
}

/// `%pI6c`: the longest run of zero words compressed to `::`, IPv4-mapped and ISATAP
/// addresses ending in dotted quad (libtraceevent's `print_ip6c_addr`).
fn ip6_compressed(b: &[u8], out: &mut Vec<u8>) {
    let word = |i: usize| u16::from_be_bytes([b[2 * i], b[2 * i + 1]]);
    let w32 = |i: usize| u32::from_be_bytes([b[4 * i], b[4 * i + 1], b[4 * i + 2], b[4 * i + 3]]);
    let v4mapped = w32(0) == 0 && w32(1) == 0 && w32(2) == 0x0000_ffff;
    let isatap = (w32(2) | 0x0200_0000) == 0x0200_5efe;
    let use_v4 = v4mapped || isatap;
    let range = if use_v4 { 6 } else { 8 };
    let mut zerolen = [0u8; 8];
    for (i, z) in zerolen.iter_mut().enumerate().take(range) {
        *z = (i..range).take_while(|&j| word(j) == 0).count() as u8;
    }
    let (mut longest, mut colonpos) = (1u8, None);
    for (i, &z) in zerolen.iter().enumerate().take(range) {
        if z > longest {
            longest = z;
            colonpos = Some(i);
        }
    }
    let mut needcolon = false;
    let mut i = 0;
    while i < range {
        if Some(i) == colonpos {
            if needcolon || i == 0 {
                out.push(b':');
            }
            out.push(b':');
            needcolon = false;
            i += longest as usize;
            continue;
        }
        if needcolon {
            out.push(b':');
        }
        let w = word(i);
        let (hi, lo) = ((w >> 8) as u8, (w & 0xff) as u8);
        if hi != 0 {
            cfmt::write_hex(hi as u64, out);
            hex2(lo, out);
        } else {
            cfmt::write_hex(lo as u64, out);
        }
        needcolon = true;
        i += 1;
    }
    if use_v4 {
        if needcolon {
            out.push(b':');
        }
        ip4(&b[12..16], false, false, out);
    }
}

/// `__get_bitmask`: hex, most significant byte first, a comma every 32 bits.
fn bitmask_text(data: &[u8], endian: Endian, out: &mut Vec<u8>) {
    let size = data.len();
    let nr_bits = size * 8;
    let str_size = nr_bits.div_ceil(4) + nr_bits.saturating_sub(1) / 32;
    let mut s = vec![b'0'; str_size];
    let mut len = 0usize;
    let mut i = str_size as isize - 2;
    while i >= 0 {
        let index = if endian == Endian::Big {
            size - (len + 1)
        } else {
            len
        };
        let b = data[index];
        let iu = i as usize;
        s[iu] = b"0123456789abcdef"[(b >> 4) as usize];
        s[iu + 1] = b"0123456789abcdef"[(b & 15) as usize];
        len += 1;
        if len & 3 == 0 && i > 0 {
            i -= 1;
            s[i as usize] = b',';
        }
        i -= 2;
    }
    out.extend_from_slice(&s);
}

/// `__get_cpumask`: the set CPUs as ranges, `0-3,8`.
fn cpumask_text(data: &[u8], endian: Endian, out: &mut Vec<u8>) {
    let size = data.len();
    let bit = |n: usize| {
        let (i, b) = (n / 8, n % 8);
        let index = if endian == Endian::Big {
            size - (i + 1)
        } else {
            i
        };
        data[index] >> b & 1 == 1
    };
    let nbits = size * 8;
    let mut n = 0;
    let mut first = true;
    while n < nbits {
        if !bit(n) {
            n += 1;
            continue;
        }
        let start = n;
        while n < nbits && bit(n) {
            n += 1;
        }
        if !first {
            out.push(b',');
        }
        first = false;
        cfmt::write_dec(start as u64, out);
        if n - 1 > start {
            out.push(b'-');
            cfmt::write_dec((n - 1) as u64, out);
        }
    }
}
