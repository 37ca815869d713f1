//! The page's files, embedded in the binary: plain HTML, CSS and JavaScript written by
//! hand (no build step, no framework, nothing fetched from the network).

const FILES: &[(&str, &str, &str)] = &[
    ("", HTML, include_str!("../assets/index.html")),
    ("index.html", HTML, include_str!("../assets/index.html")),
    ("app.css", CSS, include_str!("../assets/app.css")),
    ("util.js", JS, include_str!("../assets/util.js")),
    ("app.js", JS, include_str!("../assets/app.js")),
    ("timeline.js", JS, include_str!("../assets/timeline.js")),
    ("why.js", JS, include_str!("../assets/why.js")),
    ("events.js", JS, include_str!("../assets/events.js")),
    ("flame.js", JS, include_str!("../assets/flame.js")),
    ("panels.js", JS, include_str!("../assets/panels.js")),
];

const HTML: &str = "text/html; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";
const JS: &str = "text/javascript; charset=utf-8";

/// The content type and text of the page's file `name`.
pub fn find(name: &str) -> Option<(&'static str, &'static str)> {
    FILES
        .iter()
        .find(|(n, _, _)| *n == name)
        .map(|(_, t, body)| (*t, *body))
}
