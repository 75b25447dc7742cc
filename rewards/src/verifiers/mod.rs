//! Answer verifiers: math final answers, Countdown equations, Sudoku grids, and the exact
//! arithmetic and answer-tag helpers they share.

pub mod countdown;
pub mod expr;
pub mod math;
pub mod rational;
pub mod sudoku;
pub mod tags;

pub use countdown::{Countdown, CountdownReward, CountdownTask};
pub use math::{MathProblem, MathReward, MathTask};
pub use sudoku::{Board, SudokuReward, SudokuTask};
