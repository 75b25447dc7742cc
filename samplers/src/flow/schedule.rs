//! The SD3 shifted sigma schedule (diffusers `FlowMatchEulerDiscreteScheduler`).

use serde::{Deserialize, Serialize};

use super::error::{FlowError, Result};

/// A noise schedule `σ_0 = 1 > σ_1 > … > σ_{N−1} > σ_N = 0` for `N` steps, with the model
/// timesteps `t_i = 1000·σ_i`.
///
/// Built exactly as diffusers' `FlowMatchEulerDiscreteScheduler(shift)` with
/// `set_timesteps(N)` (SD3, arXiv 2403.03206): the constructor's `σ_min` is
/// `shift·s/(1 + (shift−1)s)` at `s = 1/1000` in f32; then `t = linspace(1000, 1000·σ_min, N)`
/// in f64, `σ = t/1000`, the shift applied (again) in f64, cast to f32, and `0` appended. So
/// the last non-zero sigma is shifted twice (0.00893 for shift 3, not `σ_min`).
#[derive(Debug, Clone, PartialEq)]
pub struct Schedule {
    sigmas: Vec<f32>,
    timesteps: Vec<f32>,
}

/// Parameters of a [`Schedule`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ScheduleConfig {
    /// Number of denoising steps `N`. Default 10 (Flow-GRPO's training steps).
    pub steps: usize,
    /// The SD3 shift. Default 3.0 (SD3.5-M).
    pub shift: f64,
    /// Training timesteps of the scheduler. Default 1000.
    pub num_train_timesteps: usize,
}

impl Default for ScheduleConfig {
    fn default() -> Self {
        Self { steps: 10, shift: 3.0, num_train_timesteps: 1000 }
    }
}

impl Schedule {
    /// The schedule of `cfg`.
    pub fn new(cfg: &ScheduleConfig) -> Result<Self> {
        let bad =
            |field, value: String, expected| Err(FlowError::Config { field, value, expected });
        if cfg.steps == 0 {
            return bad("schedule.steps", "0".into(), "at least 1 step");
        }
        if !(cfg.shift > 0.0 && cfg.shift.is_finite()) {
            return bad("schedule.shift", cfg.shift.to_string(), "a finite number > 0");
        }
        if cfg.num_train_timesteps < 2 {
            return bad(
                "schedule.num_train_timesteps",
                cfg.num_train_timesteps.to_string(),
                ">= 2",
            );
        }
        let n_train = cfg.num_train_timesteps as f32;
        let shift32 = cfg.shift as f32;
        let s_min = 1.0f32 / n_train;
        let sigma_min = shift32 * s_min / (1.0 + (shift32 - 1.0) * s_min);
        let (hi, lo) = (f64::from(n_train), f64::from(n_train) * f64::from(sigma_min));
        let n = cfg.steps;
        let mut sigmas: Vec<f32> = (0..n)
            .map(|i| {
                let t = if n == 1 { hi } else { hi + (lo - hi) * i as f64 / (n - 1) as f64 };
                let s = t / f64::from(n_train);
                (cfg.shift * s / (1.0 + (cfg.shift - 1.0) * s)) as f32
            })
            .collect();
        let timesteps = sigmas.iter().map(|s| s * n_train).collect();
        sigmas.push(0.0);
        Ok(Self { sigmas, timesteps })
    }

    /// Number of steps `N`.
    pub fn steps(&self) -> usize {
        self.timesteps.len()
    }

    /// The `N + 1` sigmas, ending in 0.
    pub fn sigmas(&self) -> &[f32] {
        &self.sigmas
    }

    /// The `N` model timesteps `1000·σ_i`.
    pub fn timesteps(&self) -> &[f32] {
        &self.timesteps
    }

    /// `(σ_i, σ_{i+1})` of step `i`.
    pub fn pair(&self, i: usize) -> Result<(f64, f64)> {
        if i >= self.steps() {
            return Err(FlowError::Step { step: i, steps: self.steps() });
        }
        Ok((f64::from(self.sigmas[i]), f64::from(self.sigmas[i + 1])))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_diffusers_fixture() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/flow-schedule/schedule.json");
        let text = std::fs::read_to_string(path)
            .expect("fixtures/flow-schedule/schedule.json is in the repository");
        let json: serde_json::Value = serde_json::from_str(&text).unwrap();
        for n in [10usize, 40] {
            let want = &json["schedules"][n.to_string()];
            let s =
                Schedule::new(&ScheduleConfig { steps: n, ..ScheduleConfig::default() }).unwrap();
            let sig: Vec<f64> =
                want["sigmas"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
            let ts: Vec<f64> =
                want["timesteps"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
            assert_eq!(s.sigmas().len(), n + 1);
            for (a, b) in s.sigmas().iter().zip(&sig) {
                // The fixture holds float32 values printed as doubles; serde_json's default parser
                // may be one f64 ulp off, which the f32 comparison absorbs exactly.
                assert_eq!(*a, *b as f32, "sigma for N = {n}");
            }
            for (a, b) in s.timesteps().iter().zip(&ts) {
                assert_eq!(*a, *b as f32, "timestep for N = {n}");
            }
        }
    }

    #[test]
    fn bad_configs_are_named() {
        let err =
            Schedule::new(&ScheduleConfig { steps: 0, ..ScheduleConfig::default() }).unwrap_err();
        assert!(err.to_string().contains("schedule.steps"));
        let err = Schedule::new(&ScheduleConfig { shift: -1.0, ..ScheduleConfig::default() })
            .unwrap_err();
        assert!(err.to_string().contains("schedule.shift"));
        let s = Schedule::new(&ScheduleConfig::default()).unwrap();
        assert!(s.pair(10).is_err() && s.pair(9).is_ok());
    }
}
