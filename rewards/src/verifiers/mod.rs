//! Answer verifiers shared across worlds: math final answers, and the exact arithmetic
//! (expression parser, rationals) and answer-tag helpers that the Countdown verifier
//! (`crate::worlds::countdown::verify`) also uses.

pub mod expr;
pub mod math;
pub mod rational;
pub mod tags;

pub use math::{MathProblem, MathReward, MathTask};
