//! How a command that read a damaged or cut file ends: it reports what it could read,
//! then names what it skipped (each problem once, as the reader's error reads: the
//! file, the CPU, the offset), and exits 2, as for any bad input. One function, so that
//! no command reports the damage differently or forgets the status.

use std::process::ExitCode;

use kstate_format::Error;

/// Prints each of `damage` on stderr; the exit status for a command that did its work
/// on input that held it.
pub fn finish(damage: &[Error]) -> ExitCode {
    for e in damage {
        eprintln!("kstate: {e}");
    }
    if damage.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(crate::EXIT_BAD_INPUT)
    }
}
