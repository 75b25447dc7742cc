//! Property tests of the code world: every template's reference solution passes its own
//! tests in Python, the tests reject a constant function, and targets score full marks
//! under the code reward.

use std::sync::Arc;

use drift_core::rng::SplitMix64;
use drift_rewards::jsonl::{read_jsonl, write_jsonl};
use drift_rewards::reward::{Reward, TextSample};
use drift_rewards::sandbox::RunStatus;
use drift_rewards::sandbox::{Sandbox, SandboxConfig, SandboxMode};
use drift_rewards::worlds::code::templates::all_templates;
use drift_rewards::worlds::code::{CodeItem, CodeWorld, CodeWorldConfig};
use drift_rewards::worlds::code::{CodeReward, CodeRewardConfig};
use drift_rewards::worlds::{Split, TextItem};

fn sandbox() -> Sandbox {
    let cfg =
        SandboxConfig { mode: SandboxMode::Limits, timeout_s: 10.0, ..SandboxConfig::default() };
    Sandbox::new(&cfg).unwrap()
}

/// Runs `solution` followed by every test in one process; true when it exits 0.
fn passes(sb: &Sandbox, solution: &str, tests: &[String]) -> (bool, String) {
    let program = format!("{solution}\n{}\n", tests.join("\n"));
    let out = sb.run_python(&[("main.py", &program)], "main.py").unwrap();
    (out.status == RunStatus::Exit(0), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn every_template_reference_passes_and_a_constant_fails() {
    let world = CodeWorld::new(CodeWorldConfig::default()).unwrap();
    let sb = sandbox();
    let items: Vec<CodeItem> = all_templates()
        .into_iter()
        .enumerate()
        .map(|(i, t)| world.item_of(t, format!("t{i}"), &mut SplitMix64::keyed(&[i as u64])))
        .collect();
    let failures: Vec<String> = std::thread::scope(|scope| {
        let handles: Vec<_> = items
            .chunks(items.len().div_ceil(4))
            .map(|chunk| {
                let sb = &sb;
                scope.spawn(move || {
                    let mut bad = Vec::new();
                    for item in chunk {
                        let (ok, err) = passes(sb, &item.solution, &item.tests);
                        if !ok {
                            bad.push(format!(
                                "{}: {}\n{}{:?}",
                                item.template, err, item.solution, item.tests
                            ));
                        }
                        let constant = "def f(*a):\n    return 0\n";
                        if passes(sb, constant, &item.tests).0 {
                            bad.push(format!(
                                "{}: a constant 0 passes {:?}",
                                item.template, item.tests
                            ));
                        }
                    }
                    bad
                })
            })
            .collect();
        handles.into_iter().flat_map(|h| h.join().unwrap()).collect()
    });
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn targets_score_full_marks_and_jsonl_round_trips() {
    let world = CodeWorld::new(CodeWorldConfig::default()).unwrap();
    let reward =
        CodeReward::with_sandbox(&CodeRewardConfig::default(), Arc::new(sandbox())).unwrap();
    let items = [world.items(Split::Train, 3), world.items(Split::HeldOut, 3)].concat();
    for item in &items {
        let ev = reward.evaluate(&TextSample::new(item.clone(), item.target())).unwrap();
        assert_eq!(ev.score, 2.5, "{}: {:?}", item.prompt(), ev.details);
    }
    let path = std::env::temp_dir().join(format!("drift-code-{}.jsonl", std::process::id()));
    write_jsonl(&path, &items).unwrap();
    assert_eq!(read_jsonl::<CodeItem>(&path).unwrap(), items);
    std::fs::write(&path, "{\"id\": \"u1\", \"prompt\": \"p\", \"solution\": \"s\"}\n").unwrap();
    let err = read_jsonl::<CodeItem>(&path).unwrap_err().to_string();
    assert!(err.contains(":1:") && err.contains("tests"), "{err}");
    std::fs::remove_file(&path).unwrap();
}
