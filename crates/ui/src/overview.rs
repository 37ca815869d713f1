//! The overview's lanes from each file's [`Summary`]: one pass per lane over the file,
//! made when the server starts ([`App::warm_up`]), then every span, syscall key, thread
//! and CPU filter is binned from memory (11 M events: a key click or a zoom re-read the
//! file, 0.8-1.7 s).

use std::sync::Arc;

use kstate_views::lanes::Summary;

use crate::api::App;

impl App {
    /// The summary of file `f`, made once (the first asker waits).
    pub(crate) fn summary_of(&self, f: usize) -> Result<Arc<Summary>, String> {
        let f = self.file_at(f)?;
        self.summaries.get_or(
            &format!("{f}"),
            |s| s.bytes(),
            || {
                let source = self.files[f].source().ok_or("no source")?;
                Ok(Arc::new(Summary::of(source)))
            },
        )
    }
}
