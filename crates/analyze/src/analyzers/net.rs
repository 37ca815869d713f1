//! `net` and `netsize`: network transmit time and packet sizes, per device.
//!
//! `net` (value: ns): net:net_dev_queue (the packet enters the device's transmit path,
//! `dev_queue_xmit`) to net:net_dev_xmit of the same skb (`skbaddr`) — the time spent in
//! the queueing discipline and the driver's transmit function. Pairs by skb address; a
//! queued skb that is dropped never gets its xmit, and when its address is reused by a
//! later packet the stale start is replaced and counted as unmatched. GSO packets are
//! segmented before the driver, so their segments' xmits carry other addresses: they
//! count as unmatched too. Key: the device (`name` of the xmit event).
//!
//! `netsize` (value: bytes): the `len` of every net:net_dev_xmit per device — the packet
//! size mix (what LKST's network I/O size distribution showed); `--dist` gives the
//! histogram. A packet's len includes the link-layer header (e.g. a UDP datagram of S
//! payload bytes over Ethernet or loopback is S + 8 + 20 + 14).
//!
//! Both: flag column `failed`, transmits whose driver returned non-zero (`rc`, e.g.
//! NETDEV_TX_BUSY: the packet is requeued and transmitted again later).

use kstate_format::{Field, FieldRef, Trace};

use super::softirq::NO_FIELD;
use crate::analyzer::{need, Analyzer, Info, Kind, Missing, Out, Sample, Tasks, Traits, Unit};
use crate::fxmap::FxMap;
use crate::pair::Pairs;
use kstate_format::stream::merge::Event;

/// Device names by key.
#[derive(Default)]
struct Devices {
    index: FxMap<Box<[u8]>, u64>,
    names: Vec<String>,
}

impl Devices {
    fn key(&mut self, name: &[u8]) -> u64 {
        let name = match name.iter().position(|&b| b == 0) {
            Some(n) => &name[..n],
            None => name,
        };
        if let Some(k) = self.index.get(name) {
            return *k;
        }
        let k = self.names.len() as u64;
        self.index.insert(name.into(), k);
        self.names.push(String::from_utf8_lossy(name).into_owned());
        k
    }
    fn name(&self, key: u64) -> String {
        match self.names.get(key as usize) {
            Some(n) if !n.is_empty() => n.clone(),
            Some(_) => "(no name)".into(),
            None => format!("dev {key}"),
        }
    }
}

/// net_dev_xmit, resolved.
struct Xmit {
    id: u32,
    skb: FieldRef,
    len: FieldRef,
    rc: FieldRef,
    name: Field,
}

fn xmit(trace: &Trace, missing: &mut Vec<String>) -> Option<Xmit> {
    let ev = need(trace, "net:net_dev_xmit", missing)?;
    let (Some(skb), Some(len), Some(name)) =
        (ev.field("skbaddr"), ev.field("len"), ev.field("name"))
    else {
        missing.push("net:net_dev_xmit (fields skbaddr, len, name)".into());
        return None;
    };
    Some(Xmit {
        id: ev.id,
        skb: skb.into(),
        len: len.into(),
        rc: ev.field("rc").map_or(NO_FIELD, FieldRef::from),
        name: name.clone(),
    })
}

pub struct Net {
    queue: u32,
    queue_skb: FieldRef,
    xmit: Xmit,
    open: Pairs<u64, ()>,
    devs: Devices,
}

impl Analyzer for Net {
    const INFO: Info = Info {
        name: "net",
        about: "network transmit time per device (net_dev_queue to net_dev_xmit)",
        needs: "net:net_dev_queue + net:net_dev_xmit",
        preset: "net",
        by: &[("dev", "network device")],
        flag_column: Some("failed"),
        value: "transmit time",
        unit: Unit::Ns,
        traits: Traits::DEFAULT,
        run: crate::piped::drive_piped::<Net>,
        live: Some(crate::analyzer::live::<Net>),
    };

    fn bind(trace: &Trace, _by: &str) -> Result<(Self, Vec<u32>), Missing> {
        let mut missing = Vec::new();
        let q = need(trace, "net:net_dev_queue", &mut missing);
        let x = xmit(trace, &mut missing);
        let (Some(q), Some(x)) = (q, x) else {
            return Err(Missing::events(missing));
        };
        let Some(queue_skb) = q.field("skbaddr") else {
            return Err(Missing::events(vec![
                "net:net_dev_queue (field skbaddr)".into()
            ]));
        };
        let ids = vec![q.id, x.id];
        Ok((
            Net {
                queue: q.id,
                queue_skb: queue_skb.into(),
                xmit: x,
                open: Pairs::default(),
                devs: Devices::default(),
            },
            ids,
        ))
    }

    #[inline]
    fn event(&mut self, ev: &Event<'_>, out: &mut Out) {
        if ev.id == self.queue {
            if let Some(skb) = self.queue_skb.get_u64(ev.payload, ev.endian) {
                self.open.begin(skb, ev.cpu, (), out);
            }
            return;
        }
        let x = &self.xmit;
        let Some(skb) = x.skb.get_u64(ev.payload, ev.endian) else {
            return;
        };
        let Some(o) = self.open.end(skb) else {
            out.unmatched();
            return;
        };
        let rc = x.rc.get_i64(ev.payload, ev.endian).unwrap_or(0);
        let key = self
            .devs
            .key(x.name.data(ev.payload, ev.endian).unwrap_or(b""));
        out.pair(
            o.mark,
            Sample {
                start: o.start,
                value: ev.ts.saturating_sub(o.start),
                key,
                tid: ev.pid(),
                cpu: ev.cpu,
                flag: rc != 0,
                kind: Kind::Dur,
            },
        );
    }

    fn finish(&mut self, _out: &mut Out) -> u64 {
        self.open.len() as u64
    }

    fn key_name(&self, key: u64, _tasks: &Tasks) -> String {
        self.devs.name(key)
    }
}

pub struct NetSize {
    xmit: Xmit,
    devs: Devices,
}

impl Analyzer for NetSize {
    const INFO: Info = Info {
        name: "netsize",
        about: "transmitted packet sizes per device (len of net_dev_xmit, bytes)",
        needs: "net:net_dev_xmit",
        preset: "net",
        by: &[("dev", "network device")],
        flag_column: Some("failed"),
        value: "packet size",
        unit: Unit::Bytes,
        traits: Traits::DEFAULT,
        run: crate::piped::drive_piped::<NetSize>,
        live: Some(crate::analyzer::live::<NetSize>),
    };

    fn bind(trace: &Trace, _by: &str) -> Result<(Self, Vec<u32>), Missing> {
        let mut missing = Vec::new();
        let Some(x) = xmit(trace, &mut missing) else {
            return Err(Missing::events(missing));
        };
        let ids = vec![x.id];
        Ok((
            NetSize {
                xmit: x,
                devs: Devices::default(),
            },
            ids,
        ))
    }

    #[inline]
    fn event(&mut self, ev: &Event<'_>, out: &mut Out) {
        let x = &self.xmit;
        let Some(len) = x.len.get_u64(ev.payload, ev.endian) else {
            return;
        };
        let rc = x.rc.get_i64(ev.payload, ev.endian).unwrap_or(0);
        let key = self
            .devs
            .key(x.name.data(ev.payload, ev.endian).unwrap_or(b""));
        out.emit(Sample {
            start: ev.ts,
            value: len,
            key,
            tid: ev.pid(),
            cpu: ev.cpu,
            flag: rc != 0,
            kind: Kind::Dur,
        });
    }

    fn finish(&mut self, _out: &mut Out) -> u64 {
        0
    }

    fn key_name(&self, key: u64, _tasks: &Tasks) -> String {
        self.devs.name(key)
    }
}
