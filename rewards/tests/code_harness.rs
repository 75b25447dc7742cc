//! The code reward's harness (one sandboxed interpreter per completion, a forked child per
//! test) gives every test the verdict a fresh `python3 main.py` of the same program gives,
//! keeps tests from seeing each other, and fails what it could not run.

use std::time::{Duration, Instant};

use drift_rewards::sandbox::{RunStatus, Sandbox, SandboxConfig, SandboxMode};
use drift_rewards::worlds::code::harness::{run_harness, Compiles};

/// Every jail usable here, then limits only.
fn sandboxes() -> Vec<Sandbox> {
    let cfg = |mode| SandboxConfig { mode, timeout_s: 1.5, ..SandboxConfig::default() };
    let mut out: Vec<Sandbox> = [SandboxMode::Namespaces, SandboxMode::Bwrap]
        .into_iter()
        .filter_map(|m| Sandbox::new(&cfg(m)).ok())
        .collect();
    out.push(Sandbox::new(&cfg(SandboxMode::Limits)).unwrap());
    out
}

#[test]
fn every_test_ends_as_a_fresh_interpreter_of_its_program_would() {
    let code = "import sys\ndef f(x):\n    return 2 * x";
    let tests: Vec<String> = [
        "assert f(2) == 4",
        "assert f(2) == 5",
        "sys.exit(3)",
        "sys.exit(None)",
        "sys.exit('a message')",
        "sys.exit(True)",
        "import os\nos._exit(7)",
        "import os, signal\nos.kill(os.getpid(), signal.SIGTERM)",
        "print('x' * 100000)",
        "import sys\nsys.stderr.write('y' * 100000)\nsys.exit(2)",
        "if __name__ == '__main__':\n    sys.exit(4)",
        "import atexit\natexit.register(lambda: print(1 / 0))",
        "while True:\n    pass",
        "undefined_name",
    ]
    .map(String::from)
    .to_vec();
    // The reference: each program alone in a fresh interpreter, unjailed (as PID 1 of a PID
    // namespace an interpreter ignores signals it sends itself, which no user's machine does).
    let plain = sandboxes().pop().unwrap();
    let expected: Vec<RunStatus> = tests
        .iter()
        .map(|test| {
            let program = format!("{code}\n\n{test}\n");
            plain.run_python(&[("main.py", &program)], "main.py").unwrap().status
        })
        .collect();
    for sb in sandboxes() {
        let run = run_harness(&sb, code, &tests, true).unwrap();
        assert_eq!(run.compiles, Compiles::Yes);
        assert_eq!(run.tests.len(), tests.len());
        for ((test, got), alone) in tests.iter().zip(&run.tests).zip(&expected) {
            assert_eq!(got.status, alone.to_string(), "mode {}: {test:?}: {got:?}", sb.mode());
            assert_eq!(got.passed, *alone == RunStatus::Exit(0), "mode {}: {test:?}", sb.mode());
        }
        assert!(run.tests[1].stderr_tail.contains("AssertionError"), "{:?}", run.tests[1]);
        assert!(run.tests[4].stderr_tail.contains("a message"), "{:?}", run.tests[4]);
    }
}

#[test]
fn tests_do_not_see_each_other() {
    let tests: Vec<String> = [
        // Interpreter state, a module's state and the test files are each test's own.
        "import builtins, json\nbuiltins.leak = 1\njson.leak = 1\nopen('note', 'w').write('x')",
        "import builtins, json\nassert not hasattr(builtins, 'leak') and not hasattr(json, 'leak')",
        "import os\nfor name in os.listdir(os.path.dirname(__file__)):\n    \
         try:\n        open(os.path.join(os.path.dirname(__file__), name), 'w').write('pass')\n    \
         except OSError:\n        pass",
        "assert False, 'the test as written'",
    ]
    .map(String::from)
    .to_vec();
    for sb in sandboxes() {
        let run = run_harness(&sb, "x = 1", &tests, true).unwrap();
        let passed: Vec<bool> = run.tests.iter().map(|t| t.passed).collect();
        assert_eq!(passed, vec![true, true, true, false], "mode {}: {:?}", sb.mode(), run.tests);
        assert!(run.tests[3].stderr_tail.contains("the test as written"));
    }
}

#[test]
fn a_test_that_kills_the_harness_fails_what_was_left_and_time_is_bounded() {
    let tests: Vec<String> = [
        "pass",
        "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\nimport time\ntime.sleep(30)",
        "pass",
    ]
    .map(String::from)
    .to_vec();
    for sb in sandboxes() {
        let start = Instant::now();
        let run = run_harness(&sb, "", &tests, true).unwrap();
        assert!(
            start.elapsed() < Duration::from_secs(6),
            "mode {}: {:?}",
            sb.mode(),
            start.elapsed()
        );
        assert!(run.tests[0].passed);
        assert!(!run.tests[1].passed, "mode {}: {:?}", sb.mode(), run.tests);
        // As PID 1 of drift's jail the harness cannot be killed from inside and the test just
        // times out; elsewhere it dies and the test after it is reported as not run.
        if sb.mode().namespaces {
            assert_eq!(run.tests[1].status, "timeout");
            assert!(run.tests[2].passed);
        } else {
            for t in &run.tests[1..] {
                assert!(t.status.starts_with("not run: the harness ended with"), "{t:?}");
            }
        }
    }
}

#[test]
fn the_format_check_runs_no_test_when_the_gate_is_on_and_every_test_when_it_is_off() {
    let sb = Sandbox::new(&SandboxConfig { mode: SandboxMode::Limits, ..SandboxConfig::default() })
        .unwrap();
    let tests = vec!["pass".to_string(), "assert f() == 1".to_string()];
    let gated = run_harness(&sb, "def f(:\n", &tests, true).unwrap();
    assert_eq!((gated.compiles, gated.tests.len()), (Compiles::SyntaxError, 0));
    let open = run_harness(&sb, "def f(:\n", &tests, false).unwrap();
    let status: Vec<&str> = open.tests.iter().map(|t| t.status.as_str()).collect();
    assert_eq!(status, vec!["exit 1", "exit 1"]);
    assert!(open.tests[0].stderr_tail.contains("SyntaxError"));
    let fine = run_harness(&sb, "def f():\n    return 1\n", &tests, true).unwrap();
    assert_eq!(fine.compiles, Compiles::Yes);
    assert!(fine.tests.iter().all(|t| t.passed));
}
