//! What was skipped as damaged or cut short, as every report shows it: in JSON as one
//! object per problem (`{"file", "cpu", "offset", "kind", "problem"}`, null where a
//! problem has no CPU or offset), in HTML as a table at the top of the page. The text
//! front ends print each problem as the reader's error reads.

use kstate_format::{Error, ErrorKind};
use serde_json::{json, Value};

use crate::svg::esc;

/// The JSON `"damage"` member's value.
pub fn json(damage: &[Error]) -> Value {
    Value::Array(
        damage
            .iter()
            .map(|e| {
                json!({
                    "file": e.path.as_ref().map(|p| p.display().to_string()),
                    "cpu": e.cpu,
                    "offset": e.offset,
                    "kind": kind(e.kind),
                    "problem": e.msg,
                })
            })
            .collect(),
    )
}

fn kind(k: ErrorKind) -> &'static str {
    match k {
        ErrorKind::Truncated => "truncated",
        ErrorKind::Corrupt => "corrupt",
        ErrorKind::BadMagic => "bad magic",
        ErrorKind::Unsupported => "unsupported",
        ErrorKind::Io => "io",
        ErrorKind::LostSection(_) => "lost section",
        _ => "input",
    }
}

/// The HTML section that says the page covers only what could be read, and what was
/// skipped where; empty when nothing was.
pub fn html(damage: &[Error]) -> String {
    if damage.is_empty() {
        return String::new();
    }
    let mut h = String::from(
        "<section id=\"damage\"><h2 class=\"lost\">damaged input</h2><p class=\"lost\">\
         The file is damaged or cut short: what follows covers what could be read. \
         Skipped:</p><table class=\"kv\"><tr><th>file</th><th>CPU</th><th>offset</th>\
         <th>problem</th></tr>",
    );
    for e in damage {
        let file = e
            .path
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        let cpu = e.cpu.map(|c| c.to_string()).unwrap_or_default();
        let offset = e
            .offset
            .map(|o| format!("offset {o} (0x{o:x})"))
            .unwrap_or_default();
        h.push_str(&format!(
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&file),
            cpu,
            offset,
            esc(&e.msg)
        ));
    }
    h.push_str("</table></section>\n");
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn each_problem_with_its_file_cpu_and_offset() {
        let e = Error::corrupt(4096, "compressed chunk of 1808 bytes is damaged")
            .on_cpu(5)
            .in_file(Path::new("t<1>.dat"));
        let cut = Error::new(ErrorKind::Truncated, None, "the file ends early");
        let v = json(&[e.clone(), cut]);
        assert_eq!(
            v,
            json!([
                {"file": "t<1>.dat", "cpu": 5, "offset": 4096, "kind": "corrupt",
                 "problem": "compressed chunk of 1808 bytes is damaged"},
                {"file": null, "cpu": null, "offset": null, "kind": "truncated",
                 "problem": "the file ends early"},
            ])
        );
        let h = html(&[e]);
        assert!(h.contains("<td>t&lt;1&gt;.dat</td><td>5</td><td>offset 4096 (0x1000)</td>"));
        assert_eq!(html(&[]), "");
    }
}
