//! SIGINT, SIGTERM and SIGHUP end a recording cleanly instead of killing the recorder:
//! the handler only notes the signal; the recorder sees it, stops tracing, writes the file
//! and removes its instance.

use std::sync::atomic::{AtomicI32, Ordering};

static CAUGHT: AtomicI32 = AtomicI32::new(0);

extern "C" fn note(sig: libc::c_int) {
    CAUGHT.store(sig, Ordering::SeqCst);
}

const STOP_SIGNALS: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// Installs the handlers (for the rest of the process's life: a second Ctrl-C while the
/// file is being written must not leave it half done).
pub fn install() {
    for sig in STOP_SIGNALS {
        // SAFETY: sigaction with a handler that only stores to an atomic, which is
        // async-signal-safe; the struct is fully initialised.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = note as extern "C" fn(libc::c_int) as usize;
            sa.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

/// The stop signal received, if any.
pub fn caught() -> Option<i32> {
    match CAUGHT.load(Ordering::SeqCst) {
        0 => None,
        s => Some(s),
    }
}

pub fn name(sig: i32) -> &'static str {
    match sig {
        libc::SIGINT => "SIGINT",
        libc::SIGTERM => "SIGTERM",
        libc::SIGHUP => "SIGHUP",
        _ => "a signal",
    }
}

static SAVE_ASKED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

extern "C" fn note_save(_: libc::c_int) {
    SAVE_ASKED.store(true, Ordering::SeqCst);
}

/// SIGUSR1 asks a watch's flight recorder for a save now, instead of ending the process
/// (its default): installed by the watch that can save.
pub fn install_save_request() {
    // SAFETY: as in `install`: the handler only stores to an atomic.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = note_save as extern "C" fn(libc::c_int) as usize;
        sa.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(libc::SIGUSR1, &sa, std::ptr::null_mut());
    }
}

/// Whether SIGUSR1 came since the last call.
pub fn save_requested() -> bool {
    SAVE_ASKED.swap(false, Ordering::SeqCst)
}
