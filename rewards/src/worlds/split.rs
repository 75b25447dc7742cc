//! Train / held-out splits of the toy worlds.
//!
//! Rule: a unit (an item's canonical content for Sudoku and Countdown, a template key for
//! code) is held out when `mix64(fnv1a(unit)) ⊕ mix64(seed)`, reduced mod 100, is below
//! `held_out_percent`. Identical content always lands in the same split, so the two splits
//! are disjoint by construction, and the partition is a pure function of the seed.

use serde::{Deserialize, Serialize};

use drift_core::rng::{fnv1a, mix64};

/// Which split.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Split {
    /// Training items.
    Train,
    /// Held-out items, for evaluation only.
    HeldOut,
}

impl Split {
    /// A small tag mixed into item keys.
    pub fn tag(self) -> u64 {
        match self {
            Self::Train => 1,
            Self::HeldOut => 2,
        }
    }

    /// The split's name, as serde writes it: `train` or `held_out`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Train => "train",
            Self::HeldOut => "held_out",
        }
    }
}

/// The split of `unit` under `seed` and `held_out_percent` (module rule).
pub fn split_of(unit: &str, seed: u64, held_out_percent: u8) -> Split {
    if (mix64(fnv1a(unit.as_bytes())) ^ mix64(seed)) % 100 < held_out_percent as u64 {
        Split::HeldOut
    } else {
        Split::Train
    }
}

/// Validates a held-out percentage (`1..=99`).
pub fn check_percent(p: u8) -> Result<(), crate::RewardError> {
    if (1..=99).contains(&p) {
        Ok(())
    } else {
        Err(crate::RewardError::Config {
            field: "held_out_percent",
            value: p.to_string(),
            expected: "1 to 99".into(),
        })
    }
}

/// What a dLLM needs from an item: the prompt text and the target text (a correct answer in
/// the expected output format), both plain strings over a small character set.
pub trait TextItem {
    /// A stable identifier.
    fn id(&self) -> &str;
    /// The prompt.
    fn prompt(&self) -> String;
    /// A correct completion.
    fn target(&self) -> String;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_is_deterministic_and_roughly_sized() {
        let held = (0..2000).filter(|i| split_of(&i.to_string(), 5, 10) == Split::HeldOut).count();
        assert!((120..=280).contains(&held), "{held}");
        assert_eq!(split_of("abc", 5, 10), split_of("abc", 5, 10));
        let other = (0..2000).filter(|i| split_of(&i.to_string(), 6, 10) == Split::HeldOut).count();
        assert_ne!(held, 0);
        assert!(other > 0);
        assert!(check_percent(0).is_err() && check_percent(10).is_ok());
    }

    #[test]
    fn split_names_are_the_serde_names() {
        for s in [Split::Train, Split::HeldOut] {
            assert_eq!(serde_json::to_string(&s).unwrap(), format!("\"{}\"", s.name()));
        }
    }
}
