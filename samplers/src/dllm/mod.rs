//! dLLM decoding: semi-autoregressive blocks, token proposals, position rules, threshold parallel decoding, order policies and recorded trajectories (ALGORITHMS.md §5).
