//! Rewards served over HTTP: a scoring model that lives in Python (PickScore, HPS, aesthetic,
//! OCR, a GenEval detector) scores drift's images through [`HttpReward`], one request per
//! batch, with time-outs, retries and every failure recorded instead of raised.
//! `examples/reward_server/server.py` is a reference server (Python standard library only).

pub mod client;
pub mod reward;

pub use reward::{HttpReward, HttpRewardConfig, PromptText};

#[cfg(test)]
mod tests;
