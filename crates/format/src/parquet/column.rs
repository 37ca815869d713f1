//! One column of a row group, decoded a batch at a time: the values as the file stores
//! them (INT32, INT64 or byte arrays) and, for an optional column, its definition levels.
//! Shared by the trace rebuild here and kstate-export's summary reader, which differ in
//! how they walk a batch's rows, not in how they fill it.

use parquet::column::reader::ColumnReader;
use parquet::data_type::ByteArray;

/// One column's decoded batch of values (an optional column's nulls are not in it).
pub enum Vals {
    I32(Vec<i32>),
    I64(Vec<i64>),
    Bytes(Vec<ByteArray>),
}

impl Vals {
    /// An empty batch of the type `reader` decodes, if it is one of the three.
    pub fn of(reader: &ColumnReader) -> Option<Vals> {
        match reader {
            ColumnReader::Int32ColumnReader(_) => Some(Vals::I32(Vec::new())),
            ColumnReader::Int64ColumnReader(_) => Some(Vals::I64(Vec::new())),
            ColumnReader::ByteArrayColumnReader(_) => Some(Vals::Bytes(Vec::new())),
            _ => None,
        }
    }

    /// Replaces the batch with the next `n` rows of `reader` (`def`: the definition
    /// levels, for an optional column); returns how many rows there were, or `None` when
    /// `reader` does not decode this batch's type.
    pub fn read(
        &mut self,
        reader: &mut ColumnReader,
        def: Option<&mut Vec<i16>>,
        n: usize,
    ) -> Option<parquet::errors::Result<usize>> {
        let rows = match (reader, self) {
            (ColumnReader::Int32ColumnReader(r), Vals::I32(v)) => {
                v.clear();
                r.read_records(n, def, None, v)
            }
            (ColumnReader::Int64ColumnReader(r), Vals::I64(v)) => {
                v.clear();
                r.read_records(n, def, None, v)
            }
            (ColumnReader::ByteArrayColumnReader(r), Vals::Bytes(v)) => {
                v.clear();
                r.read_records(n, def, None, v)
            }
            _ => return None,
        };
        Some(rows.map(|(rows, _, _)| rows))
    }

    /// Value `i` of the batch as an integer (`None` past its end or for byte arrays).
    pub fn int(&self, i: usize) -> Option<i64> {
        match self {
            Vals::I32(v) => v.get(i).map(|&x| i64::from(x)),
            Vals::I64(v) => v.get(i).copied(),
            Vals::Bytes(_) => None,
        }
    }

    /// Value `i` of the batch as bytes (`None` past its end or for integers).
    pub fn bytes(&self, i: usize) -> Option<&[u8]> {
        match self {
            Vals::Bytes(v) => v.get(i).map(|b| b.data()),
            _ => None,
        }
    }
}
