//! A fork server for sandboxed runs: a small process, forked once when the [`super::Sandbox`]
//! is made, that forks a worker per run, so a run never forks the trainer itself.
//!
//! Why: `fork` copies the page table of every resident page of the forking process, and
//! drift's namespace jail forks twice per run. A dLLM trainer holds its update's peak (3.2 GB
//! for dllm-code-v5's coupled-GRPO update, kept on purpose by
//! `drift_core::alloc::keep_freed_memory`), so forking it per run cost more than the runs
//! (BENCHMARKS.md, session 15); handing the memory back before each batch instead
//! (`malloc_trim`) made the next update fault all of it in again, which on a virtual machine
//! whose host reclaims freed guest memory costs more still (session 26). The server is forked
//! while the process is small and stays small.
//!
//! Protocol: the client makes a socket pair per run, passes one end to the server over a
//! `SOCK_SEQPACKET` control socket (`SCM_RIGHTS`), writes the request on its own end and reads
//! the reply to end of file. The server forks a worker that reads the request, does the run
//! exactly as the sandbox would in-process ([`super::Sandbox`]'s `run_here`), writes the reply
//! and exits. The server exits, after its workers, at end of file on the control socket: when
//! the last clone of the sandbox is dropped or the client process ends. Workers die with the
//! server (`PR_SET_PDEATHSIG`).
//!
//! Fork safety: the server is forked from a possibly multi-threaded process. It makes only
//! system calls (`recvmsg`, `fork`, `close`, `waitpid`) on memory prepared before the fork;
//! its workers run ordinary Rust (glibc's `fork` leaves malloc usable in the child).

use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::Mutex;
use std::time::Duration;

use super::supervise::{RunOutput, RunStatus};

/// One run, as the worker receives it.
pub(super) struct Request {
    pub files: Vec<(String, String)>,
    pub script: String,
    pub timeout: Duration,
    pub uid: Option<u32>,
}

/// The client's handle on a running server.
#[derive(Debug)]
pub(super) struct Spawner {
    /// The control socket; `None` once dropped.
    ctrl: Mutex<Option<OwnedFd>>,
    pid: libc::pid_t,
}

impl Spawner {
    /// Forks the server; each of its workers answers one request with `serve`.
    pub(super) fn start<F>(serve: F) -> io::Result<Self>
    where
        F: Fn(Request) -> Result<RunOutput, String>,
    {
        let mut fds = [0 as RawFd; 2];
        // SAFETY: socketpair writes two descriptors into the array on success.
        let rc = unsafe {
            libc::socketpair(
                libc::AF_UNIX,
                libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
                0,
                fds.as_mut_ptr(),
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: both descriptors are fresh and owned here.
        let (client, server) =
            unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        // SAFETY: fork has no preconditions; the child only runs `serve_loop`, which never
        // returns.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(io::Error::last_os_error());
        }
        if pid == 0 {
            // The server keeps only the standard streams and its control socket (as fd 3):
            // a descriptor it inherited from another thread's run in flight (a pipe end)
            // would otherwise stay open as long as the server lives.
            // SAFETY: descriptor operations on this process's own table.
            unsafe {
                // The client's end first: held here, the server would never see end of file.
                libc::close(client.as_raw_fd());
                if server.as_raw_fd() != 3 && libc::dup2(server.as_raw_fd(), 3) < 0 {
                    libc::_exit(1);
                }
                if libc::syscall(libc::SYS_close_range, 4u32, u32::MAX, 0u32) < 0 {
                    for fd in 4..65_536 {
                        libc::close(fd);
                    }
                }
            }
            std::mem::forget((client, server));
            serve_loop(3, &serve);
        }
        drop(server);
        Ok(Self { ctrl: Mutex::new(Some(client)), pid })
    }

    /// Runs `req` in a worker of the server and returns its reply.
    pub(super) fn run(&self, req: &Request) -> io::Result<Result<RunOutput, String>> {
        let (mut mine, theirs) = UnixStream::pair()?;
        {
            let ctrl = self.ctrl.lock().unwrap_or_else(|e| e.into_inner());
            let ctrl =
                ctrl.as_ref().ok_or_else(|| io::Error::other("the fork server was stopped"))?;
            send_fd(ctrl.as_raw_fd(), theirs.as_raw_fd())?;
        }
        drop(theirs);
        mine.write_all(&encode_request(req))?;
        mine.shutdown(std::net::Shutdown::Write)?;
        let mut reply = Vec::new();
        mine.read_to_end(&mut reply)?;
        decode_reply(&reply).ok_or_else(|| {
            io::Error::other(format!(
                "the sandbox's fork server sent no complete reply ({} bytes)",
                reply.len()
            ))
        })
    }
}

impl Drop for Spawner {
    fn drop(&mut self) {
        // Closing the control socket ends the server's loop (it waits for its workers); reap it.
        drop(self.ctrl.get_mut().unwrap_or_else(|e| e.into_inner()).take());
        // SAFETY: waiting for our own child.
        unsafe {
            libc::waitpid(self.pid, std::ptr::null_mut(), 0);
        }
    }
}

/// The server: one worker per received descriptor, until end of file. Never returns.
fn serve_loop<F>(ctrl: RawFd, serve: &F) -> !
where
    F: Fn(Request) -> Result<RunOutput, String>,
{
    // SAFETY: system calls on descriptors this process owns; `_exit` never returns.
    unsafe {
        // When the client process ends, its end of the control socket closes and `recv_fd`
        // sees end of file: no parent-death signal (which would follow the forking *thread*).
        loop {
            while libc::waitpid(-1, std::ptr::null_mut(), libc::WNOHANG) > 0 {}
            let fd = match recv_fd(ctrl) {
                Ok(Some(fd)) => fd,
                Ok(None) => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            };
            let pid = libc::fork();
            if pid == 0 {
                libc::close(ctrl);
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0);
                let code = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    work(fd, serve)
                })) {
                    Ok(Ok(())) => 0,
                    _ => 1,
                };
                libc::_exit(code);
            }
            // On a failed fork the client reads end of file and reports it.
            libc::close(fd);
        }
        while libc::waitpid(-1, std::ptr::null_mut(), 0) > 0 {}
        libc::_exit(0)
    }
}

/// A worker: reads one request from `fd`, runs it, writes the reply.
fn work<F>(fd: RawFd, serve: &F) -> io::Result<()>
where
    F: Fn(Request) -> Result<RunOutput, String>,
{
    // SAFETY: `fd` was received for this worker alone.
    let mut stream = unsafe { UnixStream::from_raw_fd(fd) };
    let mut bytes = Vec::new();
    stream.read_to_end(&mut bytes)?;
    let req = decode_request(&bytes).ok_or_else(|| io::Error::other("malformed request"))?;
    let reply = serve(req);
    stream.write_all(&encode_reply(&reply))
}

/// Sends descriptor `fd` as one message on `sock`.
fn send_fd(sock: RawFd, fd: RawFd) -> io::Result<()> {
    let mut byte = [1u8];
    let mut iov = libc::iovec { iov_base: byte.as_mut_ptr().cast(), iov_len: 1 };
    // SAFETY: CMSG_SPACE is a pure size computation.
    let space = unsafe { libc::CMSG_SPACE(std::mem::size_of::<RawFd>() as u32) } as usize;
    let mut control = vec![0u8; space];
    // SAFETY: msghdr is plain data; the pointers stay valid for the call below.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = space as _;
    // SAFETY: `control` has room for one header with one descriptor (CMSG_SPACE above).
    unsafe {
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<RawFd>() as u32) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<RawFd>(), fd);
        if libc::sendmsg(sock, &msg, libc::MSG_NOSIGNAL) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Receives one descriptor from `sock`; `None` at end of file.
fn recv_fd(sock: RawFd) -> io::Result<Option<RawFd>> {
    let mut byte = [0u8];
    let mut iov = libc::iovec { iov_base: byte.as_mut_ptr().cast(), iov_len: 1 };
    // 64 bytes hold the header and one descriptor on every Linux ABI (CMSG_SPACE(4) ≤ 24);
    // a fixed array keeps allocation out of the server.
    let mut control = [0u64; 8];
    // SAFETY: msghdr is plain data; the pointers stay valid for the call below.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control) as _;
    // SAFETY: recvmsg fills `msg` within the buffers it points to.
    unsafe {
        let n = libc::recvmsg(sock, &mut msg, libc::MSG_CMSG_CLOEXEC);
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        if n == 0 {
            return Ok(None);
        }
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        if cmsg.is_null()
            || (*cmsg).cmsg_level != libc::SOL_SOCKET
            || (*cmsg).cmsg_type != libc::SCM_RIGHTS
        {
            return Err(io::Error::other("a control message without a descriptor"));
        }
        Ok(Some(std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast::<RawFd>())))
    }
}

fn put(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
    out.extend_from_slice(bytes);
}

/// Reads length-prefixed fields and fixed-size integers from a byte slice.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    fn bytes(&mut self) -> Option<&'a [u8]> {
        let n = usize::try_from(self.u64()?).ok()?;
        self.take(n)
    }
    fn string(&mut self) -> Option<String> {
        String::from_utf8(self.bytes()?.to_vec()).ok()
    }
}

fn encode_request(req: &Request) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&(req.timeout.as_nanos() as u64).to_le_bytes());
    out.extend_from_slice(&req.uid.map_or(u64::MAX, u64::from).to_le_bytes());
    put(&mut out, req.script.as_bytes());
    out.extend_from_slice(&(req.files.len() as u64).to_le_bytes());
    for (name, text) in &req.files {
        put(&mut out, name.as_bytes());
        put(&mut out, text.as_bytes());
    }
    out
}

fn decode_request(bytes: &[u8]) -> Option<Request> {
    let mut r = Reader(bytes);
    let timeout = Duration::from_nanos(r.u64()?);
    let uid = match r.u64()? {
        u64::MAX => None,
        v => Some(u32::try_from(v).ok()?),
    };
    let script = r.string()?;
    let n = r.u64()?;
    let mut files = Vec::new();
    for _ in 0..n {
        files.push((r.string()?, r.string()?));
    }
    r.0.is_empty().then_some(Request { files, script, timeout, uid })
}

fn encode_reply(reply: &Result<RunOutput, String>) -> Vec<u8> {
    let mut out = Vec::new();
    match reply {
        Err(why) => {
            out.push(0);
            put(&mut out, why.as_bytes());
        }
        Ok(o) => {
            out.push(1);
            let (kind, value) = match o.status {
                RunStatus::Exit(c) => (0u8, c),
                RunStatus::Signal(s) => (1, s),
                RunStatus::Timeout => (2, 0),
                RunStatus::OutputLimit => (3, 0),
            };
            out.push(kind);
            out.extend_from_slice(&value.to_le_bytes());
            out.extend_from_slice(&(o.elapsed.as_nanos() as u64).to_le_bytes());
            out.extend_from_slice(&o.uid.map_or(u64::MAX, u64::from).to_le_bytes());
            put(&mut out, &o.stdout);
            put(&mut out, &o.stderr);
        }
    }
    out
}

fn decode_reply(bytes: &[u8]) -> Option<Result<RunOutput, String>> {
    let mut r = Reader(bytes);
    let reply = match r.take(1)?[0] {
        0 => Err(r.string()?),
        1 => {
            let kind = r.take(1)?[0];
            let value = i32::from_le_bytes(r.take(4)?.try_into().ok()?);
            let status = match kind {
                0 => RunStatus::Exit(value),
                1 => RunStatus::Signal(value),
                2 => RunStatus::Timeout,
                3 => RunStatus::OutputLimit,
                _ => return None,
            };
            let elapsed = Duration::from_nanos(r.u64()?);
            let uid = match r.u64()? {
                u64::MAX => None,
                v => Some(u32::try_from(v).ok()?),
            };
            let stdout = r.bytes()?.to_vec();
            let stderr = r.bytes()?.to_vec();
            Ok(RunOutput { status, stdout, stderr, elapsed, uid })
        }
        _ => return None,
    };
    r.0.is_empty().then_some(reply)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_and_replies_round_trip_and_truncation_is_refused() {
        let req = Request {
            files: vec![("main.py".into(), "print('é')\n".into()), ("t0.py".into(), String::new())],
            script: "main.py".into(),
            timeout: Duration::from_millis(1500),
            uid: Some(1_500_000_007),
        };
        let bytes = encode_request(&req);
        let back = decode_request(&bytes).unwrap();
        assert_eq!(
            (back.files, back.script, back.timeout, back.uid),
            (req.files, req.script, req.timeout, req.uid)
        );
        assert!(decode_request(&bytes[..bytes.len() - 1]).is_none());
        let out = RunOutput {
            status: RunStatus::Signal(9),
            stdout: b"out".to_vec(),
            stderr: vec![0, 255],
            elapsed: Duration::from_micros(1234),
            uid: None,
        };
        let bytes = encode_reply(&Ok(out));
        let back = decode_reply(&bytes).unwrap().unwrap();
        assert_eq!(
            (back.status, back.stdout, back.stderr, back.elapsed, back.uid),
            (
                RunStatus::Signal(9),
                b"out".to_vec(),
                vec![0, 255],
                Duration::from_micros(1234),
                None
            )
        );
        assert!(decode_reply(&bytes[..bytes.len() - 1]).is_none());
        let err = decode_reply(&encode_reply(&Err("no jail".into()))).unwrap();
        assert_eq!(err.unwrap_err(), "no jail");
    }
}
