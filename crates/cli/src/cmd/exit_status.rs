//! The exit status of the command kstate ran (`record -- CMD`, `run -- CMD`): scripts and
//! CI wrap their command in kstate (`kstate run -- make test && deploy`), so kstate
//! exits with the command's status as `time` and `strace` do, and says it in one line.

use std::os::unix::process::ExitStatusExt;
use std::process::{ExitCode, ExitStatus};

/// What `kstate record --help` and `kstate run --help` say about exit statuses.
macro_rules! exit_status_help {
    () => {
        "Exit status: the command's own status when it fails (128+N when signal N killed it, \
         as shells report it); otherwise 0 when the recording is complete, 1 when recording \
         failed or was cut short (a full disk), 2 for bad arguments."
    };
}
pub(crate) use exit_status_help;

/// The status as shells report it: the exit code, or 128+N when signal N ended it.
pub fn shell_status(st: ExitStatus) -> u8 {
    match (st.code(), st.signal()) {
        (Some(c), _) => c as u8,
        (None, Some(sig)) => 128u8.wrapping_add(sig as u8),
        (None, None) => 1,
    }
}

/// When the command failed: one line on stderr and the status kstate exits with.
pub fn failed(st: Option<ExitStatus>) -> Option<ExitCode> {
    let st = st.filter(|s| !s.success())?;
    let code = shell_status(st);
    match st.signal() {
        Some(sig) => eprintln!(
            "kstate: the command was killed by {} (exit status {code})",
            signal_name(sig)
        ),
        None => eprintln!("kstate: the command exited with status {code}"),
    }
    Some(ExitCode::from(code))
}

fn signal_name(sig: i32) -> String {
    let name = match sig {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGTRAP => "SIGTRAP",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGUSR1 => "SIGUSR1",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGUSR2 => "SIGUSR2",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGALRM => "SIGALRM",
        libc::SIGTERM => "SIGTERM",
        libc::SIGXCPU => "SIGXCPU",
        libc::SIGXFSZ => "SIGXFSZ",
        _ => return format!("signal {sig}"),
    };
    name.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_as_shells_report_them() {
        assert_eq!(shell_status(ExitStatus::from_raw(7 << 8)), 7);
        assert_eq!(shell_status(ExitStatus::from_raw(libc::SIGKILL)), 137);
        assert_eq!(shell_status(ExitStatus::from_raw(libc::SIGSEGV)), 139);
        assert!(failed(Some(ExitStatus::from_raw(0))).is_none());
        assert!(failed(None).is_none());
    }
}
