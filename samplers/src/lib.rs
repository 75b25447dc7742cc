//! drift-samplers: dLLM decoding and flow ODE/SDE samplers over small model traits.
