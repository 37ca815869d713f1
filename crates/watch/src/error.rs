//! What can stop a watch: what was asked of it (rules, escalations, events, options) is
//! refused before anything is recorded, the system refused (tracefs), or the recording
//! itself failed. Front ends report the first as bad arguments and the others as
//! failures of the system (the CLI's exit statuses 2 and 1).

use std::fmt;

#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The watch as asked cannot run; the text says why. Nothing was recorded.
    Arguments(String),
    /// The system refused what the watch needs before recording (tracefs).
    System(String),
    /// Recording failed.
    Recording(kstate_record::Error),
    /// The command to watch could not be run (not found, not executable): the exit
    /// status a shell gives for it (127, 126) and why.
    CommandNotRun { status: u8, message: String },
}

impl Error {
    /// Whether what the user asked for is at fault, not the system.
    pub fn is_bad_input(&self) -> bool {
        matches!(self, Error::Arguments(_))
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Arguments(msg) | Error::System(msg) => f.write_str(msg),
            Error::CommandNotRun { message, .. } => f.write_str(message),
            Error::Recording(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for Error {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_are_bad_arguments_and_the_systems_failures_are_not() {
        let refused = Error::Arguments(crate::Rule::parse("nonsense").unwrap_err());
        assert!(refused.is_bad_input(), "{refused}");
        let text = "alarm rule \"nonsense\": no comparison (>, >=, <, <=, ==) (at character 9)\n    nonsense\n            ^";
        assert_eq!(refused.to_string(), text);

        let system = Error::System("tracefs: not mounted".into());
        assert!(!system.is_bad_input());
        assert_eq!(system.to_string(), "tracefs: not mounted");
    }
}
