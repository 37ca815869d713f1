//! Parsing an event's `print fmt:` into a format string and argument expressions, and the
//! format string into pieces (literal text and conversions bound to arguments).
//!
//! The grammar is the C subset kernel `TP_printk` arguments use, read as libtraceevent reads
//! it: `REC->field`, numbers, strings, character constants, identifiers (resolved as kernel
//! symbols), casts, unary and binary operators with C precedence, `?:`, `[]`, `sizeof`, and
//! the tracing helpers (`__print_flags`, `__print_symbolic`, `__get_str`, ...). Anything else
//! is a parse error: the caller then prints the event's raw fields instead of guessing.

use crate::event_format::{EventFormat, Field, FieldKind};
use crate::print_fmt::cfmt::Conv;
use crate::print_fmt::ops::{self, c_strtoull, PErr, PResult};
use crate::print_fmt::print_funcs::PrintFunc;

#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    /// A number or identifier as written, with its value (`strtoull`, else the kernel symbol
    /// of that name, else 0). The text matters for `__print_flags` values and `%s`.
    Atom {
        text: Box<str>,
        value: u64,
    },
    /// A character constant or a value computed while parsing.
    Num(u64),
    /// A string literal (escapes kept as written).
    Str(Box<str>),
    Field(Box<Field>),
    /// `!`, `~`, `-`, `+` applied to an operand.
    Unary(u8, Box<Expr>),
    Binary(BinOp, Box<Expr>, Box<Expr>),
    Cond(Box<Expr>, Box<Expr>, Box<Expr>),
    /// `(type)expr`, with the type as libtraceevent spells it (`struct page *`).
    Cast(Box<str>, Box<Expr>),
    Index(Box<Expr>, Box<Expr>),
    /// An element of an array field at a constant index (`REC->args[2]`), resolved while
    /// parsing to where it is: the common case of `Index`, read without evaluating.
    Load {
        offset: usize,
        size: usize,
    },
    Flags {
        val: Box<Expr>,
        delim: Box<str>,
        items: Vec<(i64, Box<str>)>,
    },
    Symbolic {
        val: Box<Expr>,
        items: Vec<(i64, Box<str>)>,
    },
    Hex {
        data: Box<Expr>,
        len: Box<Expr>,
        spaced: bool,
    },
    IntArray {
        data: Box<Expr>,
        count: Box<Expr>,
        el_size: Box<Expr>,
    },
    GetStr(Box<Field>),
    Bitmask(Box<Field>),
    Cpumask(Box<Field>),
    DynArray(Box<Field>),
    DynArrayLen(Box<Field>),
    /// A helper function a trace-cmd plugin defines (`jiffies_to_msecs(REC->wait)`).
    Call(PrintFunc, Vec<Expr>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinOp {
    Mul,
    Div,
    Rem,
    Add,
    Sub,
    Shl,
    Shr,
    Lt,
    Gt,
    Le,
    Ge,
    Eq,
    Ne,
    And,
    Xor,
    Or,
    LAnd,
    LOr,
}

impl BinOp {
    /// The binary operation libtraceevent evaluates for `op` (`^` included: it prints 0).
    pub(super) fn from_op(op: &str) -> Option<BinOp> {
        Some(match op {
            "*" => BinOp::Mul,
            "/" => BinOp::Div,
            "%" => BinOp::Rem,
            "+" => BinOp::Add,
            "-" => BinOp::Sub,
            "<<" => BinOp::Shl,
            ">>" => BinOp::Shr,
            "<" => BinOp::Lt,
            ">" => BinOp::Gt,
            "<=" => BinOp::Le,
            ">=" => BinOp::Ge,
            "==" => BinOp::Eq,
            "!=" => BinOp::Ne,
            "&" => BinOp::And,
            "^" => BinOp::Xor,
            "|" => BinOp::Or,
            "&&" => BinOp::LAnd,
            "||" => BinOp::LOr,
            _ => return None,
        })
    }
}

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Tok {
    Item(String),
    Str(String),
    /// A character constant as written between its quotes (libtraceevent reads it as an atom).
    Char(String),
    Delim(u8),
    Op(String),
    End,
}

pub(super) struct Lexer<'a> {
    s: &'a [u8],
    pub(super) i: usize,
    /// Where the token last read starts.
    start: usize,
}

impl Lexer<'_> {
    fn next(&mut self) -> Result<Tok, String> {
        let s = self.s;
        while self.i < s.len() && s[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
        let Some(&c) = s.get(self.i) else {
            return Ok(Tok::End);
        };
        let start = self.i;
        self.start = start;
        self.i += 1;
        if c.is_ascii_alphanumeric() || c == b'_' {
            while self.i < s.len() && (s[self.i].is_ascii_alphanumeric() || s[self.i] == b'_') {
                self.i += 1;
            }
            return Ok(Tok::Item(lossy(&s[start..self.i])));
        }
        match c {
            b'"' => {
                let mut text = Vec::new();
                loop {
                    let body_start = self.i;
                    loop {
                        match s.get(self.i) {
                            None => return Err("unterminated string".into()),
                            Some(b'\\') => self.i += 2,
                            Some(b'"') => break,
                            Some(_) => self.i += 1,
                        }
                    }
                    let end = self.i.min(s.len());
                    text.extend_from_slice(&s[body_start.min(end)..end]);
                    self.i += 1;
                    // Adjacent string literals are one string.
                    let mut j = self.i;
                    while j < s.len() && s[j].is_ascii_whitespace() {
                        j += 1;
                    }
                    if s.get(j) == Some(&b'"') {
                        self.i = j + 1;
                    } else {
                        break;
                    }
                }
                Ok(Tok::Str(lossy(&text)))
            }
            b'\'' => {
                let ch = *s.get(self.i).ok_or("unterminated character")?;
                let body = self.i;
                let mut j = self.i + 1;
                if ch == b'\\' {
                    j += 1;
                }
                while j < s.len() && s[j] != b'\'' {
                    j += 1;
                }
                self.i = j + 1;
                Ok(Tok::Char(lossy(&s[body..j.min(s.len())])))
            }
            b'(' | b')' | b',' => Ok(Tok::Delim(c)),
            _ => {
                let two = s.get(start..start + 2).unwrap_or_default();
                let len = match two {
                    b"->" | b"++" | b"--" | b"||" | b"&&" | b"==" | b"!=" | b"<=" | b">=" => 2,
                    b"<<" | b">>" => 2,
                    _ => 1,
                };
                self.i = start + len;
                if !c.is_ascii_graphic() {
                    return Err(format!("unexpected byte 0x{c:02x}"));
                }
                Ok(Tok::Op(lossy(&s[start..self.i])))
            }
        }
    }
}

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// What parsing needs from outside: the trace's `long` size and kernel symbol addresses.
pub struct Ctx<'c> {
    pub long_size: usize,
    pub symbol: &'c mut dyn FnMut(&[u8]) -> u64,
}

pub(super) struct Parser<'a, 'c, 'x> {
    pub(super) lex: Lexer<'a>,
    pub(super) tok: Tok,
    /// Where `tok` starts in the print fmt.
    pub(super) tok_at: usize,
    /// Levels of recursion the parse is in, and the most allowed (see [`ops::MAX_DEPTH`]).
    pub(super) depth: usize,
    pub(super) limit: usize,
    ev: &'a EventFormat,
    ctx: &'x mut Ctx<'c>,
}

/// A parsed print fmt: the format string (escapes as written) and its arguments.
#[derive(Debug, Clone, PartialEq)]
pub struct PrintFmt {
    pub format: Vec<u8>,
    pub args: Vec<Expr>,
}

/// Why a print fmt is not evaluated.
#[derive(Debug, Clone, PartialEq)]
pub enum FmtError {
    /// Something libtraceevent does not read either, or kstate does not evaluate.
    Unsupported(String),
    /// The format nests deeper than [`ops::MAX_DEPTH`]: refused before it can exhaust the
    /// stack. `at` is the byte of the print fmt where it went too deep.
    TooDeep { at: usize },
}

impl std::fmt::Display for FmtError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FmtError::Unsupported(s) => f.write_str(s),
            FmtError::TooDeep { at } => write!(
                f,
                "its print fmt nests deeper than {} levels (at byte {at} of the print fmt)",
                ops::MAX_DEPTH
            ),
        }
    }
}

impl From<PErr> for FmtError {
    fn from(e: PErr) -> FmtError {
        match e {
            PErr::Bad(s) => FmtError::Unsupported(s),
            PErr::Deep(at) => FmtError::TooDeep { at },
        }
    }
}

/// Parses `ev.print_fmt`.
pub fn parse_print_fmt(ev: &EventFormat, ctx: &mut Ctx<'_>) -> Result<PrintFmt, FmtError> {
    parse_print_fmt_within(ev, ctx, ops::MAX_DEPTH)
}

/// Parses `ev.print_fmt`, refusing it when it nests deeper than `limit` levels (tests find
/// how deep formats nest with it).
pub fn parse_print_fmt_within(
    ev: &EventFormat,
    ctx: &mut Ctx<'_>,
    limit: usize,
) -> Result<PrintFmt, FmtError> {
    let mut p = Parser {
        lex: Lexer {
            s: ev.print_fmt.as_bytes(),
            i: 0,
            start: 0,
        },
        tok: Tok::End,
        tok_at: 0,
        depth: 0,
        limit,
        ev,
        ctx,
    };
    p.advance()?;
    let Tok::Str(format) = p.tok.clone() else {
        return Err(FmtError::Unsupported(
            "print fmt does not start with a string".into(),
        ));
    };
    p.advance()?;
    let mut args = Vec::new();
    while p.tok == Tok::Delim(b',') {
        p.advance()?;
        args.push(p.full_expr(true)?);
    }
    if p.tok != Tok::End {
        return Err(FmtError::Unsupported(format!(
            "unexpected {:?} after the arguments",
            p.tok
        )));
    }
    Ok(PrintFmt {
        format: format.into_bytes(),
        args,
    })
}

impl Parser<'_, '_, '_> {
    pub(super) fn advance(&mut self) -> PResult<()> {
        self.tok = self.lex.next()?;
        self.tok_at = self.lex.start;
        Ok(())
    }

    pub(super) fn expect_delim(&mut self, d: u8) -> PResult<()> {
        if self.tok != Tok::Delim(d) {
            return Err(PErr::Bad(format!(
                "expected '{}', found {:?}",
                d as char, self.tok
            )));
        }
        self.advance()
    }

    fn expect_op(&mut self, op: &str) -> PResult<()> {
        if !matches!(&self.tok, Tok::Op(o) if o == op) {
            return Err(PErr::Bad(format!("expected '{op}', found {:?}", self.tok)));
        }
        self.advance()
    }

    fn item(&mut self) -> PResult<String> {
        let Tok::Item(s) = self.tok.clone() else {
            return Err(PErr::Bad(format!("expected a name, found {:?}", self.tok)));
        };
        self.advance()?;
        Ok(s)
    }

    pub(super) fn field(&self, name: &str) -> Result<Box<Field>, String> {
        // libtraceevent looks among the common fields first.
        self.ev
            .common
            .iter()
            .chain(self.ev.fields.iter())
            .find(|f| f.name == name)
            .map(|f| Box::new(f.clone()))
            .ok_or_else(|| format!("no field {name:?}"))
    }

    fn own_field(&self, name: &str) -> Result<Box<Field>, String> {
        self.ev
            .fields
            .iter()
            .find(|f| f.name == name)
            .map(|f| Box::new(f.clone()))
            .ok_or_else(|| format!("no field {name:?}"))
    }

    /// `->field` after `REC`.
    pub(super) fn rec_field(&mut self) -> PResult<Box<Field>> {
        self.expect_op("->")?;
        let name = self.item()?;
        Ok(self.field(&name)?)
    }

    /// An atom's value as libtraceevent evaluates it: `strtoull`, else the kernel symbol
    /// of that name, else 0.
    pub(super) fn atom(&mut self, text: String) -> Expr {
        let mut value = c_strtoull(&text);
        if value == 0 && !text.as_bytes().first().is_some_and(u8::is_ascii_digit) {
            value = (self.ctx.symbol)(text.as_bytes());
        }
        Expr::Atom {
            text: text.into(),
            value,
        }
    }

    /// `NAME(` has been read.
    pub(super) fn function(&mut self, name: &str) -> PResult<Expr> {
        let e = match name {
            "__print_flags" | "__print_flags_u64" => {
                let val = self.full_expr(false)?;
                self.expect_delim(b',')?;
                let delim = match self.tok.clone() {
                    Tok::Str(s) => {
                        self.advance()?;
                        s
                    }
                    Tok::Item(s) => {
                        self.advance()?;
                        s
                    }
                    _ => String::new(),
                };
                self.expect_delim(b',')?;
                let items = self.symbol_list()?;
                Expr::Flags {
                    val: Box::new(val),
                    delim: delim.into(),
                    items,
                }
            }
            "__print_symbolic" | "__print_symbolic_u64" => {
                let val = self.full_expr(false)?;
                self.expect_delim(b',')?;
                let items = self.symbol_list()?;
                Expr::Symbolic {
                    val: Box::new(val),
                    items,
                }
            }
            "__print_hex" | "__print_hex_str" => {
                let data = self.full_expr(true)?;
                self.expect_delim(b',')?;
                let len = self.full_expr(true)?;
                self.expect_delim(b')')?;
                return Ok(Expr::Hex {
                    data: Box::new(data),
                    len: Box::new(len),
                    spaced: name == "__print_hex",
                });
            }
            "__print_array" => {
                let data = self.full_expr(true)?;
                self.expect_delim(b',')?;
                let count = self.full_expr(true)?;
                self.expect_delim(b',')?;
                let el_size = self.full_expr(true)?;
                self.expect_delim(b')')?;
                return Ok(Expr::IntArray {
                    data: Box::new(data),
                    count: Box::new(count),
                    el_size: Box::new(el_size),
                });
            }
            "__get_str" | "__get_rel_str" | "__get_bitmask" | "__get_rel_bitmask"
            | "__get_cpumask" | "__get_rel_cpumask" => {
                let f = self.item()?;
                let f = self.field(&f)?;
                self.expect_delim(b')')?;
                return Ok(match name {
                    "__get_str" | "__get_rel_str" => Expr::GetStr(f),
                    "__get_bitmask" | "__get_rel_bitmask" => Expr::Bitmask(f),
                    _ => Expr::Cpumask(f),
                });
            }
            "__get_dynamic_array"
            | "__get_rel_dynamic_array"
            | "__get_sockaddr"
            | "__get_sockaddr_rel"
            | "__get_dynamic_array_len"
            | "__get_rel_dynamic_array_len" => {
                let f = self.item()?;
                let f = self.own_field(&f)?;
                if !matches!(f.kind, FieldKind::Dynamic { .. }) {
                    return Err(format!("{name}({}) of a field that is not dynamic", f.name).into());
                }
                self.expect_delim(b')')?;
                return Ok(if name.ends_with("_len") {
                    Expr::DynArrayLen(f)
                } else {
                    Expr::DynArray(f)
                });
            }
            "__builtin_expect" => {
                let e = self.full_expr(true)?;
                self.expect_delim(b',')?;
                self.full_expr(true)?;
                self.expect_delim(b')')?;
                return Ok(e);
            }
            "sizeof" => return self.sizeof(),
            _ => {
                let Some((func, n)) = PrintFunc::named(name) else {
                    return Err(format!("function {name}() is not evaluated").into());
                };
                // libtraceevent's process_func_handler: each argument one `process_arg`,
                // then ',' or, after the last, ')'.
                let mut args = Vec::with_capacity(n);
                for i in 0..n {
                    args.push(self.one_arg()?);
                    self.expect_delim(if i + 1 < n { b',' } else { b')' })?;
                }
                return Ok(Expr::Call(func, args));
            }
        };
        self.expect_delim(b')')?;
        Ok(e)
    }

    /// `{ value, "name" }, ...` of `__print_flags` / `__print_symbolic`; the closing `)` is
    /// left for the caller.
    fn symbol_list(&mut self) -> PResult<Vec<(i64, Box<str>)>> {
        let mut items = Vec::new();
        loop {
            self.expect_op("{")?;
            let v = self.full_expr(true)?;
            self.expect_delim(b',')?;
            // Usually a string; libtraceevent takes any expression's text (`((void *)0)`
            // names the terminating entry "0").
            let name = flag_text(&self.one_arg()?)?;
            self.expect_op("}")?;
            items.push((flag_value(&v)?, name));
            if self.tok != Tok::Delim(b',') {
                break;
            }
            self.advance()?;
        }
        Ok(items)
    }

    fn sizeof(&mut self) -> PResult<Expr> {
        let mut words = Vec::new();
        if matches!(&self.tok, Tok::Item(r) if r == "REC") {
            self.advance()?;
            self.expect_op("->")?;
            let name = self.item()?;
            let f = self.field(&name)?;
            if !matches!(f.kind, FieldKind::Int) {
                return Err("sizeof of an array field".into());
            }
            self.expect_delim(b')')?;
            return Ok(Expr::Num(f.size as u64));
        }
        while let Tok::Item(w) = &self.tok {
            words.push(w.clone());
            self.advance()?;
        }
        self.expect_delim(b')')?;
        let long = self.ctx.long_size as u64;
        let size = match words.join(" ").as_str() {
            "int" | "unsigned" | "unsigned int" | "u32" | "__u32" | "s32" | "__s32" => 4,
            "long" | "unsigned long" => long,
            "long long" | "unsigned long long" | "u64" | "__u64" | "s64" | "__s64" => 8,
            "u16" | "__u16" | "s16" | "__s16" => 2,
            "u8" | "__u8" | "s8" => 1,
            other => return Err(format!("sizeof({other}) is not evaluated").into()),
        };
        Ok(Expr::Num(size))
    }
}

/// C's `strtoull(s, NULL, 0)`: a decimal, `0x` hex or `0` octal prefix of `s`.
pub fn strtoull(s: &[u8]) -> u64 {
    let (radix, digits) = match s {
        [b'0', b'x' | b'X', rest @ ..] if rest.first().is_some_and(u8::is_ascii_hexdigit) => {
            (16, rest)
        }
        [b'0', rest @ ..] => (8, rest),
        _ => (10, s),
    };
    let mut v: u64 = 0;
    for &c in digits {
        let d = match c {
            b'0'..=b'9' => (c - b'0') as u32,
            b'a'..=b'f' => (c - b'a' + 10) as u32,
            b'A'..=b'F' => (c - b'A' + 10) as u32,
            _ => break,
        };
        if d >= radix {
            break;
        }
        v = match v
            .checked_mul(radix as u64)
            .and_then(|v| v.checked_add(d as u64))
        {
            Some(v) => v,
            None => return u64::MAX,
        };
    }
    v
}

/// The value of a `__print_flags` / `__print_symbolic` entry as libtraceevent computes it:
/// the entry's text (an atom as written, an expression evaluated to a signed number) is read
/// with `strtoull` when it starts with a digit, else looked up among the softirq and hrtimer
/// names it knows, else -1. So negative values all read as -1.
fn flag_value(e: &Expr) -> Result<i64, String> {
    let text = flag_text(e)?;
    let b = text.as_bytes();
    if b.first().is_some_and(u8::is_ascii_digit) {
        return Ok(strtoull(b) as i64);
    }
    const KNOWN: [(&str, i64); 12] = [
        ("HI_SOFTIRQ", 0),
        ("TIMER_SOFTIRQ", 1),
        ("NET_TX_SOFTIRQ", 2),
        ("NET_RX_SOFTIRQ", 3),
        ("BLOCK_SOFTIRQ", 4),
        ("IRQ_POLL_SOFTIRQ", 5),
        ("TASKLET_SOFTIRQ", 6),
        ("SCHED_SOFTIRQ", 7),
        ("HRTIMER_SOFTIRQ", 8),
        ("RCU_SOFTIRQ", 9),
        ("HRTIMER_NORESTART", 0),
        ("HRTIMER_RESTART", 1),
    ];
    Ok(KNOWN
        .iter()
        .find(|(n, _)| *n == &*text)
        .map_or(-1, |&(_, v)| v))
}

/// The text libtraceevent keeps for a flag entry's value or name (`arg_eval`): an atom or
/// string as written, a cast's operand, or an expression folded to a signed number.
fn flag_text(e: &Expr) -> Result<Box<str>, String> {
    Ok(match e {
        Expr::Atom { text, .. } => text.clone(),
        Expr::Str(s) => s.clone(),
        Expr::Cast(_, inner) => return flag_text(inner),
        other => const_eval(other)
            .ok_or("a flag entry that is not a constant")?
            .to_string()
            .into(),
    })
}

/// Signed constant folding of a flag value (libtraceevent's `arg_num_eval`): only the
/// operators it folds.
fn const_eval(e: &Expr) -> Option<i64> {
    Some(match e {
        Expr::Atom { text, .. } => strtoll(text.as_bytes()),
        Expr::Num(v) => *v as i64,
        Expr::Cast(_, inner) => const_eval(inner)?,
        Expr::Unary(b'-', r) => 0i64.wrapping_sub(const_eval(r)?),
        Expr::Unary(b'+', r) => const_eval(r)?,
        Expr::Unary(b'~', r) => !const_eval(r)?,
        Expr::Binary(op, l, r) => {
            let (l, r) = (const_eval(l)?, const_eval(r)?);
            match op {
                BinOp::Or => l | r,
                BinOp::LOr => (l != 0 || r != 0) as i64,
                BinOp::And => l & r,
                BinOp::LAnd => (l != 0 && r != 0) as i64,
                BinOp::Lt => (l < r) as i64,
                BinOp::Le => (l <= r) as i64,
                BinOp::Gt => (l > r) as i64,
                BinOp::Ge => (l >= r) as i64,
                BinOp::Shl => l.wrapping_shl(r as u32),
                BinOp::Shr => l.wrapping_shr(r as u32),
                BinOp::Eq => (l == r) as i64,
                BinOp::Ne => (l != r) as i64,
                BinOp::Add => l.wrapping_add(r),
                BinOp::Sub => l.wrapping_sub(r),
                _ => return None,
            }
        }
        _ => return None,
    })
}

fn strtoll(s: &[u8]) -> i64 {
    match s.strip_prefix(b"-") {
        Some(rest) => 0i64.wrapping_sub(strtoull(rest).min(i64::MAX as u64 + 1) as i64),
        None => strtoull(s).min(i64::MAX as u64) as i64,
    }
}

/// What a `%p` conversion's letters ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PtrKind {
    /// Plain `%p`: `0x...`, or `(nil)` for 0.
    Plain,
    /// `%pS`/`%pF` (with offset) and `%ps`/`%pf` (name only).
    Func { offset: bool },
    /// `%pM`, `%pMR` (reversed), `%pMF` (dashes), `%pm` (no separators).
    Mac { sep: u8, reverse: bool },
    /// `%pI4`/`%pi4` and their `h n l b` byte-order letters.
    Ip4 { zeros: bool, reverse: bool },
    /// `%pI6` (colons), `%pi6` (none), `%pI6c` (compressed).
    Ip6 { colons: bool, compressed: bool },
    /// `%pIS` / `%piS` with `p` (port) and `c` (compressed).
    IpSock {
        zeros: bool,
        port: bool,
        compressed: bool,
        reverse: bool,
    },
    /// `%pU` with `b B l L`.
    Uuid { upper: bool, guid: bool },
    /// `%ph` with `C D N` separators.
    Hex { sep: Option<u8> },
}

/// One piece of a parsed format string.
#[derive(Debug, Clone, PartialEq)]
pub enum Piece {
    Lit(Vec<u8>),
    /// A conversion of argument `arg`; `star` is the argument giving its `*` width.
    Num {
        conv: Conv,
        arg: usize,
        star: Option<usize>,
    },
    Str {
        conv: Conv,
        arg: usize,
        star: Option<usize>,
    },
    Ptr {
        kind: PtrKind,
        arg: usize,
        star: Option<usize>,
    },
}

/// Splits a format string into pieces, binding conversions to arguments `0..nargs` in order
/// as libtraceevent's `parse_args` does. Errors where libtraceevent would mark the event as
/// failed (too few arguments) or print something other than the conversion.
pub fn parse_pieces(fmt: &[u8], nargs: usize) -> Result<Vec<Piece>, String> {
    let mut pieces = Vec::new();
    let mut lit = Vec::new();
    let mut next_arg = 0usize;
    let mut take = |what: &str| {
        let a = next_arg;
        next_arg += 1;
        if a < nargs {
            Ok(a)
        } else {
            Err(format!("no argument for {what}"))
        }
    };
    let mut i = 0;
    while i < fmt.len() {
        let c = fmt[i];
        if c == b'\\' {
            i += 1;
            match fmt.get(i) {
                Some(b'n') => lit.push(b'\n'),
                Some(b't') => lit.push(b'\t'),
                Some(b'r') => lit.push(b'\r'),
                Some(&o) => lit.push(o),
                None => {}
            }
            i += 1;
            continue;
        }
        if c != b'%' {
            lit.push(c);
            i += 1;
            continue;
        }
        if fmt.get(i + 1) == Some(&b'%') {
            lit.push(b'%');
            i += 2;
            continue;
        }
        if !lit.is_empty() {
            pieces.push(Piece::Lit(std::mem::take(&mut lit)));
        }
        let start = i;
        let mut j = i + 1;
        let mut star = None;
        loop {
            let Some(&ch) = fmt.get(j) else {
                return Err("format ends inside a conversion".into());
            };
            match ch {
                b'#' | b'h' | b'l' | b'L' | b'z' | b'Z' | b'.' | b'0'..=b'9' | b'-' | b'+' => {}
                b'*' => {
                    if star.is_some() {
                        return Err("two '*' in one conversion".into());
                    }
                    star = Some(take("'*'")?);
                }
                b'p' => {
                    let (kind, letters) = pointer_kind(&fmt[j + 1..]);
                    let conv = Conv::parse(&fmt[start..=j])
                        .ok_or_else(|| format!("conversion {:?}", lossy(&fmt[start..=j])))?;
                    let _ = conv;
                    pieces.push(Piece::Ptr {
                        kind,
                        arg: take("%p")?,
                        star,
                    });
                    j += letters;
                    break;
                }
                b'c' | b'd' | b'u' | b'i' | b'x' | b'X' | b'o' | b's' => {
                    let conv = Conv::parse(&fmt[start..=j])
                        .ok_or_else(|| format!("conversion {:?}", lossy(&fmt[start..=j])))?;
                    let arg = take("a conversion")?;
                    pieces.push(if ch == b's' {
                        Piece::Str { conv, arg, star }
                    } else {
                        Piece::Num { conv, arg, star }
                    });
                    break;
                }
                _ => return Err(format!("conversion character {:?}", ch as char)),
            }
            j += 1;
        }
        i = j + 1;
    }
    if !lit.is_empty() {
        pieces.push(Piece::Lit(lit));
    }
    Ok(pieces)
}

/// The kind of a `%p` conversion from the letters after `p`, and how many of them it uses
/// (libtraceevent's `parse_arg_format_pointer`).
fn pointer_kind(s: &[u8]) -> (PtrKind, usize) {
    let at = |i: usize| s.get(i).copied().unwrap_or(0);
    match at(0) {
        b'F' | b'S' => (PtrKind::Func { offset: true }, 1),
        b'f' | b's' => (PtrKind::Func { offset: false }, 1),
        b'M' | b'm' => {
            let (sep, reverse, n) = match (at(0), at(1)) {
                (b'm', b'R') => (0, true, 2),
                (b'm', b'F') => (0, false, 2),
                (b'm', _) => (0, false, 1),
                (_, b'R') => (b':', true, 2),
                (_, b'F') => (b'-', false, 2),
                _ => (b':', false, 1),
            };
            (PtrKind::Mac { sep, reverse }, n)
        }
        b'I' | b'i' => {
            let zeros = at(0) == b'i';
            match at(1) {
                b'4' => {
                    let (reverse, n) = byte_order(at(2));
                    (PtrKind::Ip4 { zeros, reverse }, 2 + n)
                }
                b'6' => {
                    let compressed = at(0) == b'I' && at(2) == b'c';
                    (
                        PtrKind::Ip6 {
                            colons: at(0) == b'I',
                            compressed,
                        },
                        2 + (at(2) == b'c') as usize,
                    )
                }
                b'S' => {
                    let mut k = 2;
                    let (mut port, mut compressed) = (false, false);
                    while matches!(at(k), b'p' | b'f' | b's') {
                        port |= at(k) == b'p';
                        k += 1;
                    }
                    let (reverse, n) = byte_order(at(k));
                    k += n;
                    if at(k) == b'c' {
                        compressed = true;
                        k += 1;
                    }
                    (
                        PtrKind::IpSock {
                            zeros,
                            port,
                            compressed,
                            reverse,
                        },
                        k,
                    )
                }
                _ => (PtrKind::Plain, 1),
            }
        }
        b'U' => {
            let (upper, guid, n) = match at(1) {
                b'L' => (true, true, 2),
                b'l' => (false, true, 2),
                b'B' => (true, false, 2),
                b'b' => (false, false, 2),
                _ => (false, false, 1),
            };
            (PtrKind::Uuid { upper, guid }, n)
        }
        b'h' => {
            let (sep, n) = match at(1) {
                b'C' => (Some(b':'), 2),
                b'D' => (Some(b'-'), 2),
                b'N' => (None, 2),
                _ => (Some(b' '), 1),
            };
            (PtrKind::Hex { sep }, n)
        }
        _ => (PtrKind::Plain, 0),
    }
}

/// `h n l b` after an IPv4 conversion: (reverse the bytes, letters used). `h` (host order)
/// reverses on a little-endian trace, which the caller decides.
fn byte_order(c: u8) -> (bool, usize) {
    match c {
        b'l' => (true, 1),
        b'h' | b'n' | b'b' => (false, 1),
        _ => (false, 0),
    }
}
