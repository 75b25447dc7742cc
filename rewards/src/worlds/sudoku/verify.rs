//! Sudoku boards and the Sudoku verifier (d1 / docs/algorithms.md §10).
//!
//! Rule: the answer grid is read from the last `<answer>…</answer>` if present, else from
//! the whole completion, as its last `n²` cell characters (`1`–`n` a digit, `0` or `.` an
//! empty cell; everything else ignored). Score = (number of originally empty cells whose
//! answer equals the solution) / (number of originally empty cells); fewer than `n²` cells
//! scores 0. The strict flag `solved` is true when every row, column and box of the answer
//! holds `1..=n` once and every clue is kept.

use serde::{Deserialize, Serialize};

use crate::reward::{Details, Evaluation, Reward, TextSample};
use crate::verifiers::tags::last_answer;
use crate::RewardError;

/// A square board of side `n` (4 or 9: boxes of 2×2 or 3×3), row-major, 0 = empty.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Board {
    n: usize,
    cells: Vec<u8>,
}

impl Board {
    /// A board from its cells; errors unless `cells.len()` is 16 or 81 with values `0..=n`.
    pub fn new(cells: Vec<u8>) -> Result<Self, RewardError> {
        let n = match cells.len() {
            16 => 4,
            81 => 9,
            len => {
                return Err(RewardError::Invalid {
                    what: format!("sudoku board of {len} cells"),
                    expected: "16 (4×4) or 81 (9×9) cells".into(),
                })
            }
        };
        if let Some(bad) = cells.iter().find(|&&c| c as usize > n) {
            return Err(RewardError::Invalid {
                what: format!("sudoku cell value {bad}"),
                expected: format!("0 (empty) to {n}"),
            });
        }
        Ok(Self { n, cells })
    }

    /// The side length.
    pub fn n(&self) -> usize {
        self.n
    }

    /// The box side (2 or 3).
    pub fn box_side(&self) -> usize {
        if self.n == 4 {
            2
        } else {
            3
        }
    }

    /// The cells, row-major, 0 = empty.
    pub fn cells(&self) -> &[u8] {
        &self.cells
    }

    /// The number of filled cells (clues).
    pub fn clues(&self) -> usize {
        self.cells.iter().filter(|&&c| c != 0).count()
    }

    /// Indices of the `3n` units (rows, columns, boxes), each a list of `n` cell indices.
    pub fn units(&self) -> Vec<Vec<usize>> {
        let (n, b) = (self.n, self.box_side());
        let rows = (0..n).map(|r| (0..n).map(|c| r * n + c).collect());
        let cols = (0..n).map(|c| (0..n).map(|r| r * n + c).collect());
        let boxes = (0..n).map(|k| {
            let (r0, c0) = (k / b * b, k % b * b);
            (0..n).map(|i| (r0 + i / b) * n + c0 + i % b).collect()
        });
        rows.chain(cols).chain(boxes).collect()
    }

    /// True when the board is full and every unit holds `1..=n` exactly once.
    pub fn is_solved(&self) -> bool {
        self.units().iter().all(|u| {
            let mut seen = vec![false; self.n + 1];
            u.iter().all(|&i| {
                let v = self.cells[i] as usize;
                v != 0 && !std::mem::replace(&mut seen[v], true)
            })
        })
    }

    /// One line per row, digits with `.` for empty cells.
    pub fn to_rows(&self) -> String {
        self.cells
            .chunks(self.n)
            .map(|r| r.iter().map(|&c| cell_char(c)).collect::<String>())
            .collect::<Vec<_>>()
            .join("\n")
    }
}

fn cell_char(c: u8) -> char {
    if c == 0 {
        '.'
    } else {
        (b'0' + c) as char
    }
}

/// The cells written in `text`: digits and `.`, ignoring any other character.
fn cell_values(text: &str) -> Vec<u8> {
    text.chars()
        .filter_map(|c| match c {
            '.' => Some(0),
            '0'..='9' => Some(c as u8 - b'0'),
            _ => None,
        })
        .collect()
}

impl TryFrom<String> for Board {
    type Error = RewardError;
    /// Parses the compact form: `n²` characters `1`–`9` or `.`/`0`, other characters ignored.
    fn try_from(s: String) -> Result<Self, Self::Error> {
        Board::new(cell_values(&s))
    }
}

impl From<Board> for String {
    fn from(b: Board) -> String {
        b.cells.iter().map(|&c| cell_char(c)).collect()
    }
}

/// A Sudoku problem: a puzzle and its (unique) solution.
pub trait SudokuTask: Send + Sync {
    /// The puzzle, 0 = empty.
    fn puzzle(&self) -> &Board;
    /// The solution.
    fn solution(&self) -> &Board;
}

/// The verdict of one completion.
#[derive(Debug, Clone, PartialEq)]
pub struct SudokuVerdict {
    /// The partial-credit score by the module rule.
    pub score: f64,
    /// The strict flag by the module rule.
    pub solved: bool,
    /// Why the score is below 1.
    pub reason: Option<String>,
}

/// Verifies `completion` against `puzzle` and its `solution` by the module rule.
pub fn verify(puzzle: &Board, solution: &Board, completion: &str) -> SudokuVerdict {
    let n2 = puzzle.n * puzzle.n;
    let values = cell_values(last_answer(completion).unwrap_or(completion));
    if values.len() < n2 || values.iter().any(|&v| v as usize > puzzle.n) {
        let reason =
            format!("found {} cells with values 0..={}, expected {n2}", values.len(), puzzle.n);
        return SudokuVerdict { score: 0.0, solved: false, reason: Some(reason) };
    }
    let answer = &values[values.len() - n2..];
    let empty: Vec<usize> = (0..n2).filter(|&i| puzzle.cells[i] == 0).collect();
    let right = empty.iter().filter(|&&i| answer[i] == solution.cells[i]).count();
    let score = if empty.is_empty() { 1.0 } else { right as f64 / empty.len() as f64 };
    let kept = (0..n2).all(|i| puzzle.cells[i] == 0 || answer[i] == puzzle.cells[i]);
    let solved = kept && Board { n: puzzle.n, cells: answer.to_vec() }.is_solved();
    let reason = (score < 1.0).then(|| format!("{right} of {} empty cells right", empty.len()));
    SudokuVerdict { score, solved, reason }
}

/// The Sudoku reward by the module rule; the strict flag is the note `("solved", "true")`.
#[derive(Debug, Clone, Copy, Default)]
pub struct SudokuReward;

impl<T: SudokuTask> Reward<TextSample<T>> for SudokuReward {
    fn name(&self) -> &str {
        "sudoku"
    }

    fn evaluate(&self, s: &TextSample<T>) -> Result<Evaluation, RewardError> {
        let v = verify(s.task.puzzle(), s.task.solution(), &s.completion);
        let notes = vec![("solved".to_string(), v.solved.to_string())];
        Ok(Evaluation {
            score: v.score,
            details: Details { gate: v.reason, notes, ..Details::default() },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn board(s: &str) -> Board {
        Board::try_from(s.to_string()).unwrap()
    }

    #[test]
    fn partial_credit_and_strict_flag() {
        let sol = board("1234341221434321");
        let puz = board("1.3.3.1.2.4.4.2.");
        let full = verify(&puz, &sol, "<answer>\n1234\n3412\n2143\n4321\n</answer>");
        assert_eq!((full.score, full.solved), (1.0, true));
        let half = verify(&puz, &sol, "1234341221434321".replace("4321", "4.2.").as_str());
        assert_eq!(half.score, 6.0 / 8.0);
        assert!(!half.solved);
        assert_eq!(verify(&puz, &sol, "1234").score, 0.0);
        // Changing a clue keeps the empty-cell credit but is not solved.
        let changed = verify(&puz, &sol, "2234341221434321");
        assert_eq!((changed.score, changed.solved), (1.0, false));
        assert!(sol.is_solved() && !puz.is_solved());
        assert!(Board::new(vec![0; 10]).is_err());
        assert!(Board::new(vec![5; 16]).is_err());
        assert_eq!(String::from(puz.clone()), "1.3.3.1.2.4.4.2.");
        assert_eq!(puz.to_rows().lines().count(), 4);
    }
}
