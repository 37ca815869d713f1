//! `--on-alarm CMD`: a shell command run for each firing, beside the watch. Each runs in a
//! process group of its own, so that one that outlives `--on-alarm-timeout` is killed
//! with everything it started; one that fails or is killed is logged. At the end the
//! watch waits for those still running no longer than their timeout.

use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::alarm::Firing;

/// One command running for a firing.
struct Running {
    child: Child,
    rule: String,
    deadline: Instant,
}

pub struct Hooks {
    cmd: String,
    timeout: Duration,
    running: Vec<Running>,
}

/// What became of a command, for the log: a failure or a timeout.
pub struct Outcome {
    pub text: String,
}

impl Hooks {
    pub fn new(cmd: String, timeout: Duration) -> Hooks {
        Hooks {
            cmd,
            timeout,
            running: Vec::new(),
        }
    }

    /// Starts the command for `f` (the details in `KSTATE_ALARM_*`); a command that
    /// cannot be started at all is said at once.
    pub fn fire(&mut self, f: &Firing) -> Option<Outcome> {
        let spawned = Command::new("/bin/sh")
            .arg("-c")
            .arg(&self.cmd)
            .env("KSTATE_ALARM_RULE", &f.rule)
            .env("KSTATE_ALARM_VALUE", f.value.to_string())
            .env("KSTATE_ALARM_THRESHOLD", f.threshold.to_string())
            .env("KSTATE_ALARM_KEY", f.key.clone().unwrap_or_default())
            .env("KSTATE_ALARM_START", f.start.to_string())
            .env("KSTATE_ALARM_END", f.end.to_string())
            .stdin(Stdio::null())
            .process_group(0)
            .spawn();
        match spawned {
            Ok(child) => {
                self.running.push(Running {
                    child,
                    rule: f.rule.clone(),
                    deadline: Instant::now() + self.timeout,
                });
                None
            }
            Err(e) => Some(Outcome {
                text: format!("--on-alarm for {}: cannot start /bin/sh: {e}", f.rule),
            }),
        }
    }

    /// Reaps the commands that ended and kills those past their timeout: what failed.
    pub fn poll(&mut self) -> Vec<Outcome> {
        let now = Instant::now();
        let mut told = Vec::new();
        let timeout = self.timeout;
        let cmd = &self.cmd;
        self.running.retain_mut(|r| match r.child.try_wait() {
            Ok(Some(st)) => {
                if let Some(why) = failure(st) {
                    told.push(Outcome {
                        text: format!("--on-alarm {cmd:?} for {}: {why}", r.rule),
                    });
                }
                false
            }
            Ok(None) if now >= r.deadline => {
                kill_group(&mut r.child);
                told.push(Outcome {
                    text: format!(
                        "--on-alarm {cmd:?} for {}: still running after {} s \
                         (--on-alarm-timeout); killed it and its process group",
                        r.rule,
                        timeout.as_secs_f64()
                    ),
                });
                false
            }
            Ok(None) => true,
            Err(_) => false,
        });
        told
    }

    /// At the end: waits for the commands still running, each until its deadline, and
    /// kills those past it. What failed.
    pub fn finish(&mut self) -> Vec<Outcome> {
        let mut told = Vec::new();
        while !self.running.is_empty() {
            told.extend(self.poll());
            if !self.running.is_empty() {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        told
    }
}

/// Why a command's status is a failure, if it is.
fn failure(st: std::process::ExitStatus) -> Option<String> {
    match (st.code(), st.signal()) {
        (Some(0), _) => None,
        (Some(127), _) => Some("exited with status 127 (command not found)".into()),
        (Some(c), _) => Some(format!("exited with status {c}")),
        (None, Some(s)) => Some(format!("killed by signal {s}")),
        (None, None) => Some("ended abnormally".into()),
    }
}

fn kill_group(child: &mut Child) {
    // SAFETY: signals the process group our own child leads (process_group(0)).
    unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
    let _ = child.wait();
}
