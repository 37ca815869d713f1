//! The task, CPU and time filters that `kstate analyze` and `kstate profile` share, written
//! once: a command takes them with `#[command(flatten)]` and words their help for what it
//! selects (pairs, samples) with `#[command(mut_arg(...))]`.

use kstate_analyze::filter::{parse_window, Filters, WindowSpec};

#[derive(clap::Args, Debug, Clone, Default)]
pub struct FilterArgs {
    /// Only those in FROM:TO
    #[arg(long, value_parser = parse_window, value_name = "FROM:TO")]
    pub window: Option<WindowSpec>,
    /// Only those outside FROM:TO
    #[arg(long, value_parser = parse_window, value_name = "FROM:TO")]
    pub not_window: Option<WindowSpec>,
    /// Only these processes (comma-separated)
    #[arg(long, value_delimiter = ',')]
    pub pid: Vec<i32>,
    /// Only these threads (comma-separated)
    #[arg(long, value_delimiter = ',')]
    pub tid: Vec<i32>,
    /// Only tasks with this comm (comma-separated)
    #[arg(long, value_delimiter = ',')]
    pub comm: Vec<String>,
    /// Only those on these CPUs (comma-separated)
    #[arg(long, value_delimiter = ',')]
    pub cpu: Vec<u32>,
}

impl FilterArgs {
    /// The engine's filters for these options; the rest (keys, values) as `Filters` has them
    /// by default.
    pub fn filters(&self) -> Filters {
        Filters {
            window: self.window,
            not_window: self.not_window,
            pids: self.pid.clone(),
            tids: self.tid.clone(),
            comms: self.comm.clone(),
            cpus: self.cpu.clone(),
            ..Filters::default()
        }
    }
}
