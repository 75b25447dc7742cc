//! Rollout throughput of dLLM decoding on the shipped code model (4 held-out prompts × 4
//! samples): low-confidence remasking at two step budgets vs Fast-dLLM threshold decoding. One JSON line per case on stdout:
//! rule, steps budget, rows, generated tokens per second (rows × gen_length / seconds),
//! model evaluations per generated token, and held-out-style accuracy is not measured here
//! (`drift eval dllm` does that).
//!
//! Run with `cargo bench -p drift-dllm --bench decode` (from the workspace root or the crate;
//! the model is `examples/checkpoints/dllm-code-v0`, or `DRIFT_BENCH_MODEL`).

use std::path::PathBuf;
use std::time::Instant;

use drift_core::rng::RngKey;
use drift_dllm::grpo::{CodeTask, TextTask};
use drift_dllm::model::{DiffusionLm, LoadOptions};
use drift_dllm::tokenizer::{EOS_ID, PAD_ID};
use drift_samplers::dllm::{
    decode, DecodeBatch, DecodeConfig, Padding, PositionRule, ProposalConfig,
};
use serde_json::json;

fn model_dir() -> PathBuf {
    std::env::var("DRIFT_BENCH_MODEL").map(PathBuf::from).unwrap_or_else(|_| {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/checkpoints/dllm-code-v0")
    })
}

fn main() -> drift_dllm::Result<()> {
    let dir = model_dir();
    let model = DiffusionLm::from_dir(&dir, &LoadOptions::frozen())?;
    let task = CodeTask::new()?;
    let items = task.eval_items(4);
    let prompts =
        items.iter().map(|i| task.prompt_ids(i)).collect::<drift_dllm::Result<Vec<_>>>()?;
    let group = 4;
    let gen = 106;
    eprintln!(
        "model {} ({} parameters), {} rows",
        dir.display(),
        model.num_parameters(),
        prompts.len() * group
    );
    let cases = [
        ("low_confidence", PositionRule::LowConfidence, 106),
        ("low_confidence", PositionRule::LowConfidence, 53),
        ("threshold_0.9", PositionRule::Threshold { tau: 0.9 }, 106),
        ("threshold_0.7", PositionRule::Threshold { tau: 0.7 }, 106),
    ];
    for (name, position, steps) in cases {
        let cfg = DecodeConfig {
            gen_length: gen,
            block_length: gen,
            steps,
            proposal: ProposalConfig { temperature: 1.0, ..ProposalConfig::default() },
            position,
            stop_tokens: vec![EOS_ID],
            ..DecodeConfig::default()
        };
        let batch = DecodeBatch {
            prompts: &prompts,
            group_size: group,
            pad_id: PAD_ID,
            padding: Padding::Visible,
            first_row: 0,
            greedy_per_group: 0,
        };
        // One timed rollout per case (each is tens of model evaluations over every row).
        let t0 = Instant::now();
        let traj = decode(&model, &cfg, &batch, RngKey::new(2), model.device())?;
        let secs = t0.elapsed().as_secs_f64();
        let evals = traj.evaluations;
        let tokens = (prompts.len() * group * gen) as f64;
        println!(
            "{}",
            json!({
                "case": "dllm_decode", "rule": name, "steps_budget": steps,
                "rows": prompts.len() * group, "gen_length": gen, "seconds": secs,
                "model_evaluations": evals,
                "generated_tokens_per_s": tokens / secs,
                "evaluations_per_token": evals as f64 / gen as f64,
            })
        );
    }
    Ok(())
}
