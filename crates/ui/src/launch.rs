//! `kstate ui --open`: the browser is launched on a redirect file, never on the URL. A
//! command line is public (any local user reads it with `ps -eo args`), and the URL holds
//! the access token; so, as Jupyter does, the URL goes into a file only its owner can read
//! (created 0600, refusing to follow a planted link), in the user's runtime directory, and
//! the browser opens that file, which sends it on. The file is removed when the server stops.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// The redirect file, removed when dropped.
pub struct RedirectFile {
    path: PathBuf,
}

impl RedirectFile {
    /// Writes the page that sends the browser to `url`.
    pub fn create(url: &str) -> std::io::Result<RedirectFile> {
        let dir = std::env::var_os("XDG_RUNTIME_DIR")
            .map(PathBuf::from)
            .filter(|d| d.is_dir())
            .unwrap_or_else(std::env::temp_dir);
        let path = dir.join(format!("kstate-ui-{}-open.html", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)?;
        let attr = url.replace('&', "&amp;").replace('"', "&quot;");
        write!(
            f,
            "<!doctype html>\n<html><head><meta charset=\"utf-8\">\
             <meta http-equiv=\"refresh\" content=\"0;url={attr}\">\
             <title>kstate ui</title></head>\
             <body><p><a href=\"{attr}\">Open kstate ui</a></p></body></html>\n"
        )?;
        Ok(RedirectFile { path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for RedirectFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn only_the_owner_reads_the_token() {
        let url = "http://127.0.0.1:1234/0123abcd/";
        let f = RedirectFile::create(url).unwrap();
        let meta = std::fs::metadata(f.path()).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        let text = std::fs::read_to_string(f.path()).unwrap();
        assert!(text.contains(&format!("url={url}\"")), "{text}");
        let p = f.path().to_path_buf();
        drop(f);
        assert!(!p.exists());
    }
}
