//! A print fmt compiled once per event type into steps: literal text, plain integer
//! conversions of a number at a fixed place in the record, and the remaining pieces, which
//! [`Eval`] interprets. Most events of a large trace (system calls, IRQs, timers) print
//! only the first two kinds, so a line costs a few loads and digit conversions instead of a
//! walk over the expression tree per conversion. A literal before an integer is one step
//! with it, and such a message can be written through a [`Cursor`] with its line.

use crate::bytes::Endian;
use crate::print_fmt::cfmt::{self, Column, Cursor};
use crate::print_fmt::eval::{cast_mask, Eval};
use crate::print_fmt::parse::{Expr, Piece};

/// How a plain integer conversion prints its (already masked) value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum IntConv {
    /// `%x`, `%lx`, ...
    Hex,
    /// `%u`, `%lu`, ...
    Unsigned,
    /// `%d`, `%i`, ...: the value is sign-extended from its top `64 - shift` bits.
    Signed { shift: u32 },
}

#[derive(Debug, Clone)]
enum Step {
    Lit(Column),
    /// A conversion without flags, width or precision of the `size` bytes at `off` (read
    /// as 0 when they do not fit the record, as libtraceevent reads them), masked by the
    /// casts around it and the conversion's length.
    Int {
        /// The literal text before the number (often empty).
        pre: Column,
        off: usize,
        size: u8,
        mask: u64,
        conv: IntConv,
    },
    /// Any other piece, by index.
    Piece(usize),
}

/// A print fmt's pieces and arguments, and the steps that print them.
#[derive(Debug)]
pub(super) struct Program {
    pub pieces: Vec<Piece>,
    pub args: Vec<Expr>,
    steps: Vec<Step>,
    /// Whether every step is a literal or an integer (no [`Eval`] needed, nothing can be
    /// unsupported).
    simple: bool,
    /// For a simple program, the longest message it can print.
    max_len: usize,
}

/// The most an integer step prints: a sign and twenty digits.
const INT_MAX_LEN: usize = 21;

/// Where a number argument is in the record, when it is a field or constant-index element
/// (through casts): offset, size, and the casts' mask.
fn fixed_place(e: &Expr) -> Option<(usize, usize, u64)> {
    match e {
        Expr::Field(f) => Some((f.offset, f.size, u64::MAX)),
        Expr::Load { offset, size } => Some((*offset, *size, u64::MAX)),
        Expr::Cast(ty, inner) => {
            let (off, size, mask) = fixed_place(inner)?;
            Some((off, size, mask & cast_mask(ty)))
        }
        _ => None,
    }
    .filter(|&(_, size, _)| matches!(size, 1 | 2 | 4 | 8))
}

impl Program {
    pub fn new(pieces: Vec<Piece>, args: Vec<Expr>) -> Program {
        let steps: Vec<Step> = pieces
            .iter()
            .enumerate()
            .map(|(i, p)| match p {
                Piece::Lit(s) => Step::Lit(Column::new(s)),
                Piece::Num {
                    conv,
                    arg,
                    star: None,
                } if conv.is_plain() => {
                    let place = args.get(*arg).and_then(fixed_place);
                    let bits = conv.bits();
                    let kind = match conv.conv {
                        b'x' => Some(IntConv::Hex),
                        b'u' => Some(IntConv::Unsigned),
                        b'd' | b'i' => Some(IntConv::Signed { shift: 64 - bits }),
                        _ => None,
                    };
                    match (place, kind) {
                        (Some((off, size, mask)), Some(conv)) => Step::Int {
                            pre: Column::new(b""),
                            off,
                            size: size as u8,
                            mask: mask & (u64::MAX >> (64 - bits)),
                            conv,
                        },
                        _ => Step::Piece(i),
                    }
                }
                _ => Step::Piece(i),
            })
            .collect();
        // A short literal goes with the integer after it.
        let mut fused: Vec<Step> = Vec::with_capacity(steps.len());
        for step in steps {
            if let (Some(Step::Lit(lit @ Column::Short(..))), Step::Int { pre, .. }) =
                (fused.last(), &step)
            {
                if pre.is_empty() {
                    let lit = lit.clone();
                    let last = fused.len() - 1;
                    fused[last] = step;
                    if let Step::Int { pre, .. } = &mut fused[last] {
                        *pre = lit;
                    }
                    continue;
                }
            }
            fused.push(step);
        }
        let steps = fused;
        let simple = steps.iter().all(|s| !matches!(s, Step::Piece(_)));
        let max_len = steps
            .iter()
            .map(|s| match s {
                Step::Lit(c) => c.len(),
                Step::Int { pre, .. } => pre.len() + INT_MAX_LEN,
                Step::Piece(_) => 0,
            })
            .sum();
        Program {
            pieces,
            args,
            steps,
            simple,
            max_len,
        }
    }

    /// The longest message of a simple program: what [`Program::run_cursor`] may write.
    #[inline]
    pub fn simple_max_len(&self) -> Option<usize> {
        self.simple.then_some(self.max_len)
    }

    /// Prints a simple program into a line's cursor, which has room for
    /// [`Program::simple_max_len`] more bytes.
    #[inline]
    pub fn run_cursor(&self, payload: &[u8], endian: Endian, out: &mut Cursor) {
        for s in &self.steps {
            match *s {
                Step::Lit(ref c) => out.column(c),
                Step::Int {
                    ref pre,
                    off,
                    size,
                    mask,
                    conv,
                } => {
                    out.column(pre);
                    match conv {
                        IntConv::Hex => out.hex(load(payload, endian, off, size) & mask),
                        IntConv::Unsigned => out.dec(load(payload, endian, off, size) & mask),
                        IntConv::Signed { shift } => {
                            let v = load(payload, endian, off, size) & mask;
                            let s = ((v << shift) as i64) >> shift;
                            if s < 0 {
                                out.byte(b'-');
                            }
                            out.dec(s.unsigned_abs());
                        }
                    }
                }
                Step::Piece(_) => {}
            }
        }
    }

    /// Prints the message; false when the evaluation met something it does not print
    /// faithfully.
    #[inline]
    pub fn print(&self, ev: &Eval, out: &mut Vec<u8>) -> bool {
        if self.simple {
            self.run_simple(ev.payload, ev.endian, out);
            true
        } else {
            self.run(ev, out);
            !ev.unsupported.get()
        }
    }

    /// Prints a program of literals and integers only.
    #[inline]
    pub fn run_simple(&self, payload: &[u8], endian: Endian, out: &mut Vec<u8>) {
        for s in &self.steps {
            match *s {
                Step::Lit(ref c) => c.push(out),
                Step::Int {
                    ref pre,
                    off,
                    size,
                    mask,
                    conv,
                } => {
                    pre.push(out);
                    int(payload, endian, off, size, mask, conv, out)
                }
                Step::Piece(_) => {}
            }
        }
    }

    /// Prints the message; the caller checks `ev.unsupported` afterwards.
    pub fn run(&self, ev: &Eval, out: &mut Vec<u8>) {
        for s in &self.steps {
            match *s {
                Step::Lit(ref c) => c.push(out),
                Step::Int {
                    ref pre,
                    off,
                    size,
                    mask,
                    conv,
                } => {
                    pre.push(out);
                    int(ev.payload, ev.endian, off, size, mask, conv, out)
                }
                Step::Piece(i) => ev.print(&self.pieces[i..=i], self.args.as_slice(), out),
            }
        }
    }
}

#[inline(always)]
fn int(
    payload: &[u8],
    endian: Endian,
    off: usize,
    size: u8,
    mask: u64,
    conv: IntConv,
    out: &mut Vec<u8>,
) {
    let v = load(payload, endian, off, size) & mask;
    match conv {
        IntConv::Hex => cfmt::write_hex(v, out),
        IntConv::Unsigned => cfmt::write_dec(v, out),
        IntConv::Signed { shift } => {
            let s = ((v << shift) as i64) >> shift;
            if s < 0 {
                out.push(b'-');
            }
            cfmt::write_dec(s.unsigned_abs(), out);
        }
    }
}

/// The `size` bytes at `off`, 0 when they do not fit the record.
#[inline(always)]
fn load(payload: &[u8], endian: Endian, off: usize, size: u8) -> u64 {
    let rest = payload.get(off..).unwrap_or_default();
    match size {
        1 => rest.first().map_or(0, |&b| b as u64),
        2 => rest.first_chunk().map_or(0, |b| endian.u16(*b) as u64),
        4 => rest.first_chunk().map_or(0, |b| endian.u32(*b) as u64),
        _ => rest.first_chunk().map_or(0, |b| endian.u64(*b)),
    }
}
