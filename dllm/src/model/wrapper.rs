//! [`DiffusionLm`]: one type for both architectures, implementing
//! [`MaskPredictor`] with Dream's logit shift inside.

use std::collections::HashMap;

use candle_core::{DType, Device, Tensor};
use candle_nn::VarMap;
use drift_core::nn::LoraAdapter;
use drift_core::rng::RngKey;
use drift_samplers::MaskPredictor;

use super::config::{Architecture, ModelConfig};
use super::dream::DreamModel;
use super::llada::LladaModel;
use super::lora::{is_adapter_tensor, LoraConfig};
use super::weights::{build_with, Source, WeightBackend};
use crate::error::{DllmError, Result};
use crate::tokenizer::Tokenizer;

/// The network of either architecture.
#[derive(Debug, Clone)]
pub enum Network {
    /// LLaDA.
    Llada(LladaModel),
    /// Dream / DiffuCoder.
    Dream(DreamModel),
}

impl Network {
    /// Builds the network `cfg` describes from `vb`, with LoRA adapters where `lora` says.
    pub fn new(
        cfg: &ModelConfig,
        vb: &candle_nn::VarBuilder,
        lora: Option<&LoraConfig>,
    ) -> Result<Self> {
        Ok(match cfg {
            ModelConfig::Llada(c) => Network::Llada(LladaModel::new(c, vb, lora)?),
            ModelConfig::Dream(c) => Network::Dream(DreamModel::new(c, vb, lora)?),
        })
    }

    /// Raw logits `[B, T, V]` (f32) as the architecture's own code returns them.
    pub fn forward(&self, ids: &Tensor, mask: Option<&Tensor>) -> Result<Tensor> {
        match self {
            Network::Llada(m) => m.forward(ids, mask),
            Network::Dream(m) => m.forward(ids, mask),
        }
    }
}

/// How to materialise weights: dtype, device, and trainable (`Var`s in a `VarMap`) or frozen
/// (plain tensors, which never get gradients: reference models, rollout-only copies).
#[derive(Debug, Clone)]
pub struct LoadOptions {
    /// Weight dtype (default f32; bf16/f16 are meant for CUDA; logits are always f32).
    pub dtype: DType,
    /// Device for the weights.
    pub device: Device,
    /// Whether weights become `Var`s in a `VarMap` (default false). With `lora`, only the
    /// adapters' tensors do and the base stays frozen.
    pub trainable: bool,
    /// LoRA adapters on the block projections ([`LoraConfig`]); default none.
    pub lora: Option<LoraConfig>,
    /// The key fresh adapter tensors absent from the source are drawn under (`A` from
    /// `key.stream(name)`; `B` is zero). Default `RngKey::new(0)`.
    pub adapter_key: RngKey,
}

impl Default for LoadOptions {
    fn default() -> Self {
        Self {
            dtype: DType::F32,
            device: Device::Cpu,
            trainable: false,
            lora: None,
            adapter_key: RngKey::new(0),
        }
    }
}

impl LoadOptions {
    /// Frozen f32 weights on the CPU.
    pub fn frozen() -> Self {
        Self::default()
    }
    /// Trainable f32 weights on the CPU.
    pub fn trainable() -> Self {
        Self { trainable: true, ..Self::default() }
    }
}

/// A masked diffusion LM of either architecture, its weights, config and (optional) tokenizer.
///
/// `logits` follows the [`MaskPredictor`] convention: `logits[b, i]` scores the token at `i`.
/// For Dream (AR-initialised, arXiv 2508.15487) the raw output is shifted right by one:
/// `shifted[:, 0] = raw[:, 0]`, `shifted[:, i] = raw[:, i−1]` (Dream's `generation_utils.py`).
#[derive(Clone)]
pub struct DiffusionLm {
    net: Network,
    config: ModelConfig,
    weights: Vec<(String, Tensor)>,
    varmap: Option<VarMap>,
    tokenizer: Option<Tokenizer>,
    lora: Option<LoraConfig>,
    dtype: DType,
    device: Device,
    bf16_matmuls: bool,
}

impl DiffusionLm {
    /// Builds the model for `config` from `source`, as `opts` says.
    pub(crate) fn build(config: ModelConfig, source: Source, opts: &LoadOptions) -> Result<Self> {
        config.validate()?;
        if let Some(l) = &opts.lora {
            l.validate()?;
        }
        let varmap = opts.trainable.then(VarMap::new);
        let adapters = opts.lora.as_ref().map(|_| opts.adapter_key);
        let (backend, record) = WeightBackend::new(source, varmap.clone(), adapters);
        let lora = opts.lora.as_ref();
        let (net, weights) = build_with(backend, record, opts.dtype, &opts.device, |vb| {
            Network::new(&config, vb, lora)
        })?;
        if let Some(l) = lora {
            if !weights.iter().any(|(n, _)| is_adapter_tensor(n)) {
                return Err(DllmError::Config {
                    key: "lora.target_modules",
                    value: format!("{:?}", l.target_modules),
                    expected: "names that match at least one block projection".into(),
                });
            }
        }
        Ok(Self {
            net,
            config,
            weights,
            varmap,
            tokenizer: None,
            lora: opts.lora.clone(),
            dtype: opts.dtype,
            device: opts.device.clone(),
            bf16_matmuls: false,
        })
    }

    /// A freshly initialised model (linear and embedding weights `N(0, 0.02²)`, norm gains 1,
    /// biases 0), every tensor drawn under `key.stream(tensor name)`: reproducible from the key.
    pub fn init(
        config: ModelConfig,
        key: drift_core::rng::RngKey,
        opts: &LoadOptions,
    ) -> Result<Self> {
        Self::build(config, Source::Init(key), opts)
    }

    fn frozen_options(&self) -> LoadOptions {
        LoadOptions {
            dtype: self.dtype,
            device: self.device.clone(),
            lora: self.lora.clone(),
            ..LoadOptions::default()
        }
    }

    /// A frozen model with every LoRA adapter folded into its layer's weight
    /// (`W + (α/r) B A`) and no adapters: the same map up to rounding, at the base's cost per
    /// forward (rollouts, evaluation, saving). Without adapters, a frozen copy.
    pub fn merged(&self) -> Result<Self> {
        let Some(lora) = &self.lora else { return self.frozen_copy() };
        let map = merged_weights(&self.weights, lora.scale())?;
        let opts = LoadOptions { lora: None, ..self.frozen_options() };
        let mut merged = Self::build(self.config.clone(), Source::Tensors(map), &opts)?;
        merged.tokenizer = self.tokenizer.clone();
        Ok(merged)
    }

    /// A frozen copy whose linear layers compute `x Wᵀ` in bf16 on AMX tiles
    /// ([`drift_core::nn::amx`]: both factors rounded to bf16, products summed in f32; the
    /// precision of PyTorch's and Fast-dLLM's `bfloat16` inference), every other op in the
    /// model's own dtype: for decoding and evaluation on a CPU that has AMX. LoRA adapters are
    /// folded in first. The copy does not follow later updates of this model's weights and
    /// cannot be trained. Errors name the missing CPU feature.
    pub fn with_bf16_matmuls(&self) -> Result<Self> {
        let mut fast = self.merged()?;
        match &mut fast.net {
            Network::Llada(m) => m.use_bf16_matmuls()?,
            Network::Dream(m) => m.use_bf16_matmuls()?,
        }
        fast.bf16_matmuls = true;
        Ok(fast)
    }

    /// Whether the linear layers run in bf16 on AMX tiles ([`with_bf16_matmuls`](Self::with_bf16_matmuls)).
    pub fn bf16_matmuls(&self) -> bool {
        self.bf16_matmuls
    }

    /// The LoRA configuration of the adapters, if the model has any.
    pub fn lora(&self) -> Option<&LoraConfig> {
        self.lora.as_ref()
    }

    /// The same model with `tokenizer` attached.
    #[must_use]
    pub fn with_tokenizer(mut self, tokenizer: Tokenizer) -> Self {
        self.tokenizer = Some(tokenizer);
        self
    }

    /// A frozen view over the same storage: no `Var`s, so its forward records no graph and
    /// uses the fused kernels, yet it sees every in-place optimizer update of the original
    /// (`Tensor::detach` shares storage, docs/architecture.md §6).
    pub fn detached(&self) -> Result<Self> {
        let map: HashMap<String, Tensor> =
            self.weights.iter().map(|(n, t)| (n.clone(), t.detach())).collect();
        let opts = self.frozen_options();
        let mut view = Self::build(self.config.clone(), Source::Tensors(map), &opts)?;
        view.tokenizer = self.tokenizer.clone();
        Ok(view)
    }

    /// A frozen copy with its own storage: a snapshot of the current weights that later
    /// optimizer updates do not reach (a refreshed RL reference policy).
    pub fn frozen_copy(&self) -> Result<Self> {
        let map = self
            .weights
            .iter()
            .map(|(n, t)| Ok((n.clone(), t.detach().copy()?)))
            .collect::<Result<HashMap<String, Tensor>>>()?;
        let opts = self.frozen_options();
        let mut copy = Self::build(self.config.clone(), Source::Tensors(map), &opts)?;
        copy.tokenizer = self.tokenizer.clone();
        Ok(copy)
    }

    /// A frozen model of this architecture, configuration and tokenizer with the given weights
    /// (a reference policy restored from a checkpoint); errors name a missing weight.
    /// Weights without adapter tensors (a [`merged`](Self::merged) model's) build a model
    /// without adapters.
    pub fn frozen_with_weights(&self, weights: HashMap<String, Tensor>) -> Result<Self> {
        let mut opts = self.frozen_options();
        if !weights.keys().any(|n| is_adapter_tensor(n)) {
            opts.lora = None;
        }
        let mut copy = Self::build(self.config.clone(), Source::Tensors(weights), &opts)?;
        copy.tokenizer = self.tokenizer.clone();
        Ok(copy)
    }

    /// Raw logits `[B, T, V]` (f32) exactly as the architecture's reference code returns them
    /// (for Dream: unshifted).
    pub fn raw_logits(&self, ids: &Tensor, attention_mask: Option<&Tensor>) -> Result<Tensor> {
        self.check_ids(ids)?;
        self.net.forward(ids, attention_mask)
    }

    /// Logits `[B, T, V]` (f32) where position `i` scores the token at `i` (Dream's shift
    /// applied), with an optional `[B, T]` padding mask (non-zero = real token).
    pub fn position_logits(&self, ids: &Tensor, attention_mask: Option<&Tensor>) -> Result<Tensor> {
        let raw = self.raw_logits(ids, attention_mask)?;
        match self.config.architecture() {
            Architecture::Llada => Ok(raw),
            Architecture::Dream => shift_logits(&raw),
        }
    }

    fn check_ids(&self, ids: &Tensor) -> Result<()> {
        let ok_dtype = matches!(ids.dtype(), DType::U32 | DType::I64 | DType::U8);
        if ids.rank() != 2 || !ok_dtype {
            return Err(DllmError::Input {
                name: "ids",
                got: format!("{:?} {:?}", ids.dtype(), ids.dims()),
                expected: "an integer (u32/i64) tensor [B, T]".into(),
            });
        }
        Ok(())
    }

    /// The parsed config.
    pub fn config(&self) -> &ModelConfig {
        &self.config
    }
    /// The network.
    pub fn network(&self) -> &Network {
        &self.net
    }
    /// The attached tokenizer, if any.
    pub fn tokenizer(&self) -> Option<&Tokenizer> {
        self.tokenizer.as_ref()
    }
    /// The `VarMap` holding the trainable weights (`None` when frozen).
    pub fn varmap(&self) -> Option<&VarMap> {
        self.varmap.as_ref()
    }
    /// Every weight tensor by checkpoint name, in the order the model requested them.
    pub fn weights(&self) -> &[(String, Tensor)] {
        &self.weights
    }
    /// Total number of scalar parameters.
    pub fn num_parameters(&self) -> usize {
        self.weights.iter().map(|(_, t)| t.elem_count()).sum()
    }
    /// Weight dtype.
    pub fn dtype(&self) -> DType {
        self.dtype
    }
    /// Weight device.
    pub fn device(&self) -> &Device {
        &self.device
    }
}

impl std::fmt::Debug for DiffusionLm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DiffusionLm")
            .field("architecture", &self.config.architecture())
            .field("parameters", &self.num_parameters())
            .field("trainable", &self.varmap.is_some())
            .field("lora", &self.lora)
            .field("dtype", &self.dtype)
            .field("device", &self.device)
            .finish_non_exhaustive()
    }
}

/// The base weights with each adapter folded in: `W + scale · B A` under the base name, for
/// every `{layer}.weight` that has `{layer}.lora_A.weight` and `{layer}.lora_B.weight`;
/// adapter tensors are dropped and every tensor is detached.
pub(crate) fn merged_weights(
    weights: &[(String, Tensor)],
    scale: f64,
) -> Result<HashMap<String, Tensor>> {
    let all: HashMap<&str, &Tensor> = weights.iter().map(|(n, t)| (n.as_str(), t)).collect();
    let mut out = HashMap::new();
    for (name, t) in weights {
        if is_adapter_tensor(name) {
            continue;
        }
        let layer = name.strip_suffix(".weight");
        let pair = layer.and_then(|l| {
            Some((
                all.get(format!("{l}.lora_A.weight").as_str())?,
                all.get(format!("{l}.lora_B.weight").as_str())?,
            ))
        });
        let value = match pair {
            Some((a, b)) => {
                let delta =
                    LoraAdapter::new((*a).clone(), (*b).clone(), scale).delta_weight(t.dtype())?;
                (t.detach() + delta)?
            }
            None => t.detach(),
        };
        out.insert(name.clone(), value);
    }
    Ok(out)
}

/// Dream's shift from "raw `i` predicts `i+1`" to "logits `i` score token `i`":
/// `shifted = cat(raw[:, :1], raw[:, :T−1])` along the sequence axis.
pub fn shift_logits(raw: &Tensor) -> Result<Tensor> {
    let t = raw.dim(1)?;
    if t <= 1 {
        return Ok(raw.clone());
    }
    Ok(Tensor::cat(&[raw.narrow(1, 0, 1)?, raw.narrow(1, 0, t - 1)?], 1)?)
}

impl MaskPredictor for DiffusionLm {
    fn logits(&self, ids: &Tensor, attention_mask: Option<&Tensor>) -> candle_core::Result<Tensor> {
        self.position_logits(ids, attention_mask).map_err(DllmError::into_candle)
    }
    fn mask_id(&self) -> u32 {
        self.config.mask_id()
    }
    fn vocab_size(&self) -> usize {
        self.config.logit_width()
    }
    /// Both architectures have Fast-dLLM's prefix and dual caches.
    fn supports_kv_cache(&self) -> bool {
        true
    }
    /// Dream: Fast-dLLM's block decoding (`dream/model/generation_utils_block.py`) commits
    /// each block's first position at the block's recording step.
    fn cache_commits_block_start(&self) -> bool {
        matches!(self.net, Network::Dream(_))
    }
    fn cached_logits(
        &self,
        ids: &Tensor,
        op: drift_samplers::dllm::CacheOp,
        cache: &mut drift_samplers::dllm::KvCache,
        attention_mask: Option<&Tensor>,
    ) -> candle_core::Result<Tensor> {
        match &self.net {
            Network::Llada(m) => {
                m.forward_cached(ids, op, cache, attention_mask).map_err(DllmError::into_candle)
            }
            // Fast-dLLM's Dream shifts the logits of the positions it ran, whatever the op:
            // `cat(raw[:, :1], raw[:, :-1])`, so a cached pass's first position scores itself
            // with its own raw logits (its block's first position, committed at the recording
            // step, so no choice reads it).
            Network::Dream(m) => m
                .forward_cached(ids, op, cache, attention_mask)
                .and_then(|raw| shift_logits(&raw))
                .map_err(DllmError::into_candle),
        }
    }
}
