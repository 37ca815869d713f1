//! A print fmt compiled once per event type into steps: literal text, plain integer
//! conversions of a number at a fixed place in the record, and the remaining pieces, which
//! [`Eval`] interprets. Most events of a large trace (system calls, IRQs, timers) print
//! only the first two kinds, so a line costs a few loads and digit conversions instead of a
//! walk over the expression tree per conversion.

use crate::bytes::Endian;
use crate::print_fmt::cfmt::{self, Column};
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
}

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
        let simple = steps.iter().all(|s| !matches!(s, Step::Piece(_)));
        Program {
            pieces,
            args,
            steps,
            simple,
        }
    }

    /// Whether [`Program::run_simple`] prints the whole message.
    #[inline]
    pub fn is_simple(&self) -> bool {
        self.simple
    }

    /// Prints a program of literals and integers only.
    #[inline]
    pub fn run_simple(&self, payload: &[u8], endian: Endian, out: &mut Vec<u8>) {
        for s in &self.steps {
            match *s {
                Step::Lit(ref c) => c.push(out),
                Step::Int {
                    off,
                    size,
                    mask,
                    conv,
                } => int(payload, endian, off, size, mask, conv, out),
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
                    off,
                    size,
                    mask,
                    conv,
                } => int(ev.payload, ev.endian, off, size, mask, conv, out),
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
    let rest = payload.get(off..).unwrap_or_default();
    let v = match size {
        1 => rest.first().map_or(0, |&b| b as u64),
        2 => rest.first_chunk().map_or(0, |b| endian.u16(*b) as u64),
        4 => rest.first_chunk().map_or(0, |b| endian.u32(*b) as u64),
        _ => rest.first_chunk().map_or(0, |b| endian.u64(*b)),
    } & mask;
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
