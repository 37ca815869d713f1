//! The dump of a real trace: the threads write the one pass's bytes (lisa-rtapp has
//! slices that must be formatted again with the comms learnt before them), every event once.

use super::*;
use kstate_format::stream::merge::Merger;

fn request(style: Style, threads: usize) -> Request {
    Request {
        style,
        ns: true,
        events: Vec::new(),
        cpus: Vec::new(),
        pid: None,
        from: None,
        to: None,
        threads,
        // Small slices: the fixture is cut into many, so seams are crossed often.
        slice_bytes: 16 << 10,
    }
}

fn dump(trace: Trace, req: &Request) -> (Vec<u8>, Dumped) {
    let mut out = Vec::new();
    let d = write(&[trace], &["trace.dat".into()], req, &mut out).expect("dumps");
    (out, d)
}

fn fixture() -> Trace {
    Trace::open(&kstate_testdata::path("lisa-rtapp/trace.dat")).expect("opens")
}

#[test]
fn threads_write_the_one_pass_bytes() {
    for style in [Style::Text, Style::Raw, Style::Json] {
        let (one, d1) = dump(fixture(), &request(style, 1));
        let (two, d2) = dump(fixture(), &request(style, 2));
        assert!(d1.slices.is_none(), "one thread cuts no slices");
        let s = d2.slices.expect("two threads cut the trace into slices");
        assert!(s.slices > 1, "{style:?}: {} slices", s.slices);
        assert!(d1.failure.is_none() && d2.failure.is_none());
        assert!(
            one == two,
            "{style:?}: the threads' bytes differ from one pass's"
        );
    }
}

#[test]
fn json_has_every_event_once_in_time_order() {
    let trace = fixture();
    let mut merger = Merger::new(&trace, None, IdFilter::all()).expect("merges");
    let mut times = Vec::new();
    while let Some(ev) = merger.next().expect("reads") {
        times.push(ev.ts);
    }
    let (out, _) = dump(fixture(), &request(Style::Json, 2));
    let text = String::from_utf8(out).expect("utf-8");
    let dumped: Vec<u64> = text
        .lines()
        .map(|l| {
            let ts = l.strip_prefix("{\"ts\":").expect("ts first");
            ts[..ts.find(',').expect("a comma")]
                .parse()
                .expect("a number")
        })
        .collect();
    assert!(times.len() > 1000, "{} events", times.len());
    assert_eq!(dumped, times);
}

#[test]
fn window_keeps_the_events_inside_it() {
    let (all, _) = dump(fixture(), &request(Style::Json, 1));
    let all = String::from_utf8(all).expect("utf-8");
    let ts = |l: &str| -> u64 {
        let t = &l["{\"ts\":".len()..];
        t[..t.find(',').expect("a comma")]
            .parse()
            .expect("a number")
    };
    let lines: Vec<&str> = all.lines().collect();
    let (from, to) = (ts(lines[100]), ts(lines[2000]));
    let inside: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| (from..=to).contains(&ts(l)))
        .collect();
    for threads in [1, 2] {
        let req = Request {
            from: Some(from),
            to: Some(to),
            ..request(Style::Json, threads)
        };
        let (out, _) = dump(fixture(), &req);
        let out = String::from_utf8(out).expect("utf-8");
        assert_eq!(out.lines().collect::<Vec<_>>(), inside, "{threads} threads");
    }
}
