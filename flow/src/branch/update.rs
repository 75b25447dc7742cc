//! One BranchGRPO update: every kept edge `parent → child` of the tree is one action, trained
//! with Flow-GRPO's per-transition PPO-clip loss and Gaussian-mean KL (the same core loss),
//! its advantage the child's depth-wise one; accumulated over micro-batches of edges, then one
//! optimizer step.

use candle_core::{Device, Tensor};
use drift_core::loss::{
    gaussian_mean_kl, policy_loss, LossDiagnostics, PolicyInputs, PolicyLoss, Reference,
};
use drift_core::train::{Accumulator, Optimizer, StepReport};
use drift_samplers::flow::{gaussian_log_prob, transition_log_prob, Guidance, Schedule};

use super::rollout::TreeBatch;
use crate::error::Result;
use crate::grpo::config::KlStd;
use crate::grpo::update::{UpdateCost, UpdateReport};
use crate::grpo::FlowGrpoConfig;
use crate::policy::FlowPolicy;

fn index(rows: impl Iterator<Item = usize>, dev: &Device) -> Result<Tensor> {
    let v: Vec<u32> = rows.map(|r| r as u32).collect();
    let n = v.len();
    Ok(Tensor::from_vec(v, n, dev)?)
}

/// The policy loss of edges `chunk` of `batch` (one micro-batch), and the model calls it made.
/// Edges of one step are scored in one model call per model.
fn micro_batch<M: FlowPolicy>(
    policy: &M,
    reference: &M,
    batch: &TreeBatch<impl Sized>,
    chunk: &[usize],
    cfg: &FlowGrpoConfig,
    schedule: &Schedule,
) -> Result<(PolicyLoss, usize)> {
    let dev = policy.device();
    let (tree, e) = (&batch.tree, &batch.edges);
    let (mut lp_new, mut lp_old, mut kl, mut calls) = (Vec::new(), Vec::new(), Vec::new(), 0);
    let mut start = 0;
    while start < chunk.len() {
        // The run of edges at one step (edges are stored step by step).
        let i = e.steps[chunk[start]];
        let end = start + chunk[start..].iter().take_while(|&&k| e.steps[k] == i).count();
        let children: Vec<usize> = chunk[start..end].iter().map(|&k| e.children[k]).collect();
        start = end;
        let child_idx = index(children.iter().copied(), dev)?;
        let parent_idx = index(children.iter().map(|&c| tree.parents[i][c]), dev)?;
        let root_idx = index(children.iter().map(|&c| tree.trees[i + 1][c]), dev)?;
        let x = tree.latents[i].index_select(&parent_idx, 0)?;
        let next = tree.latents[i + 1].index_select(&child_idx, 0)?;
        let cond = batch.cond.index_select(&root_idx, 0)?;
        let null = policy.null_cond(children.len())?;
        let guide = Guidance { uncond: &null, scale: cfg.guidance };
        let guidance = (cfg.guidance != 1.0).then_some(&guide);
        let (kind, reduce) = (cfg.rollout.step, cfg.rollout.log_prob);
        let score = |model: &M| {
            transition_log_prob(model, &x, &next, i, schedule, kind, &cond, guidance, reduce)
        };
        let t = score(policy)?;
        calls += 1;
        // A split step with a scaled noise drew (and scored) its children under `s·std`.
        let scaled = cfg.branch.as_ref().is_some_and(|b| b.tree.split_noise != 1.0);
        let lp = if tree.split[i] && scaled {
            gaussian_log_prob(&next, &t.mean, tree.std[i], reduce)?
        } else {
            t.log_prob.clone()
        };
        lp_new.push(lp);
        lp_old.push(tree.log_probs[i].index_select(&child_idx, 0)?);
        if cfg.loss.kl.is_some() {
            let r = score(reference)?;
            calls += 1;
            let std = match cfg.kl_std {
                KlStd::SigmaT => t.sigma_t,
                KlStd::Transition => tree.std[i],
            };
            let std = Tensor::new(std as f32, dev)?;
            kl.push(gaussian_mean_kl(&t.mean, &r.mean.detach(), &std)?);
        }
    }
    let lp_new = Tensor::cat(&lp_new, 0)?.unsqueeze(1)?;
    let lp_old = Tensor::cat(&lp_old, 0)?.unsqueeze(1)?;
    let kl = if kl.is_empty() { None } else { Some(Tensor::cat(&kl, 0)?.unsqueeze(1)?) };
    let adv: Vec<f32> = chunk.iter().map(|&k| batch.advantages_host[k]).collect();
    let adv = Tensor::from_vec(adv, chunk.len(), dev)?;
    let mask = lp_new.ones_like()?;
    let inputs = PolicyInputs {
        lp_new: &lp_new,
        lp_old: &lp_old,
        mask: &mask,
        advantages: &adv,
        reference: kl.as_ref().map(Reference::Kl),
    };
    let per_call = if cfg.guidance != 1.0 { 2 } else { 1 };
    Ok((policy_loss(&cfg.loss, &inputs)?, calls * per_call))
}

/// Trains on edges `edges` of `batch` (indices into `batch.edges`): micro-batches of
/// `micro_batch × (trained steps)` edges (the actions of `micro_batch` Flow-GRPO samples),
/// each weighted by its share of the edges, then one optimizer step. Edges with a zero
/// advantage (when masked) are skipped before any forward pass.
pub fn update_edges<M: FlowPolicy>(
    policy: &M,
    reference: &M,
    batch: &TreeBatch<impl Sized>,
    edges: &[usize],
    cfg: &FlowGrpoConfig,
    schedule: &Schedule,
    opt: &mut Optimizer,
) -> Result<UpdateReport> {
    let edges: Vec<usize> = edges
        .iter()
        .copied()
        .filter(|&k| !cfg.mask_zero_advantage || batch.advantages_host[k] != 0.0)
        .collect();
    if edges.is_empty() {
        // Nothing to learn from: no optimizer step, reported as not applied.
        let lr = opt.config().adamw.lr * opt.config().schedule.factor(opt.step_count());
        let step = StepReport { applied: false, skipped: None, grad_norm: 0.0, lr };
        return Ok(UpdateReport {
            step,
            diagnostics: LossDiagnostics::default(),
            cost: UpdateCost::default(),
        });
    }
    let steps = crate::grpo::update::trained_transitions(cfg, &batch.tree.stochastic).len();
    let per_chunk = cfg.micro_batch * steps.max(1);
    let mut acc = Accumulator::new();
    let mut forward_calls = 0;
    for chunk in edges.chunks(per_chunk) {
        let (out, calls) = micro_batch(policy, reference, batch, chunk, cfg, schedule)?;
        forward_calls += calls;
        acc.add(&out, chunk.len() as f64 / edges.len() as f64, opt.params())?;
    }
    let models = if cfg.loss.kl.is_some() { 2 } else { 1 };
    let per_call = if cfg.guidance != 1.0 { 2 } else { 1 };
    let image_evaluations = edges.len() * models * per_call;
    Ok(acc.step(opt, UpdateCost { forward_calls, image_evaluations })?)
}
