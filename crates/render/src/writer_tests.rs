//! The writers of `info`, the HTML report and PNG charts against a real trace (LISA's
//! sched_load recording, testdata/): the numbers they print are those of the reader's own
//! pass over the same trace, the markup parses, and a PNG decodes to the chart's size.

use std::collections::BTreeMap;

use kstate_format::stream::merge::{IdFilter, Merger};
use kstate_format::Trace;
use kstate_views::survey::Survey;

fn lisa() -> Trace {
    Trace::open(&kstate_testdata::path("lisa-sched_load/trace.dat")).unwrap()
}

fn lisa_survey() -> Survey {
    let source = kstate_analyze::Source::new(lisa(), "lisa-sched_load/trace.dat".into());
    let s = kstate_views::survey::of(&source);
    assert!(s.analyses.len() >= 2, "{} analyses", s.analyses.len());
    s
}

/// Every `<svg>...</svg>` in `page`, each of which must parse as XML on its own.
fn svgs(page: &str) -> Vec<&str> {
    let mut v = Vec::new();
    let mut rest = page;
    while let Some(at) = rest.find("<svg") {
        let end = rest[at..].find("</svg>").expect("an <svg> is closed") + at + 6;
        let svg = &rest[at..end];
        roxmltree::Document::parse(svg).unwrap_or_else(|e| panic!("{e}: {svg}"));
        v.push(svg);
        rest = &rest[end..];
    }
    v
}

#[test]
fn info_counts_what_the_reader_reads() {
    let trace = lisa();
    let d = kstate_views::describe::describe(&trace).unwrap();
    let j = crate::info::json(&d);
    // The reader's own pass: events per CPU with their first and last time, per name.
    let mut cpus: BTreeMap<u32, (u64, u64, u64)> = BTreeMap::new();
    let mut names: BTreeMap<String, u64> = BTreeMap::new();
    let mut m = Merger::new(&trace, None, IdFilter::all()).unwrap();
    while let Some(ev) = m.next().unwrap() {
        let c = cpus.entry(ev.cpu).or_insert((0, ev.ts, ev.ts));
        c.0 += 1;
        c.2 = ev.ts;
        *names
            .entry(trace.events.get(ev.id).unwrap().name.clone())
            .or_default() += 1;
    }
    let total: u64 = cpus.values().map(|c| c.0).sum();
    assert!(total > 3000, "{total} events");
    assert_eq!(j["events"], total);
    assert_eq!(j["cpus"], trace.cpu_count);
    assert_eq!(j["first_ts"], cpus.values().map(|c| c.1).min().unwrap());
    assert_eq!(j["last_ts"], cpus.values().map(|c| c.2).max().unwrap());
    let counts: BTreeMap<String, u64> = serde_json::from_value(j["event_counts"].clone()).unwrap();
    assert_eq!(counts, names);
    for c in j["per_cpu"].as_array().unwrap() {
        let cpu = c["cpu"].as_u64().unwrap() as u32;
        let (n, first, last) = cpus.get(&cpu).copied().unwrap_or((0, 0, 0));
        assert_eq!(c["events"], n, "CPU {cpu}");
        if n > 0 {
            assert_eq!(
                (c["first_ts"].as_u64(), c["last_ts"].as_u64()),
                (Some(first), Some(last))
            );
        }
    }
    // The text says the same total, and names the file.
    let text = crate::info::text(&d);
    assert!(text.contains(&format!("{total}")), "{text}");
    assert!(text.contains("lisa-sched_load/trace.dat"), "{text}");
}

#[test]
fn the_report_page_holds_well_formed_charts_and_escapes_what_it_is_given() {
    let mut s = lisa_survey();
    // A file name is anyone's text: it must come out as text, never as markup.
    s.file = "<img src=x onerror=alert(1)>&\"".into();
    let page = crate::html::render(&s, None);
    assert!(page.starts_with("<!DOCTYPE html>") && page.trim_end().ends_with("</html>"));
    assert!(
        !page.contains("<img src=x"),
        "the file name came out as markup"
    );
    assert!(page.contains("&lt;img src=x onerror=alert(1)&gt;&amp;"));
    // Each analysis has its section, with its charts; every chart parses.
    let charts = svgs(&page);
    assert!(
        charts.len() >= 2 * s.analyses.len(),
        "{} charts",
        charts.len()
    );
    for a in &s.analyses {
        let id = format!("id=\"an-{}\"", a.info.name);
        assert!(page.contains(&id), "no section {id}");
        // The table's first row is the analysis' largest key, with its count.
        if let Some(row) = a.stat.rows.first() {
            let cell = format!("<td>{}</td>", row.agg.count);
            let from = page.find(&id).unwrap();
            let end = page[from..].find("</section>").unwrap() + from;
            assert!(
                page[from..end].contains(&cell),
                "{}: no {cell}",
                a.info.name
            );
        }
    }
    // Every link within the page leads to something on it.
    for part in page.split("href=\"#").skip(1) {
        let target = &part[..part.find('"').unwrap()];
        assert!(
            page.contains(&format!("id=\"{target}\"")),
            "#{target} leads nowhere"
        );
    }
}

#[cfg(feature = "png")]
#[test]
fn a_png_chart_decodes_to_the_charts_size_with_its_bars_drawn() {
    let s = lisa_survey();
    let a = s.analyses.iter().find(|a| !a.stat.rows.is_empty()).unwrap();
    let size = crate::svg::Size { w: 640, h: 420 };
    let svg = crate::svg::stat_chart(&crate::charts::stat_chart(a, 12), size);
    let png = crate::png::svg_to_png(&svg).unwrap();
    let mut reader = png::Decoder::new(std::io::Cursor::new(png))
        .read_info()
        .unwrap();
    let mut pixels = vec![0; reader.output_buffer_size()];
    let frame = reader.next_frame(&mut pixels).unwrap();
    assert_eq!((frame.width, frame.height), (size.w, size.h));
    assert_eq!(frame.color_type, png::ColorType::Rgba);
    // White ground, and the bars (the rectangles with a title) in the colour the SVG
    // gives them.
    let px: std::collections::HashSet<&[u8]> = pixels[..frame.buffer_size()].chunks(4).collect();
    assert!(px.contains(&[255u8, 255, 255, 255][..]));
    let doc = roxmltree::Document::parse(&svg).unwrap();
    let bar = doc
        .descendants()
        .find(|n| n.has_tag_name("rect") && n.children().any(|c| c.has_tag_name("title")))
        .expect("a bar");
    let c = bar.attribute("fill").unwrap().trim_start_matches('#');
    let rgb: Vec<u8> = (0..3)
        .map(|i| u8::from_str_radix(&c[2 * i..2 * i + 2], 16).unwrap())
        .collect();
    assert!(
        px.iter().any(|p| p[..3] == rgb[..] && p[3] == 255),
        "no pixel of the bars' colour #{c}"
    );
    assert!(crate::png::svg_to_png("not an svg")
        .unwrap_err()
        .starts_with("SVG:"));
}
