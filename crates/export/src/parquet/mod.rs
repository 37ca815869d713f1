//! kstate's Parquet directory, written: `kstate convert --to parquet -o DIR` ([`write`],
//! where the tables are described), and the fleet summaries (`kstate summarize`,
//! [`write_summary`], read back by `kstate fleet`). The column rules and the meta table's
//! layout are kstate-format's (`kstate_format::parquet`), which reads the directory back as
//! a trace: one definition for the writer and the reader.

mod meta;
mod summary;
mod write;

pub use summary::{
    read_summary, read_summary_meta, read_summary_of, summary_files, write_summary,
    COLUMNS as SUMMARY_COLUMNS, SUFFIX as SUMMARY_SUFFIX,
};
pub use write::{write, Summary};
