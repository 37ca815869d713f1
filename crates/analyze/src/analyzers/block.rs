//! What the block-I/O analyzers (`biotime`, `blkqueue`) share: the request events'
//! fields resolved once per file, the direction read from `rwbs`, request identity, and
//! device names.
//!
//! Request identity: a request is known by its device, its first sector and its direction
//! class (R, W, D, F, N) from insert/issue to complete, as blktrace pairs them. A pure
//! flush (direction F) carries sector 0 at issue and `(sector_t)-1` at completion on
//! Linux 6.x, so flushes are identified by device alone (one flush in flight per
//! hardware queue; a second one before the first completes replaces it).
//!
//! Keys print LKST-style: the device as 8 hex digits `major << 8 | minor`, a dash and the
//! direction, then the disk in parentheses: `0000fe00-W(vda)`. Disk names come from
//! `/sys/dev/block/MAJOR:MINOR/uevent` (DEVNAME) only when the trace was recorded on this
//! machine (its uname names this host and kernel release, or kstate's recording section
//! names this host); otherwise `0000fe00-W(254:0)`.

use std::cell::RefCell;

use kstate_format::{FieldRef, Trace};

use super::sched::bytes;
use crate::analyzer::need;
use crate::fxmap::FxMap;

/// What each request event is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    None,
    Insert,
    Issue,
    Complete,
    Requeue,
}

/// The fields every block_rq_* event has.
#[derive(Debug, Clone, Copy)]
pub struct RqFields {
    pub dev: FieldRef,
    pub sector: FieldRef,
    pub rwbs: (usize, usize),
    /// The submitting task's name (insert, issue).
    pub comm: Option<(usize, usize)>,
    /// The completion status (complete).
    pub error: Option<FieldRef>,
}

/// block_rq_insert/issue/complete (and requeue where recorded), resolved.
pub struct RqEvents {
    /// Role and fields by event id.
    by_id: Vec<(Role, Option<RqFields>)>,
    pub ids: Vec<u32>,
}

impl RqEvents {
    /// Needs issue and complete; insert and requeue are used where recorded.
    pub fn bind(trace: &Trace, missing: &mut Vec<String>) -> Option<RqEvents> {
        let mut e = RqEvents {
            by_id: vec![(Role::None, None); trace.events.id_limit()],
            ids: Vec::new(),
        };
        let mut absent = Vec::new();
        for (name, role, required) in [
            ("block:block_rq_insert", Role::Insert, false),
            ("block:block_rq_issue", Role::Issue, true),
            ("block:block_rq_complete", Role::Complete, true),
            ("block:block_rq_requeue", Role::Requeue, false),
        ] {
            let list = if required { &mut *missing } else { &mut absent };
            let Some(ev) = need(trace, name, list) else {
                continue;
            };
            let f = |n: &str| ev.field(n).map(FieldRef::from);
            let (Some(dev), Some(sector), Some(rwbs)) = (f("dev"), f("sector"), ev.field("rwbs"))
            else {
                if required {
                    missing.push(format!("{name} (with dev, sector, rwbs)"));
                }
                continue;
            };
            e.by_id[ev.id as usize] = (
                role,
                Some(RqFields {
                    dev,
                    sector,
                    rwbs: (rwbs.offset, rwbs.size),
                    comm: ev.field("comm").map(|c| (c.offset, c.size)),
                    error: f("error"),
                }),
            );
            e.ids.push(ev.id);
        }
        // Insert is optional (without it a request's queue time is unknown and it is
        // counted from its issue); issue and complete are required.
        let has = |r: Role| e.by_id.iter().any(|(x, _)| *x == r);
        (has(Role::Issue) && has(Role::Complete)).then_some(e)
    }

    /// The fields of request event `id`.
    #[inline]
    pub fn fields(&self, id: u32) -> Option<RqFields> {
        self.by_id.get(id as usize).and_then(|x| x.1)
    }

    /// The role of event `id` and, for request events, the request it is about.
    #[inline]
    pub fn decode(&self, id: u32, payload: &[u8], e: kstate_format::Endian) -> (Role, Rq) {
        match self.by_id.get(id as usize) {
            Some(&(role, Some(f))) => {
                let dev = f.dev.get_u64(payload, e).unwrap_or(0) as u32;
                let dir = direction(bytes(payload, f.rwbs));
                let sector = if dir == Dir::F {
                    u64::MAX
                } else {
                    f.sector.get_u64(payload, e).unwrap_or(0)
                };
                (role, Rq { dev, sector, dir })
            }
            _ => (
                Role::None,
                Rq {
                    dev: 0,
                    sector: 0,
                    dir: Dir::N,
                },
            ),
        }
    }
}

/// A request's direction class, from the operation letter of `rwbs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum Dir {
    R = 0,
    W = 1,
    /// Discard (and secure erase).
    D = 2,
    /// Flush.
    F = 3,
    /// Anything else (zone management, driver-private).
    N = 4,
}

impl Dir {
    pub fn letter(self) -> char {
        match self {
            Dir::R => 'R',
            Dir::W => 'W',
            Dir::D => 'D',
            Dir::F => 'F',
            Dir::N => 'N',
        }
    }
    fn from_code(c: u64) -> Dir {
        match c {
            0 => Dir::R,
            1 => Dir::W,
            2 => Dir::D,
            3 => Dir::F,
            _ => Dir::N,
        }
    }
}

/// `rwbs` as the kernel fills it (blk_fill_rwbs): an optional `F` (preflush), the
/// operation (`W`, `R`, `D`, `DE`, `F`, `N`), then modifiers (`F` FUA, `A`, `S`, `M`).
pub fn direction(rwbs: &[u8]) -> Dir {
    let op = |c: u8| match c {
        b'R' => Some(Dir::R),
        b'W' => Some(Dir::W),
        b'D' => Some(Dir::D),
        b'F' => Some(Dir::F),
        b'N' => Some(Dir::N),
        _ => None,
    };
    match rwbs {
        [b'F', second, ..] if op(*second).is_some() => op(*second).unwrap_or(Dir::N),
        [first, ..] => op(*first).unwrap_or(Dir::N),
        [] => Dir::N,
    }
}

/// One request's identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Rq {
    /// The kernel's dev_t: major << 20 | minor.
    pub dev: u32,
    /// First sector; `u64::MAX` for flushes.
    pub sector: u64,
    pub dir: Dir,
}

impl Rq {
    /// The device-and-direction key.
    #[inline]
    pub fn key(&self) -> u64 {
        ((self.dev as u64) << 8) | self.dir as u64
    }
}

pub fn major_minor(dev: u32) -> (u32, u32) {
    (dev >> 20, dev & ((1 << 20) - 1))
}

/// Names of devices, resolved on this machine when the trace was recorded here.
pub struct DevNames {
    local: bool,
    names: RefCell<FxMap<u32, String>>,
}

impl DevNames {
    pub fn new(trace: &Trace) -> DevNames {
        DevNames {
            local: recorded_here(trace),
            names: RefCell::new(FxMap::default()),
        }
    }

    /// `0000fe00-W(vda)` for key `dev << 8 | dir`.
    pub fn key_name(&self, key: u64) -> String {
        let dev = (key >> 8) as u32;
        let dir = Dir::from_code(key & 0xff);
        let (major, minor) = major_minor(dev);
        let mut names = self.names.borrow_mut();
        let name = names.entry(dev).or_insert_with(|| {
            self.local
                .then(|| disk_name(major, minor))
                .flatten()
                .unwrap_or_else(|| format!("{major}:{minor}"))
        });
        format!("{:08x}-{}({name})", (major << 8) | minor, dir.letter())
    }
}

fn disk_name(major: u32, minor: u32) -> Option<String> {
    let text = std::fs::read_to_string(format!("/sys/dev/block/{major}:{minor}/uevent")).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("DEVNAME="))
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

fn proc_text(name: &str) -> Option<String> {
    std::fs::read_to_string(format!("/proc/sys/kernel/{name}"))
        .ok()
        .map(|s| s.trim().to_string())
}

/// Whether `trace` was recorded on this machine, as far as it says: its uname
/// (`SYSNAME NODENAME RELEASE ...`) names this host and kernel release, or, without a
/// uname, kstate's recording section names this host.
fn recorded_here(trace: &Trace) -> bool {
    let Some(host) = proc_text("hostname") else {
        return false;
    };
    if let Some(u) = &trace.uname {
        let mut w = u.split_whitespace();
        let (_, node, release) = (w.next(), w.next(), w.next());
        return node == Some(host.as_str()) && release == proc_text("osrelease").as_deref();
    }
    trace
        .extra(kstate_format::sections::ids::RECORDING)
        .and_then(|b| kstate_format::sections::Recording::decode(b).ok())
        .is_some_and(|r| r.hostname == host)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directions_from_rwbs() {
        for (rwbs, d) in [
            ("W", Dir::W),
            ("WS", Dir::W),
            ("WSM", Dir::W),
            ("FWS", Dir::W),
            ("WFS", Dir::W),
            ("R", Dir::R),
            ("RA", Dir::R),
            ("FF", Dir::F),
            ("F", Dir::F),
            ("D", Dir::D),
            ("DE", Dir::D),
            ("N", Dir::N),
            ("", Dir::N),
        ] {
            assert_eq!(direction(rwbs.as_bytes()), d, "{rwbs}");
        }
        // NUL-padded char[10] as recorded.
        assert_eq!(direction(b"WS\0\0\0\0\0\0\0\0"), Dir::W);
    }

    #[test]
    fn keys_print_lkst_style() {
        let names = DevNames {
            local: false,
            names: RefCell::new(FxMap::default()),
        };
        let rq = Rq {
            dev: (8 << 20) | 3,
            sector: 0,
            dir: Dir::W,
        };
        assert_eq!(names.key_name(rq.key()), "00000803-W(8:3)");
        let rq = Rq {
            dev: 254 << 20,
            sector: 0,
            dir: Dir::R,
        };
        assert_eq!(names.key_name(rq.key()), "0000fe00-R(254:0)");
    }
}
