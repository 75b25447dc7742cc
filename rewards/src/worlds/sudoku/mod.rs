//! The Sudoku world: 4×4 and 9×9 puzzles with a unique solution and a clue-count knob.
//!
//! Generation of item `k` of a split: a random full grid ([`solver::random_full`]) keyed by
//! `(seed, split, k, attempt)`; its cells are visited in random order and each is emptied
//! when the puzzle keeps exactly one solution, until `clues` cells remain (or no further
//! cell can go: the puzzle is then minimal, with more clues). The attempt is kept when its
//! puzzle falls in the requested split by the [`crate::worlds::split`] content rule, else
//! the next attempt is drawn, so the splits are disjoint.

pub mod solver;
pub mod verify;

use serde::{Deserialize, Serialize};

use crate::worlds::split::{check_percent, split_of, Split, TextItem};
use crate::RewardError;
use drift_core::rng::SplitMix64;

pub use verify::{Board, SudokuReward, SudokuTask};

/// Configuration of the Sudoku world.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SudokuConfig {
    /// Side: 4 or 9. Default 4 (small enough for a tiny dLLM; d1 uses 4×4).
    pub size: usize,
    /// Clues to keep: the difficulty knob (fewer is harder). Default 0 = 8 for 4×4, 36 for
    /// 9×9. 4×4 puzzles need at least 4 clues, 9×9 at least 17.
    pub clues: usize,
    /// Seed of items and split. Default 0.
    pub seed: u64,
    /// Percentage of puzzles held out. Default 10.
    pub held_out_percent: u8,
}

impl Default for SudokuConfig {
    fn default() -> Self {
        Self { size: 4, clues: 0, seed: 0, held_out_percent: 10 }
    }
}

/// One Sudoku item, as written to and read from JSONL (boards in the compact 16/81-character
/// form, `.` for empty).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SudokuItem {
    /// Identifier.
    pub id: String,
    /// The puzzle.
    pub puzzle: Board,
    /// Its unique solution.
    pub solution: Board,
}

impl SudokuTask for SudokuItem {
    fn puzzle(&self) -> &Board {
        &self.puzzle
    }
    fn solution(&self) -> &Board {
        &self.solution
    }
}

impl TextItem for SudokuItem {
    fn id(&self) -> &str {
        &self.id
    }
    fn prompt(&self) -> String {
        let n = self.puzzle.n();
        format!("Solve this {n}x{n} sudoku (. is empty):\n{}\n", self.puzzle.to_rows())
    }
    fn target(&self) -> String {
        format!("<answer>\n{}\n</answer>", self.solution.to_rows())
    }
}

/// The Sudoku world.
#[derive(Debug, Clone)]
pub struct SudokuWorld {
    cfg: SudokuConfig,
    clues: usize,
}

impl SudokuWorld {
    /// Checks the configuration.
    pub fn new(cfg: SudokuConfig) -> Result<Self, RewardError> {
        check_percent(cfg.held_out_percent)?;
        let (min, default) = match cfg.size {
            4 => (4, 8),
            9 => (17, 36),
            s => {
                return Err(RewardError::Config {
                    field: "size",
                    value: s.to_string(),
                    expected: "4 or 9".into(),
                })
            }
        };
        let clues = if cfg.clues == 0 { default } else { cfg.clues };
        if clues < min || clues > cfg.size * cfg.size {
            return Err(RewardError::Config {
                field: "clues",
                value: clues.to_string(),
                expected: format!("{min} to {} for a {1}x{1} board", cfg.size * cfg.size, cfg.size),
            });
        }
        Ok(Self { cfg, clues })
    }

    /// Item `k` of `split`.
    pub fn item(&self, split: Split, k: u64) -> SudokuItem {
        let mut attempt = 0u64;
        loop {
            let mut rng = SplitMix64::keyed(&[
                self.cfg.seed,
                0x50D0,
                self.cfg.size as u64,
                split.tag(),
                k,
                attempt,
            ]);
            let (puzzle, solution) = self.generate(&mut rng);
            if split_of(&String::from(puzzle.clone()), self.cfg.seed, self.cfg.held_out_percent)
                == split
            {
                let tag = if split == Split::Train { "train" } else { "held_out" };
                return SudokuItem {
                    id: format!("sudoku{}-{tag}-{k}", self.cfg.size),
                    puzzle,
                    solution,
                };
            }
            attempt += 1;
        }
    }

    /// The first `n` items of `split`.
    pub fn items(&self, split: Split, n: usize) -> Vec<SudokuItem> {
        (0..n as u64).map(|k| self.item(split, k)).collect()
    }

    /// One puzzle and its solution by the module rule.
    fn generate(&self, rng: &mut SplitMix64) -> (Board, Board) {
        let n = self.cfg.size;
        let solution = solver::random_full(n, rng);
        let mut cells = solution.cells().to_vec();
        let mut order: Vec<usize> = (0..n * n).collect();
        rng.shuffle32(&mut order);
        let mut filled = n * n;
        for i in order {
            if filled == self.clues {
                break;
            }
            let keep = cells[i];
            cells[i] = 0;
            let trial = Board::new(cells.clone()).expect("same size");
            if solver::solve(&trial, 2).0 == 1 {
                filled -= 1;
            } else {
                cells[i] = keep;
            }
        }
        (Board::new(cells).expect("same size"), solution)
    }
}
