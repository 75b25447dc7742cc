//! Supervision of one sandboxed child: read its stdout and stderr up to a byte cap, enforce a
//! wall-time deadline, kill its whole process group (and uid) when either is exceeded.

use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, ExitStatus};
use std::time::{Duration, Instant};

use super::limits;

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunStatus {
    /// Exited with this status code.
    Exit(i32),
    /// Killed by this signal (SIGXCPU/SIGKILL for CPU time, SIGXFSZ for file size, …).
    Signal(i32),
    /// Still running at the wall-time deadline; killed.
    Timeout,
    /// Wrote more than the output cap; killed.
    OutputLimit,
}

impl std::fmt::Display for RunStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Exit(c) => write!(f, "exit {c}"),
            Self::Signal(s) => write!(f, "killed by signal {s}"),
            Self::Timeout => write!(f, "timeout"),
            Self::OutputLimit => write!(f, "output over the cap"),
        }
    }
}

/// What a run produced.
#[derive(Debug, Clone)]
pub struct RunOutput {
    /// How it ended.
    pub status: RunStatus,
    /// Its stdout, at most the cap.
    pub stdout: Vec<u8>,
    /// Its stderr, at most the cap.
    pub stderr: Vec<u8>,
    /// Wall time from spawn to reap.
    pub elapsed: Duration,
    /// The run's own uid, when it had one.
    pub uid: Option<u32>,
}

/// Supervises `child` (a session leader, so its pid is its process group id) until it exits,
/// exceeds `timeout`, or writes more than `cap` bytes to stdout and stderr together; kills
/// its group and, when `uid` is set, every process of that uid, before returning.
pub fn supervise(
    mut child: Child,
    timeout: Duration,
    cap: usize,
    uid: Option<u32>,
    sweep_group: bool,
) -> io::Result<RunOutput> {
    let start = Instant::now();
    let deadline = start + timeout;
    let pid = child.id();
    let mut pipes = [
        child.stdout.take().map(|p| Pipe::new(File::from(OwnedFd::from(p)))),
        child.stderr.take().map(|p| Pipe::new(File::from(OwnedFd::from(p)))),
    ];
    let mut verdict = None;
    while pipes.iter().any(|p| p.as_ref().is_some_and(|p| p.open)) {
        let now = Instant::now();
        if now >= deadline {
            verdict = Some(RunStatus::Timeout);
            break;
        }
        poll_pipes(&mut pipes, deadline - now)?;
        let total: usize = pipes.iter().flatten().map(|p| p.buf.len()).sum();
        if total > cap {
            verdict = Some(RunStatus::OutputLimit);
            break;
        }
    }
    let status = match verdict {
        Some(v) => {
            kill(pid, uid, sweep_group);
            child.wait()?;
            v
        }
        None => match wait_until(&mut child, deadline)? {
            Some(st) => from_exit(st),
            None => {
                kill(pid, uid, sweep_group);
                child.wait()?;
                RunStatus::Timeout
            }
        },
    };
    // Whatever the run left behind (background children, daemons) dies with it.
    kill(pid, uid, sweep_group);
    let [out, err] = pipes.map(|p| p.map(|p| p.buf).unwrap_or_default());
    let (mut stdout, mut stderr) = (out, err);
    stdout.truncate(cap);
    stderr.truncate(cap);
    Ok(RunOutput { status, stdout, stderr, elapsed: start.elapsed(), uid })
}

fn kill(pid: u32, uid: Option<u32>, sweep_group: bool) {
    if sweep_group {
        limits::sweep_group(pid);
    } else {
        limits::kill_group(pid);
    }
    if let Some(uid) = uid {
        limits::kill_uid(uid);
    }
}

fn from_exit(st: ExitStatus) -> RunStatus {
    match (st.code(), st.signal()) {
        (Some(c), _) => RunStatus::Exit(c),
        (None, Some(s)) => RunStatus::Signal(s),
        (None, None) => RunStatus::Exit(-1),
    }
}

/// Waits for the child to exit until `deadline`; `None` if it is still running then.
fn wait_until(child: &mut Child, deadline: Instant) -> io::Result<Option<ExitStatus>> {
    let mut nap = Duration::from_micros(200);
    loop {
        if let Some(st) = child.try_wait()? {
            return Ok(Some(st));
        }
        let now = Instant::now();
        if now >= deadline {
            return Ok(None);
        }
        std::thread::sleep(nap.min(deadline - now));
        nap = (nap * 2).min(Duration::from_millis(10));
    }
}

/// One non-blocking pipe and what was read from it.
struct Pipe {
    reader: File,
    buf: Vec<u8>,
    open: bool,
}

impl Pipe {
    fn new(reader: File) -> Self {
        // SAFETY: fcntl on a pipe fd we own.
        unsafe {
            let fd = reader.as_raw_fd();
            let flags = libc::fcntl(fd, libc::F_GETFL);
            libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK);
        }
        Self { reader, buf: Vec::new(), open: true }
    }

    /// Reads one chunk of what is available (so the caller checks the cap between chunks);
    /// marks the pipe closed at end of file.
    fn read_chunk(&mut self) -> io::Result<()> {
        let mut chunk = [0u8; 16 * 1024];
        match self.reader.read(&mut chunk) {
            Ok(0) => self.open = false,
            Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
            Err(e)
                if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted) => {}
            Err(e) => return Err(e),
        }
        Ok(())
    }
}

/// Waits up to `wait` for data on the open pipes, then drains the ready ones.
fn poll_pipes(pipes: &mut [Option<Pipe>], wait: Duration) -> io::Result<()> {
    let mut fds: Vec<libc::pollfd> = pipes
        .iter()
        .flatten()
        .filter(|p| p.open)
        .map(|p| libc::pollfd { fd: p.reader.as_raw_fd(), events: libc::POLLIN, revents: 0 })
        .collect();
    let ms = wait.as_millis().clamp(1, 100) as libc::c_int;
    // SAFETY: fds is a valid array of pollfd of the given length.
    let rc = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
    if rc < 0 {
        let e = io::Error::last_os_error();
        return if e.kind() == io::ErrorKind::Interrupted { Ok(()) } else { Err(e) };
    }
    for p in pipes.iter_mut().flatten().filter(|p| p.open) {
        if fds.iter().any(|f| f.fd == p.reader.as_raw_fd() && f.revents != 0) {
            p.read_chunk()?;
        }
    }
    Ok(())
}
