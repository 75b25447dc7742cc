//! The masked-diffusion pretraining / SFT objective of LLaDA (Nie et al., arXiv 2502.09992,
//! Eq. 3 and the SFT variant of its guidelines).
//!
//! Per row `b`: draw `t_b ~ U(ε, 1)` (`t = ε + (1 − ε) u`, ε = 1e-3), mask each completion
//! token independently with probability `t_b` (prompt tokens are never masked; pretraining is
//! prompt length 0), and score the masked tokens by cross-entropy:
//!
//! ```text
//! loss = (1/B) Σ_b (1/L_b) Σ_{j masked in b} −log p_θ(y_bj | x̃_b)_j / t_b
//! ```
//!
//! with `L_b` the number of completion tokens of row `b` (rows with `L_b = 0` contribute 0).
//! This is LLaDA's SFT normalisation (by the answer length, then the mean over rows); with
//! prompt length 0 and every position a completion token it equals LLaDA's pretraining loss
//! `Σ CE/t / (B · T)`. It is an upper bound on the negative log-likelihood per token.
//!
//! [`LossWeighting::Flat`] drops the `1/t_b` (each masked token weighs `1/(L_b · B)`, the
//! masked-token cross-entropy of BERT / MaskGIT): no longer a likelihood bound, but the
//! rare rows with small `t_b` no longer carry gradients `1/t_b` times larger than the rest, and
//! the high-`t` predictions that start every decode get the larger share of the loss.
//!
//! Randomness comes only from the [`RngKey`]: row `b` of the batch is global row
//! `key.row + b`, and its `t` and mask are drawn under that row's key
//! (streams `"mdm_t"` and `"mdm_mask"`), so a row gets the same mask whatever micro-batch it
//! lands in. The model is any [`MaskPredictor`]: logits at `i` score the token at `i` (Dream's
//! shift already applied by its wrapper). `completion_mask` is read to the host once (a
//! `[B, T]` copy) to build the keyed masks; nothing else leaves the device.
//!
//! ```
//! use candle_core::{DType, Device, Tensor};
//! use drift_core::rng::RngKey;
//! use drift_dllm::model::{DiffusionLm, LoadOptions, TinySize};
//! use drift_dllm::pretrain::masked_diffusion_loss;
//! use drift_dllm::tokenizer::CharTokenizer;
//!
//! let tok = CharTokenizer::ascii();
//! let cfg = TinySize::Nano.spec().llada(tok.vocab_spec());
//! let model = DiffusionLm::init(cfg, RngKey::new(0), &LoadOptions::trainable())?;
//! let ids = Tensor::new(vec![tok.encode("Q: 2+2? A: 4")?], &Device::Cpu)?;
//! let completion = Tensor::ones(ids.dims(), DType::U8, &Device::Cpu)?;
//! // SFT: the 8-character prompt "Q: 2+2? " is never masked. Step 3, global row 0.
//! let key = RngKey::new(42).step(3);
//! let loss = masked_diffusion_loss(&model, &ids, &[8], &completion, key)?;
//! let _grads = loss.backward()?; // reaches every Var in model.varmap()
//! # assert!(loss.to_scalar::<f32>()? >= 0.0);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use candle_core::{DType, Tensor, D};
use drift_core::ops;
use drift_core::rng::RngKey;
use drift_samplers::MaskPredictor;

use crate::error::{DllmError, Result};

/// The default lower bound ε of the masking ratio (LLaDA's `eps = 1e-3`).
pub const DEFAULT_EPS: f32 = 1e-3;

/// How masked tokens are weighted in the objective (module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LossWeighting {
    /// `1 / (t_b · L_b · B)`: LLaDA's Eq. 3, an upper bound on the NLL. The default.
    #[default]
    InverseT,
    /// `1 / (L_b · B)`: masked-token cross-entropy without the `1/t` factor.
    Flat,
}

/// The objective's settings beside the batch: ε and the [`LossWeighting`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MdmObjective {
    /// Lower bound ε of `t ~ U(ε, 1)`.
    pub eps: f32,
    /// How masked tokens are weighted.
    pub weighting: LossWeighting,
}

impl Default for MdmObjective {
    /// LLaDA's: ε = [`DEFAULT_EPS`], `1/t` weights.
    fn default() -> Self {
        Self { eps: DEFAULT_EPS, weighting: LossWeighting::InverseT }
    }
}

/// The random part of one objective evaluation, on the host.
#[derive(Debug, Clone, PartialEq)]
pub struct DiffusionMasks {
    /// Masking ratio `t_b ∈ [ε, 1)` per row.
    pub t: Vec<f32>,
    /// `[B][T]`: whether position `j` of row `b` is masked (always false in the prompt and
    /// outside the completion mask).
    pub masked: Vec<Vec<bool>>,
}

/// Draws the masking ratios and masks for `B = prompt_lens.len()` rows of length `seq_len`.
/// `completion[b][j]` says whether position `j` of row `b` is a completion token; positions
/// before `prompt_lens[b]` are never masked whatever it says.
pub fn draw_masks(
    key: RngKey,
    prompt_lens: &[usize],
    completion: &[Vec<bool>],
    seq_len: usize,
    eps: f32,
) -> Result<DiffusionMasks> {
    if completion.len() != prompt_lens.len() || completion.iter().any(|r| r.len() != seq_len) {
        return Err(DllmError::Input {
            name: "completion_mask",
            got: format!("{} rows", completion.len()),
            expected: format!("{} rows of {seq_len}", prompt_lens.len()),
        });
    }
    let (mut ts, mut masked) = (Vec::new(), Vec::new());
    for (b, (&p, comp)) in prompt_lens.iter().zip(completion).enumerate() {
        let row = key.row(key.row + b as u64);
        let t = eps + (1.0 - eps) * row.stream("mdm_t").uniform_f32_vec(1)[0];
        let u = row.stream("mdm_mask").uniform_f32_vec(seq_len);
        masked.push((0..seq_len).map(|j| j >= p && comp[j] && u[j] < t).collect());
        ts.push(t);
    }
    Ok(DiffusionMasks { t: ts, masked })
}

/// The objective for `ids: [B, T]` (u32), prompt lengths `prompt_lens[B]` and
/// `completion_mask: [B, T]` (non-zero = completion token that counts; use all ones past the
/// prompt for plain SFT, zeros on padding), with ε = [`DEFAULT_EPS`]. Returns a scalar f32
/// tensor carrying the graph to the model's weights.
pub fn masked_diffusion_loss<M: MaskPredictor + ?Sized>(
    model: &M,
    ids: &Tensor,
    prompt_lens: &[usize],
    completion_mask: &Tensor,
    key: RngKey,
) -> Result<Tensor> {
    let objective = MdmObjective::default();
    masked_diffusion_loss_with(model, ids, prompt_lens, completion_mask, None, key, objective)
}

/// [`masked_diffusion_loss`] with an attention mask `[B, T]` (0 hides a key, e.g. left
/// padding; `None` shows every position) passed to the model, and an explicit ε and
/// [`LossWeighting`].
pub fn masked_diffusion_loss_with<M: MaskPredictor + ?Sized>(
    model: &M,
    ids: &Tensor,
    prompt_lens: &[usize],
    completion_mask: &Tensor,
    attention_mask: Option<&Tensor>,
    key: RngKey,
    objective: MdmObjective,
) -> Result<Tensor> {
    let MdmObjective { eps, weighting } = objective;
    let (b, t) = ids.dims2().map_err(|_| shape_err("ids", ids, "[B, T]"))?;
    if completion_mask.dims() != [b, t] {
        return Err(shape_err("completion_mask", completion_mask, "the shape of ids"));
    }
    if prompt_lens.len() != b {
        return Err(DllmError::Input {
            name: "prompt_lens",
            got: format!("{} entries", prompt_lens.len()),
            expected: format!("{b} (one per row of ids)"),
        });
    }
    let completion: Vec<Vec<bool>> = completion_mask
        .ne(0u32)?
        .to_dtype(DType::U8)?
        .to_vec2::<u8>()?
        .into_iter()
        .map(|r| r.into_iter().map(|v| v != 0).collect())
        .collect();
    let draws = draw_masks(key, prompt_lens, &completion, t, eps)?;
    let weights = loss_weights(&draws, &completion, prompt_lens, weighting);

    let dev = ids.device();
    let ids = ids.to_dtype(DType::U32)?;
    let masked = Tensor::from_vec(
        draws.masked.iter().flatten().map(|&m| u8::from(m)).collect::<Vec<_>>(),
        (b, t),
        dev,
    )?;
    let mask_ids = Tensor::full(model.mask_id(), (b, t), dev)?;
    let noisy = masked.where_cond(&mask_ids, &ids)?;
    let logits = model.logits(&noisy, attention_mask)?.to_dtype(DType::F32)?;
    let logp = ops::log_softmax_last_dim(&logits)?;
    let token_lp = logp.gather(&ids.unsqueeze(D::Minus1)?, D::Minus1)?.squeeze(D::Minus1)?;
    let w = Tensor::from_vec(weights, (b, t), dev)?;
    Ok((token_lp * w)?.sum_all()?.neg()?)
}

/// Per-position weights `[masked] / (t_b · L_b · B)` (or `[masked] / (L_b · B)` when flat),
/// flattened row-major.
fn loss_weights(
    draws: &DiffusionMasks,
    completion: &[Vec<bool>],
    prompt_lens: &[usize],
    weighting: LossWeighting,
) -> Vec<f32> {
    let b = draws.t.len() as f32;
    draws
        .masked
        .iter()
        .zip(completion)
        .zip(prompt_lens)
        .zip(&draws.t)
        .flat_map(|(((m, comp), &p), &t)| {
            let len = comp.iter().enumerate().filter(|&(j, &c)| c && j >= p).count().max(1);
            let t = match weighting {
                LossWeighting::InverseT => t,
                LossWeighting::Flat => 1.0,
            };
            let scale = 1.0 / (t * len as f32 * b);
            m.iter().map(move |&on| if on { scale } else { 0.0 })
        })
        .collect()
}

fn shape_err(name: &'static str, t: &Tensor, expected: &str) -> DllmError {
    DllmError::Input { name, got: format!("shape {:?}", t.dims()), expected: expected.into() }
}
