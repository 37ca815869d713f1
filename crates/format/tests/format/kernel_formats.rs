//! Every event format file of the running kernel must parse: the kernel is the
//! authority on what format files look like.

use kstate_format::{EventFormat, FieldKind};
use std::path::Path;

fn tracefs() -> Option<&'static Path> {
    let p = Path::new("/sys/kernel/tracing");
    if !p.join("events").exists() {
        // Root on the CI machines; mount as the recorder would.
        let _ = std::process::Command::new("mount")
            .args(["-t", "tracefs", "nodev", "/sys/kernel/tracing"])
            .status();
    }
    p.join("events/header_page").exists().then_some(p)
}

#[test]
fn all_kernel_formats_parse() {
    let Some(fs) = tracefs() else {
        panic!(
            "tracefs is not available at /sys/kernel/tracing and could not be mounted (need root)"
        );
    };
    let mut n = 0;
    let mut dynamic = 0;
    for sys in std::fs::read_dir(fs.join("events")).unwrap() {
        let sys = sys.unwrap().path();
        if !sys.is_dir() {
            continue;
        }
        for ev in std::fs::read_dir(&sys).unwrap() {
            let f = ev.unwrap().path().join("format");
            let Ok(text) = std::fs::read(&f) else {
                continue;
            };
            let sysname = sys.file_name().unwrap().to_str().unwrap();
            let fmt = EventFormat::parse(&text, sysname, 8)
                .unwrap_or_else(|e| panic!("{}: {e}", f.display()));
            assert_eq!(
                Some(fmt.name.as_str()),
                f.parent().unwrap().file_name().unwrap().to_str()
            );
            assert_eq!(
                fmt.common.first().map(|c| c.name.as_str()),
                Some("common_type"),
                "{}",
                f.display()
            );
            for fld in &fmt.fields {
                if matches!(fld.kind, FieldKind::Dynamic { .. }) {
                    dynamic += 1;
                }
            }
            n += 1;
        }
    }
    assert!(n > 500, "only {n} event formats found");
    assert!(dynamic > 50, "only {dynamic} __data_loc fields found");
}
