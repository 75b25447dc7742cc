//! Property tests of the Sudoku and Countdown worlds: uniqueness, verifier agreement,
//! corrupted answers scoring below 1, determinism, disjoint splits, JSONL round trips.

use std::collections::HashSet;

use drift_rewards::jsonl::{read_jsonl, write_jsonl};
use drift_rewards::reward::{Reward, TextSample};
use drift_rewards::worlds::countdown::verify::verify as verify_countdown;
use drift_rewards::worlds::countdown::CountdownReward;
use drift_rewards::worlds::countdown::{CountdownConfig, CountdownItem, CountdownWorld};
use drift_rewards::worlds::sudoku::solver::solve;
use drift_rewards::worlds::sudoku::verify::verify as verify_sudoku;
use drift_rewards::worlds::sudoku::SudokuReward;
use drift_rewards::worlds::sudoku::{SudokuConfig, SudokuItem, SudokuWorld};
use drift_rewards::worlds::{Split, TextItem};

fn check_sudoku(cfg: SudokuConfig, n_items: usize) {
    let world = SudokuWorld::new(cfg.clone()).unwrap();
    let mut seen = HashSet::new();
    for split in [Split::Train, Split::HeldOut] {
        for item in world.items(split, n_items) {
            let (count, sol) = solve(&item.puzzle, 2);
            assert_eq!(count, 1, "{} has {count} solutions", item.id);
            assert_eq!(sol.as_ref(), Some(&item.solution));
            if cfg.clues != 0 {
                assert!(item.puzzle.clues() >= cfg.clues, "{}", item.id);
            }
            let full = verify_sudoku(&item.puzzle, &item.solution, &item.target());
            assert_eq!((full.score, full.solved), (1.0, true), "{}", item.id);
            // Corrupt one originally empty cell: partial credit below 1, not solved.
            let mut cells = item.solution.cells().to_vec();
            let i = (0..cells.len()).find(|&i| item.puzzle.cells()[i] == 0).unwrap();
            cells[i] = cells[i] % item.puzzle.n() as u8 + 1;
            let text: String = cells.iter().map(|c| char::from(b'0' + c)).collect();
            let bad = verify_sudoku(&item.puzzle, &item.solution, &text);
            assert!(bad.score < 1.0 && !bad.solved, "{}", item.id);
            assert!(
                seen.insert((split, String::from(item.puzzle.clone()))),
                "duplicate {}",
                item.id
            );
        }
    }
    // Splits are disjoint as sets of puzzles.
    let train: HashSet<String> =
        seen.iter().filter(|(s, _)| *s == Split::Train).map(|(_, p)| p.clone()).collect();
    assert!(seen.iter().filter(|(s, _)| *s == Split::HeldOut).all(|(_, p)| !train.contains(p)));
    assert_eq!(world.item(Split::Train, 3), world.item(Split::Train, 3));
    let item = world.item(Split::Train, 0);
    let ev = SudokuReward.evaluate(&TextSample::new(item.clone(), item.target())).unwrap();
    assert_eq!(ev.score, 1.0);
    assert_eq!(ev.details.notes, vec![("solved".to_string(), "true".to_string())]);
    let ev = SudokuReward.evaluate(&TextSample::new(item, "no grid")).unwrap();
    assert_eq!(ev.score, 0.0);
    assert!(ev.details.gate.is_some());
}

#[test]
fn sudoku_4x4_items_are_unique_and_verify() {
    check_sudoku(SudokuConfig::default(), 40);
    check_sudoku(SudokuConfig { clues: 5, seed: 7, ..SudokuConfig::default() }, 20);
}

#[test]
fn sudoku_9x9_items_are_unique_and_verify() {
    check_sudoku(SudokuConfig { size: 9, clues: 32, ..SudokuConfig::default() }, 4);
}

#[test]
fn sudoku_config_and_jsonl() {
    assert!(SudokuWorld::new(SudokuConfig { size: 5, ..Default::default() }).is_err());
    let err =
        SudokuWorld::new(SudokuConfig { size: 9, clues: 10, ..Default::default() }).unwrap_err();
    assert!(err.to_string().contains("17 to 81"), "{err}");
    let items = SudokuWorld::new(SudokuConfig::default()).unwrap().items(Split::Train, 3);
    let path = std::env::temp_dir().join(format!("drift-sudoku-{}.jsonl", std::process::id()));
    write_jsonl(&path, &items).unwrap();
    assert_eq!(read_jsonl::<SudokuItem>(&path).unwrap(), items);
    std::fs::write(&path, "{\"id\":\"x\",\"puzzle\":\"123\",\"solution\":\"1234341221434321\"}\n")
        .unwrap();
    let err = read_jsonl::<SudokuItem>(&path).unwrap_err().to_string();
    assert!(err.contains(":1:") && err.contains("16 (4×4) or 81"), "{err}");
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn countdown_items_are_solvable_by_their_reference() {
    for cfg in
        [CountdownConfig::default(), CountdownConfig { count: 4, seed: 3, ..Default::default() }]
    {
        let world = CountdownWorld::new(cfg.clone()).unwrap();
        let mut train = HashSet::new();
        for split in [Split::Train, Split::HeldOut] {
            for item in world.items(split, 200) {
                assert_eq!(item.numbers.len(), cfg.count);
                assert!((1..=cfg.max_target).contains(&item.target), "{item:?}");
                let (score, why) =
                    verify_countdown(&item.numbers, item.target, &item.target_text());
                assert_eq!(score, 1.0, "{item:?}: {why:?}");
                let sample = TextSample::new(item.clone(), item.target_text());
                assert_eq!(CountdownReward.evaluate(&sample).unwrap().score, 1.0);
                let wrong = format!("<answer>{} + 1</answer>", item.solution);
                assert!(verify_countdown(&item.numbers, item.target, &wrong).0 < 1.0);
                let mut key = item.numbers.clone();
                key.sort_unstable();
                if split == Split::Train {
                    train.insert((key, item.target));
                } else {
                    assert!(!train.contains(&(key, item.target)), "{item:?} is also in train");
                }
            }
        }
        assert_eq!(world.item(Split::HeldOut, 5), world.item(Split::HeldOut, 5));
    }
    assert!(CountdownWorld::new(CountdownConfig { count: 1, ..Default::default() }).is_err());
}

#[test]
fn countdown_jsonl_round_trip() {
    let items = CountdownWorld::new(CountdownConfig::default()).unwrap().items(Split::Train, 5);
    let path = std::env::temp_dir().join(format!("drift-countdown-{}.jsonl", std::process::id()));
    write_jsonl(&path, &items).unwrap();
    assert_eq!(read_jsonl::<CountdownItem>(&path).unwrap(), items);
    std::fs::remove_file(&path).unwrap();
}

trait TargetText {
    fn target_text(&self) -> String;
}
impl TargetText for CountdownItem {
    fn target_text(&self) -> String {
        TextItem::target(self)
    }
}
