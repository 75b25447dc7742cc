//! The Sudoku world as a dLLM task (d1, arXiv 2504.12216, §4: 4×4 Sudoku): prompt `BOS` +
//! the puzzle's text, completion `<answer>` + the solved grid + `</answer>`, rewarded d1-style
//! by the fraction of the puzzle's empty cells filled right plus a bonus when the grid is
//! solved:
//!
//! ```text
//! r = right_empty_cells / empty_cells + solved_bonus · 1[grid solved and clues kept]
//! ```
//!
//! The pass rate counts solved grids. Items, splits and the verifier are drift-rewards'
//! Sudoku world (`drift_rewards::worlds::sudoku`); the held-out split is a disjoint set of
//! puzzles by the worlds' content rule.

use drift_rewards::worlds::sudoku::{verify::verify, SudokuConfig, SudokuItem, SudokuWorld};
use drift_rewards::worlds::{Split, TextItem};
use serde::{Deserialize, Serialize};

use super::task::{TaskScore, TextTask};
use crate::error::{DllmError, Result};
use crate::tokenizer::{Tokenizer, BOS_ID, EOS_ID};

/// Which text world a dLLM run pretrains, trains and evaluates on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TextWorld {
    /// The code world (spec → one-line Python function, sandboxed tests). The default.
    #[default]
    Code,
    /// The Sudoku world (`[sudoku]`: [`SudokuTaskConfig`]).
    Sudoku,
}

/// The Sudoku task: the world's items and the reward's solved bonus.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SudokuTaskConfig {
    /// Board side, 4 or 9. Default 4 (d1's setting).
    pub size: usize,
    /// Clues per puzzle, the difficulty knob (fewer is harder). Default 0 = the world's
    /// default (8 of 16 for 4×4, 36 for 9×9).
    pub clues: usize,
    /// Seed of the items and the split. Default 0.
    pub seed: u64,
    /// Percentage of puzzles held out. Default 10.
    pub held_out_percent: u8,
    /// Reward added when the grid is solved with its clues kept. Default 1.0.
    pub solved_bonus: f64,
}

impl Default for SudokuTaskConfig {
    fn default() -> Self {
        Self { size: 4, clues: 0, seed: 0, held_out_percent: 10, solved_bonus: 1.0 }
    }
}

impl SudokuTaskConfig {
    /// The world this configuration draws items from; errors name the field at fault.
    pub fn world(&self) -> Result<SudokuWorld> {
        let cfg = SudokuConfig {
            size: self.size,
            clues: self.clues,
            seed: self.seed,
            held_out_percent: self.held_out_percent,
        };
        SudokuWorld::new(cfg).map_err(|e| DllmError::Config {
            key: "sudoku",
            value: format!("size {} clues {}", self.size, self.clues),
            expected: e.to_string(),
        })
    }
}

/// The Sudoku world in drift's corpus format (module docs), through the model's tokenizer.
pub struct SudokuTextTask {
    world: SudokuWorld,
    tokenizer: Tokenizer,
    solved_bonus: f64,
}

impl SudokuTextTask {
    /// The task of `cfg`, encoding with `tokenizer` (the model's own).
    pub fn new(cfg: &SudokuTaskConfig, tokenizer: Tokenizer) -> Result<Self> {
        if !(cfg.solved_bonus.is_finite() && cfg.solved_bonus >= 0.0) {
            return Err(DllmError::Config {
                key: "sudoku.solved_bonus",
                value: cfg.solved_bonus.to_string(),
                expected: "a finite value >= 0".into(),
            });
        }
        Ok(Self { world: cfg.world()?, tokenizer, solved_bonus: cfg.solved_bonus })
    }

    /// The world the items come from.
    pub fn world(&self) -> &SudokuWorld {
        &self.world
    }

    /// The tokenizer prompts are encoded with.
    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    /// The score of one completion by the module rule.
    pub fn score_one(&self, item: &SudokuItem, completion: &str) -> TaskScore {
        let v = verify(&item.puzzle, &item.solution, completion);
        let solved = f64::from(u8::from(v.solved));
        TaskScore {
            reward: v.score + self.solved_bonus * solved,
            passed: v.solved,
            failure: None,
            components: vec![("sudoku_cells".into(), v.score), ("sudoku_solved".into(), solved)],
        }
    }
}

impl TextTask for SudokuTextTask {
    type Item = SudokuItem;

    /// The train split's item `seed · 1 000 003 + index` (the code task's keying).
    fn train_item(&self, seed: u64, index: u64) -> SudokuItem {
        self.world.item(Split::Train, seed.wrapping_mul(1_000_003).wrapping_add(index))
    }

    fn eval_items(&self, n: usize) -> Vec<SudokuItem> {
        self.world.items(Split::HeldOut, n)
    }

    fn prompt_ids(&self, item: &SudokuItem) -> Result<Vec<u32>> {
        let mut ids = vec![BOS_ID];
        ids.extend(self.tokenizer.encode(&item.prompt())?);
        Ok(ids)
    }

    fn completion_text(&self, ids: &[u32]) -> Result<String> {
        let end = ids.iter().position(|&t| t == EOS_ID).unwrap_or(ids.len());
        self.tokenizer.decode(&ids[..end], true)
    }

    fn score(&self, items: &[SudokuItem], completions: &[String]) -> Vec<TaskScore> {
        items.iter().zip(completions).map(|(item, c)| self.score_one(item, c)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokenizer::CharTokenizer;

    fn task(bonus: f64) -> SudokuTextTask {
        let cfg = SudokuTaskConfig { solved_bonus: bonus, ..SudokuTaskConfig::default() };
        SudokuTextTask::new(&cfg, Tokenizer::Char(CharTokenizer::ascii())).unwrap()
    }

    #[test]
    fn reward_is_the_right_empty_cell_fraction_plus_the_solved_bonus() {
        let t = task(1.0);
        let item = t.train_item(0, 3);
        let empty: Vec<usize> = (0..16).filter(|&i| item.puzzle.cells()[i] == 0).collect();
        assert_eq!(empty.len(), 8, "the default 4x4 puzzle keeps 8 clues");
        // The target text solves it: 1 + 1.
        let full = t.score_one(&item, &item.target());
        assert_eq!((full.reward, full.passed), (2.0, true));
        // Two empty cells changed to another digit: 6 of 8 right, no bonus.
        let mut cells: Vec<u8> = item.solution.cells().to_vec();
        for &i in &empty[..2] {
            cells[i] = cells[i] % 4 + 1;
        }
        let text: String = cells.iter().map(|c| char::from(b'0' + c)).collect();
        let part = t.score_one(&item, &text);
        assert_eq!((part.reward, part.passed), (6.0 / 8.0, false));
        assert_eq!(part.components[0], ("sudoku_cells".to_string(), 0.75));
        // A bonus of 0 leaves the cell fraction alone.
        assert_eq!(task(0.0).score_one(&item, &item.target()).reward, 1.0);
        // Garbage scores 0, contained.
        assert_eq!(t.score_one(&item, "no grid here").reward, 0.0);
    }

    #[test]
    fn held_out_puzzles_are_not_train_puzzles_and_prompts_start_with_bos() {
        let t = task(1.0);
        let held: std::collections::BTreeSet<String> =
            t.eval_items(32).into_iter().map(|i| String::from(i.puzzle)).collect();
        assert_eq!(held.len(), 32);
        for k in 0..256 {
            assert!(!held.contains(&String::from(t.train_item(0, k).puzzle)));
        }
        let item = t.eval_items(1).remove(0);
        let ids = t.prompt_ids(&item).unwrap();
        assert_eq!(ids[0], BOS_ID);
        assert_eq!(t.tokenizer().decode(&ids[1..], true).unwrap(), item.prompt());
        let bad = SudokuTaskConfig { solved_bonus: -1.0, ..SudokuTaskConfig::default() };
        let e = SudokuTextTask::new(&bad, Tokenizer::Char(CharTokenizer::ascii()));
        assert!(e.err().unwrap().to_string().contains("solved_bonus"));
        let bad = SudokuTaskConfig { clues: 2, ..SudokuTaskConfig::default() };
        let e = SudokuTextTask::new(&bad, Tokenizer::Char(CharTokenizer::ascii()));
        assert!(e.err().unwrap().to_string().contains("clues"));
    }
}
