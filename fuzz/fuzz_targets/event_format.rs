//! Any text as an event format file; whatever parses must read fields from any payload
//! without panicking.
#![no_main]
use kstate_format::{Endian, EventFormat};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let split = data.iter().position(|&b| b == 0xff).unwrap_or(data.len());
    let (text, payload) = data.split_at(split);
    if let Ok(ev) = EventFormat::parse(text, "fuzz", 8) {
        for f in ev.fields.iter().chain(ev.common.iter()) {
            let mut out = Vec::new();
            f.value(payload, Endian::Little).write_json(&mut out);
            f.write_raw_text(payload, Endian::Big, 8, None, &mut out);
        }
    }
});
