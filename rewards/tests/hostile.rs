//! Hostile code against the sandbox, in every isolation mode available here (limits only,
//! drift's namespace jail, and bwrap when it works). Each case must end in bounded time with a
//! failure recorded and nothing outside the sandbox touched.

use std::sync::Arc;
use std::time::{Duration, Instant};

use drift_rewards::reward::{Reward, TextSample};
use drift_rewards::sandbox::RunStatus;
use drift_rewards::sandbox::{Sandbox, SandboxConfig, SandboxMode};
use drift_rewards::worlds::code::{CodeReward, CodeRewardConfig};

/// The sandboxes to test: limits only, the namespace jail and bwrap when their probes succeed.
fn sandboxes() -> Vec<Arc<Sandbox>> {
    let cfg = |mode| SandboxConfig {
        mode,
        timeout_s: 1.5,
        memory_mb: 512,
        file_size_mb: 16,
        max_processes: 16,
        max_output_bytes: 65_536,
        ..SandboxConfig::default()
    };
    // The jails first: limits-only runs sharing an ordinary user's uid can leave a fork
    // bomb's last children to be reaped after the run, which the next start would wait for.
    let mut out = Vec::new();
    for mode in [SandboxMode::Namespaces, SandboxMode::Bwrap] {
        match Sandbox::new(&cfg(mode)) {
            Ok(sb) => out.push(Arc::new(sb)),
            Err(e) => println!("{mode:?} is not usable here ({e}): not tested"),
        }
    }
    out.push(Arc::new(Sandbox::new(&cfg(SandboxMode::Limits)).unwrap()));
    out
}

fn completion(code: &str) -> String {
    format!("```python\n{code}\n```\n")
}

/// Scores `code` against one test `pass`ing trivially, returning (score, elapsed, details).
fn score(sb: &Arc<Sandbox>, code: &str, test: &str) -> (f64, Duration, String) {
    let reward = CodeReward::with_sandbox(&CodeRewardConfig::default(), Arc::clone(sb)).unwrap();
    let sample = TextSample::new(vec![test.to_string()], completion(code));
    let start = Instant::now();
    let out = reward.evaluate_batch(std::slice::from_ref(&sample)).remove(0);
    assert!(out.is_ok(), "{:?}", out.failure);
    let exec = out.details.components[1].score;
    (exec, start.elapsed(), format!("{:?}", out.details.tests))
}

fn assert_fails_fast(code: &str, bound: Duration) {
    for sb in sandboxes() {
        let (exec, took, details) = score(&sb, code, "pass");
        assert_eq!(exec, 0.0, "mode {}: {details}", sb.mode());
        assert!(took < bound, "mode {}: took {took:?}", sb.mode());
        println!("mode {}: failed in {took:?}: {details}", sb.mode());
    }
}

#[test]
fn correct_solution_scores_full_under_all_limits() {
    for sb in sandboxes() {
        let reward =
            CodeReward::with_sandbox(&CodeRewardConfig::default(), Arc::clone(&sb)).unwrap();
        let tests = vec!["assert f(2) == 4".to_string(), "assert f(-3) == 9".to_string()];
        let sample = TextSample::new(tests, completion("def f(x):\n    return x * x"));
        let out = reward.evaluate_batch(&[sample]).remove(0);
        assert_eq!(out.score, 2.5, "mode {}: {:?}", sb.mode(), out.details);
    }
}

#[test]
fn infinite_loop_times_out() {
    assert_fails_fast("while True:\n    pass", Duration::from_secs(4));
}

#[test]
fn allocating_16_gb_fails() {
    assert_fails_fast("x = bytearray(16 * 1024 ** 3)\nx[-1] = 1", Duration::from_secs(4));
}

#[test]
fn writing_a_2_gb_file_is_stopped() {
    let code = "with open('big.bin', 'wb') as f:\n    for _ in range(2048):\n        f.write(b'\\0' * (1 << 20))";
    assert_fails_fast(code, Duration::from_secs(4));
}

#[test]
fn printing_1_gb_is_cut_off() {
    for sb in sandboxes() {
        let code =
            "import sys\nb = 'x' * (1 << 20)\nfor _ in range(1024):\n    sys.stdout.write(b)\n";
        let start = Instant::now();
        let out = sb.run_python(&[("main.py", code)], "main.py").unwrap();
        assert_eq!(out.status, RunStatus::OutputLimit, "mode {}", sb.mode());
        assert!(out.stdout.len() <= 65_536);
        assert!(start.elapsed() < Duration::from_secs(3), "mode {}", sb.mode());
    }
    assert_fails_fast("print('x' * (1 << 30))", Duration::from_secs(4));
}

#[test]
fn fork_bomb_is_bounded_and_leaves_nothing_behind() {
    let code =
        "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n";
    for sb in sandboxes() {
        let start = Instant::now();
        let out = sb.run_python(&[("main.py", code)], "main.py").unwrap();
        assert_ne!(out.status, RunStatus::Exit(0), "mode {}", sb.mode());
        assert!(
            start.elapsed() < Duration::from_secs(4),
            "mode {}: {:?}",
            sb.mode(),
            start.elapsed()
        );
        if let Some(uid) = out.uid {
            let t = Instant::now();
            while processes_of(uid) > 0 && t.elapsed() < Duration::from_secs(2) {
                std::thread::sleep(Duration::from_millis(20));
            }
            assert_eq!(processes_of(uid), 0, "mode {}: processes of uid {uid} survived", sb.mode());
        }
        println!("mode {}: fork bomb ended as {} in {:?}", sb.mode(), out.status, out.elapsed);
    }
    assert_fails_fast(code, Duration::from_secs(4));
}

/// Live (not zombie) processes whose real uid is `uid`, from /proc.
fn processes_of(uid: u32) -> usize {
    let Ok(dir) = std::fs::read_dir("/proc") else { return 0 };
    dir.flatten()
        .filter_map(|e| std::fs::read_to_string(e.path().join("status")).ok())
        .filter(|s| !s.lines().any(|l| l.starts_with("State:") && l.contains("Z (zombie)")))
        .filter(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .is_some_and(|u| u == uid.to_string())
        })
        .count()
}

#[test]
fn parent_environment_is_not_inherited() {
    let name = format!("DRIFT_SECRET_{}", std::process::id());
    std::env::set_var(&name, "hunter2");
    for sb in sandboxes() {
        let (seen, _, d) = score(
            &sb,
            &format!("import os\nv = os.environ.get('{name}')"),
            "assert v == 'hunter2'",
        );
        assert_eq!(seen, 0.0, "mode {}: the child saw the parent's variable: {d}", sb.mode());
        let (hidden, _, d) =
            score(&sb, &format!("import os\nv = os.environ.get('{name}')"), "assert v is None");
        assert_eq!(hidden, 1.0, "mode {}: {d}", sb.mode());
    }
}

#[test]
fn writes_outside_the_sandbox_do_not_land() {
    let id = std::process::id();
    let in_cwd = std::env::current_dir().unwrap().join(format!("drift-escape-{id}.txt"));
    let outside = std::env::temp_dir().join(format!("drift-escape-dir-{id}"));
    std::fs::create_dir_all(&outside).unwrap();
    let abs = outside.join("x.txt");
    for sb in sandboxes() {
        let confined = sb.mode().bwrap || sb.mode().namespaces || sb.mode().own_uid;
        for target in [&in_cwd, &abs] {
            let code = format!("open({:?}, 'w').write('escaped')", target.display().to_string());
            let (exec, _, d) = score(&sb, &code, "pass");
            let landed = target.exists();
            let _ = std::fs::remove_file(target);
            if confined {
                assert!(!landed, "mode {}: {} was written", sb.mode(), target.display());
                assert_eq!(exec, 0.0, "mode {}: {d}", sb.mode());
            } else {
                println!("mode {}: not confined (not root, no bwrap): write to {} landed={landed}; assertion skipped", sb.mode(), target.display());
            }
        }
    }
    let _ = std::fs::remove_dir_all(&outside);
}

#[test]
fn network_is_blocked_in_a_jail() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let code =
        format!("import socket\ns = socket.create_connection(('127.0.0.1', {port}), timeout=0.5)");
    for sb in sandboxes() {
        let (exec, _, d) = score(&sb, &code, "pass");
        if sb.mode().bwrap || sb.mode().namespaces {
            assert_eq!(exec, 0.0, "mode {}: connected to the parent's socket: {d}", sb.mode());
        } else {
            println!("mode {}: network is NOT blocked without bwrap (connect scored {exec}); assertion skipped", sb.mode());
        }
    }
    drop(listener);
}

#[test]
fn temp_dirs_are_removed() {
    let before = count_sandbox_dirs();
    for sb in sandboxes() {
        let _ = score(&sb, "open('junk.txt', 'w').write('x')", "pass");
    }
    // Other tests run concurrently, so only check that this test's dirs did not accumulate.
    assert!(count_sandbox_dirs() <= before + 8);
}

fn count_sandbox_dirs() -> usize {
    let prefix = format!("drift-sandbox-{}-", std::process::id());
    std::fs::read_dir(std::env::temp_dir())
        .map(|d| {
            d.flatten().filter(|e| e.file_name().to_string_lossy().starts_with(&prefix)).count()
        })
        .unwrap_or(0)
}

#[test]
fn filling_the_disk_with_many_files_is_bounded_in_a_jail() {
    // 12 files of 10 MiB, each under the 16 MiB per-file limit, 120 MiB in all.
    let code = "for i in range(12):\n    with open(f'fill{i}.bin', 'wb') as f:\n        f.write(b'\\0' * (10 << 20))";
    for sb in sandboxes() {
        let (exec, took, d) = score(&sb, code, "pass");
        if (sb.mode().bwrap && sb.mode().sized_tmpfs) || sb.mode().namespaces {
            assert_eq!(exec, 0.0, "mode {}: wrote 120 MiB into a 64 MiB tmpfs: {d}", sb.mode());
        } else {
            println!("mode {}: total writes are bounded only per file and by time (scored {exec} in {took:?}); assertion skipped", sb.mode());
        }
    }
}

#[test]
fn scratch_files_in_the_working_directory_work() {
    let code =
        "with open('scratch.txt', 'w') as f:\n    f.write('hi')\nv = open('scratch.txt').read()";
    for sb in sandboxes() {
        let (exec, _, d) = score(&sb, code, "assert v == 'hi'");
        assert_eq!(exec, 1.0, "mode {}: {d}", sb.mode());
    }
}

#[test]
fn missing_bwrap_falls_back_to_the_namespace_jail_or_errors_when_required() {
    let missing = std::path::PathBuf::from("/nonexistent/bwrap");
    let cfg = SandboxConfig { bwrap: missing.clone(), ..SandboxConfig::default() };
    let Ok(sb) = Sandbox::new(&cfg) else {
        // No jail at all here: `auto` refuses, naming the explicit opt-out.
        let err = Sandbox::new(&cfg).unwrap_err().to_string();
        assert!(err.contains("mode = \"limits\""), "{err}");
        return;
    };
    let sb = Arc::new(sb);
    assert!(!sb.mode().bwrap, "{}", sb.mode());
    let (exec, _, d) = score(&sb, "def f(x):\n    return x", "assert f(3) == 3");
    assert_eq!(exec, 1.0, "{d}");
    let strict =
        SandboxConfig { mode: SandboxMode::Bwrap, bwrap: missing, ..SandboxConfig::default() };
    assert!(Sandbox::new(&strict).unwrap_err().to_string().contains("bwrap"));
}

/// The jails usable here (drift's namespace jail, bwrap), as the trainer's own uid
/// (`drop_privileges = false`, as an ordinary user runs it) or with a per-run uid.
fn jails(drop_privileges: bool) -> Vec<Arc<Sandbox>> {
    let mut out = Vec::new();
    for mode in [SandboxMode::Namespaces, SandboxMode::Bwrap] {
        let cfg =
            SandboxConfig { mode, timeout_s: 1.5, drop_privileges, ..SandboxConfig::default() };
        match Sandbox::new(&cfg) {
            Ok(sb) => out.push(Arc::new(sb)),
            Err(e) => println!("{mode:?} is not usable here ({e}): not tested"),
        }
    }
    out
}

/// Runs `code` as a test that passes only when its assertions hold inside the sandbox.
fn holds_inside(sb: &Arc<Sandbox>, code: &str) -> (f64, String) {
    let (exec, _, d) = score(sb, "", code);
    (exec, d)
}

#[test]
fn the_jail_has_its_own_pid_namespace_and_proc() {
    // Under the trainer's own uid (as an ordinary user would run it) and under a per-run uid.
    for sb in jails(false).into_iter().chain(jails(true)) {
        // PID 1 is the test harness (drift's jail) or bwrap's init with the harness as PID 2,
        // and the test runs in the harness's child; the trainer is invisible.
        let code = "import os\nassert os.getpid() <= 3 and os.getppid() <= 2, (os.getpid(), os.getppid())\n\
                    pids = [p for p in os.listdir('/proc') if p.isdigit()]\nassert len(pids) <= 3, pids";
        let (exec, d) = holds_inside(&sb, code);
        assert_eq!(exec, 1.0, "mode {}: {d}", sb.mode());
    }
}

#[test]
fn the_jail_hides_the_trainers_environment_files_and_home() {
    let secret = std::env::temp_dir().join(format!("drift-secret-{}", std::process::id()));
    std::fs::write(&secret, "hunter2").unwrap();
    std::fs::set_permissions(&secret, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let here = std::env::current_dir().unwrap();
    for sb in jails(false).into_iter().chain(jails(true)) {
        for path in [
            format!("/proc/{}/environ", std::process::id()),
            secret.display().to_string(),
            here.join("Cargo.toml").display().to_string(),
        ] {
            let code = format!("import os\nassert not os.path.exists({path:?})");
            let (exec, d) = holds_inside(&sb, &code);
            assert_eq!(exec, 1.0, "mode {}: {path} is visible: {d}", sb.mode());
        }
        let (exec, d) = holds_inside(
            &sb,
            "import os\nassert not os.path.exists('/home') and not os.path.exists('/root')",
        );
        assert_eq!(exec, 1.0, "mode {}: {d}", sb.mode());
    }
    let _ = std::fs::remove_file(&secret);
}

#[test]
fn the_jails_writable_places_share_one_size_cap() {
    // 40 MiB into each of /dev/shm, /var/tmp and /tmp: 120 MiB against the 64 MiB cap.
    let code = "for d in ['/dev/shm', '/var/tmp', '/tmp']:\n    with open(d + '/fill.bin', 'wb') as f:\n        f.write(b'\\0' * (40 << 20))";
    for sb in jails(false) {
        let (exec, d) = holds_inside(&sb, &format!("{code}\n"));
        assert_eq!(exec, 0.0, "mode {}: wrote 120 MiB past a 64 MiB cap: {d}", sb.mode());
        if !sb.mode().namespaces {
            continue; // bwrap's /dev/shm is its own capped tmpfs
        }
        let (exec, d) = holds_inside(
            &sb,
            "open('/dev/shm/a', 'w').write('x')\nassert open('/tmp/a').read() == 'x'",
        );
        assert_eq!(exec, 1.0, "mode {}: /dev/shm is not the jail's /tmp: {d}", sb.mode());
    }
}

#[test]
fn a_survivor_and_kill_minus_one_die_with_the_jail() {
    // The trainer's own uid: only the jail protects it.
    for sb in jails(false) {
        // A grandchild in its own session outlives the program: it dies with the namespace.
        let marker = format!("drift-survivor-{}", std::process::id());
        let code = format!(
            "import os\nif os.fork() == 0:\n    os.setsid()\n    \
             os.execv('/usr/bin/python3', ['python3', '-c', 'import time; time.sleep(30) # {marker}'])\n\
             import time\ntime.sleep(0.3)"
        );
        let (_, took, d) = score(&sb, "", &code);
        assert!(took < Duration::from_secs(4), "mode {}: took {took:?}: {d}", sb.mode());
        std::thread::sleep(Duration::from_millis(200));
        let alive = std::process::Command::new("pgrep").args(["-f", &marker]).output().unwrap();
        assert!(alive.stdout.is_empty(), "a survivor: {}", String::from_utf8_lossy(&alive.stdout));
        // kill(-1) and kill(getppid()) reach only the jail's own processes: this test process
        // (the trainer) goes on.
        for kill in ["os.kill(-1, signal.SIGKILL)", "os.kill(os.getppid(), signal.SIGKILL)"] {
            let code = format!("import os, signal\n{kill}");
            let (_, took, d) = score(&sb, "", &code);
            assert!(took < Duration::from_secs(4), "mode {}: {kill} took {took:?}: {d}", sb.mode());
        }
    }
}

#[test]
fn sleeping_past_the_wall_limit_is_killed() {
    assert_fails_fast("import time\ntime.sleep(60)", Duration::from_secs(4));
}

#[test]
fn many_spinning_threads_are_bounded() {
    let code = "import threading\ndef spin():\n    while True:\n        pass\n\
                for _ in range(64):\n    threading.Thread(target=spin, daemon=True).start()\n\
                spin()";
    assert_fails_fast(code, Duration::from_secs(4));
}

#[test]
fn files_in_the_hosts_shared_temp_places_do_not_outlive_a_jailed_run() {
    let tag = format!("drift-leak-{}", std::process::id());
    let places = ["/tmp", "/var/tmp", "/dev/shm"];
    for sb in jails(false) {
        let code = format!(
            "for d in {places:?}:\n    open(d + '/{tag}', 'w').write('x' * 1000)\nassert open('/tmp/{tag}').read()"
        );
        let (exec, d) = holds_inside(&sb, &code);
        assert_eq!(exec, 1.0, "mode {}: the run could not write its scratch files: {d}", sb.mode());
        for place in places {
            let host = std::path::Path::new(place).join(&tag);
            let landed = host.exists();
            let _ = std::fs::remove_file(&host);
            assert!(!landed, "mode {}: {} outlived the run", sb.mode(), host.display());
        }
    }
}

#[test]
fn run_folders_of_a_killed_trainer_are_removed_by_the_next_one() {
    // A process that has exited stands for a trainer killed mid-run.
    let mut gone = std::process::Command::new("true").spawn().unwrap();
    let pid = gone.id();
    gone.wait().unwrap();
    let stale = std::env::temp_dir().join(format!("drift-sandbox-{pid}-0-0"));
    std::fs::create_dir_all(stale.join("sub")).unwrap();
    std::fs::write(stale.join("sub/main.py"), "print(1)").unwrap();
    let live = std::env::temp_dir().join(format!("drift-sandbox-{}-999999-0", std::process::id()));
    std::fs::create_dir_all(&live).unwrap();
    let _ = Sandbox::new(&SandboxConfig { mode: SandboxMode::Limits, ..SandboxConfig::default() })
        .unwrap();
    assert!(!stale.exists(), "{} survived", stale.display());
    assert!(live.exists(), "a live trainer's folder was removed");
    std::fs::remove_dir_all(&live).unwrap();
}
