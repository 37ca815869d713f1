//! A flame graph as a standalone SVG, from folded stacks (root first, `;`-separated, with
//! sample counts): each frame a box as wide as its samples, callers below callees, a
//! tooltip (`<title>`) with the name, samples and share. No script: it reads anywhere.

use std::collections::BTreeMap;
use std::fmt::Write;

#[derive(Default)]
struct Node {
    samples: u64,
    children: BTreeMap<String, Node>,
}

const WIDTH: f64 = 1200.0;
const ROW: f64 = 16.0;
const PAD: f64 = 10.0;
const TITLE: f64 = 24.0;

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A warm colour from the name, stable across runs; kernel frames (`_[k]`, as
/// stackcollapse marks them) in oranges, user frames in reds and yellows.
fn color(name: &str) -> String {
    let mut h: u32 = 2166136261;
    for b in name.bytes() {
        h = (h ^ b as u32).wrapping_mul(16777619);
    }
    let (r, g, b) = if name.ends_with("_[k]") {
        (230 + h % 25, 120 + (h >> 8) % 40, 20 + (h >> 16) % 30)
    } else {
        (205 + h % 50, 80 + (h >> 8) % 130, 40 + (h >> 16) % 40)
    };
    format!("rgb({r},{g},{b})")
}

/// The SVG for `folded` (stack, samples); `title` heads the picture.
pub fn svg(folded: &[(String, u64)], title: &str) -> String {
    let mut root = Node::default();
    let mut depth = 0usize;
    for (stack, n) in folded {
        root.samples += n;
        let mut node = &mut root;
        let mut d = 0;
        for f in stack.split(';').filter(|f| !f.is_empty()) {
            node = node.children.entry(f.to_string()).or_default();
            node.samples += n;
            d += 1;
        }
        depth = depth.max(d);
    }
    let height = TITLE + PAD * 2.0 + ROW * (depth + 1) as f64;
    let mut out = String::new();
    let _ = write!(
        out,
        "<?xml version=\"1.0\" standalone=\"no\"?>\n\
<svg version=\"1.1\" width=\"{WIDTH}\" height=\"{height}\" viewBox=\"0 0 {WIDTH} {height}\" xmlns=\"http://www.w3.org/2000/svg\">\n\
<rect x=\"0\" y=\"0\" width=\"{WIDTH}\" height=\"{height}\" fill=\"#f8f8f8\"/>\n\
<text x=\"{}\" y=\"18\" font-family=\"monospace\" font-size=\"14\" text-anchor=\"middle\">{}</text>\n",
        WIDTH / 2.0,
        esc(title)
    );
    let total = root.samples.max(1) as f64;
    let scale = (WIDTH - 2.0 * PAD) / total;
    // The root ("all") at the bottom, callees above their callers.
    let mut stack: Vec<(&str, &Node, f64, usize)> = vec![("all", &root, PAD, 0)];
    while let Some((name, node, x, d)) = stack.pop() {
        let w = node.samples as f64 * scale;
        let y = height - PAD - ROW * (d + 1) as f64;
        if w >= 0.3 {
            let pct = node.samples as f64 * 100.0 / total;
            let _ = writeln!(
                out,
                "<g><title>{} ({} samples, {pct:.2}%)</title><rect x=\"{x:.2}\" y=\"{y:.1}\" width=\"{w:.2}\" height=\"{}\" fill=\"{}\" rx=\"2\"/>",
                esc(name),
                node.samples,
                ROW - 1.0,
                if d == 0 { "rgb(200,200,200)".into() } else { color(name) }
            );
            // As many characters as fit (about 7 px each at 11 px monospace).
            let fit = ((w - 4.0) / 7.0) as usize;
            if fit >= 3 {
                let label: String = if name.chars().count() <= fit {
                    name.to_string()
                } else {
                    let mut s: String = name.chars().take(fit - 2).collect();
                    s.push_str("..");
                    s
                };
                let _ = writeln!(
                    out,
                    "<text x=\"{:.2}\" y=\"{:.1}\" font-family=\"monospace\" font-size=\"11\">{}</text>",
                    x + 2.0,
                    y + ROW - 4.0,
                    esc(&label)
                );
            }
            let _ = writeln!(out, "</g>");
        }
        let mut cx = x;
        for (cname, child) in &node.children {
            stack.push((cname, child, cx, d + 1));
            cx += child.samples as f64 * scale;
        }
    }
    out.push_str("</svg>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boxes_follow_the_stacks() {
        let s = svg(
            &[
                ("main;a;hot".into(), 2),
                ("main;b;hot".into(), 1),
                ("main;<&>".into(), 1),
            ],
            "t",
        );
        assert!(s.starts_with("<?xml") && s.ends_with("</svg>\n"));
        assert!(s.contains("<title>all (4 samples, 100.00%)</title>"));
        assert!(s.contains("<title>main (4 samples, 100.00%)</title>"));
        assert!(s.contains("<title>a (2 samples, 50.00%)</title>"));
        assert!(s.contains("<title>hot (1 samples, 25.00%)</title>"));
        assert!(s.contains("&lt;&amp;&gt;"));
        assert_eq!(s.matches("<rect").count(), 1 + 1 + 1 + 2 + 2 + 1);
    }
}
