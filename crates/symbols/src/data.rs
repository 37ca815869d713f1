//! Data addresses to names, for the locks threads waited on: which mapped object of a
//! process holds an address, then that object's data symbols (`main_arena`, a `static`
//! mutex).
//!
//! The objects are the files of the process's recorded executable mappings. One mapping
//! fixes a file's load bias (its start less the virtual address of its file offset); the
//! file's PT_LOAD segments, `.bss` included, then say which addresses it covers, so data
//! in the anonymous pages after `.data` is found too.

use crate::Symbolizer;

/// What an address was found to be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DataName {
    /// A data symbol: `main_arena`, or `name+0x10` inside one.
    Symbol {
        name: String,
        offset: u64,
        image: String,
    },
    /// Inside a mapped file, at this symbol address, but no data symbol covers it.
    Object { image: String, addr: u64 },
}

impl std::fmt::Display for DataName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DataName::Symbol {
                name, offset: 0, ..
            } => f.write_str(name),
            DataName::Symbol { name, offset, .. } => write!(f, "{name}+{offset:#x}"),
            DataName::Object { image, addr } => write!(f, "{image}+{addr:#x}"),
        }
    }
}

impl Symbolizer {
    /// Names `addr` in process `pid` from the mappings known at any time of the recording;
    /// None where no mapped file of the process holds it (heap, stack, anonymous memory).
    pub(crate) fn data_name(&mut self, pid: u32, addr: u64) -> Option<DataName> {
        let mut seen: Vec<String> = Vec::new();
        let maps = self.maps.get(&pid)?.clone();
        for m in maps.iter().rev() {
            if !m.path.starts_with('/') || m.path.starts_with("/memfd:") || seen.contains(&m.path) {
                continue;
            }
            seen.push(m.path.clone());
            let img = self.image(&m.path);
            let Some(at) = img.mapping_addr(m.pgoff) else {
                continue;
            };
            let v = addr.wrapping_sub(m.start.wrapping_sub(at));
            if !img.holds(v) {
                continue;
            }
            let image = m.path.rsplit('/').next().unwrap_or(&m.path).to_string();
            let same_file = match (&m.build_id, &img.build_id) {
                (Some(want), Some(have)) => want == have,
                _ => true,
            };
            return Some(match img.lookup_data(v).filter(|_| same_file) {
                Some((name, offset)) => DataName::Symbol {
                    name: name.to_string(),
                    offset,
                    image,
                },
                None => DataName::Object { image, addr: v },
            });
        }
        None
    }
}
