//! The sandbox's fork server: runs started from it give what runs that fork the caller give,
//! concurrent runs get their own output, and the server ends with the last clone of its
//! sandbox. (One test in its own binary: it counts this process's children.)

use std::time::Duration;

use drift_rewards::sandbox::{RunStatus, Sandbox, SandboxConfig, SandboxMode};

/// Live children of this process, from every thread's `/proc/self/task/*/children`.
fn children() -> usize {
    child_pids().len()
}

#[test]
fn the_fork_server_runs_what_a_fork_would_runs_in_parallel_and_ends_with_its_sandbox() {
    let before = children();
    let cfg =
        |fork_server| SandboxConfig { timeout_s: 2.0, fork_server, ..SandboxConfig::default() };
    let mode = |c: SandboxConfig| {
        // The jail when the kernel allows it, else limits only.
        Sandbox::new(&c)
            .or_else(|_| Sandbox::new(&SandboxConfig { mode: SandboxMode::Limits, ..c }))
    };
    let served = mode(cfg(true)).unwrap();
    assert_eq!(children(), before + 1, "one server per sandbox");
    let direct = mode(cfg(false)).unwrap();
    assert_eq!(children(), before + 1, "no server when fork_server is off");
    assert_eq!(served.mode(), direct.mode());

    let program = |t: usize, k: usize| {
        format!("import sys\nprint('run', {t}, {k})\nsys.stderr.write('e{k}')\nsys.exit({k})\n")
    };
    std::thread::scope(|s| {
        for t in 0..4 {
            let (served, direct, program) = (&served, &direct, &program);
            s.spawn(move || {
                for k in 0..4 {
                    let text = program(t, k);
                    let a = served.run_python(&[("main.py", &text)], "main.py").unwrap();
                    let b = direct.run_python(&[("main.py", &text)], "main.py").unwrap();
                    assert_eq!(a.status, RunStatus::Exit(k as i32));
                    assert_eq!(a.stdout, format!("run {t} {k}\n").into_bytes());
                    assert_eq!(a.stderr, format!("e{k}").into_bytes());
                    assert_eq!((a.status, &a.stdout, &a.stderr), (b.status, &b.stdout, &b.stderr));
                    assert_eq!(a.uid.is_some(), b.uid.is_some());
                }
            });
        }
    });
    // Limits hold in the server's runs: the wall limit and the output cap.
    let out = served.run_python(&[("main.py", "while True:\n    pass\n")], "main.py").unwrap();
    assert_eq!(out.status, RunStatus::Timeout);
    assert!(out.elapsed < Duration::from_secs(4), "{:?}", out.elapsed);
    let out = served.run_python(&[("main.py", "print('x' * (1 << 20))\n")], "main.py").unwrap();
    assert_eq!(out.status, RunStatus::OutputLimit);

    let clone = served.clone();
    drop(served);
    assert_eq!(children(), before + 1, "a clone keeps the server");
    assert_eq!(
        clone.run_python(&[("main.py", "pass\n")], "main.py").unwrap().status,
        RunStatus::Exit(0)
    );
    drop(clone);
    assert_eq!(children(), before, "the server ends with the last clone");

    // A server killed from outside: runs go on, forking this process.
    let old: Vec<String> = child_pids();
    let orphaned = mode(cfg(true)).unwrap();
    let server: Vec<String> = child_pids().into_iter().filter(|p| !old.contains(p)).collect();
    assert_eq!(server.len(), 1);
    // SAFETY: signalling our own child.
    unsafe { libc::kill(server[0].parse().unwrap(), libc::SIGKILL) };
    let stat = format!("/proc/{}/stat", server[0]);
    let dead = |s: String| s.rsplit(')').next().is_some_and(|r| r.trim_start().starts_with('Z'));
    while !std::fs::read_to_string(&stat).map(dead).unwrap_or(true) {
        std::thread::sleep(Duration::from_millis(5));
    }
    let out = orphaned.run_python(&[("main.py", "print('still here')\n")], "main.py").unwrap();
    assert_eq!((out.status, out.stdout), (RunStatus::Exit(0), b"still here\n".to_vec()));
    drop(orphaned);
    assert_eq!(children(), before, "the killed server is reaped");
    drop(direct);
}

/// The pids of this process's children.
fn child_pids() -> Vec<String> {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else { return Vec::new() };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|s| s.split_whitespace().map(String::from).collect::<Vec<_>>())
        .collect()
}
