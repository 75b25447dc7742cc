//! Resource limits and privilege drop applied in the child between `fork` and `exec`, and
//! the clean-up that kills every process a run left behind.
//!
//! Everything called from [`apply`] runs in the forked child of a multi-threaded parent, so
//! it only uses async-signal-safe system calls (`setsid`, `setrlimit`, `setgroups`, `setgid`,
//! `setuid`) on values computed before the fork.

use std::io;
use std::sync::atomic::{AtomicU32, Ordering};

/// The limits of one run, in the units `setrlimit` takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// `RLIMIT_AS`, bytes of address space.
    pub address_space: u64,
    /// `RLIMIT_CPU`, seconds of CPU time (SIGXCPU then SIGKILL).
    pub cpu_seconds: u64,
    /// `RLIMIT_FSIZE`, bytes per written file (SIGXFSZ).
    pub file_size: u64,
    /// `RLIMIT_NPROC`, processes of the run's user (enforced when the run has its own uid).
    pub processes: u64,
    /// `RLIMIT_NOFILE`, open file descriptors.
    pub open_files: u64,
}

/// The first uid handed to runs when the parent is root: a range no real account uses.
const UID_BASE: u32 = 1_500_000_000;

static NEXT_UID: AtomicU32 = AtomicU32::new(0);

/// A fresh unprivileged uid (also used as gid) for one run, distinct from every other run of
/// this process and, through the pid, of other processes: the per-user process limit then
/// counts this run's processes only, and [`kill_uid`] reaches exactly them.
pub fn fresh_uid() -> u32 {
    let n = NEXT_UID.fetch_add(1, Ordering::Relaxed) % 65_536;
    UID_BASE + (std::process::id() % 8_192) * 65_536 + n
}

/// True when this process runs as root (then runs are given their own uid).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Called in the child before exec: new session and process group, the limits, then (when
/// `uid` is given) the drop to that uid with no supplementary groups.
pub fn apply(limits: &Limits, uid: Option<u32>) -> io::Result<()> {
    // SAFETY: only async-signal-safe calls on plain values.
    unsafe {
        if libc::setsid() < 0 {
            return Err(io::Error::last_os_error());
        }
        set(libc::RLIMIT_AS, limits.address_space)?;
        set(libc::RLIMIT_CPU, limits.cpu_seconds)?;
        set(libc::RLIMIT_FSIZE, limits.file_size)?;
        set(libc::RLIMIT_NPROC, limits.processes)?;
        set(libc::RLIMIT_NOFILE, limits.open_files)?;
        set(libc::RLIMIT_CORE, 0)?;
        if let Some(uid) = uid {
            if libc::setgroups(0, std::ptr::null()) < 0
                || libc::setgid(uid) < 0
                || libc::setuid(uid) < 0
            {
                return Err(io::Error::last_os_error());
            }
        }
    }
    Ok(())
}

unsafe fn set(resource: libc::__rlimit_resource_t, value: u64) -> io::Result<()> {
    let lim = libc::rlimit { rlim_cur: value, rlim_max: value };
    if libc::setrlimit(resource, &lim) < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The number of tasks (threads included: `RLIMIT_NPROC` counts threads) whose real uid is
/// this process's, from `/proc`: what `RLIMIT_NPROC` already counts when runs share the
/// parent's uid.
pub fn processes_of_current_user() -> u64 {
    // SAFETY: getuid has no preconditions.
    let me = unsafe { libc::getuid() }.to_string();
    let Ok(dir) = std::fs::read_dir("/proc") else { return 0 };
    let field = |status: &str, key: &str| {
        status
            .lines()
            .find(|l| l.starts_with(key))
            .and_then(|l| l.split_whitespace().nth(1))
            .map(str::to_string)
    };
    dir.flatten()
        .filter_map(|e| std::fs::read_to_string(e.path().join("status")).ok())
        .filter(|s| field(s, "Uid:").is_some_and(|u| u == me))
        .map(|s| field(&s, "Threads:").and_then(|t| t.parse::<u64>().ok()).unwrap_or(1))
        .sum()
}

/// Sends SIGKILL to the process group `pgid` (the run's session leader's pid).
pub fn kill_group(pgid: u32) {
    // SAFETY: kill has no memory-safety preconditions; a stale group yields ESRCH.
    unsafe {
        libc::kill(-(pgid as libc::pid_t), libc::SIGKILL);
    }
}

/// [`kill_group`], then again every 5 ms for up to `SWEEP_FOR` while the group still has
/// members: a process forked while the first signal was delivered (a fork bomb's newest
/// child) gets the next one. For runs with neither a jail nor their own uid, where nothing
/// else would catch it.
pub fn sweep_group(pgid: u32) {
    let start = std::time::Instant::now();
    // SAFETY: kill has no memory-safety preconditions; an empty group yields ESRCH.
    while unsafe { libc::kill(-(pgid as libc::pid_t), libc::SIGKILL) } == 0
        && start.elapsed() < SWEEP_FOR
    {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// How long [`sweep_group`] keeps signalling a group that still has members (zombies awaiting
/// their reaper count as members).
const SWEEP_FOR: std::time::Duration = std::time::Duration::from_millis(200);

/// Kills every process owned by `uid` (a run's own uid), including any that escaped its
/// process group with `setsid`: a forked helper takes that uid and calls `kill(-1, SIGKILL)`,
/// which reaches exactly the processes of the same uid.
pub fn kill_uid(uid: u32) {
    // SAFETY: the child only makes async-signal-safe calls and leaves with _exit.
    unsafe {
        let pid = libc::fork();
        if pid == 0 {
            if libc::setgroups(0, std::ptr::null()) == 0
                && libc::setgid(uid) == 0
                && libc::setuid(uid) == 0
            {
                libc::kill(-1, libc::SIGKILL);
            }
            libc::_exit(0);
        }
        if pid > 0 {
            let mut status = 0;
            libc::waitpid(pid, &mut status, 0);
        }
    }
}
