//! Any bytes as each of kstate's extra sections: decoders must return an error or a value,
//! never panic, and whatever decodes must survive re-encoding unchanged.
#![no_main]
use kstate_format::sections::{
    decode_processes, decode_ring_stats, encode_processes, encode_ring_stats, parse_ring_stats,
    parse_sysinfo, sysinfo_snapshots, Recording, SysinfoWriter,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(r) = Recording::decode(data) {
        assert_eq!(Recording::decode(&r.encode()).unwrap(), r);
    }
    if let Ok(p) = decode_processes(data) {
        assert_eq!(decode_processes(&encode_processes(&p)).unwrap(), p);
    }
    if let Ok(s) = decode_ring_stats(data) {
        assert_eq!(decode_ring_stats(&encode_ring_stats(&s)).unwrap(), s);
    }
    let _ = parse_ring_stats(0, data);
    for s in sysinfo_snapshots(data).take(10_000) {
        if s.is_err() {
            break;
        }
    }
    // The same bytes behind each magic line, so the fuzzer need not find them first.
    for magic in [
        &b"kstate-recording 1\n"[..],
        b"kstate-processes 1\n",
        b"kstate-ring-stats 1\n",
        b"kstate-sysinfo 1\n",
    ] {
        let b = [magic, data].concat();
        let _ = Recording::decode(&b);
        let _ = decode_processes(&b);
        let _ = decode_ring_stats(&b);
        for s in sysinfo_snapshots(&b).take(10_000) {
            if s.is_err() {
                break;
            }
        }
    }
    // Text the writer accepts must come back exactly.
    let split = data.iter().position(|&b| b == 0).unwrap_or(data.len());
    let (m, v) = data.split_at(split);
    let v = v.get(1..).unwrap_or_default();
    if let Ok(vals) = parse_sysinfo(m, v) {
        let mut w = SysinfoWriter::new(Vec::new());
        w.snapshot(1, m, v).unwrap();
        w.snapshot(2, v, m).ok();
        w.snapshot(3, m, v).unwrap();
        let b = w.into_inner().unwrap();
        let snaps: Vec<_> = sysinfo_snapshots(&b).collect::<Result<_, _>>().unwrap();
        let last = snaps.last().unwrap();
        // Later duplicates win in the decoded table.
        let mut want: Vec<(String, u64)> = Vec::new();
        for (n, x) in vals {
            match want.iter_mut().find(|(k, _)| *k == n) {
                Some(e) => e.1 = x,
                None => want.push((n, x)),
            }
        }
        let mut got = last.values.clone();
        got.sort();
        want.sort();
        assert_eq!(got, want);
    }
});
