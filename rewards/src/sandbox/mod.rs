//! A sandbox for running untrusted Python: one fresh temp directory per run, an empty
//! environment, no stdin, capped output, `setrlimit` limits, its own session and process
//! group (killed whole on time-out), its own unprivileged uid when the parent is root, and a
//! jail: drift's own namespace jail (`jail.rs`: user, mount, network, PID, IPC namespaces, a
//! read-only root of system directories, one size-capped writable `/tmp`) when the kernel
//! allows it, else a `bwrap` jail (read-only `/`, no network, own pid namespace, dies with its
//! parent) whose only writable place is its working directory `/tmp`, a private tmpfs of
//! [`SandboxConfig::tmpfs_mb`]; the run's files are bound read-only at `/tmp/src` in both.
//!
//! [`Sandbox::new`] probes once which of these are available (a trial run of the interpreter
//! in each) and reports the active mode in [`Sandbox::mode`]; with no jail at all it refuses,
//! unless the config asks for resource limits only (`mode = "limits"`).
//!
//! Shared by every reward that runs a program (the code world's [`crate::worlds::code`], a
//! user's own code tasks): [`limits`] sets the resource limits, [`supervise`] waits, caps the
//! output and kills on time-out.

use std::fs;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Once};
use std::time::Duration;

use serde::{Deserialize, Serialize};

mod jail;
pub mod limits;
mod spawner;
pub mod supervise;

use crate::RewardError;
use jail::Jail;
use limits::Limits;
use spawner::{Request, Spawner};
pub use supervise::{RunOutput, RunStatus};

/// Which isolation to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SandboxMode {
    /// drift's namespace jail when the kernel allows it, else bwrap, else an error from
    /// [`Sandbox::new`] (the default): code never runs unjailed unless `limits` is asked for.
    Auto,
    /// bwrap, or an error from [`Sandbox::new`] when it does not work here.
    Bwrap,
    /// drift's own namespace jail (user, mount, network, PID, IPC namespaces; a read-only
    /// root of system directories; one size-capped `/tmp`), or an error when the kernel does
    /// not allow it here.
    Namespaces,
    /// Limits, empty environment, temp dir, process group and uid only: no filesystem,
    /// network or process jail. Only when asked for explicitly.
    Limits,
}

/// Configuration of the code sandbox. Defaults follow DiffuCoder's execution reward (5 s per
/// test) with limits generous for a small test function and tight for hostile code.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SandboxConfig {
    /// Isolation mode. Default `auto`.
    pub mode: SandboxMode,
    /// The interpreter. Default: `/usr/bin/python3` when present, else `python3` on `PATH`,
    /// resolved once to its real executable.
    pub python: Option<PathBuf>,
    /// Wall-time limit per run, seconds. Default 5.0 (DiffuCoder).
    pub timeout_s: f64,
    /// Address-space limit, MiB (`RLIMIT_AS`). Default 1024.
    pub memory_mb: u64,
    /// CPU-time limit, seconds (`RLIMIT_CPU`); 0 = the wall limit rounded up, plus 1. Default 0.
    pub cpu_s: u64,
    /// Largest file a run may write, MiB (`RLIMIT_FSIZE`). Default 16.
    pub file_size_mb: u64,
    /// Processes of the run's uid (`RLIMIT_NPROC`, enforced under the per-run uid). Default 16.
    pub max_processes: u64,
    /// Bytes of stdout + stderr read before the run is killed. Default 65536.
    pub max_output_bytes: usize,
    /// Give each run its own unprivileged uid when the parent is root. Default true.
    pub drop_privileges: bool,
    /// The bubblewrap executable. Default `bwrap` (looked up on `/usr/local/bin:/usr/bin:/bin`).
    pub bwrap: PathBuf,
    /// Size of the private `/tmp` under bwrap or the namespace jail, MiB: the most a run can
    /// write in total (`/var/tmp` and `/dev/shm` included under the jail). Default 64. (With
    /// limits only, just the per-file limit and the time bound writes.)
    pub tmpfs_mb: u64,
    /// Start runs from a small fork server forked when the sandbox is made, instead of
    /// forking the calling process per run (`sandbox::spawner`): a fork copies the page table
    /// of the forking process, which for a trainer at its update's peak costs more than the
    /// run. Default true; when the server cannot be started, runs fork the process itself.
    pub fork_server: bool,
}

impl Default for SandboxConfig {
    fn default() -> Self {
        Self {
            mode: SandboxMode::Auto,
            python: None,
            timeout_s: 5.0,
            memory_mb: 1024,
            cpu_s: 0,
            file_size_mb: 16,
            max_processes: 16,
            max_output_bytes: 65_536,
            drop_privileges: true,
            bwrap: PathBuf::from("bwrap"),
            tmpfs_mb: 64,
            fork_server: true,
        }
    }
}

/// The isolation actually in force, as probed by [`Sandbox::new`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActiveMode {
    /// Runs are inside bwrap (read-only `/`, private `/tmp`, no network, own pid namespace).
    pub bwrap: bool,
    /// Runs are inside drift's namespace jail (`jail.rs`: read-only system directories only,
    /// a size-capped private `/tmp`, no network, own PID namespace).
    #[serde(default)]
    pub namespaces: bool,
    /// Runs have their own unprivileged uid (per-run process limit, no write access to
    /// root-owned files).
    pub own_uid: bool,
    /// The bwrap `/tmp` has a size limit (bwrap ≥ 0.5 supports `--size`).
    pub sized_tmpfs: bool,
}

impl std::fmt::Display for ActiveMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let jail = if self.bwrap {
            "bwrap"
        } else if self.namespaces {
            "namespaces"
        } else {
            "limits"
        };
        let uid = if self.own_uid { "+uid" } else { "" };
        let size = if self.bwrap && !self.sized_tmpfs { "+unsized-tmp" } else { "" };
        write!(f, "{jail}{uid}{size}")
    }
}

/// A probed, ready sandbox; cheap to share between threads.
#[derive(Debug, Clone)]
pub struct Sandbox {
    python: PathBuf,
    /// The interpreter's installation (`sys.base_prefix`), bound into the namespace jail.
    prefix: PathBuf,
    limits: Limits,
    timeout: Duration,
    cap: usize,
    tmpfs_bytes: u64,
    bwrap: PathBuf,
    mode: ActiveMode,
    /// The fork server runs start from, when there is one.
    spawner: Option<Arc<Spawner>>,
}

/// Tasks of the trainer's uid that may start after [`Sandbox::new`] counted them (thread
/// pools created later), added to `RLIMIT_NPROC` when runs share the trainer's uid.
const SHARED_UID_MARGIN: u64 = 64;

/// Retries of a start that failed with EAGAIN (the shared uid's process limit), 50 ms apart.
const SPAWN_RETRIES: u32 = 20;

/// The working directory of runs under bwrap (a private tmpfs).
const JAIL_DIR: &str = "/tmp";
/// Where the run's files are bound, read-only, under bwrap.
const JAIL_SRC: &str = "/tmp/src";

static JAIL_NOTICE: Once = Once::new();
static SERVER_NOTICE: Once = Once::new();
static NEXT_DIR: AtomicU64 = AtomicU64::new(0);

impl Sandbox {
    /// Validates `cfg`, resolves the interpreter and probes bwrap and the uid drop.
    pub fn new(cfg: &SandboxConfig) -> Result<Self, RewardError> {
        let timeout = positive_secs("timeout_s", cfg.timeout_s)?;
        let positive = [
            ("memory_mb", cfg.memory_mb),
            ("max_processes", cfg.max_processes),
            ("tmpfs_mb", cfg.tmpfs_mb),
        ];
        for (field, v) in positive {
            if v == 0 {
                return Err(RewardError::Config {
                    field,
                    value: "0".into(),
                    expected: "a positive integer".into(),
                });
            }
        }
        let cpu = if cfg.cpu_s == 0 { cfg.timeout_s.ceil() as u64 + 1 } else { cfg.cpu_s };
        let limits = Limits {
            address_space: cfg.memory_mb << 20,
            cpu_seconds: cpu,
            file_size: cfg.file_size_mb << 20,
            processes: cfg.max_processes,
            open_files: 64,
        };
        let (python, prefix) = resolve_python(cfg.python.as_deref())?;
        let cap = cfg.max_output_bytes;
        let mode =
            ActiveMode { bwrap: false, namespaces: false, own_uid: false, sized_tmpfs: false };
        let (tmpfs_bytes, bwrap) = (cfg.tmpfs_mb << 20, cfg.bwrap.clone());
        let spawner = None;
        let mut sb =
            Self { python, prefix, limits, timeout, cap, tmpfs_bytes, bwrap, mode, spawner };
        remove_stale_dirs();
        sb.mode.own_uid = cfg.drop_privileges && limits::is_root() && sb.probe();
        if !sb.mode.own_uid {
            // RLIMIT_NPROC counts all of this user's tasks, threads included: leave room for
            // those running now and for threads the trainer starts later.
            sb.limits.processes += limits::processes_of_current_user() + SHARED_UID_MARGIN;
        }
        if matches!(cfg.mode, SandboxMode::Auto | SandboxMode::Namespaces) {
            sb.mode.namespaces = true;
            sb.mode.namespaces = sb.probe();
        }
        if !sb.mode.namespaces && matches!(cfg.mode, SandboxMode::Auto | SandboxMode::Bwrap) {
            // Try bwrap with a sized /tmp, then without (old bwrap), then give up on it.
            sb.mode.bwrap = true;
            sb.mode.sized_tmpfs = true;
            if !sb.probe() {
                sb.mode.sized_tmpfs = false;
            }
            if !sb.mode.sized_tmpfs && !sb.probe() {
                sb.mode.bwrap = false;
            }
        }
        if cfg.mode != SandboxMode::Limits && !sb.mode.namespaces && !sb.mode.bwrap {
            let tried = match cfg.mode {
                SandboxMode::Bwrap => "a working `bwrap` (probe `bwrap --ro-bind / / true` failed)",
                SandboxMode::Namespaces => {
                    "user, mount, network and PID namespaces for drift's jail (the probe failed)"
                }
                _ => {
                    "a jail for model-written code: user, mount, network and PID namespaces for \
                     drift's own jail, or a working `bwrap` (both failed here); set the \
                     sandbox's `mode = \"limits\"` to run code under resource limits only, with \
                     no filesystem or network jail"
                }
            };
            return Err(RewardError::Invalid {
                what: format!("sandbox mode `{}`", serde_name(cfg.mode)),
                expected: tried.into(),
            });
        }
        if cfg.mode == SandboxMode::Auto && sb.mode.bwrap {
            JAIL_NOTICE.call_once(|| {
                eprintln!(
                    "drift-rewards: user namespaces are not available here; code runs in \
                     bubblewrap, whose /dev/shm has no size cap"
                )
            });
        }
        if cfg.fork_server {
            let direct = sb.clone();
            let serve = move |req: Request| {
                let files: Vec<(&str, &str)> =
                    req.files.iter().map(|(n, t)| (n.as_str(), t.as_str())).collect();
                direct
                    .run_here(&files, &req.script, req.timeout, req.uid)
                    .map_err(|e| e.to_string())
            };
            // Without a server (fork failed), runs fork this process as before.
            sb.spawner = Spawner::start(serve).ok().map(Arc::new);
        }
        Ok(sb)
    }

    /// The isolation in force.
    pub fn mode(&self) -> ActiveMode {
        self.mode
    }

    /// The interpreter runs use.
    pub fn python(&self) -> &Path {
        &self.python
    }

    /// The wall limit of one run, [`SandboxConfig::timeout_s`].
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Bytes of stdout and stderr a run may write before it is killed,
    /// [`SandboxConfig::max_output_bytes`].
    pub fn output_cap(&self) -> usize {
        self.cap
    }

    /// Runs `python -I -S -B <script>` under every limit, with `files` (`(name, contents)`;
    /// `script` must be one of them). Under a jail they are read-only at `/tmp/src` and the
    /// working directory is the jail's private `/tmp` (drift's jail writes them there itself;
    /// bwrap binds them from a fresh host folder removed afterwards); with limits only, that
    /// host folder is the working directory. A script finds its companions next to itself
    /// (`os.path.dirname(__file__)`) in every mode.
    pub fn run_python(
        &self,
        files: &[(&str, &str)],
        script: &str,
    ) -> Result<RunOutput, RewardError> {
        self.run_python_within(files, script, self.timeout)
    }

    /// [`Sandbox::run_python`] with the wall limit `timeout` for the whole run instead of
    /// [`SandboxConfig::timeout_s`] (a script that runs several timed programs itself, such as
    /// the code world's test harness, needs the sum of their limits).
    pub fn run_python_within(
        &self,
        files: &[(&str, &str)],
        script: &str,
        timeout: Duration,
    ) -> Result<RunOutput, RewardError> {
        let uid = self.mode.own_uid.then(limits::fresh_uid);
        let Some(spawner) = &self.spawner else {
            return self.run_here(files, script, timeout, uid);
        };
        let req = Request {
            files: files.iter().map(|(n, t)| (n.to_string(), t.to_string())).collect(),
            script: script.to_string(),
            timeout,
            uid,
        };
        match spawner.run(&req) {
            Ok(Ok(out)) => Ok(out),
            Ok(Err(why)) => Err(sandbox_err(
                "run in the sandbox's fork server".into(),
                std::io::Error::other(why),
            )),
            Err(e) => {
                // The server is gone (killed from outside) or its worker died mid-reply: run
                // it here rather than score every later sample as a failure.
                SERVER_NOTICE.call_once(|| {
                    eprintln!(
                        "drift-rewards: the sandbox's fork server did not answer ({e}); runs \
                         now fork this process"
                    )
                });
                self.run_here(files, script, timeout, uid)
            }
        }
    }

    /// The run itself, forking this process: `uid` is the run's own uid, when it has one.
    fn run_here(
        &self,
        files: &[(&str, &str)],
        script: &str,
        timeout: Duration,
        uid: Option<u32>,
    ) -> Result<RunOutput, RewardError> {
        // The namespace jail writes the files itself, inside the jail; the other modes get a
        // host folder, removed when the run ends (and, if the trainer is killed, by the next
        // trainer's Sandbox::new).
        let (dir, jail) = if self.mode.namespaces {
            let jail = Jail::new(files, &self.prefix, self.tmpfs_bytes)
                .map_err(|e| sandbox_err("prepare the namespace jail".into(), e))?;
            (None, Some(jail))
        } else {
            let dir = TempDir::create()?;
            for (name, text) in files {
                let path = dir.0.join(name);
                fs::write(&path, text)
                    .map_err(|e| sandbox_err(format!("write {}", path.display()), e))?;
            }
            if let Some(uid) = uid {
                chown(&dir.0, uid)?;
            }
            (Some(dir), None)
        };
        let mut cmd = self.command(dir.as_ref().map(|d| d.0.as_path()), script);
        let lim = self.limits;
        let jailed = self.mode.bwrap || self.mode.namespaces;
        cmd.env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("LANG", "C.UTF-8")
            .env("HOME", dir.as_ref().filter(|_| !jailed).map_or(Path::new(JAIL_DIR), |d| &d.0))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        // SAFETY: `apply` and `Jail::enter` only make async-signal-safe calls on values
        // prepared before the fork.
        unsafe {
            cmd.pre_exec(move || {
                limits::apply(&lim, uid)?;
                match &jail {
                    Some(jail) => jail.enter(),
                    None => Ok(()),
                }
            });
        }
        // Runs that share the trainer's uid share its process limit: right after a fork bomb,
        // while the kernel reaps it, a start can fail with EAGAIN. Retry for up to a second.
        let mut tries = 0;
        let child = loop {
            match cmd.spawn() {
                Ok(child) => break child,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock && tries < SPAWN_RETRIES => {
                    tries += 1;
                    std::thread::sleep(Duration::from_millis(50));
                }
                Err(e) => return Err(sandbox_err(format!("spawn {:?}", cmd.get_program()), e)),
            }
        };
        let sweep_group = uid.is_none() && !jailed;
        supervise::supervise(child, timeout, self.cap, uid, sweep_group)
            .map_err(|e| sandbox_err("supervise the run".into(), e))
    }

    /// The command of a run: `dir` is the run's host folder (none under the namespace jail).
    fn command(&self, dir: Option<&Path>, script: &str) -> Command {
        let Some(dir) = dir.filter(|_| !self.mode.namespaces) else {
            // Jail::enter changes into the jail's /tmp, where the run's files are at src/.
            let mut cmd = Command::new(&self.python);
            cmd.args(["-I", "-S", "-B"]).arg(format!("{JAIL_SRC}/{script}"));
            return cmd;
        };
        if !self.mode.bwrap {
            let mut cmd = Command::new(&self.python);
            cmd.args(["-I", "-S", "-B", script]).current_dir(dir);
            return cmd;
        }
        // The same view of the host as drift's jail: system directories only, read-only.
        let mut cmd = Command::new(&self.bwrap);
        for host in jail::host_paths(&self.prefix).unwrap_or_default() {
            match host {
                jail::HostPath::Symlink { path, target } => {
                    cmd.arg("--symlink").arg(target).arg(path)
                }
                jail::HostPath::Dir(path) => cmd.arg("--ro-bind").arg(&path).arg(&path),
            };
        }
        cmd.args(["--dev", "/dev", "--proc", "/proc"]);
        // Each private tmpfs (/tmp, /dev/shm) is capped; /var/tmp is /tmp.
        for place in [JAIL_DIR, "/dev/shm"] {
            if self.mode.sized_tmpfs {
                cmd.arg("--size").arg(self.tmpfs_bytes.to_string());
            }
            cmd.args(["--tmpfs", place]);
        }
        cmd.args(["--dir", "/var", "--symlink", "/tmp", "/var/tmp", "--ro-bind"])
            .arg(dir)
            .args([JAIL_SRC, "--chdir", JAIL_DIR])
            .args(["--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts"])
            .args(["--die-with-parent", "--"])
            .arg(&self.python)
            .args(["-I", "-S", "-B"])
            .arg(format!("{JAIL_SRC}/{script}"));
        cmd
    }

    /// A trial run in the current mode: true when `pass` runs and exits 0.
    fn probe(&self) -> bool {
        let probe = Self { timeout: Duration::from_secs(10), ..self.clone() };
        matches!(
            probe.run_python(&[("probe.py", "pass\n")], "probe.py"),
            Ok(RunOutput { status: RunStatus::Exit(0), .. })
        )
    }
}

fn positive_secs(field: &'static str, v: f64) -> Result<Duration, RewardError> {
    if v > 0.0 && v.is_finite() {
        Ok(Duration::from_secs_f64(v))
    } else {
        Err(RewardError::Config { field, value: v.to_string(), expected: "seconds > 0".into() })
    }
}

fn sandbox_err(context: String, source: std::io::Error) -> RewardError {
    RewardError::Sandbox { context, source }
}

/// Finds the real interpreter (following pyenv-style shims) and its installation by asking it,
/// with the parent's environment, for `sys.executable` and `sys.base_prefix`.
fn resolve_python(configured: Option<&Path>) -> Result<(PathBuf, PathBuf), RewardError> {
    let candidate = match configured {
        Some(p) => p.to_path_buf(),
        None if Path::new("/usr/bin/python3").exists() => PathBuf::from("/usr/bin/python3"),
        None => PathBuf::from("python3"),
    };
    let out = Command::new(&candidate)
        .args(["-c", "import sys; print(sys.executable); print(sys.base_prefix)"])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| sandbox_err(format!("start {}", candidate.display()), e))?;
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let mut lines = text.lines().map(str::trim);
    let (exe, prefix) = (lines.next().unwrap_or(""), lines.next().unwrap_or(""));
    if !out.status.success() || exe.is_empty() || prefix.is_empty() {
        return Err(RewardError::Invalid {
            what: format!("python interpreter {}", candidate.display()),
            expected: "a working python3 that reports sys.executable".into(),
        });
    }
    Ok((PathBuf::from(exe), PathBuf::from(prefix)))
}

/// The name a mode has in a config file.
fn serde_name(mode: SandboxMode) -> &'static str {
    match mode {
        SandboxMode::Auto => "auto",
        SandboxMode::Bwrap => "bwrap",
        SandboxMode::Namespaces => "namespaces",
        SandboxMode::Limits => "limits",
    }
}

/// Removes the run folders (`drift-sandbox-<pid>-…` in the temp dir) of processes that no
/// longer exist: what a trainer killed mid-run left behind.
fn remove_stale_dirs() {
    let Ok(entries) = fs::read_dir(std::env::temp_dir()) else { return };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix("drift-sandbox-")) else {
            continue;
        };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<libc::pid_t>().ok()) else {
            continue;
        };
        // SAFETY: kill with signal 0 only checks that the process exists.
        let gone = unsafe { libc::kill(pid, 0) } < 0
            && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
        if gone {
            drop(TempDir(e.path()));
        }
    }
}

fn chown(path: &Path, uid: u32) -> Result<(), RewardError> {
    std::os::unix::fs::chown(path, Some(uid), Some(uid))
        .map_err(|e| sandbox_err(format!("chown {}", path.display()), e))
}

/// A private directory under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn create() -> Result<Self, RewardError> {
        let n = NEXT_DIR.fetch_add(1, Ordering::Relaxed);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let path =
            std::env::temp_dir().join(format!("drift-sandbox-{}-{n}-{nanos}", std::process::id()));
        fs::DirBuilder::new()
            .mode(0o700)
            .create(&path)
            .map_err(|e| sandbox_err(format!("create {}", path.display()), e))?;
        Ok(Self(path))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        // A run may have left read-only subdirectories: make them writable first.
        if let Ok(entries) = fs::read_dir(&self.0) {
            for e in entries.flatten() {
                let _ = fs::set_permissions(e.path(), fs::Permissions::from_mode(0o700));
            }
        }
        let _ = fs::remove_dir_all(&self.0);
    }
}
