//! Print fmts nested deep, built from the input: each step wraps the argument so far in a
//! parenthesis, a unary operator, a cast, a `?:` (in the middle or chained), an index, a
//! helper call (`__print_symbolic`, `__print_flags`, `jiffies_to_msecs`, ...) or an
//! operator chain, repeated up to thousands of times. Whatever the nesting, parsing and
//! printing must neither panic nor exhaust the stack (kstate refuses what nests past
//! `print_fmt::MAX_DEPTH`), and a format of a few levels must not be refused as too deep.
#![no_main]
use kstate_format::print_fmt::{format_once, Symbols, MAX_DEPTH};
use kstate_format::{Endian, EventFormat};
use libfuzzer_sys::fuzz_target;

/// Wraps `inner` with construct `kind`; returns how many levels it may add at most.
fn wrap(kind: u8, inner: &str) -> (String, usize) {
    match kind % 16 {
        0 => (format!("({inner})"), 1),
        1 => (format!("!{inner}"), 1),
        2 => (format!("-{inner}"), 1),
        3 => (format!("~{inner}"), 1),
        4 => (format!("(u32){inner}"), 2),
        5 => (format!("REC->x ? {inner} : 0"), 3),
        6 => (format!("{inner} ? 1 : 0"), 3),
        7 => (format!("REC->x ? 1 : {inner}"), 3),
        8 => (format!("{inner} + REC->x"), 2),
        9 => (format!("REC->x - {inner}"), 2),
        10 => (format!("REC->x * ({inner}) | REC->y"), 3),
        11 => (format!("__print_symbolic({inner}, {{ 1, \"one\" }}, {{ 2, \"two\" }})"), 3),
        12 => (format!("__print_flags({inner}, \"|\", {{ 1, \"A\" }}, {{ 2, \"B\" }})"), 3),
        13 => (format!("jiffies_to_msecs({inner})"), 3),
        14 => (format!("REC->arr[{inner}]"), 3),
        _ => (format!("(({inner}) << 1)"), 3),
    }
}

fuzz_target!(|data: &[u8]| {
    // Pairs of (construct, repeat): a repeat byte of 255 means thousands.
    let mut arg = "REC->x".to_string();
    let mut levels = 1usize;
    let mut helper = false;
    for pair in data.chunks(2).take(64) {
        let kind = pair[0];
        let n = match pair.get(1).copied().unwrap_or(1) {
            255 => 5_000,
            254 => 600,
            r => (r % 8) as usize + 1,
        };
        helper |= matches!(kind % 16, 11 | 12 | 13);
        for _ in 0..n {
            let (a, l) = wrap(kind, &arg);
            arg = a;
            levels += l;
        }
        if arg.len() > 400_000 {
            break;
        }
    }
    let conv = if helper { "%s" } else { "%d" };
    let text = format!(
        "name: nest\nID: 7\nformat:\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
         \tfield:int x;\toffset:8;\tsize:4;\tsigned:1;\n\
         \tfield:int y;\toffset:12;\tsize:4;\tsigned:1;\n\
         \tfield:int arr[4];\toffset:16;\tsize:16;\tsigned:1;\n\n\
         print fmt: \"v={conv}\", {arg}\n"
    );
    let Ok(ev) = EventFormat::parse(text.as_bytes(), "fuzz", 8) else {
        return;
    };
    let mut payload = vec![0u8; 32];
    payload[8] = 1;
    payload[12] = 2;
    let syms = Symbols::default();
    let mut out = Vec::new();
    match format_once(&ev, &syms, 8, &payload, Endian::Little, &mut out) {
        Ok(_) => {}
        Err(e) if e.contains("nests deeper than") => {
            // Only what nests deep is refused as too deep.
            assert!(levels > MAX_DEPTH, "refused at {levels} levels: {e}");
        }
        Err(_) => {}
    }
});
