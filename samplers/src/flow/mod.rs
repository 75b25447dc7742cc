//! Flow-matching samplers: SD3 schedules, Euler ODE, Flow-GRPO and DanceGRPO SDEs, CPS, windowed SDE rollouts (ALGORITHMS.md §7).
