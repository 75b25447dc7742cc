//! BranchGRPO through the Flow-GRPO trainer on the tiny random DiT and the brightness toy task
//! of the Flow-GRPO tests.

use candle_core::Device;
use drift_core::rng::RngKey;
use drift_core::train::{Optimizer, ParamSet};
use drift_samplers::flow::{rollout_tree, RolloutConfig, Schedule, TreeConfig, Window};

use super::*;
use crate::grpo::tests::{random_base, toy_config, Brightness, Darkness, ToyTask};
use crate::grpo::{sample_batch, train_flow_grpo, update, EvalReport, FlowGrpoConfig, ImageReward};

/// `toy_config` with a tree of one child per split at steps 0 and 1 and `G` roots per
/// prompt: the tree counterpart of Flow-GRPO's `G` independent samples.
fn one_child_trees(base: &std::path::Path) -> (FlowGrpoConfig, FlowGrpoConfig) {
    // One model call over the whole batch, as the tree makes: equal to the last bit.
    let flat = FlowGrpoConfig { micro_batch: 8, ..toy_config(base) };
    let tree = TreeConfig { split_steps: vec![0, 1], branching: 1, split_noise: 1.0 };
    let branch =
        BranchConfig { tree, roots_per_prompt: flat.group_size, ..BranchConfig::default() };
    let with_tree = FlowGrpoConfig { branch: Some(branch), ..flat.clone() };
    (flat, with_tree)
}

fn max_abs_diff(a: &candle_core::Tensor, b: &candle_core::Tensor) -> f32 {
    (a - b).unwrap().abs().unwrap().max_all().unwrap().to_scalar::<f32>().unwrap()
}

#[test]
fn one_child_per_split_and_no_pruning_is_exactly_flow_grpo() {
    let dir = tempfile::tempdir().unwrap();
    random_base(dir.path());
    let (flat_cfg, tree_cfg) = one_child_trees(dir.path());
    tree_cfg.validate().unwrap();
    let dev = Device::Cpu;
    let schedule = Schedule::new(&flat_cfg.schedule).unwrap();
    let mut reports = Vec::new();
    let mut weights = Vec::new();
    // Flow-GRPO's batch and update, then the tree's, each from a fresh copy of the base.
    let (policy, varmap) = crate::model::load_dit_trainable(dir.path(), &dev).unwrap();
    let reference = crate::model::load_dit_frozen(dir.path(), &dev).unwrap();
    let mut opt = Optimizer::new(flat_cfg.optim, ParamSet::all(&varmap)).unwrap();
    let flat =
        sample_batch(&policy, &ToyTask::new(), &Brightness, &flat_cfg, &schedule, 0).unwrap();
    let rows: Vec<usize> = (0..flat.len()).collect();
    reports
        .push(update(&policy, &reference, &flat, &rows, &flat_cfg, &schedule, &mut opt).unwrap());
    weights.push(opt.params().snapshot().unwrap());

    let (policy, varmap) = crate::model::load_dit_trainable(dir.path(), &dev).unwrap();
    let reference = crate::model::load_dit_frozen(dir.path(), &dev).unwrap();
    let mut opt = Optimizer::new(tree_cfg.optim, ParamSet::all(&varmap)).unwrap();
    let branch = tree_cfg.branch.clone().unwrap();
    let tree =
        sample_tree_batch(&policy, &ToyTask::new(), &Brightness, &tree_cfg, &branch, &schedule, 0)
            .unwrap();
    // The same images, the same rewards, the same advantage on every edge of a sample.
    assert_eq!(max_abs_diff(tree.tree.leaves(), flat.rollout.images()), 0.0);
    assert_eq!(tree.rewards(), flat.rewards());
    assert_eq!(tree.edges.steps.len(), flat.len() * 3, "3 trained steps of every sample");
    assert_eq!(tree.kept, (0..tree.edges.steps.len()).collect::<Vec<_>>());
    for (e, &child) in tree.edges.children.iter().enumerate() {
        let want = flat.advantages_host[child];
        assert!(
            (tree.advantages_host[e] - want).abs() < 1e-5,
            "edge {e}: {} vs {want}",
            tree.advantages_host[e]
        );
        // The recorded log-prob of the edge is the flat rollout's of that sample and step.
        let i = tree.edges.steps[e];
        let lp_tree = tree.tree.log_probs[i].to_vec1::<f32>().unwrap()[child];
        let lp_flat = flat.rollout.log_probs.to_vec2::<f32>().unwrap()[child][i];
        assert_eq!(lp_tree, lp_flat, "edge {e}");
    }
    let edges = tree.kept.clone();
    reports.push(
        update_edges(&policy, &reference, &tree, &edges, &tree_cfg, &schedule, &mut opt).unwrap(),
    );
    weights.push(opt.params().snapshot().unwrap());

    let (a, b) = (&reports[0], &reports[1]);
    assert!(a.step.applied && b.step.applied);
    let rel = (a.step.grad_norm - b.step.grad_norm).abs() / a.step.grad_norm;
    assert!(
        a.step.grad_norm > 0.0 && rel < 1e-5,
        "grad norm {} vs {}",
        a.step.grad_norm,
        b.step.grad_norm
    );
    assert_eq!(a.diagnostics.actions, b.diagnostics.actions);
    assert!(
        (a.diagnostics.total_loss - b.diagnostics.total_loss).abs() < 1e-6,
        "{} vs {}",
        a.diagnostics.total_loss,
        b.diagnostics.total_loss
    );
    assert_eq!(a.cost.image_evaluations, b.cost.image_evaluations);
    for (name, w) in &weights[0] {
        let d = max_abs_diff(w, &weights[1][name]);
        assert!(d < 1e-7, "{name}: the two updates' weights differ by {d}");
    }
}

/// Counts the rows every model call evaluates.
struct Counting(std::cell::RefCell<Vec<usize>>);

impl drift_samplers::flow::VelocityField for Counting {
    type Cond = candle_core::Tensor;
    fn velocity(
        &self,
        x: &candle_core::Tensor,
        _: &candle_core::Tensor,
        _: &candle_core::Tensor,
    ) -> candle_core::Result<candle_core::Tensor> {
        self.0.borrow_mut().push(x.dim(0)?);
        x * 0.5
    }
}

#[test]
fn a_tree_of_sixteen_leaves_costs_the_analytic_model_evaluations_and_fuses_to_leaf_means() {
    let dev = Device::Cpu;
    let s =
        Schedule::new(&drift_samplers::flow::ScheduleConfig { steps: 20, ..Default::default() })
            .unwrap();
    let p = 3;
    let x = RngKey::new(1).normal((p, 2, 2, 2), candle_core::DType::F32, &dev).unwrap();
    let c = candle_core::Tensor::zeros((p, 1), candle_core::DType::F32, &dev).unwrap();
    let cfg = TreeConfig { split_steps: vec![0, 3, 6, 9], branching: 2, split_noise: 1.0 };
    let model = Counting(Default::default());
    let rows: Vec<u64> = (0..p as u64).collect();
    let t = rollout_tree(
        &model,
        &x,
        &c,
        &s,
        &RolloutConfig::default(),
        &cfg,
        None,
        RngKey::new(2),
        &rows,
    )
    .unwrap();
    assert_eq!(cfg.leaves_per_root(), 16);
    assert_eq!(t.leaves().dim(0).unwrap(), 16 * p);
    // One call per step over every live node: before step i a root has 2^(splits before i).
    let per_root: Vec<usize> =
        (0..20).map(|i| 1 << cfg.split_steps.iter().filter(|&&sp| sp < i).count()).collect();
    assert_eq!(*model.0.borrow(), per_root.iter().map(|n| n * p).collect::<Vec<_>>());
    // 1 + 3·2 + 3·4 + 3·8 + 10·16 = 203 evaluations per root (320 for 16 flat samples).
    assert_eq!(per_root.iter().sum::<usize>(), 203);
    assert_eq!(t.evaluations, 203 * p);
    // Every node's fused reward is the mean of the leaves below it, at every level.
    let leaves: Vec<f64> = (0..16 * p).map(|k| ((k * 7) % 5) as f64 / 4.0).collect();
    let fused = fuse_rewards(&t, &leaves, Fusion::Mean).unwrap();
    assert_eq!(fused.len(), 21);
    for (level, rewards) in fused.iter().enumerate() {
        for (node, &r) in rewards.iter().enumerate() {
            let below: Vec<f64> = (0..leaves.len())
                .filter(|&l| t.ancestor(l, level) == node)
                .map(|l| leaves[l])
                .collect();
            let mean = below.iter().sum::<f64>() / below.len() as f64;
            assert!((r - mean).abs() < 1e-12, "level {level} node {node}: {r} vs {mean}");
        }
    }
}

#[test]
fn mix_trains_only_the_split_edges_inside_the_sde_window_and_pruning_shrinks_the_backward_set() {
    let dir = tempfile::tempdir().unwrap();
    random_base(dir.path());
    let dev = Device::Cpu;
    let tree = TreeConfig { split_steps: vec![0, 1, 2], branching: 2, split_noise: 1.0 };
    let cfg = FlowGrpoConfig {
        group_size: 8,
        rollout: RolloutConfig {
            window: Some(Window { start: 0, len: 3 }),
            ..RolloutConfig::default()
        },
        branch: Some(BranchConfig { tree, ..BranchConfig::default() }),
        ..toy_config(dir.path())
    };
    cfg.validate().unwrap();
    let schedule = Schedule::new(&cfg.schedule).unwrap();
    let policy = crate::model::load_dit_frozen(dir.path(), &dev).unwrap();
    let branch = cfg.branch.clone().unwrap();
    let b = sample_tree_batch(&policy, &ToyTask::new(), &Brightness, &cfg, &branch, &schedule, 0)
        .unwrap();
    // Per prompt: 2 + 4 + 8 split edges; step 3 is an ODE step and not trained.
    assert_eq!(b.edges.steps.iter().filter(|&&s| s == 3).count(), 0);
    assert_eq!(b.edges.steps.len(), 2 * (2 + 4 + 8));
    // 1 + 2 + 4 + 8 live nodes per root before steps 0..3.
    assert_eq!(b.tree.evaluations, 2 * 15);
    // Width pruning ranks only the edges after the last split: Mix has none, so it keeps all.
    let pruned = BranchConfig {
        prune: PruneConfig { width_keep: 0.5, ..PruneConfig::default() },
        ..branch.clone()
    };
    let cfg_pruned = FlowGrpoConfig { branch: Some(pruned.clone()), ..cfg.clone() };
    let p = sample_tree_batch(
        &policy,
        &ToyTask::new(),
        &Brightness,
        &cfg_pruned,
        &pruned,
        &schedule,
        0,
    )
    .unwrap();
    assert_eq!(p.edges, b.edges, "the forward tree is never cut");
    assert_eq!(p.kept.len(), b.edges.steps.len());
    // Splits at steps 0 and 1, SDE everywhere: step 2's 4 leaves per tree are ranked and half
    // keep their edge; the split edges stay (2 + 4 + 2 per prompt).
    let tree = TreeConfig { split_steps: vec![0, 1], branching: 2, split_noise: 1.0 };
    let wide = BranchConfig {
        tree,
        prune: PruneConfig { width_keep: 0.5, ..PruneConfig::default() },
        ..BranchConfig::default()
    };
    let cfg_wide = FlowGrpoConfig {
        group_size: 4,
        rollout: RolloutConfig::default(),
        branch: Some(wide.clone()),
        ..toy_config(dir.path())
    };
    cfg_wide.validate().unwrap();
    let w =
        sample_tree_batch(&policy, &ToyTask::new(), &Brightness, &cfg_wide, &wide, &schedule, 0)
            .unwrap();
    assert_eq!(w.edges.steps.len(), 2 * (2 + 4 + 4));
    assert_eq!(w.kept.len(), 2 * (2 + 4 + 2));
    // A group size that is not the tree's leaves is named.
    let bad = FlowGrpoConfig { group_size: 6, ..cfg.clone() };
    assert!(bad.validate().unwrap_err().to_string().contains("roots_per_prompt"));
}

/// Held-out mean brightness before and after 8 BranchGRPO iterations (tree of 8 leaves from
/// one root, splits at steps 0, 1 and 2 of 4, all steps SDE) with `reward`.
fn learn_brightness_with_trees(
    reward: &ImageReward<Vec<u32>>,
    shuffle_rewards: bool,
) -> (f64, f64) {
    let base = tempfile::tempdir().unwrap();
    random_base(base.path());
    let tree = TreeConfig { split_steps: vec![0, 1, 2], branching: 2, split_noise: 1.0 };
    let mut cfg = FlowGrpoConfig {
        prompts_per_step: 2,
        group_size: 8,
        micro_batch: 16,
        shuffle_rewards,
        rollout: RolloutConfig::default(),
        advantage: drift_core::advantage::AdvantageConfig::branch_grpo(),
        branch: Some(BranchConfig { tree, ..BranchConfig::default() }),
        ..toy_config(base.path())
    };
    cfg.run.steps = 8;
    cfg.run.eval_every = 100;
    cfg.optim.adamw.lr = 3e-3;
    cfg.optim.ema = None;
    cfg.loss.kl = None;
    cfg.loss.surrogate = drift_core::loss::Surrogate::PpoClip { eps_low: 0.2, eps_high: 0.2 };
    let run = tempfile::tempdir().unwrap();
    let r = train_flow_grpo(&cfg, "", &ToyTask::new(), reward, run.path(), &Device::Cpu).unwrap();
    // The run drew one grid per tree and logged the tree's size.
    let trees = std::fs::read_dir(run.path().join("eval/trees")).unwrap().count();
    assert_eq!(trees, 4, "one grid per held-out tree");
    let metrics = std::fs::read_to_string(run.path().join("metrics.jsonl")).unwrap();
    assert!(metrics.contains("\"tree/edges_kept\":"));
    let bright = |e: &EvalReport| e.reward_mean.abs();
    (bright(&r.base), bright(&r.trained))
}

/// BranchGRPO's learnability guard: brightness rises clearly above its shuffled-reward null
/// within 8 iterations and falls when its direction is flipped. A sign, detach or
/// edge-alignment bug (a child scored under another parent or prompt, an advantage on the
/// wrong edge) breaks the first assertion.
#[test]
fn branch_grpo_learns_brightness_above_its_shuffled_null_and_unlearns_it_when_flipped() {
    let (base, real) = learn_brightness_with_trees(&Brightness, false);
    let (null_base, null) = learn_brightness_with_trees(&Brightness, true);
    let (_, flipped) = learn_brightness_with_trees(&Darkness, false);
    assert!((base - null_base).abs() < 1e-6, "same base and noise: {base} vs {null_base}");
    assert!(
        real > null + 0.02 && real > base + 0.02,
        "brightness: base {base:.4}, real {real:.4}, shuffled null {null:.4}"
    );
    assert!(flipped < base - 0.02, "flipped reward: base {base:.4} → {flipped:.4}");
}

#[test]
fn the_presets_validate_and_keep_flow_grpos_eight_images_per_prompt() {
    for (name, cfg) in [
        ("branch_grpo", FlowGrpoConfig::branch_grpo()),
        ("branch_grpo_pruned", FlowGrpoConfig::branch_grpo_pruned()),
        ("branch_grpo_mix", FlowGrpoConfig::branch_grpo_mix()),
        ("flow_grpo_all_steps", FlowGrpoConfig::flow_grpo_all_steps()),
    ] {
        cfg.validate().unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(cfg.group_size, 8, "{name}");
    }
    let mix = FlowGrpoConfig::branch_grpo_mix();
    assert_eq!(
        mix.branch.unwrap().shape(),
        "1→2→4→8 per root at steps [0, 1, 2], 1 root(s) per prompt"
    );
}
