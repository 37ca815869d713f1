//! The print-format parser and evaluator (`kstate dump`'s text): any format file text,
//! kallsyms and printk text, and record bytes. Whatever parses must print any record
//! without panicking or running away. `format_once` compiles the print fmt into the
//! `Program` that `dump` runs and prints through it (and, for a program of literals and
//! integers, checks that `dump`'s cursor path writes the same message).
#![no_main]
use kstate_format::print_fmt::{format_bprint_once, format_once, Symbols};
use kstate_format::{Endian, EventFormat};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // Sections separated by 0xff: format text, payload, kallsyms, printk formats.
    let mut parts = data.split(|&b| b == 0xff);
    let text = parts.next().unwrap_or_default();
    let payload = parts.next().unwrap_or_default();
    let kallsyms = parts.next();
    let printk = parts.next();
    let syms = Symbols::new(kallsyms, printk);
    let mut out = Vec::new();
    for (long, endian) in [(8, Endian::Little), (4, Endian::Big)] {
        if let Ok(ev) = EventFormat::parse(text, "fuzz", long) {
            let _ = format_once(&ev, &syms, long, payload, endian, &mut out);
        }
        out.clear();
        // The same text as a trace_printk format, with the record as its buffer.
        let _ = format_bprint_once(text, 0x1234, &syms, long, payload, 0, endian, &mut out);
        out.clear();
    }
});
