//! The ring-buffer page layout, read from the kernel's `events/header_page` description
//! rather than assumed: the commit field is a `local_t` (4 bytes on 32-bit kernels, 8 on
//! 64-bit) and sub-buffers may be larger than 4 KiB on kernels 6.8+.

use crate::bytes::Endian;
use crate::error::{Error, Result};

/// The bytes of as many whole pages of `page_size` as fit in `bytes`, at least one page:
/// the size of a batch that reads or copies pages many at a time.
pub fn whole_pages(page_size: usize, bytes: usize) -> usize {
    (bytes / page_size).max(1) * page_size
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageLayout {
    pub endian: Endian,
    /// Offset of the u64 page timestamp (always 0 in practice, but described).
    pub ts_offset: usize,
    pub commit_offset: usize,
    /// 4 or 8.
    pub commit_size: usize,
    /// Where event records start.
    pub data_offset: usize,
    /// Bytes per page (sub-buffer), header included.
    pub page_size: usize,
}

impl PageLayout {
    /// The layout every kernel since 2.6.31 uses, for files that carry no header_page.
    pub fn default_for(endian: Endian, long_size: usize, page_size: usize) -> PageLayout {
        PageLayout {
            endian,
            ts_offset: 0,
            commit_offset: 8,
            commit_size: long_size,
            data_offset: 8 + long_size,
            page_size,
        }
    }

    /// Parses the text of `events/header_page`, e.g.
    /// `field: local_t commit; offset:8; size:8; signed:1;`.
    /// `page_size_hint` is what the container says the page size is; the header's own
    /// `data` size wins when they disagree because it describes the kernel that wrote the pages.
    pub fn parse(text: &[u8], endian: Endian, page_size_hint: Option<usize>) -> Result<PageLayout> {
        let text = String::from_utf8_lossy(text);
        let mut ts = None;
        let mut commit = None;
        let mut data = None;
        let mut pos = 0u64;
        for line in text.split_inclusive('\n') {
            let line_off = pos;
            pos += line.len() as u64;
            let line = line.trim();
            let Some(decl) = line.strip_prefix("field:") else {
                continue;
            };
            let mut name = None;
            let mut offset = None;
            let mut size = None;
            for part in decl.split(';') {
                let part = part.trim();
                if let Some(v) = part.strip_prefix("offset:") {
                    offset = v.trim().parse::<usize>().ok();
                } else if let Some(v) = part.strip_prefix("size:") {
                    size = v.trim().parse::<usize>().ok();
                } else if name.is_none() && !part.is_empty() && !part.starts_with("signed:") {
                    name = part.split_whitespace().last();
                }
            }
            let (Some(name), Some(offset), Some(size)) = (name, offset, size) else {
                return Err(Error::corrupt(
                    line_off,
                    format!("header_page: cannot parse field line {line:?}"),
                ));
            };
            match name {
                "timestamp" => ts = Some(offset),
                "commit" => commit = Some((offset, size)),
                "data" => data = Some((offset, size)),
                _ => {}
            }
        }
        let (Some(ts_offset), Some((commit_offset, commit_size)), Some((data_offset, data_size))) =
            (ts, commit, data)
        else {
            return Err(Error::corrupt(
                0,
                "header_page: missing timestamp, commit or data field",
            ));
        };
        if commit_size != 4 && commit_size != 8 {
            return Err(Error::corrupt(
                0,
                format!("header_page: commit size {commit_size} is neither 4 nor 8"),
            ));
        }
        let described = data_offset + data_size;
        let page_size = if described > data_offset {
            described
        } else {
            page_size_hint.unwrap_or(4096)
        };
        if page_size <= data_offset || page_size > (1 << 26) {
            return Err(Error::corrupt(
                0,
                format!("header_page: implausible page size {page_size}"),
            ));
        }
        Ok(PageLayout {
            endian,
            ts_offset,
            commit_offset,
            commit_size,
            data_offset,
            page_size,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_64_bit_header() {
        let t = b"\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;\n\tfield: local_t commit;\toffset:8;\tsize:8;\tsigned:1;\n\tfield: int overwrite;\toffset:8;\tsize:1;\tsigned:1;\n\tfield: char data;\toffset:16;\tsize:4080;\tsigned:1;\n";
        let l = PageLayout::parse(t, Endian::Little, None).unwrap();
        assert_eq!(
            (l.commit_offset, l.commit_size, l.data_offset, l.page_size),
            (8, 8, 16, 4096)
        );
    }

    #[test]
    fn parses_32_bit_and_large_subbuffers() {
        let t = b"field: u64 timestamp; offset:0; size:8; signed:0;\nfield: local_t commit; offset:8; size:4; signed:1;\nfield: char data; offset:12; size:16372; signed:1;\n";
        let l = PageLayout::parse(t, Endian::Big, None).unwrap();
        assert_eq!((l.commit_size, l.data_offset, l.page_size), (4, 12, 16384));
    }

    #[test]
    fn rejects_garbage() {
        assert!(PageLayout::parse(b"field: nonsense\n", Endian::Little, None).is_err());
        assert!(PageLayout::parse(b"", Endian::Little, None).is_err());
    }
}
