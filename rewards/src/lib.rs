//! drift-rewards: rewards, verifiers and the shipped toy worlds.
