//! Forward throughput of the dLLM models, beside a plain f32 matmul as this machine's
//! reference peak. One JSON line per case on stdout:
//!
//! - `matmul`: `n × n × n` f32 candle matmul, GFLOP/s = `2 n³ / s`;
//! - `forward`: config, architecture, parameters, batch, seq_len, mode (`frozen`: plain tensors
//!   and fused kernels, the rollout path; `tracked`: `Var` weights and the differentiable
//!   kernels, the training path), tokens/s, and GFLOP/s achieved with
//!   `FLOPs = 2 · P_matmul · tokens + 4 · B · T² · d · L` (`P_matmul` = parameters in matmuls,
//!   i.e. all but the input embedding and norm gains; the second term is `q kᵀ` and `p v`),
//!   plus that as a fraction of the measured matmul rate.
//!
//! Run with `cargo bench -p drift-dllm` (add `--features mkl` for MKL).

use candle_core::{DType, Device};
use drift_core::bench::{matmul_gflops as reference_gflops, median_seconds};
use drift_core::rng::RngKey;
use drift_dllm::model::{DiffusionLm, LoadOptions, ModelConfig, TinySize, VocabSpec};
use serde_json::json;

const VOCAB: VocabSpec = VocabSpec { vocab_size: 128, mask_id: 1, pad_id: 0, bos_id: 2, eos_id: 3 };

fn matmul_gflops(n: usize) -> drift_core::Result<f64> {
    let gflops = reference_gflops(n, &Device::Cpu)?;
    println!("{}", json!({"case": "matmul", "n": n, "dtype": "f32", "gflops": gflops}));
    Ok(gflops)
}

struct Case {
    size: TinySize,
    llada: bool,
    batch: usize,
    seq_len: usize,
    tracked: bool,
    iters: usize,
}

fn forward_case(c: &Case, peak: f64) -> drift_dllm::Result<()> {
    let spec = c.size.spec();
    let cfg: ModelConfig = if c.llada { spec.llada(VOCAB) } else { spec.dream(VOCAB) };
    let opts = LoadOptions { trainable: c.tracked, ..LoadOptions::default() };
    let model = DiffusionLm::init(cfg, RngKey::new(0), &opts)?;
    let ids = (RngKey::new(3).uniform((c.batch, c.seq_len), DType::F32, &Device::Cpu)? * 124.0)?
        .floor()?
        .affine(1.0, 4.0)?
        .to_dtype(DType::U32)?;
    let secs = median_seconds(c.iters, || model.raw_logits(&ids, None).map(|l| l.dims().to_vec()));
    let params = model.num_parameters();
    let p_matmul =
        params - VOCAB.vocab_size * spec.d_model - (2 * spec.n_layers + 1) * spec.d_model;
    let tokens = (c.batch * c.seq_len) as f64;
    let attn =
        4.0 * c.batch as f64 * (c.seq_len as f64).powi(2) * (spec.d_model * spec.n_layers) as f64;
    let gflops = (2.0 * p_matmul as f64 * tokens + attn) / secs / 1e9;
    let line = json!({
        "case": "forward",
        "config": c.size.name(),
        "arch": if c.llada { "llada" } else { "dream" },
        "mode": if c.tracked { "tracked" } else { "frozen" },
        "params": params,
        "batch": c.batch,
        "seq_len": c.seq_len,
        "seconds": secs,
        "tokens_per_s": tokens / secs,
        "gflops": gflops,
        "fraction_of_matmul": gflops / peak,
    });
    println!("{line}");
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let peak = matmul_gflops(1024)?;
    let cases = [
        Case {
            size: TinySize::Micro,
            llada: true,
            batch: 8,
            seq_len: 128,
            tracked: false,
            iters: 7,
        },
        Case {
            size: TinySize::Micro,
            llada: false,
            batch: 8,
            seq_len: 128,
            tracked: false,
            iters: 7,
        },
        Case {
            size: TinySize::Micro,
            llada: true,
            batch: 8,
            seq_len: 128,
            tracked: true,
            iters: 7,
        },
        Case {
            size: TinySize::Small50M,
            llada: true,
            batch: 4,
            seq_len: 256,
            tracked: false,
            iters: 3,
        },
        Case {
            size: TinySize::Small50M,
            llada: false,
            batch: 4,
            seq_len: 256,
            tracked: false,
            iters: 3,
        },
    ];
    for c in &cases {
        forward_case(c, peak)?;
    }
    Ok(())
}
