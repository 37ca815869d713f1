//! `kstate bench chat`: the seeds' chat benchmark (seed 001 §5, seed 003 §3.4.2.2), a
//! scheduler stress: rooms of users exchanging 100-byte messages over loopback TCP
//! through a relay server, four threads per user, reported as messages delivered per
//! second. The program itself is `kstate workload chat` (so `kstate record`, `run` and
//! `scale` can run it); `bench chat` runs it in a child process and reports.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, ExitCode, Stdio};
use std::sync::{mpsc, Arc, Barrier};
use std::thread::JoinHandle;
use std::time::Instant;

use crate::Error;
use serde_json::{json, Value};

/// Bytes per message, as in the original chat benchmark.
pub const MSG: usize = 100;

const THREADS_HELP: &str = "\
Threads: per user, on the client side a sender (writes its MESSAGES messages) and a
receiver (reads the (USERS-1) x MESSAGES messages the others of its room sent); on the
server side a reader (reads the user's messages and queues each for every other user of
the room) and a writer (writes the user's queue to its connection): 4 per user, as in the
seed's chat (30 rooms x 20 users = 2,400 threads there). Server and clients are threads of
one process, named chat-srv-rd/chat-srv-wr/chat-cli-tx/chat-cli-rx; every user has its own
TCP connection over 127.0.0.1 with TCP_NODELAY (one segment per message).

Delivered messages = ROOMS x USERS x (USERS-1) x MESSAGES. The clock starts when every
connection is up and all threads exist, and stops when the last receiver has read its
last message; CPU user/sys are the process's over that time (getrusage).";

/// `kstate workload chat`: one run of the chat benchmark in this process.
#[derive(clap::Args, Clone)]
#[command(after_help = THREADS_HELP)]
pub struct ChatArgs {
    /// Chat rooms
    #[arg(long, default_value_t = 4, value_parser = kstate_args::int::<usize>(1..=1000))]
    pub rooms: usize,
    /// Users per room (at least 2)
    #[arg(long, default_value_t = 10, value_parser = kstate_args::int::<usize>(2..=1000))]
    pub users: usize,
    /// Messages each user sends to its room
    #[arg(long, default_value_t = 300, value_parser = kstate_args::int::<u64>(1..=10_000_000))]
    pub messages: u64,
    /// Print the result as one JSON line
    #[arg(long)]
    pub json: bool,
}

/// `kstate bench chat`.
#[derive(clap::Args)]
#[command(after_help = format!("{THREADS_HELP}\n\n\
    Each run is `kstate workload chat` in a child process; the median run (by messages/s)\n\
    is reported. The seed's setting: --rooms 30 --users 20 --messages 300 (LKST 2004:\n\
    391,509 messages/s untraced on a 2.8 GHz Xeon, kernel 2.4).\n\n\
    Example:\n  kstate bench chat --rooms 10 --users 20 --messages 100"))]
pub struct Args {
    #[command(flatten)]
    chat: ChatArgs,
    /// Runs; the median is reported
    #[arg(long, default_value_t = 3, value_parser = kstate_args::int::<usize>(crate::bench::RUNS))]
    runs: usize,
}

/// One run's figures.
#[derive(Debug, Clone, Copy)]
pub struct ChatResult {
    pub threads: usize,
    pub delivered: u64,
    pub elapsed_s: f64,
    pub user_s: f64,
    pub sys_s: f64,
}

impl ChatResult {
    pub fn per_sec(&self) -> f64 {
        if self.elapsed_s > 0.0 {
            self.delivered as f64 / self.elapsed_s
        } else {
            0.0
        }
    }
}

fn err(msg: impl Into<String>) -> Error {
    Error::failed(msg)
}

fn io(what: &str) -> impl Fn(std::io::Error) -> Error + '_ {
    move |e| err(format!("chat: {what}: {e}"))
}

/// User and system CPU seconds of this process, all threads (exited ones included).
fn rusage() -> (f64, f64) {
    // SAFETY: rusage is plain data that getrusage fills.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: ru is valid and writable.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (tv(ru.ru_utime), tv(ru.ru_stime))
}

fn spawn<F>(name: &str, f: F) -> Result<Handle, Error>
where
    F: FnOnce() -> std::io::Result<Option<Instant>> + Send + 'static,
{
    // Small stacks: the seed's setting is 2,400 threads.
    std::thread::Builder::new()
        .name(name.into())
        .stack_size(128 << 10)
        .spawn(f)
        .map_err(io("cannot start a thread"))
}

/// A thread of the benchmark: a sender gives its start, a receiver its end.
type Handle = JoinHandle<std::io::Result<Option<Instant>>>;

/// A message: the sender's room and user, and its sequence number, padded to [`MSG`].
fn message(room: usize, user: usize, seq: u64) -> [u8; MSG] {
    let mut m = [0x2eu8; MSG];
    m[0..4].copy_from_slice(&(room as u32).to_le_bytes());
    m[4..8].copy_from_slice(&(user as u32).to_le_bytes());
    m[8..16].copy_from_slice(&seq.to_le_bytes());
    m
}

/// Runs the benchmark: ROOMS x USERS connections, 4 threads each, every message checked
/// to come from another user of the receiver's room.
pub fn chat(rooms: usize, users: usize, messages: u64) -> Result<ChatResult, Error> {
    if rooms == 0 || users < 2 {
        return Err(err("chat: needs at least 1 room of 2 users"));
    }
    let listener = TcpListener::bind("127.0.0.1:0").map_err(io("listen on 127.0.0.1"))?;
    let addr = listener.local_addr().map_err(io("listen address"))?;
    let n = rooms * users;
    // Connect and accept one at a time, so the i-th accepted socket is user i's.
    let mut clients = Vec::with_capacity(n);
    let mut servers = Vec::with_capacity(n);
    for _ in 0..n {
        let c = TcpStream::connect(addr).map_err(io("connect"))?;
        let (s, _) = listener.accept().map_err(io("accept"))?;
        c.set_nodelay(true).map_err(io("TCP_NODELAY"))?;
        s.set_nodelay(true).map_err(io("TCP_NODELAY"))?;
        clients.push(c);
        servers.push(s);
    }
    drop(listener);
    let (txs, rxs): (Vec<_>, Vec<_>) = (0..n).map(|_| mpsc::channel::<[u8; MSG]>()).unzip();
    let start = Arc::new(Barrier::new(n + 1));
    let mut handles = Vec::with_capacity(2 * n);
    let mut senders = Vec::with_capacity(n);
    let mut receivers = Vec::with_capacity(n);
    for (i, rx) in rxs.into_iter().enumerate() {
        let mut out = servers[i].try_clone().map_err(io("socket"))?;
        handles.push(spawn("chat-srv-wr", move || {
            // Ends when every reader of the room has dropped its sender.
            for m in rx {
                out.write_all(&m)?;
            }
            Ok(None)
        })?);
    }
    for (i, mut inp) in servers.into_iter().enumerate() {
        let room = i / users;
        let peers: Vec<_> = (room * users..(room + 1) * users)
            .filter(|&j| j != i)
            .map(|j| txs[j].clone())
            .collect();
        handles.push(spawn("chat-srv-rd", move || {
            let mut m = [0u8; MSG];
            for _ in 0..messages {
                inp.read_exact(&mut m)?;
                for p in &peers {
                    // A writer gone means its connection failed; its error is reported.
                    let _ = p.send(m);
                }
            }
            Ok(None)
        })?);
    }
    drop(txs);
    for (i, c) in clients.into_iter().enumerate() {
        let (room, user) = (i / users, i % users);
        let mut out = c.try_clone().map_err(io("socket"))?;
        let go = start.clone();
        senders.push(spawn("chat-cli-tx", move || {
            go.wait();
            let t0 = Instant::now();
            for seq in 0..messages {
                out.write_all(&message(room, user, seq))?;
            }
            Ok(Some(t0))
        })?);
        let mut inp = c;
        let expect = (users as u64 - 1) * messages;
        receivers.push(spawn("chat-cli-rx", move || {
            let mut m = [0u8; MSG];
            for _ in 0..expect {
                inp.read_exact(&mut m)?;
                let from_room = u32::from_le_bytes(m[0..4].try_into().unwrap()) as usize;
                let from_user = u32::from_le_bytes(m[4..8].try_into().unwrap()) as usize;
                if from_room != room || from_user == user || from_user >= users {
                    return Err(std::io::Error::other(format!(
                        "user {user} of room {room} got a message from user {from_user} of room {from_room}"
                    )));
                }
            }
            Ok(Some(Instant::now()))
        })?);
    }
    // The clock runs from the first sender's start to the last receiver's end, as the
    // threads saw them: this thread may not get a CPU back soon after the barrier.
    let (u0, s0) = rusage();
    start.wait();
    let mut failed = None;
    let mut join = |h: Handle| match h.join() {
        Ok(Ok(t)) => t,
        Ok(Err(e)) => {
            failed = failed.take().or(Some(e.to_string()));
            None
        }
        Err(_) => {
            failed = failed.take().or(Some("a thread panicked".into()));
            None
        }
    };
    let ends: Vec<Instant> = receivers.into_iter().filter_map(&mut join).collect();
    let (u1, s1) = rusage();
    let starts: Vec<Instant> = senders.into_iter().filter_map(&mut join).collect();
    for h in handles {
        join(h);
    }
    if let Some(e) = failed {
        return Err(err(format!("chat: {e}")));
    }
    let elapsed_s = match (starts.iter().min(), ends.iter().max()) {
        (Some(a), Some(b)) => b.saturating_duration_since(*a).as_secs_f64(),
        _ => 0.0,
    };
    Ok(ChatResult {
        threads: 4 * n,
        delivered: (n * (users - 1)) as u64 * messages,
        elapsed_s,
        user_s: u1 - u0,
        sys_s: s1 - s0,
    })
}

fn result_json(a: &ChatArgs, r: &ChatResult) -> Value {
    json!({
        "rooms": a.rooms, "users": a.users, "messages": a.messages,
        "threads": r.threads, "delivered": r.delivered,
        "elapsed_s": r.elapsed_s, "messages_per_s": r.per_sec(),
        "user_s": r.user_s, "sys_s": r.sys_s,
    })
}

/// `kstate workload chat`.
pub fn workload(a: &ChatArgs) -> Result<(), Error> {
    let r = chat(a.rooms, a.users, a.messages)?;
    if a.json {
        println!("{}", result_json(a, &r));
    } else {
        print_result(a, &r);
    }
    Ok(())
}

fn print_result(a: &ChatArgs, r: &ChatResult) {
    println!(
        "{} rooms x {} users, {} messages of {MSG} bytes per user, {} threads",
        a.rooms, a.users, a.messages, r.threads
    );
    println!(
        "{} messages delivered in {:.3} s: {:.0} messages/s; CPU user {:.3} s, sys {:.3} s",
        r.delivered,
        r.elapsed_s,
        r.per_sec(),
        r.user_s,
        r.sys_s
    );
}

/// `kstate bench chat`.
pub fn run(a: Args) -> Result<ExitCode, Error> {
    if a.chat.rooms == 0 || a.chat.users < 2 {
        return Err(err("--rooms must be at least 1 and --users at least 2"));
    }
    let exe = std::env::current_exe().map_err(|e| err(e.to_string()))?;
    let mut runs = Vec::new();
    for i in 0..a.runs.max(1) {
        eprintln!("kstate bench chat: run {}/{}", i + 1, a.runs.max(1));
        let out = Command::new(&exe)
            .args(["workload", "chat", "--json", "--rooms"])
            .arg(a.chat.rooms.to_string())
            .arg("--users")
            .arg(a.chat.users.to_string())
            .arg("--messages")
            .arg(a.chat.messages.to_string())
            .stdin(Stdio::null())
            .stderr(Stdio::piped())
            .output()
            .map_err(|e| err(format!("cannot run kstate workload chat: {e}")))?;
        if !out.status.success() {
            return Err(err(format!(
                "chat run failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        let line = String::from_utf8_lossy(&out.stdout);
        let v: Value = serde_json::from_str(line.trim())
            .map_err(|e| err(format!("bad chat output {line:?}: {e}")))?;
        let f = |k: &str| v[k].as_f64().unwrap_or(0.0);
        runs.push(ChatResult {
            threads: v["threads"].as_u64().unwrap_or(0) as usize,
            delivered: v["delivered"].as_u64().unwrap_or(0),
            elapsed_s: f("elapsed_s"),
            user_s: f("user_s"),
            sys_s: f("sys_s"),
        });
    }
    let mut order: Vec<usize> = (0..runs.len()).collect();
    order.sort_by(|&x, &y| runs[x].per_sec().total_cmp(&runs[y].per_sec()));
    let med = runs[order[order.len() / 2]];
    if a.chat.json {
        let mut v = result_json(&a.chat, &med);
        v["runs"] = json!(runs
            .iter()
            .map(|r| result_json(&a.chat, r))
            .collect::<Vec<_>>());
        println!("{v}");
    } else {
        print_result(&a.chat, &med);
        if runs.len() > 1 {
            let all: Vec<String> = runs.iter().map(|r| format!("{:.0}", r.per_sec())).collect();
            println!(
                "median of {} runs (messages/s: {})",
                runs.len(),
                all.join(", ")
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
