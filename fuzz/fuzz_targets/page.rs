//! Any bytes as a ring-buffer page, under 64- and 32-bit layouts of either byte order.
#![no_main]
use kstate_format::page::PageRecords;
use kstate_format::{Endian, PageLayout};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&sel, page)) = data.split_first() else {
        return;
    };
    let endian = if sel & 1 == 0 {
        Endian::Little
    } else {
        Endian::Big
    };
    let long = if sel & 2 == 0 { 8 } else { 4 };
    let layout = PageLayout::default_for(endian, long, page.len().max(16));
    if let Ok((_, recs)) = PageRecords::new(page, &layout) {
        for r in recs {
            if let Ok((_, payload)) = r {
                assert!(payload.len() <= page.len());
            }
        }
    }
});
