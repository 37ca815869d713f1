//! `palloc`: page allocations and frees — how many, of which order and migrate type,
//! with which GFP flags, by whom.
//!
//! Events: kmem:mm_page_alloc and kmem:mm_page_free. Each event is one sample whose
//! value is its page count, 2^order: per key, `count` is the number of calls and `total`
//! the pages. kmem:mm_page_free_batched is not read: the kernel emits it for pages freed
//! in batches *in addition to* mm_page_free (free_pages_prepare traces every free), so
//! counting it would count those pages twice.
//!
//! Keys: `alloc ...` for allocations and `free ...` for frees. `--by order` (default):
//! `alloc order 0`; `--by migratetype`: `alloc Movable` (frees carry no migrate type and
//! stay keyed by order); `--by gfp`: the flags as the kernel's own print format names
//! them (`alloc GFP_HIGHUSER_MOVABLE|__GFP_ZERO`, decoded from the file's format, as
//! trace-cmd prints them); `--by comm`: the allocating task's command. `--log`: a row per
//! event (time, key, pages, task): the allocation rate over time.

use kstate_format::{FieldRef, Trace};

use crate::analyzer::{need, Analyzer, Info, Kind, Missing, Out, Sample, Tasks, Traits, Unit};
use crate::fxmap::FxMap;
use kstate_format::stream::merge::Event;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum By {
    Order,
    Migratetype,
    Gfp,
    Comm,
}

const FREE: u64 = 1 << 62;

pub struct Palloc {
    by: By,
    alloc: u32,
    a_order: FieldRef,
    a_mt: FieldRef,
    a_gfp: FieldRef,
    f_order: FieldRef,
    gfp_names: GfpNames,
    comm_of: FxMap<i32, u32>,
    comms: Vec<String>,
}

impl Analyzer for Palloc {
    const INFO: Info = Info {
        name: "palloc",
        about: "page allocations and frees: calls and pages by order, migrate type, GFP flags or command",
        needs: "kmem:mm_page_alloc + kmem:mm_page_free",
        preset: "mem",
        by: &[
            ("order", "allocation order (pages = 2^order)"),
            ("migratetype", "migrate type (Unmovable, Movable, ...)"),
            ("gfp", "GFP flags, named as the kernel prints them"),
            ("comm", "allocating task's command"),
        ],
        flag_column: None,
        value: "pages",
        unit: Unit::Count("pages"),
        traits: Traits::DEFAULT,
        run: crate::piped::drive_piped::<Palloc>,
        live: Some(crate::analyzer::live::<Palloc>),
    };

    fn bind(trace: &Trace, by: &str) -> Result<(Self, Vec<u32>), Missing> {
        let mut missing = Vec::new();
        let a = need(trace, "kmem:mm_page_alloc", &mut missing);
        let f = need(trace, "kmem:mm_page_free", &mut missing);
        let (Some(a), Some(f)) = (a, f) else {
            return Err(Missing::events(missing));
        };
        let fields = (|| {
            Some((
                a.field("order")?.into(),
                a.field("migratetype")?.into(),
                a.field("gfp_flags")?.into(),
                f.field("order")?.into(),
            ))
        })();
        let Some((a_order, a_mt, a_gfp, f_order)) = fields else {
            return Err(Missing::events(vec![
                "kmem:mm_page_alloc/free with order, migratetype, gfp_flags".into(),
            ]));
        };
        let ids = vec![a.id, f.id];
        Ok((
            Palloc {
                by: match by {
                    "migratetype" => By::Migratetype,
                    "gfp" => By::Gfp,
                    "comm" => By::Comm,
                    _ => By::Order,
                },
                alloc: a.id,

                a_order,
                a_mt,
                a_gfp,
                f_order,
                gfp_names: GfpNames::from_print_fmt(&a.print_fmt, "gfp_flags"),
                comm_of: FxMap::default(),
                comms: Vec::new(),
            },
            ids,
        ))
    }

    fn event(&mut self, ev: &Event<'_>, out: &mut Out) {
        let (p, e) = (ev.payload, ev.endian);
        let tid = ev.pid();
        let (order, key) = if ev.id == self.alloc {
            let order = self.a_order.get_u64(p, e).unwrap_or(0);
            let key = match self.by {
                By::Order => order,
                By::Migratetype => self.a_mt.get_i64(p, e).unwrap_or(-1) as u32 as u64,
                By::Gfp => self.a_gfp.get_u64(p, e).unwrap_or(0) & !FREE,
                By::Comm => self.comm_key(tid, out),
            };
            (order, key)
        } else {
            let order = self.f_order.get_u64(p, e).unwrap_or(0);
            let key = match self.by {
                By::Comm => self.comm_key(tid, out),
                _ => order,
            };
            (order, FREE | key)
        };
        out.emit(Sample {
            start: ev.ts,
            value: 1u64 << order.min(63),
            key,
            tid,
            cpu: ev.cpu,
            flag: false,
            kind: Kind::Dur,
        });
    }

    fn finish(&mut self, _out: &mut Out) -> u64 {
        0
    }

    fn key_name(&self, key: u64, _tasks: &Tasks) -> String {
        let free = key & FREE != 0;
        let k = key & !FREE;
        let what = if free { "free" } else { "alloc" };
        let detail = match self.by {
            By::Comm => self.comms[k as usize].clone(),
            _ if free => format!("order {k}"),
            By::Order => format!("order {k}"),
            By::Migratetype => migratetype(k as u32 as i32),
            By::Gfp => self.gfp_names.name(k),
        };
        format!("{what} {detail}")
    }
}

impl Palloc {
    fn comm_key(&mut self, tid: i32, out: &Out) -> u64 {
        if let Some(&c) = self.comm_of.get(&tid) {
            return c as u64;
        }
        let name = out.tasks.comm(tid);
        let c = match self.comms.iter().position(|n| *n == name) {
            Some(i) => i as u32,
            None => {
                self.comms.push(name);
                self.comms.len() as u32 - 1
            }
        };
        self.comm_of.insert(tid, c);
        c as u64
    }
}

/// enum migratetype of Linux 6.x (MIGRATE_PCPTYPES == MIGRATE_HIGHATOMIC == 3).
fn migratetype(mt: i32) -> String {
    match mt {
        0 => "Unmovable".into(),
        1 => "Movable".into(),
        2 => "Reclaimable".into(),
        3 => "HighAtomic".into(),
        4 => "CMA".into(),
        5 => "Isolate".into(),
        n => format!("migratetype {n}"),
    }
}

/// The `__print_flags(REC->FIELD, "|", {VALUE, "NAME"}, ...)` table of an event's print
/// format, with each VALUE (a C constant expression of the kernel's macros, e.g.
/// `(( gfp_t)((((1UL))) << (10)))|...`) evaluated. Names a value the way libtraceevent
/// does: each entry in order whose bits are all set takes them; leftover bits in hex.
#[derive(Debug, Clone, Default)]
pub struct GfpNames {
    flags: Vec<(u64, String)>,
}

impl GfpNames {
    pub fn from_print_fmt(fmt: &str, field: &str) -> GfpNames {
        let mut flags = Vec::new();
        let pat = format!("__print_flags(REC->{field}, \"|\",");
        if let Some(at) = fmt.find(&pat) {
            let mut rest = &fmt[at + pat.len()..];
            // Entries: `{ EXPR, "NAME"}` until `{ 0, ((void *)0) }` or the closing `)`.
            while let Some(open) = rest.find('{') {
                let body = &rest[open + 1..];
                let Some(q) = body.find(", \"") else {
                    break;
                };
                let Some(end) = body[q + 3..].find('"') else {
                    break;
                };
                let name = &body[q + 3..q + 3 + end];
                if let Some(v) = eval(&body[..q]) {
                    if v != 0 {
                        flags.push((v, name.to_string()));
                    }
                }
                rest = &body[q + 3 + end..];
                if rest.trim_start().starts_with("}") && !rest.contains('{') {
                    break;
                }
            }
        }
        GfpNames { flags }
    }

    pub fn name(&self, mut v: u64) -> String {
        if v == 0 {
            return "none".into();
        }
        let mut parts: Vec<String> = Vec::new();
        for (f, n) in &self.flags {
            if v & f == *f {
                parts.push(n.clone());
                v &= !f;
                if v == 0 {
                    break;
                }
            }
        }
        if v != 0 {
            parts.push(format!("{v:#x}"));
        }
        parts.join("|")
    }
}

/// Evaluates a C integer constant expression of numbers (with U/L suffixes), casts to
/// type names, parentheses, `~ | & ^ << >> + -`. `None` for anything else.
fn eval(s: &str) -> Option<u64> {
    let toks = tokens(s)?;
    let mut p = Parser { t: &toks, i: 0 };
    let v = p.or()?;
    (p.i == toks.len()).then_some(v)
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Num(u64),
    Ident,
    Op(&'static str),
}

fn tokens(s: &str) -> Option<Vec<Tok>> {
    let b = s.as_bytes();
    let mut i = 0;
    let mut out = Vec::new();
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() {
            i += 1;
        } else if c.is_ascii_digit() {
            let st = i;
            while i < b.len() && b[i].is_ascii_alphanumeric() {
                i += 1;
            }
            let t = s[st..i].trim_end_matches(['u', 'U', 'l', 'L']);
            let v = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
                Some(h) => u64::from_str_radix(h, 16).ok()?,
                None => t.parse().ok()?,
            };
            out.push(Tok::Num(v));
        } else if c.is_ascii_alphabetic() || c == b'_' {
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            out.push(Tok::Ident);
        } else {
            let two = s.get(i..i + 2);
            let op = match two {
                Some("<<") => "<<",
                Some(">>") => ">>",
                _ => match c {
                    b'(' => "(",
                    b')' => ")",
                    b'|' => "|",
                    b'&' => "&",
                    b'^' => "^",
                    b'~' => "~",
                    b'+' => "+",
                    b'-' => "-",
                    _ => return None,
                },
            };
            i += op.len();
            out.push(Tok::Op(op));
        }
    }
    Some(out)
}

struct Parser<'a> {
    t: &'a [Tok],
    i: usize,
}

impl Parser<'_> {
    fn peek(&self, op: &str) -> bool {
        matches!(self.t.get(self.i), Some(Tok::Op(o)) if *o == op)
    }
    fn binary(
        &mut self,
        ops: &[&str],
        next: fn(&mut Self) -> Option<u64>,
        f: fn(&str, u64, u64) -> u64,
    ) -> Option<u64> {
        let mut v = next(self)?;
        while let Some(op) = ops.iter().find(|o| self.peek(o)) {
            self.i += 1;
            let r = next(self)?;
            v = f(op, v, r);
        }
        Some(v)
    }
    fn or(&mut self) -> Option<u64> {
        self.binary(&["|"], Self::xor, |_, a, b| a | b)
    }
    fn xor(&mut self) -> Option<u64> {
        self.binary(&["^"], Self::and, |_, a, b| a ^ b)
    }
    fn and(&mut self) -> Option<u64> {
        self.binary(&["&"], Self::shift, |_, a, b| a & b)
    }
    fn shift(&mut self) -> Option<u64> {
        self.binary(&["<<", ">>"], Self::add, |op, a, b| match op {
            "<<" => a.checked_shl(b as u32).unwrap_or(0),
            _ => a.checked_shr(b as u32).unwrap_or(0),
        })
    }
    fn add(&mut self) -> Option<u64> {
        self.binary(&["+", "-"], Self::unary, |op, a, b| match op {
            "+" => a.wrapping_add(b),
            _ => a.wrapping_sub(b),
        })
    }
    fn unary(&mut self) -> Option<u64> {
        match self.t.get(self.i)? {
            Tok::Num(v) => {
                self.i += 1;
                Some(*v)
            }
            Tok::Op("~") => {
                self.i += 1;
                Some(!self.unary()?)
            }
            Tok::Op("-") => {
                self.i += 1;
                Some(self.unary()?.wrapping_neg())
            }
            Tok::Op("(") => {
                // A cast: `(` type names `)` then an operand.
                let mut j = self.i + 1;
                while self.t.get(j) == Some(&Tok::Ident) {
                    j += 1;
                }
                if j > self.i + 1 && self.t.get(j) == Some(&Tok::Op(")")) {
                    self.i = j + 1;
                    return self.unary();
                }
                self.i += 1;
                let v = self.or()?;
                if !self.peek(")") {
                    return None;
                }
                self.i += 1;
                Some(v)
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evaluates_kernel_gfp_macros() {
        assert_eq!(
            eval("( unsigned long)(( gfp_t)((((1UL))) << (10)))"),
            Some(1024)
        );
        assert_eq!(
            eval("(( gfp_t)(((((1UL))) << (10))|((((1UL))) << (11)))) & ~(( gfp_t)((((1UL))) << (10)))"),
            Some(2048)
        );
        assert_eq!(eval("0x10 | 3"), Some(0x13));
        assert_eq!(eval("1 +"), None);
    }

    #[test]
    fn names_flags_like_libtraceevent() {
        let fmt = r#""gfp_flags=%s", (REC->gfp_flags) ? __print_flags(REC->gfp_flags, "|", {( unsigned long)((( gfp_t)((((1UL))) << (6))) | (( gfp_t)((((1UL))) << (7)))), "GFP_KERNEL"}, {( unsigned long)(( gfp_t)((((1UL))) << (6))), "__GFP_IO"}, {( unsigned long)(( gfp_t)((((1UL))) << (8))), "__GFP_ZERO"}, { 0, ((void *)0) } ) : "none""#;
        let g = GfpNames::from_print_fmt(fmt, "gfp_flags");
        assert_eq!(g.flags.len(), 3);
        assert_eq!(g.name(0xc0 | 0x100), "GFP_KERNEL|__GFP_ZERO");
        assert_eq!(g.name(0x40 | 0x1000), "__GFP_IO|0x1000");
        assert_eq!(g.name(0), "none");
    }
}
