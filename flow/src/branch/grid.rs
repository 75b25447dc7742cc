//! One image grid per rollout tree, root → leaves: a row for the root, one for the level after
//! each split, and the leaves; a node sits above the first of its descendants' columns, each
//! captioned with its fused reward. A caller may show each level through a preview (the
//! model's clean-image prediction `x̂₀ = x − σ v` reads better than the noisy latent).

use std::path::Path;

use drift_rewards::image::{write_grid, GridOptions, Image};
use drift_samplers::flow::TreeRollout;

use crate::error::{FlowModelError, Result};
use crate::grpo::task::tensor_to_images;

/// The levels drawn: the roots, the level after each split, and the leaves.
pub fn drawn_levels(tree: &TreeRollout) -> Vec<usize> {
    let n = tree.parents.len();
    let mut levels = vec![0];
    levels.extend((0..n).filter(|&i| tree.split[i]).map(|i| i + 1));
    if levels.last() != Some(&n) {
        levels.push(n);
    }
    levels
}

/// The cells of tree `root`'s grid, row by row (`leaves` columns each; blank cells where a
/// level has fewer nodes), with their captions. `previews[level]` (one row per node of the
/// level, like `tree.latents[level]`) is what each drawn level shows.
pub fn tree_cells(
    tree: &TreeRollout,
    root: usize,
    node_rewards: &[Vec<f64>],
    previews: &[candle_core::Tensor],
) -> Result<(Vec<Image>, Vec<String>, usize)> {
    let n = tree.parents.len();
    let leaves = tree.trees[n].iter().filter(|&&t| t == root).count();
    if leaves == 0 {
        return Err(FlowModelError::Config {
            field: "root",
            value: root.to_string(),
            expected: format!("a root of the forest (below {})", tree.trees[0].len()),
        });
    }
    let (mut images, mut captions) = (Vec::new(), Vec::new());
    for level in drawn_levels(tree) {
        let nodes: Vec<usize> =
            (0..tree.trees[level].len()).filter(|&k| tree.trees[level][k] == root).collect();
        let idx: Vec<u32> = nodes.iter().map(|&k| k as u32).collect();
        let idx = candle_core::Tensor::from_vec(idx, nodes.len(), tree.latents[level].device())?;
        let shown = tensor_to_images(&previews[level].index_select(&idx, 0)?)?;
        let span = leaves / nodes.len().max(1);
        let blank = Image::canvas(shown[0].width(), shown[0].height(), [255; 3]).map_err(|e| {
            FlowModelError::Config {
                field: "image",
                value: e.to_string(),
                expected: "a drawable size".into(),
            }
        })?;
        for col in 0..leaves {
            if col % span == 0 && col / span < shown.len() {
                let k = col / span;
                let r = node_rewards[level][nodes[k]];
                let what = if level == 0 {
                    "root"
                } else if level == n {
                    "leaf"
                } else {
                    "node"
                };
                captions.push(format!("{what} step {level} r={r:.2}"));
                images.push(shown[k].clone());
            } else {
                captions.push(String::new());
                images.push(blank.clone());
            }
        }
    }
    Ok((images, captions, leaves))
}

/// Writes tree `root`'s grid to `path` (PNG), each level shown through `previews`.
pub fn write_tree_grid(
    path: &Path,
    tree: &TreeRollout,
    root: usize,
    node_rewards: &[Vec<f64>],
    previews: &[candle_core::Tensor],
) -> Result<()> {
    let (images, captions, columns) = tree_cells(tree, root, node_rewards, previews)?;
    let captions: Vec<&str> = captions.iter().map(String::as_str).collect();
    let options = GridOptions { columns, ..GridOptions::default() };
    write_grid(path, &images, &captions, &options)
        .map_err(|e| FlowModelError::File { path: path.to_path_buf(), reason: e.to_string() })
}

#[cfg(test)]
mod tests {
    use candle_core::{DType, Device, Tensor};
    use drift_core::rng::RngKey;
    use drift_samplers::flow::{
        rollout_tree, RolloutConfig, Schedule, ScheduleConfig, TreeConfig, VelocityField,
    };

    use super::*;
    use crate::branch::{fuse_rewards, Fusion};

    struct Half;

    impl VelocityField for Half {
        type Cond = Tensor;
        fn velocity(&self, x: &Tensor, _: &Tensor, _: &Tensor) -> candle_core::Result<Tensor> {
            x * 0.5
        }
    }

    #[test]
    fn a_tree_grid_has_a_row_per_split_and_a_node_over_its_first_leaf() {
        let dev = Device::Cpu;
        let s = Schedule::new(&ScheduleConfig { steps: 4, ..ScheduleConfig::default() }).unwrap();
        let x = RngKey::new(1).normal((2, 3, 4, 4), DType::F32, &dev).unwrap();
        let c = Tensor::zeros((2, 1), DType::F32, &dev).unwrap();
        let tree = TreeConfig { split_steps: vec![0, 2], branching: 2, split_noise: 1.0 };
        let t = rollout_tree(
            &Half,
            &x,
            &c,
            &s,
            &RolloutConfig::default(),
            &tree,
            None,
            RngKey::new(2),
            &[0, 1],
        )
        .unwrap();
        let leaves = [1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 1.0];
        let fused = fuse_rewards(&t, &leaves, Fusion::Mean).unwrap();
        let (images, captions, cols) = tree_cells(&t, 1, &fused, &t.latents).unwrap();
        // Rows: root, after step 0's split (level 1), after step 2's (level 3), the leaves.
        assert_eq!(cols, 4);
        assert_eq!(images.len(), 16);
        assert_eq!(captions[0], "root step 0 r=0.75");
        assert_eq!(&captions[1..4], ["", "", ""]);
        assert_eq!(captions[4], "node step 1 r=1.00");
        assert_eq!(captions[6], "node step 1 r=0.50");
        assert_eq!(captions[10], "node step 3 r=0.00");
        let leaf_row = [
            "leaf step 4 r=1.00",
            "leaf step 4 r=1.00",
            "leaf step 4 r=0.00",
            "leaf step 4 r=1.00",
        ];
        assert_eq!(captions[12..].to_vec(), leaf_row);
        let dir = tempfile::tempdir().unwrap();
        write_tree_grid(&dir.path().join("t.png"), &t, 0, &fused, &t.latents).unwrap();
        assert!(dir.path().join("t.png").exists());
        assert!(tree_cells(&t, 2, &fused, &t.latents).unwrap_err().to_string().contains("a root"));
    }
}
