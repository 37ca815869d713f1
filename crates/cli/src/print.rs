//! Printing that more than one command shares (a command does not import another).

use kstate_views::profile::compare::{self, Comparison};

/// The comparison table of `kstate profile --compare-events` and `kstate cachesim`:
/// `header` lines first (text), or `extra`'s members merged into the JSON object;
/// `image` names the column of the symbols' images (binaries, or source files).
pub fn comparison(
    c: &Comparison,
    header: &[String],
    image: &str,
    extra: serde_json::Value,
    json: bool,
    top: usize,
) {
    let n = if top == 0 { c.rows.len() } else { top };
    if json {
        let mut o = match extra {
            serde_json::Value::Object(m) => m,
            _ => serde_json::Map::new(),
        };
        let count = |t: &compare::Total| serde_json::json!({"name": t.name, "total": t.total, "unit": t.unit});
        o.insert("base".into(), count(&c.base));
        o.insert(
            "tested".into(),
            c.tested.iter().map(count).collect::<Vec<_>>().into(),
        );
        o.insert("ratio".into(), c.thresholds.ratio.into());
        o.insert("min_share".into(), c.thresholds.min_share.into());
        let rows: Vec<serde_json::Value> = c
            .rows
            .iter()
            .map(|r| {
                serde_json::json!({
                    "symbol": r.symbol,
                    "image": r.image,
                    "base": r.base,
                    "base_percent": r.base_share,
                    "tested": r.tested.iter().map(|t| serde_json::json!({
                        "count": t.count, "percent": t.share, "ratio": t.ratio,
                    })).collect::<Vec<_>>(),
                    "flagged": r.flagged,
                })
            })
            .collect();
        o.insert("symbols".into(), rows.into());
        println!("{}", serde_json::Value::Object(o));
        return;
    }
    for h in header {
        println!("# {h}");
    }
    let names: Vec<String> = c
        .tested
        .iter()
        .chain([&c.base])
        .map(|t| match t.unit {
            "" => format!("{} ({} in all)", t.name, t.total),
            u => format!("{} ({} {u} in all)", t.name, t.total),
        })
        .collect();
    println!(
        "# share of {} next to share of {}",
        names[..names.len() - 1].join(" and "),
        names[names.len() - 1]
    );
    println!(
        "# * flagged: share of {} at least {}x the share of {}, and at least {}%",
        c.tested
            .iter()
            .map(|t| t.name.as_str())
            .collect::<Vec<_>>()
            .join(" or "),
        c.thresholds.ratio,
        c.base.name,
        c.thresholds.min_share
    );
    println!("#");
    let widths: Vec<usize> = c.tested.iter().map(|t| t.name.len().max(8)).collect();
    let bw = c.base.name.len().max(8);
    let mut head = String::from("#  ");
    for (t, w) in c.tested.iter().zip(&widths) {
        head += &format!(" {:>w$} {:>7}", t.name, "ratio");
    }
    head += &format!(" {:>bw$}  {image:<24} Symbol", c.base.name);
    println!("{head}");
    for r in c.rows.iter().take(n) {
        let mut line = String::from(if r.flagged { " * " } else { "   " });
        for (t, w) in r.tested.iter().zip(&widths) {
            let ratio = match t.ratio {
                Some(x) => format!("{x:.1}x"),
                None => "-".into(),
            };
            line += &format!(" {:>w$} {ratio:>7}", format!("{:.2}%", t.share));
        }
        let img = r.image.rsplit('/').next().unwrap_or(&r.image);
        line += &format!(
            " {:>bw$}  {img:<24} {}",
            format!("{:.2}%", r.base_share),
            r.symbol
        );
        println!("{line}");
    }
    if c.rows.len() > n {
        println!("# ({} more symbols; --top 0 shows all)", c.rows.len() - n);
    }
}
