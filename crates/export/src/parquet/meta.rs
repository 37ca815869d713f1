//! Writes [`META_FILE`]: the rows `kstate_format::parquet::meta` lays out for a trace (and
//! reads back when the directory is opened), in its [`SCHEMA`].

use std::path::Path;
use std::sync::Arc;

use parquet::basic::Compression;
use parquet::data_type::{ByteArrayType, Int64Type};
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::parser::parse_message_type;

use kstate_format::parquet::meta::{rows, Conversion, Rows, SCHEMA};
use kstate_format::parquet::META_FILE;
use kstate_format::Trace;

/// Writes [`META_FILE`] for `trace` into `dir`, next to the tables `c` describes.
pub fn write_meta(trace: &Trace, dir: &Path, c: &Conversion) -> crate::error::Result<()> {
    write_rows(&dir.join(META_FILE), rows(trace, c))
}

fn write_rows(path: &Path, r: Rows) -> crate::error::Result<()> {
    // The encoder's failures are the write's: they name the file, as a read's do.
    let perr = |e: parquet::errors::ParquetError| crate::Error::Encode {
        path: path.to_path_buf(),
        msg: format!("Parquet: {e}"),
    };
    let schema = Arc::new(parse_message_type(SCHEMA).expect("a valid schema"));
    let props = Arc::new(
        WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .set_created_by(format!("kstate {}", env!("CARGO_PKG_VERSION")))
            .build(),
    );
    let f =
        kstate_format::output::NewFile::create(path).map_err(|e| crate::Error::write(path, e))?;
    let mut w = SerializedFileWriter::new(f, schema, props).map_err(perr)?;
    let mut rg = w.next_row_group().map_err(perr)?;
    let mut col = 0;
    while let Some(mut cw) = rg.next_column().map_err(perr)? {
        let res = match col {
            0 => cw.typed::<ByteArrayType>().write_batch(&r.kind, None, None),
            1 => cw
                .typed::<ByteArrayType>()
                .write_batch(&r.key.0, Some(&r.key.1), None),
            2 => cw
                .typed::<Int64Type>()
                .write_batch(&r.a.0, Some(&r.a.1), None),
            3 => cw
                .typed::<Int64Type>()
                .write_batch(&r.b.0, Some(&r.b.1), None),
            4 => cw
                .typed::<Int64Type>()
                .write_batch(&r.c.0, Some(&r.c.1), None),
            _ => cw
                .typed::<ByteArrayType>()
                .write_batch(&r.data.0, Some(&r.data.1), None),
        };
        res.map_err(perr)?;
        cw.close().map_err(perr)?;
        col += 1;
    }
    rg.close().map_err(perr)?;
    let mut f = w.into_inner().map_err(perr)?;
    f.persist().map_err(|e| crate::Error::write(path, e))
}
