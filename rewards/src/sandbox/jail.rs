//! A jail built from the namespaces the kernel gives an unprivileged process, for machines
//! without a working bubblewrap (`unshare(2)`, `pivot_root(2)`; the same mechanisms bwrap uses).
//!
//! In the child, between `fork` and `exec`, after the resource limits and the uid drop
//! ([`super::limits::apply`]), [`Jail::enter`]:
//! 1. unshares a user, mount, network, PID, IPC and UTS namespace, mapping the caller's uid and
//!    gid to 1000 inside (so the program, once exec'd, holds no capability);
//! 2. forks: the new process is PID 1 of the new PID namespace and does the rest, while the
//!    first one closes its descriptors, waits for it and exits with its status. Every process
//!    the program starts lives in that namespace and dies with PID 1, so `setsid` survivors,
//!    `kill(-1)` and `kill(getppid())` cannot reach the trainer; both die when their parent
//!    does (`PR_SET_PDEATHSIG`);
//! 3. builds a new root on a small tmpfs: the system directories (`/usr`, `/bin`, `/lib*`,
//!    `/etc`, and the interpreter's prefix when it lies elsewhere) bound read-only, six device
//!    nodes, a fresh `/proc` of the new PID namespace, the run's files (written there by the
//!    child: nothing of a run is on the host's disk) read-only at `/tmp/src`,
//!    and a writable `/tmp` tmpfs of `tmpfs_bytes` that `/var/tmp` and `/dev/shm` point into —
//!    so every write of the run shares one size cap, and no home directory, project folder or
//!    user file of the host is visible;
//! 4. pivots into it, detaches the old root, makes the new root read-only, sets
//!    `no_new_privs`, and returns to exec the program.
//!
//! The new network namespace has only a loopback interface that is down: no connection leaves.
//! Every path and string is prepared before the fork ([`Jail::new`]); [`Jail::enter`] makes
//! only async-signal-safe system calls.

use std::ffi::{CStr, CString};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Where the child mounts the jail's new root, in its private mount namespace (the host's
/// `/tmp` is untouched; the child no longer sees it).
pub(crate) const ROOT_MOUNT: &str = "/tmp";

/// The uid and gid the program has inside the jail.
const INNER_ID: u32 = 1000;

/// Top-level system paths bound read-only into the jail when the host has them (a symbolic
/// link, as `/bin → usr/bin` on merged-usr systems, is recreated as the same link).
pub(crate) const SYSTEM_PATHS: [&str; 8] =
    ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc"];

/// Device nodes bound into the jail's `/dev`.
const DEVICES: [&str; 6] =
    ["/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty"];

/// A piece of the host that a jail shows, read-only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum HostPath {
    /// A symbolic link recreated as the same link (`/bin → usr/bin` on merged-usr systems).
    Symlink {
        /// The link's path.
        path: PathBuf,
        /// What it points to.
        target: PathBuf,
    },
    /// A directory bound read-only at the same path.
    Dir(PathBuf),
}

/// What of the host a jail shows: the [`SYSTEM_PATHS`] the host has, and the interpreter's
/// installation `prefix` when it lies outside them (pyenv under a home directory, a conda
/// prefix). Nothing else of the host is visible: no home directory, project folder or temp
/// files. Shared by drift's namespace jail and the bwrap command line.
pub(crate) fn host_paths(prefix: &Path) -> io::Result<Vec<HostPath>> {
    let mut out = Vec::new();
    let mut bound: Vec<PathBuf> = Vec::new();
    for sys in SYSTEM_PATHS.iter().map(Path::new) {
        let Ok(meta) = std::fs::symlink_metadata(sys) else { continue };
        if meta.file_type().is_symlink() {
            out.push(HostPath::Symlink {
                path: sys.to_path_buf(),
                target: std::fs::read_link(sys)?,
            });
        } else if meta.is_dir() {
            out.push(HostPath::Dir(sys.to_path_buf()));
            bound.push(std::fs::canonicalize(sys).unwrap_or_else(|_| sys.to_path_buf()));
        }
    }
    let prefix = std::fs::canonicalize(prefix).unwrap_or_else(|_| prefix.to_path_buf());
    if prefix.is_absolute() && !bound.iter().any(|b| prefix.starts_with(b)) {
        out.push(HostPath::Dir(prefix));
    }
    Ok(out)
}

/// One step of building the new root, with every path already a C string.
#[derive(Debug, Clone)]
enum Step {
    /// `mkdir(path, mode)`; an existing directory is fine.
    Mkdir(CString, u32),
    /// `symlink(target, path)`.
    Symlink(CString, CString),
    /// Bind `src` onto `dst` (recursively), then remount it read-only, `nosuid`, `nodev`.
    BindReadOnly(CString, CString),
    /// Create an empty file `dst` and bind the device node `src` onto it.
    BindDevice(CString, CString),
    /// Mount a tmpfs on `dst` with `options` (`size=…,mode=…`).
    Tmpfs(CString, CString),
    /// Create the file `path` (mode 0644) holding `data`.
    WriteFile(CString, Vec<u8>),
}

/// A prepared jail for one run.
#[derive(Debug, Clone)]
pub struct Jail {
    /// Where the new root is mounted ([`ROOT_MOUNT`]).
    root: CString,
    /// The new root's tmpfs options.
    root_options: CString,
    /// The steps that populate the new root, in order.
    steps: Vec<Step>,
    /// `/tmp` inside the jail: the working directory.
    workdir: CString,
    /// The new root's `/proc`, seen from the old root.
    proc: CString,
}

fn c(path: impl AsRef<[u8]>) -> io::Result<CString> {
    CString::new(path.as_ref().to_vec()).map_err(|_| io::Error::other("a path holds a NUL byte"))
}

fn under(root: &Path, path: &Path) -> PathBuf {
    root.join(path.strip_prefix("/").unwrap_or(path))
}

impl Jail {
    /// Prepares the jail of a run of `files` (`(name, contents)`, written by the child into the
    /// jail's `/tmp/src` and made read-only there, so a run leaves nothing on the host even
    /// when the trainer is killed); `prefix` is the interpreter's installation
    /// (`sys.base_prefix`), bound too when it lies outside the system paths; `tmpfs_bytes` caps
    /// everything the run writes. The new root is built on [`ROOT_MOUNT`] of the child's
    /// private mount namespace.
    pub fn new(files: &[(&str, &str)], prefix: &Path, tmpfs_bytes: u64) -> io::Result<Self> {
        let root = Path::new(ROOT_MOUNT);
        let mut steps = Vec::new();
        for host in host_paths(prefix)? {
            match host {
                HostPath::Symlink { path, target } => steps.push(Step::Symlink(
                    c(target.as_os_str().as_bytes())?,
                    c(under(root, &path).as_os_str().as_bytes())?,
                )),
                HostPath::Dir(path) => {
                    let mut dir = PathBuf::from("/");
                    for part in path.components().skip(1) {
                        dir.push(part);
                        steps
                            .push(Step::Mkdir(c(under(root, &dir).as_os_str().as_bytes())?, 0o755));
                    }
                    steps.push(Step::BindReadOnly(
                        c(path.as_os_str().as_bytes())?,
                        c(under(root, &path).as_os_str().as_bytes())?,
                    ));
                }
            }
        }
        let dev = root.join("dev");
        steps.push(Step::Mkdir(c(dev.as_os_str().as_bytes())?, 0o755));
        for node in DEVICES.iter().map(Path::new) {
            if node.exists() {
                let dst = under(root, node);
                steps.push(Step::BindDevice(
                    c(node.as_os_str().as_bytes())?,
                    c(dst.as_os_str().as_bytes())?,
                ));
            }
        }
        for dir in ["proc", "tmp", "var", ".oldroot"] {
            steps.push(Step::Mkdir(c(root.join(dir).as_os_str().as_bytes())?, 0o755));
        }
        let tmp = root.join("tmp");
        let options = format!("size={tmpfs_bytes},mode=1777");
        steps.push(Step::Tmpfs(c(tmp.as_os_str().as_bytes())?, c(options)?));
        steps.push(Step::Symlink(c("/tmp")?, c(root.join("var/tmp").as_os_str().as_bytes())?));
        steps.push(Step::Symlink(c("/tmp")?, c(root.join("dev/shm").as_os_str().as_bytes())?));
        let jail_src = tmp.join("src");
        let src = c(jail_src.as_os_str().as_bytes())?;
        steps.push(Step::Mkdir(src.clone(), 0o755));
        for (name, text) in files {
            if name.contains('/') || name.is_empty() || *name == "." || *name == ".." {
                return Err(io::Error::other(format!(
                    "a run's file name {name:?} is not a plain name"
                )));
            }
            steps.push(Step::WriteFile(
                c(jail_src.join(name).as_os_str().as_bytes())?,
                text.as_bytes().to_vec(),
            ));
        }
        steps.push(Step::BindReadOnly(src.clone(), src));
        Ok(Self {
            root: c(root.as_os_str().as_bytes())?,
            root_options: c("size=1048576,mode=0755")?,
            steps,
            workdir: c("/tmp")?,
            proc: c(root.join("proc").as_os_str().as_bytes())?,
        })
    }

    /// Enters the jail (in the forked child, before exec); see the module documentation.
    /// Returns in the process that goes on to exec the program (PID 1 of the new namespace);
    /// the process it forked from never returns.
    pub fn enter(&self) -> io::Result<()> {
        // SAFETY: only async-signal-safe system calls on memory prepared before the fork.
        unsafe {
            let (uid, gid) = (libc::geteuid(), libc::getegid());
            // A uid change (the per-run uid) makes the process non-dumpable, which leaves its
            // /proc/self files owned by root and the id maps unwritable; undo that first.
            check(libc::prctl(libc::PR_SET_DUMPABLE, 1 as libc::c_ulong, 0, 0, 0))?;
            let flags = libc::CLONE_NEWUSER
                | libc::CLONE_NEWNS
                | libc::CLONE_NEWNET
                | libc::CLONE_NEWPID
                | libc::CLONE_NEWIPC
                | libc::CLONE_NEWUTS;
            check(libc::unshare(flags))?;
            write_file(c"/proc/self/setgroups", b"deny")?;
            let mut line = [0u8; 48];
            write_file(c"/proc/self/uid_map", id_map(&mut line, uid))?;
            write_file(c"/proc/self/gid_map", id_map(&mut line, gid))?;

            // The PID namespace takes effect for the children of the unsharing process: fork
            // now, so that the rest (a fresh /proc among it) happens in PID 1 of the namespace.
            let pid = libc::fork();
            if pid < 0 {
                return Err(io::Error::last_os_error());
            }
            if pid > 0 {
                wait_and_exit(pid);
            }
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0);

            let none = std::ptr::null();
            check(libc::mount(
                none,
                c"/".as_ptr(),
                none,
                libc::MS_REC | libc::MS_PRIVATE,
                none.cast(),
            ))?;
            check(libc::mount(
                c"tmpfs".as_ptr(),
                self.root.as_ptr(),
                c"tmpfs".as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV,
                self.root_options.as_ptr().cast(),
            ))?;
            for step in &self.steps {
                run_step(step)?;
            }
            // A new proc is only allowed while the host's is still visible in this mount
            // namespace, i.e. before the pivot.
            check(libc::mount(
                c"proc".as_ptr(),
                self.proc.as_ptr(),
                c"proc".as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                none.cast(),
            ))?;
            check(libc::chdir(self.root.as_ptr()))?;
            check(libc::syscall(libc::SYS_pivot_root, c".".as_ptr(), c".oldroot".as_ptr()) as i32)?;
            check(libc::chdir(c"/".as_ptr()))?;
            check(libc::umount2(c"/.oldroot".as_ptr(), libc::MNT_DETACH))?;
            check(libc::rmdir(c"/.oldroot".as_ptr()))?;
            check(libc::mount(
                none,
                c"/".as_ptr(),
                none,
                libc::MS_REMOUNT | libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV,
                none.cast(),
            ))?;
            check(libc::chdir(self.workdir.as_ptr()))?;
            check(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1 as libc::c_ulong, 0, 0, 0))?;
        }
        Ok(())
    }
}

/// The process that unshared the PID namespace: closes every descriptor (so the parent sees
/// the program's pipes and `exec` report close when the program's side does), dies with its
/// parent, waits for PID 1 and leaves with its status (re-raising a fatal signal).
unsafe fn wait_and_exit(pid: libc::pid_t) -> ! {
    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0);
    if libc::syscall(libc::SYS_close_range, 0u32, u32::MAX, 0u32) != 0 {
        for fd in 0..1024 {
            libc::close(fd);
        }
    }
    let mut status = 0;
    loop {
        let r = libc::waitpid(pid, &mut status, 0);
        if r == pid {
            break;
        }
        if r < 0 && *libc::__errno_location() != libc::EINTR {
            libc::_exit(127);
        }
    }
    if libc::WIFSIGNALED(status) {
        let sig = libc::WTERMSIG(status);
        libc::signal(sig, libc::SIG_DFL);
        libc::kill(libc::getpid(), sig);
        libc::_exit(128 + sig);
    }
    libc::_exit(libc::WEXITSTATUS(status))
}

unsafe fn run_step(step: &Step) -> io::Result<()> {
    let none = std::ptr::null();
    match step {
        Step::Mkdir(path, mode) => {
            if libc::mkdir(path.as_ptr(), *mode) < 0 && *libc::__errno_location() != libc::EEXIST {
                return Err(io::Error::last_os_error());
            }
        }
        Step::Symlink(target, path) => check(libc::symlink(target.as_ptr(), path.as_ptr()))?,
        Step::BindReadOnly(src, dst) => {
            check(libc::mount(
                src.as_ptr(),
                dst.as_ptr(),
                none,
                libc::MS_BIND | libc::MS_REC,
                none.cast(),
            ))?;
            let ro = libc::MS_REMOUNT
                | libc::MS_BIND
                | libc::MS_RDONLY
                | libc::MS_NOSUID
                | libc::MS_NODEV;
            check(libc::mount(none, dst.as_ptr(), none, ro, none.cast()))?;
        }
        Step::BindDevice(src, dst) => {
            let fd =
                libc::open(dst.as_ptr(), libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC, 0o644);
            check(fd)?;
            libc::close(fd);
            check(libc::mount(src.as_ptr(), dst.as_ptr(), none, libc::MS_BIND, none.cast()))?;
        }
        Step::WriteFile(path, data) => {
            let fd = libc::open(
                path.as_ptr(),
                libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC | libc::O_CLOEXEC,
                0o644,
            );
            check(fd)?;
            let mut rest: &[u8] = data;
            while !rest.is_empty() {
                let w = libc::write(fd, rest.as_ptr().cast(), rest.len());
                if w <= 0 {
                    let e = io::Error::last_os_error();
                    libc::close(fd);
                    return Err(e);
                }
                rest = &rest[w as usize..];
            }
            libc::close(fd);
        }
        Step::Tmpfs(dst, options) => check(libc::mount(
            c"tmpfs".as_ptr(),
            dst.as_ptr(),
            c"tmpfs".as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV,
            options.as_ptr().cast(),
        ))?,
    }
    Ok(())
}

fn check(r: i32) -> io::Result<()> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// `"<INNER_ID> <outer> 1"` (an id-map line) in `buf`, without allocating.
fn id_map(buf: &mut [u8; 48], outer: u32) -> &[u8] {
    let mut n = push_decimal(buf, 0, INNER_ID);
    buf[n] = b' ';
    n = push_decimal(buf, n + 1, outer);
    buf[n..n + 2].copy_from_slice(b" 1");
    &buf[..n + 2]
}

/// Writes `v` in decimal into `buf` at `at`; returns the position after it.
fn push_decimal(buf: &mut [u8; 48], at: usize, mut v: u32) -> usize {
    let mut digits = [0u8; 10];
    let mut k = 0;
    loop {
        digits[k] = b'0' + (v % 10) as u8;
        k += 1;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    for (i, d) in digits[..k].iter().rev().enumerate() {
        buf[at + i] = *d;
    }
    at + k
}

/// Writes `data` to the file `path` in one `write`.
unsafe fn write_file(path: &CStr, data: &[u8]) -> io::Result<()> {
    let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
    check(fd)?;
    let w = libc::write(fd, data.as_ptr().cast(), data.len());
    libc::close(fd);
    if w != data.len() as isize {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn id_map_lines_are_written_without_allocation() {
        let mut buf = [0u8; 48];
        assert_eq!(id_map(&mut buf, 0), b"1000 0 1");
        assert_eq!(id_map(&mut buf, 1_500_065_537), b"1000 1500065537 1");
        assert_eq!(id_map(&mut buf, u32::MAX), b"1000 4294967295 1");
    }
}
