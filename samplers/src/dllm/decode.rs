//! The dLLM decode loop (docs/algorithms.md §5): semi-autoregressive blocks, every position rule,
//! threshold parallel decoding, classifier-free guidance, order policies, batched prompts with
//! stop tokens, recorded as a [`Trajectory`].
//!
//! One step is one model evaluation over the whole batch:
//!
//! 1. `logits = model(x)` (under CFG, one call over `[x; x with the prompt masked]` and
//!    `u + (w + 1)(c − u)`, [`guide`]);
//! 2. in the current block, propose `x0` ([`propose`]) and score every position
//!    ([`token_stats`], [`rule_confidence`]);
//! 3. choose the positions to commit: LLaDA's quota of the most confident (or a Gumbel-top-n
//!    draw at `alg_temp > 0`), Dream's origin reveal, Fast-dLLM's threshold, or an
//!    [`OrderPolicy`];
//! 4. write `x0` there and record the step and `log p(x0)`.
//!
//! Quota and origin rules take `steps / blocks` steps per block; threshold decoding ends a
//! block when none of its positions is masked (at most `block_length` steps).
//!
//! Device traffic: the keyed noise of a step is drawn on the host and uploaded once (a
//! host → device copy per step, `[B, block, V]` f64 when `temperature > 0`). At most one small
//! read back per step, a handful of u32 scalars, and only when the loop needs it: threshold
//! decoding (is the block finished?), `early_stop` (is every row finished?) and order policies
//! (did the decision keep its contract?). Quota rules without early stop never read back
//! inside the loop.

use candle_core::{DType, Device, Tensor, D};
use drift_core::rng::RngKey;

use super::cache::{CacheOp, KvCache, KvCacheMode};
use super::confidence::{rule_confidence, token_stats};
use super::config::{DecodeConfig, PositionRule, TransferSchedule};
use super::error::{config_err, DecodeError, Result};
use super::order::{OrderDecision, OrderFeatures, OrderInput, OrderPolicy};
use super::proposal::{cumsum_last, propose};
use super::quota::{dream_transfer_count, num_transfer_tokens};
use super::select::{
    capped_threshold_mask, gumbel_perturb, mask_ineligible, origin_mask, origin_probability,
    row_counts, threshold_mask, top_n_mask,
};
use super::trajectory::{Trajectory, NEVER_COMMITTED, PROMPT_STEP};
use crate::MaskPredictor;

/// How left padding of prompts shorter than the longest one is shown to the model. Serialized
/// as `"masked"` / `"visible"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Padding {
    /// Pass an attention mask `[B, T]` (0 on padding) with every call, so padded keys are
    /// hidden (Dream's `generate(attention_mask=…)`). No mask is passed when every prompt has
    /// the same length.
    #[default]
    Masked,
    /// Pass no attention mask: padding is seen as ordinary tokens, as drift's SFT pretraining
    /// trained `dllm-code-v0`…`v4` (their `config.json` says `"drift_padding": "visible"`).
    Visible,
}

/// A batch of prompts to decode, `G` samples each.
#[derive(Debug, Clone, Copy)]
pub struct DecodeBatch<'a> {
    /// Prompt token ids, one list per prompt (lengths may differ; each is left-padded with
    /// `pad_id` to the longest).
    pub prompts: &'a [Vec<u32>],
    /// `G ≥ 1` samples per prompt; row `p · G + g` is sample `g` of prompt `p`.
    pub group_size: usize,
    /// The padding token id (below the vocabulary size, not the mask id).
    pub pad_id: u32,
    /// How padding is shown to the model.
    pub padding: Padding,
    /// Global id of the batch's first row: row `r` draws its noise under key row
    /// `first_row + r`, so a row decodes the same whatever micro-batch it lands in (given the
    /// same batch-mates under a batch-dependent model, i.e. with padding).
    pub first_row: u64,
    /// The last `greedy_per_group ≤ G` rows of each group propose greedily (`argmax` of the
    /// filtered logits) whatever [`ProposalConfig::temperature`], so a group can hold its
    /// prompt's greedy decode beside `G − greedy_per_group` samples. A greedy row ignores its
    /// Gumbel noise; every other row draws exactly the noise it would draw without greedy
    /// rows. Default 0.
    ///
    /// [`ProposalConfig::temperature`]: super::ProposalConfig::temperature
    pub greedy_per_group: usize,
}

impl<'a> DecodeBatch<'a> {
    /// `group_size` samples of each prompt, padding masked, rows numbered from 0.
    pub fn new(prompts: &'a [Vec<u32>], group_size: usize, pad_id: u32) -> Self {
        Self {
            prompts,
            group_size,
            pad_id,
            padding: Padding::Masked,
            first_row: 0,
            greedy_per_group: 0,
        }
    }
}

/// The decodings Fast-dLLM's cached Dream block loop defines (`generation_utils_block.py`):
/// after the block start's forced commit, a quota rule over at least one more step per block,
/// or the uncapped `threshold` rule; no `origin`, no capped `dream_threshold`.
fn check_block_start_rule(cfg: &DecodeConfig) -> Result<()> {
    let expected = "with kv_cache on a Dream model (whose cached block decoding commits each \
                    block's first position at its recording step): a quota position rule with \
                    at least 2 steps per block, or threshold";
    match cfg.position {
        PositionRule::Origin { .. } | PositionRule::DreamThreshold { .. } => {
            Err(input_err("position", format!("{:?}", cfg.position), expected))
        }
        PositionRule::Threshold { .. } => Ok(()),
        _ if cfg.steps_per_block() < 2 => Err(input_err("steps", cfg.steps.to_string(), expected)),
        _ => Ok(()),
    }
}

/// The `(keep, fixed)` pair of [`Decoder::greedy_uniforms`] for `b` rows in groups of `g`
/// whose last `greedy` rows propose greedily; `None` when `greedy` is 0.
fn greedy_uniforms(
    b: usize,
    g: usize,
    greedy: usize,
    device: &Device,
) -> Result<Option<(Tensor, Tensor)>> {
    if greedy == 0 {
        return Ok(None);
    }
    let is_greedy: Vec<bool> = (0..b).map(|r| r % g >= g - greedy).collect();
    let keep: Vec<f64> = is_greedy.iter().map(|&y| if y { 0.0 } else { 1.0 }).collect();
    let fixed: Vec<f64> =
        is_greedy.iter().map(|&y| if y { (-1.0f64).exp() } else { 0.0 }).collect();
    Ok(Some((Tensor::from_vec(keep, (b, 1), device)?, Tensor::from_vec(fixed, (b, 1), device)?)))
}

/// Classifier-free guidance for masked models: `u + g(c − u)` with `g = w + 1`, from
/// conditional logits `c` and unconditional logits `u` (the prompt replaced by mask tokens),
/// computed as `c + w (c − u)` so that `w = 0` (`g = 1`) returns `c` exactly (LLaDA arXiv
/// 2502.09992, `cfg_scale` = `w`; Nie et al. 2024, "Scaling up masked diffusion models on
/// text"). [`DecodeConfig::guidance`] is `g`, diffusers' convention.
pub fn guide(cond: &Tensor, uncond: &Tensor, w: f64) -> Result<Tensor> {
    Ok((cond + ((cond - uncond)? * w)?)?)
}

/// Decodes `batch` with the position rule of `cfg` (see the module docs), every draw keyed by
/// `key` (the decoder sets the key's `stream`, `iteration` = global step and `row`; the
/// caller's `seed`, `step` and `draw` name the rollout).
///
/// Early stop (`cfg.early_stop`, with stop tokens): a row is frozen once it has committed a
/// stop token with every earlier completion position committed; it then commits nothing more,
/// its undecoded positions get the row's first stop token and [`NEVER_COMMITTED`], and the
/// rollout ends when every row is frozen. Without it every position is decoded (LLaDA) and the
/// completion mask still ends at the first stop token.
///
/// ```
/// use candle_core::{Device, Tensor};
/// use drift_core::rng::RngKey;
/// use drift_samplers::dllm::{decode, DecodeBatch, DecodeConfig};
/// use drift_samplers::MaskPredictor;
///
/// /// Always predicts token 3 (vocabulary 5, mask 4).
/// struct Threes;
/// impl MaskPredictor for Threes {
///     fn logits(&self, ids: &Tensor, _: Option<&Tensor>) -> candle_core::Result<Tensor> {
///         let (b, t) = ids.dims2()?;
///         let row = Tensor::new(&[0f32, 0., 0., 5., -9.], ids.device())?;
///         row.reshape((1, 1, 5))?.broadcast_as((b, t, 5))?.contiguous()
///     }
///     fn mask_id(&self) -> u32 { 4 }
///     fn vocab_size(&self) -> usize { 5 }
/// }
///
/// let cfg = DecodeConfig { gen_length: 4, block_length: 2, steps: 4, ..Default::default() };
/// let prompts = vec![vec![1u32, 2]];
/// let traj = decode(&Threes, &cfg, &DecodeBatch::new(&prompts, 2, 0), RngKey::new(0), &Device::Cpu)?;
/// assert_eq!(traj.tokens.to_vec2::<u32>()?, vec![vec![1, 2, 3, 3, 3, 3]; 2]);
/// assert_eq!(traj.evaluations, 4);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn decode<M: MaskPredictor + ?Sized>(
    model: &M,
    cfg: &DecodeConfig,
    batch: &DecodeBatch<'_>,
    key: RngKey,
    device: &Device,
) -> Result<Trajectory> {
    Decoder::new(model, cfg, batch, key, device, None)?.run()
}

/// [`decode`] with `policy` choosing the positions in place of the quota rule's confidence
/// order (the rule must be a quota rule: low-confidence, random, margin or entropy; its
/// `alg_temp` is ignored). The policy sees the features of every completion position and
/// LLaDA's per-step count; each decision's log-probability is recorded in
/// [`Trajectory::order_log_probs`] (SAS, arXiv 2606.23567).
pub fn decode_with_policy<M: MaskPredictor + ?Sized, P: OrderPolicy + ?Sized>(
    model: &M,
    cfg: &DecodeConfig,
    batch: &DecodeBatch<'_>,
    key: RngKey,
    device: &Device,
    policy: &P,
) -> Result<Trajectory> {
    if !cfg.position.uses_quota() {
        return Err(config_err(
            "position",
            format!("{:?}", cfg.position),
            "a quota rule (low_confidence, random, margin, entropy) when an order policy is given",
        ));
    }
    Decoder::new(model, cfg, batch, key, device, Some(&Shim(policy)))?.run()
}

/// `&P` as a `&dyn OrderPolicy` for unsized `P`.
struct Shim<'p, P: ?Sized>(&'p P);

impl<P: OrderPolicy + ?Sized> OrderPolicy for Shim<'_, P> {
    fn choose(&self, input: &OrderInput<'_>) -> Result<OrderDecision> {
        self.0.choose(input)
    }
}

fn input_err(
    name: &'static str,
    got: impl Into<String>,
    expected: impl Into<String>,
) -> DecodeError {
    DecodeError::Input { name, got: got.into(), expected: expected.into() }
}

/// Replaces columns `offset..offset + piece.dim(1)` of `full[B, N]` by `piece`.
fn put_columns(full: &Tensor, piece: &Tensor, offset: usize) -> Result<Tensor> {
    let n = full.dim(1)?;
    let w = piece.dim(1)?;
    let mut parts = Vec::with_capacity(3);
    if offset > 0 {
        parts.push(full.narrow(1, 0, offset)?);
    }
    parts.push(piece.clone());
    if offset + w < n {
        parts.push(full.narrow(1, offset + w, n - offset - w)?);
    }
    Ok(Tensor::cat(&parts, 1)?)
}

/// `[prefix, x]` along dim 1 (`x` alone when `prefix` has no columns).
fn prepend(prefix: &Tensor, x: &Tensor) -> Result<Tensor> {
    if prefix.dim(1)? == 0 {
        return Ok(x.clone());
    }
    Ok(Tensor::cat(&[prefix, x], 1)?)
}

/// Exclusive prefix sum over the last dim of a u8 mask, as f32.
fn exclusive_count(mask: &Tensor) -> Result<Tensor> {
    let m = mask.to_dtype(DType::F32)?;
    Ok((cumsum_last(&m)? - m)?)
}

/// Everything the loop carries from step to step.
struct Decoder<'m, M: ?Sized> {
    model: &'m M,
    cfg: &'m DecodeConfig,
    policy: Option<&'m dyn OrderPolicy>,
    key: RngKey,
    device: Device,
    rows: Vec<u64>,
    mask_id: u32,
    vocab: usize,
    /// `[V]` f32: `−∞` at the mask id, 0 elsewhere, added to the logits the proposal samples
    /// from, so a committed token is never the mask id (which `finish` would later overwrite,
    /// making the scored sequence differ from the rewarded one).
    forbid_mask: Tensor,
    /// `P` and `L`.
    p: usize,
    l: usize,
    /// `[B, T]` u32.
    ids: Tensor,
    /// `[B, T]` u8 (1 = real token).
    attention: Tensor,
    /// Whether `attention` is passed to the model.
    pass_attention: bool,
    /// `[B, L]` i64 and f32 records of the completion.
    steps_rec: Tensor,
    logp_rec: Tensor,
    /// `[B]` u8, rows frozen by an early stop.
    frozen: Tensor,
    all_frozen: bool,
    order_lp: Vec<Tensor>,
    step: usize,
    /// Fast-dLLM's record and where the current block starts in the completion; `record_next`
    /// is set at each block's start so its first step records.
    cache: KvCache,
    block_start: usize,
    record_next: bool,
    /// The completion column the last logits start at (non-zero only for a cached pass).
    comp_offset: usize,
    /// `[B, 1]` f64 `(keep, fixed)` for the uniforms of the Gumbel noise: `u·keep + fixed`,
    /// with `keep = 0, fixed = e⁻¹` on greedy rows (noise `−log(−log e⁻¹) = 0`, the same
    /// constant over the vocabulary, so the argmax is the logits'); `None` without greedy rows.
    greedy_uniforms: Option<(Tensor, Tensor)>,
}

impl<'m, M: MaskPredictor + ?Sized> Decoder<'m, M> {
    fn new(
        model: &'m M,
        cfg: &'m DecodeConfig,
        batch: &DecodeBatch<'_>,
        key: RngKey,
        device: &Device,
        policy: Option<&'m dyn OrderPolicy>,
    ) -> Result<Self> {
        let (vocab, mask_id) = (model.vocab_size(), model.mask_id());
        cfg.validate(vocab, mask_id)?;
        if batch.prompts.is_empty() {
            return Err(input_err("prompts", "empty", "at least one prompt"));
        }
        if batch.group_size == 0 {
            return Err(input_err("group_size", "0", "at least 1"));
        }
        if batch.greedy_per_group > batch.group_size {
            return Err(input_err(
                "greedy_per_group",
                batch.greedy_per_group.to_string(),
                format!("at most group_size = {}", batch.group_size),
            ));
        }
        if batch.pad_id as usize >= vocab || batch.pad_id == mask_id {
            return Err(input_err(
                "pad_id",
                batch.pad_id.to_string(),
                format!("a token id below vocab_size = {vocab}, not the mask id {mask_id}"),
            ));
        }
        for (i, prompt) in batch.prompts.iter().enumerate() {
            if let Some(&t) = prompt.iter().find(|&&t| t as usize >= vocab || t == mask_id) {
                return Err(input_err(
                    "prompts",
                    format!("prompt {i} holding token {t}"),
                    format!("token ids below vocab_size = {vocab}, not the mask id {mask_id}"),
                ));
            }
        }
        let p = batch.prompts.iter().map(Vec::len).max().unwrap_or(0);
        let l = cfg.gen_length;
        let g = batch.group_size;
        let b = batch.prompts.len() * g;
        let t = p + l;
        let mut ids = Vec::with_capacity(b * t);
        let mut att = Vec::with_capacity(b * t);
        for prompt in batch.prompts {
            let pad = p - prompt.len();
            for _ in 0..g {
                ids.extend(std::iter::repeat_n(batch.pad_id, pad));
                ids.extend_from_slice(prompt);
                ids.extend(std::iter::repeat_n(mask_id, l));
                att.extend(std::iter::repeat_n(0u8, pad));
                att.extend(std::iter::repeat_n(1u8, prompt.len() + l));
            }
        }
        let ragged = batch.prompts.iter().any(|q| q.len() != p);
        if cfg.kv_cache != KvCacheMode::None {
            if !model.supports_kv_cache() {
                return Err(input_err(
                    "kv_cache",
                    format!("{:?}", cfg.kv_cache),
                    "a model with key/value caches (LLaDA, Dream), or kv_cache = none",
                ));
            }
            if policy.is_some() {
                return Err(input_err(
                    "kv_cache",
                    format!("{:?}", cfg.kv_cache),
                    "no order policy, or kv_cache = none",
                ));
            }
            if model.cache_commits_block_start() {
                check_block_start_rule(cfg)?;
            }
        }
        Ok(Self {
            model,
            cfg,
            policy,
            key,
            device: device.clone(),
            rows: (0..b as u64).map(|r| batch.first_row + r).collect(),
            mask_id,
            vocab,
            forbid_mask: Tensor::from_vec(
                (0..vocab as u32)
                    .map(|v| if v == mask_id { f32::NEG_INFINITY } else { 0.0 })
                    .collect(),
                vocab,
                device,
            )?,
            p,
            l,
            ids: Tensor::from_vec(ids, (b, t), device)?,
            attention: Tensor::from_vec(att, (b, t), device)?,
            pass_attention: ragged && batch.padding == Padding::Masked,
            steps_rec: Tensor::full(NEVER_COMMITTED, (b, l), device)?,
            logp_rec: Tensor::zeros((b, l), DType::F32, device)?,
            frozen: Tensor::zeros(b, DType::U8, device)?,
            all_frozen: false,
            order_lp: Vec::new(),
            step: 0,
            cache: KvCache::default(),
            block_start: 0,
            record_next: true,
            comp_offset: 0,
            greedy_uniforms: greedy_uniforms(b, g, batch.greedy_per_group, device)?,
        })
    }

    fn b(&self) -> usize {
        self.rows.len()
    }

    /// Uniforms `[B, cols]` for this step under stream `name`.
    fn uniforms(&self, name: &str, cols: usize, dtype: DType) -> Result<Tensor> {
        let k = self.key.stream(name).iteration(self.step as u64);
        let u = k.uniform_rows(&self.rows, cols, dtype, &self.device)?;
        // A uniform of exactly 0 would give Gumbel noise −∞, indistinguishable from an
        // ineligible position.
        Ok(u.maximum(1e-30)?)
    }

    /// The completion's logits under the key/value cache: the block's first step records the
    /// whole sequence (`[B, L, V]`, offset 0); later ones run the block and what follows it
    /// (prefix) or the block alone (dual) against the record and return only those columns,
    /// with `comp_offset` set to the block's start (the rules read only the current block).
    fn cached_completion_logits(&mut self) -> Result<Tensor> {
        let (p, l) = (self.p, self.l);
        let (start, bl) = (self.block_start, self.cfg.block_length);
        let abs = p + start;
        let mask = self.pass_attention.then_some(&self.attention);
        let logits = if std::mem::take(&mut self.record_next) {
            self.comp_offset = 0;
            self.model
                .cached_logits(&self.ids, CacheOp::Record, &mut self.cache, mask)?
                .narrow(1, p, l)?
        } else {
            let (input, op) = match self.cfg.kv_cache {
                KvCacheMode::Dual => (self.ids.narrow(1, abs, bl)?, CacheOp::Dual { start: abs }),
                _ => (self.ids.narrow(1, abs, p + l - abs)?, CacheOp::Prefix { start: abs }),
            };
            self.comp_offset = start;
            self.model.cached_logits(&input, op, &mut self.cache, mask)?
        };
        self.step += 1;
        Ok(logits.to_dtype(DType::F32)?)
    }

    /// One model evaluation: the (guided) logits of the completion, `[B, L, V]`.
    fn completion_logits(&mut self) -> Result<Tensor> {
        if self.cfg.kv_cache != KvCacheMode::None {
            return self.cached_completion_logits();
        }
        let mask = self.pass_attention.then_some(&self.attention);
        let logits = match self.cfg.guidance_weight() {
            None => self.model.logits(&self.ids, mask)?.narrow(1, self.p, self.l)?,
            Some(w) => {
                let b = self.b();
                let blank = Tensor::full(self.mask_id, (b, self.p), &self.device)?;
                let uncond =
                    if self.p == 0 { self.ids.clone() } else { put_columns(&self.ids, &blank, 0)? };
                let both = Tensor::cat(&[&self.ids, &uncond], 0)?;
                let both_mask = match mask {
                    Some(m) => Some(Tensor::cat(&[m, m], 0)?),
                    None => None,
                };
                let out =
                    self.model.logits(&both, both_mask.as_ref())?.narrow(1, self.p, self.l)?;
                guide(&out.narrow(0, 0, b)?, &out.narrow(0, b, b)?, w)?
            }
        };
        self.step += 1;
        Ok(logits.to_dtype(DType::F32)?)
    }

    /// `[B, L]` u8: completion positions still masked in rows not frozen.
    fn open_positions(&self) -> Result<Tensor> {
        let masked = self.ids.narrow(1, self.p, self.l)?.eq(self.mask_id)?;
        let active = self.frozen.eq(0u8)?.unsqueeze(1)?.broadcast_as(masked.shape())?;
        Ok((masked * active)?)
    }

    fn run(mut self) -> Result<Trajectory> {
        let bl = self.cfg.block_length;
        let spb = self.cfg.steps_per_block();
        'blocks: for block in 0..self.cfg.blocks() {
            let start = block * bl;
            self.block_start = start;
            self.record_next = true;
            // Fast-dLLM's Dream: the block's recording pass commits its first position.
            let first =
                self.cfg.kv_cache != KvCacheMode::None && self.model.cache_commits_block_start();
            if first {
                self.block_start_step(start)?;
                if self.all_frozen {
                    break 'blocks;
                }
            }
            match self.cfg.position {
                PositionRule::Threshold { tau } => {
                    for _ in 0..bl {
                        let remaining = self.threshold_step(start, tau)?;
                        if self.all_frozen {
                            break 'blocks;
                        }
                        if remaining == 0 {
                            break;
                        }
                    }
                }
                PositionRule::DreamThreshold { tau } => {
                    // Per row, as Dream's batch-1 loop: the step budget, the declined positions
                    // carried to the next step, and the step count, which grows by one when the
                    // last step declines any.
                    let b = self.b();
                    let (mut per, mut left, mut steps) =
                        (vec![bl / spb; b], vec![0; b], vec![spb; b]);
                    let mut i = 0;
                    while (0..b).any(|r| i < steps[r]) {
                        let budget: Vec<u32> = (0..b)
                            .map(|r| if i < steps[r] { (per[r] + left[r]) as u32 } else { 0 })
                            .collect();
                        let kept = self.capped_threshold_step(start, &budget, tau)?;
                        for r in 0..b {
                            if i >= steps[r] {
                                continue;
                            }
                            left[r] = (budget[r] - kept[r]) as usize;
                            if left[r] > 0 && i + 1 == steps[r] {
                                per[r] = 0;
                                steps[r] += 1;
                            }
                        }
                        i += 1;
                        if self.all_frozen {
                            break 'blocks;
                        }
                    }
                }
                _ => {
                    // Every quota step commits exactly its count in each active row, so the
                    // positions still masked are known on the host.
                    // After a committed block start, steps 1.. of the schedule share the
                    // block's other positions (Fast-dLLM's Dream loop starts at `i = 1`).
                    let skip = usize::from(first);
                    let quota = num_transfer_tokens(bl - skip, spb - skip);
                    let mut masked = bl - skip;
                    for s in skip..spb {
                        let n = match self.cfg.schedule {
                            TransferSchedule::Llada => quota[s - skip],
                            TransferSchedule::Dream { eps } => {
                                dream_transfer_count(masked, s, spb, eps)
                            }
                        };
                        self.quota_step(block, s, start, n, spb)?;
                        masked -= n;
                        if self.all_frozen {
                            break 'blocks;
                        }
                    }
                }
            }
        }
        self.finish()
    }

    /// The recording pass of a block under Fast-dLLM's Dream block decoding
    /// (`generation_utils_block.py`: `x[:, block_start] = x0[:, block_start]`): the proposal's
    /// token at the block's first position is committed in every active row, before any rule.
    fn block_start_step(&mut self, start: usize) -> Result<()> {
        let bl = self.cfg.block_length;
        let comp = self.completion_logits()?;
        let eligible = self.open_positions()?.narrow(1, start, bl)?;
        let (x0, stats) = self.propose_block(&comp, start)?;
        let first: Vec<u8> = (0..bl).map(|i| u8::from(i == 0)).collect();
        let first = Tensor::from_vec(first, (1, bl), &self.device)?;
        let commit = eligible.broadcast_mul(&first)?;
        self.commit(&commit, &x0, &stats.log_p_x0, start)?;
        self.sync(Vec::new())?;
        Ok(())
    }

    /// Proposal and statistics over columns `start..start + bl` of the completion. The proposal
    /// never picks the mask id; the statistics (`log p(x0)`, confidence) are those of the
    /// model's own distribution, as in LLaDA's `generate`.
    fn propose_block(
        &self,
        comp: &Tensor,
        start: usize,
    ) -> Result<(Tensor, super::confidence::TokenStats)> {
        let bl = self.cfg.block_length;
        let blk = comp.narrow(1, start - self.comp_offset, bl)?.contiguous()?;
        let noise = if self.cfg.proposal.temperature > 0.0 {
            let mut u = self.uniforms("dllm/gumbel", bl * self.vocab, DType::F64)?;
            if let Some((keep, fixed)) = &self.greedy_uniforms {
                u = u.broadcast_mul(keep)?.broadcast_add(fixed)?;
            }
            Some(u.reshape((self.b(), bl, self.vocab))?)
        } else {
            None
        };
        let allowed = blk.broadcast_add(&self.forbid_mask.to_dtype(blk.dtype())?)?;
        let x0 = propose(&allowed, &self.cfg.proposal, noise.as_ref())?;
        let stats = token_stats(&blk, &x0)?;
        Ok((x0, stats))
    }

    fn quota_step(
        &mut self,
        block: usize,
        s: usize,
        start: usize,
        n: usize,
        spb: usize,
    ) -> Result<()> {
        let bl = self.cfg.block_length;
        let comp = self.completion_logits()?;
        let open = self.open_positions()?;
        let eligible = open.narrow(1, start, bl)?;
        let (x0, stats) = self.propose_block(&comp, start)?;
        let count = (self.frozen.eq(0u8)?.to_dtype(DType::U32)? * n as f64)?;
        let mut checks = Vec::new();
        let commit = match (self.policy, self.cfg.position) {
            (Some(policy), _) => {
                let features = self.features(&comp, &open, start)?;
                let uniforms = self.uniforms("dllm/order", self.l, DType::F32)?;
                let input = OrderInput { features: &features, count: &count, uniforms: &uniforms };
                let decision = policy.choose(&input)?;
                let full_eligible = features.eligible()?;
                let commit = decision.commit.ne(0u8)?;
                let outside = row_counts(&(&commit * full_eligible.eq(0u8)?)?)?;
                let wrong_count = row_counts(&commit)?.ne(&count)?.to_dtype(DType::U32)?;
                checks.push((outside + wrong_count)?.sum_keepdim(0)?);
                self.order_lp.push(decision.log_prob.to_dtype(DType::F32)?);
                commit.narrow(1, start, bl)?
            }
            (None, PositionRule::Origin { eps }) => {
                let u = self.uniforms("dllm/origin", bl, DType::F32)?;
                origin_mask(&eligible, &u, origin_probability(s, spb, eps))?
            }
            (None, rule) => {
                let random_u = match rule {
                    PositionRule::Random => self.uniforms("dllm/random", bl, DType::F32)?,
                    _ => stats.top1.zeros_like()?,
                };
                let conf = mask_ineligible(&rule_confidence(&rule, &stats, &random_u)?, &eligible)?;
                let scores = if self.cfg.alg_temp > 0.0 {
                    let u = self.uniforms("dllm/alg_temp", bl, DType::F32)?;
                    gumbel_perturb(&conf, &u, self.cfg.alg_temp)?
                } else {
                    conf
                };
                (top_n_mask(&scores, &count)? * &eligible)?
            }
        };
        self.commit(&commit, &x0, &stats.log_p_x0, start)?;
        let sync = self.sync(checks)?;
        if self.policy.is_some() && sync[0] != 0 {
            return Err(DecodeError::Policy {
                block,
                step: s,
                reason: format!(
                    "{} row(s) off contract: commit exactly `count[b]` positions, all masked and \
                     in the current block",
                    sync[0]
                ),
            });
        }
        Ok(())
    }

    /// One step of Dream's `confidence_threshold` with per-row budgets; returns how many
    /// positions each row committed.
    fn capped_threshold_step(
        &mut self,
        start: usize,
        budget: &[u32],
        tau: f64,
    ) -> Result<Vec<u32>> {
        let bl = self.cfg.block_length;
        let comp = self.completion_logits()?;
        let eligible = self.open_positions()?.narrow(1, start, bl)?;
        let (x0, stats) = self.propose_block(&comp, start)?;
        let conf = mask_ineligible(&stats.log_p_x0.exp()?, &eligible)?;
        let active = self.frozen.eq(0u8)?.to_dtype(DType::U32)?;
        let budget = (Tensor::from_vec(budget.to_vec(), budget.len(), &self.device)? * active)?;
        let commit = capped_threshold_mask(&conf, &eligible, &budget, tau)?;
        self.commit(&commit, &x0, &stats.log_p_x0, start)?;
        self.sync(vec![row_counts(&commit)?])
    }

    /// One threshold step; returns the number of positions of the block still open.
    fn threshold_step(&mut self, start: usize, tau: f64) -> Result<u32> {
        let bl = self.cfg.block_length;
        let comp = self.completion_logits()?;
        let eligible = self.open_positions()?.narrow(1, start, bl)?;
        let (x0, stats) = self.propose_block(&comp, start)?;
        let conf = mask_ineligible(&stats.log_p_x0.exp()?, &eligible)?;
        let any = row_counts(&eligible)?.gt(0u32)?;
        let commit = threshold_mask(&conf, &eligible, &any, tau)?;
        self.commit(&commit, &x0, &stats.log_p_x0, start)?;
        let left = row_counts(&self.open_positions()?.narrow(1, start, bl)?)?.max_keepdim(0)?;
        let sync = self.sync(vec![left])?;
        Ok(sync[0])
    }

    /// The policy's features over the whole completion.
    fn features(&self, comp: &Tensor, open: &Tensor, start: usize) -> Result<OrderFeatures> {
        let (b, l, bl) = (self.b(), self.l, self.cfg.block_length);
        let stats = token_stats(comp, &comp.argmax(D::Minus1)?)?;
        let rel = (Tensor::arange(0u32, l as u32, &self.device)?.to_dtype(DType::F32)? / l as f64)?;
        let cols = Tensor::arange(0u32, l as u32, &self.device)?;
        let in_block = cols.ge(start as u32)?.mul(&cols.lt((start + bl) as u32)?)?;
        Ok(OrderFeatures {
            top1_prob: stats.top1,
            margin: stats.margin,
            neg_entropy: stats.neg_entropy,
            rel_position: rel.unsqueeze(0)?.broadcast_as((b, l))?.contiguous()?,
            in_block: in_block
                .to_dtype(DType::F32)?
                .unsqueeze(0)?
                .broadcast_as((b, l))?
                .contiguous()?,
            masked: open.to_dtype(DType::F32)?,
            log_probs: drift_core::ops::log_softmax_last_dim(&comp.to_dtype(DType::F32)?)?,
        })
    }

    /// Writes `x0` at the block positions in `commit` (`[B, bl]` u8) and records the step.
    fn commit(
        &mut self,
        commit: &Tensor,
        x0: &Tensor,
        log_p_x0: &Tensor,
        start: usize,
    ) -> Result<()> {
        let bl = self.cfg.block_length;
        let col = self.p + start;
        let old = self.ids.narrow(1, col, bl)?;
        self.ids =
            put_columns(&self.ids, &commit.where_cond(&x0.to_dtype(DType::U32)?, &old)?, col)?;
        let step = Tensor::full((self.step - 1) as i64, commit.shape(), &self.device)?;
        let old = self.steps_rec.narrow(1, start, bl)?;
        self.steps_rec = put_columns(&self.steps_rec, &commit.where_cond(&step, &old)?, start)?;
        let old = self.logp_rec.narrow(1, start, bl)?;
        let lp = log_p_x0.to_dtype(DType::F32)?;
        self.logp_rec = put_columns(&self.logp_rec, &commit.where_cond(&lp, &old)?, start)?;
        Ok(())
    }

    /// `[B, L]` u8: completion tokens that are stop tokens.
    fn stops(&self) -> Result<Tensor> {
        let comp = self.ids.narrow(1, self.p, self.l)?;
        let mut is_stop = comp.zeros_like()?.to_dtype(DType::U8)?;
        for &t in &self.cfg.stop_tokens {
            is_stop = is_stop.maximum(&comp.eq(t)?)?;
        }
        Ok(is_stop)
    }

    /// Updates the frozen rows (under early stop) and reads `extra` scalars and the
    /// all-frozen flag back in one host copy; returns the `extra` values.
    fn sync(&mut self, mut extra: Vec<Tensor>) -> Result<Vec<u32>> {
        let early = self.cfg.early_stop && !self.cfg.stop_tokens.is_empty();
        if early {
            let masked = self.ids.narrow(1, self.p, self.l)?.eq(self.mask_id)?;
            let settled_before = exclusive_count(&masked)?.eq(0f64)?;
            let stop_now = row_counts(&(self.stops()? * settled_before)?)?.gt(0u32)?;
            self.frozen = self.frozen.maximum(&stop_now)?;
            extra.push(self.frozen.to_dtype(DType::U32)?.min_keepdim(0)?);
        }
        if extra.is_empty() {
            return Ok(Vec::new());
        }
        let mut v = Tensor::cat(&extra, 0)?.to_vec1::<u32>()?;
        if early {
            self.all_frozen = v.pop() == Some(1);
        }
        Ok(v)
    }

    fn finish(self) -> Result<Trajectory> {
        let (b, p) = (self.b(), self.p);
        let is_stop = self.stops()?;
        let before = exclusive_count(&is_stop)?;
        let in_completion = before.eq(0f64)?;
        let first_stop = (&is_stop * &in_completion)?;
        // The row's first stop token (0 if none) fills positions never decoded.
        let comp = self.ids.narrow(1, p, self.l)?;
        let fill = (comp.to_dtype(DType::F32)? * first_stop.to_dtype(DType::F32)?)?
            .sum_keepdim(1)?
            .to_dtype(DType::U32)?
            .broadcast_as(comp.shape())?
            .contiguous()?;
        let undecoded = comp.eq(self.mask_id)?;
        let comp = undecoded.where_cond(&fill, &comp)?;
        let tokens = put_columns(&self.ids, &comp, p)?;
        let prompt_steps = Tensor::full(PROMPT_STEP, (b, p), &self.device)?;
        let zeros = Tensor::zeros((b, p), DType::F32, &self.device)?;
        let order_log_probs = match self.policy {
            Some(_) if !self.order_lp.is_empty() => Some(Tensor::stack(&self.order_lp, 1)?),
            Some(_) => Some(Tensor::zeros((b, 0), DType::F32, &self.device)?),
            None => None,
        };
        Ok(Trajectory {
            tokens,
            prompt_len: p,
            attention_mask: self.attention,
            commit_step: prepend(&prompt_steps, &self.steps_rec)?,
            token_log_prob: prepend(&zeros, &self.logp_rec)?,
            completion_mask: prepend(&zeros, &in_completion.to_dtype(DType::F32)?)?,
            evaluations: self.step,
            order_log_probs,
            rows: self.rows,
        })
    }
}
