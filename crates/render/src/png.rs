//! PNG output: the chart's SVG rasterized by resvg with the DejaVu Sans face compiled into
//! the binary (the `dejavu` crate); no system font is looked up, so a PNG looks the same
//! on every machine. Behind the `png` feature (on by default in the `kstate` binary).

use std::sync::OnceLock;

use resvg::{tiny_skia, usvg};

fn options() -> &'static usvg::Options<'static> {
    static OPT: OnceLock<usvg::Options<'static>> = OnceLock::new();
    OPT.get_or_init(|| {
        let mut opt = usvg::Options {
            font_family: "DejaVu Sans".into(),
            ..usvg::Options::default()
        };
        opt.fontdb_mut()
            .load_font_data(dejavu::sans::regular().to_vec());
        opt.fontdb_mut()
            .load_font_data(dejavu::sans::bold().to_vec());
        opt
    })
}

/// Rasterizes `svg` to a PNG of its own width and height.
pub fn svg_to_png(svg: &str) -> Result<Vec<u8>, String> {
    let tree = usvg::Tree::from_str(svg, options()).map_err(|e| format!("SVG: {e}"))?;
    let size = tree.size().to_int_size();
    let mut pm = tiny_skia::Pixmap::new(size.width(), size.height())
        .ok_or_else(|| format!("bad image size {}x{}", size.width(), size.height()))?;
    pm.fill(tiny_skia::Color::WHITE);
    resvg::render(&tree, tiny_skia::Transform::default(), &mut pm.as_mut());
    pm.encode_png().map_err(|e| format!("PNG: {e}"))
}
