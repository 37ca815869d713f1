//! Event format files (`events/SYSTEM/EVENT/format`): an event's id, name and field
//! layout. Parsed once per event type; after that a field is read by offset and size.

use crate::error::Result;

/// How a field's bytes are laid out in the record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldKind {
    /// A scalar integer (or pointer) of `Field::size` bytes: 1, 2, 4 or 8.
    Int,
    /// A fixed-size array of `len` elements of `elem` bytes; `char[N]` arrays are strings.
    Array {
        len: usize,
        elem: usize,
        string: bool,
    },
    /// `__data_loc` / `__rel_loc`: a 4-byte word (2 bytes in very old kernels) whose low 16
    /// bits are the offset of the data and high 16 bits its length. For `__rel_loc` the
    /// offset counts from the end of the word.
    Dynamic {
        elem: usize,
        string: bool,
        relative: bool,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    pub name: String,
    /// The declared C type without the field name, e.g. `unsigned long`, `char[16]`,
    /// `__data_loc char[]`.
    pub type_name: String,
    pub offset: usize,
    pub size: usize,
    pub signed: bool,
    pub kind: FieldKind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventFormat {
    pub id: u32,
    pub system: String,
    pub name: String,
    /// The `common_*` fields every event starts with.
    pub common: Vec<Field>,
    /// The event's own fields, in file order.
    pub fields: Vec<Field>,
    pub print_fmt: String,
}

impl EventFormat {
    /// Parses a format file's text. `long_size` (4 or 8) sizes `long` elements of dynamic
    /// arrays, whose element size the file does not state.
    pub fn parse(text: &[u8], system: &str, long_size: usize) -> Result<EventFormat> {
        let _ = (text, system, long_size);
        todo!("event format parser")
    }

    /// Looks a field up by name among the event's own fields, then the common ones.
    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields
            .iter()
            .chain(self.common.iter())
            .find(|f| f.name == name)
    }
}
