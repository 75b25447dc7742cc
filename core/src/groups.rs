//! Group membership of a batch of samples, and the segment reductions over it.
//!
//! Groups are given by a group id per sample rather than by a reshape to `[P, G]`, so ragged
//! groups (filtered samples, tree depths, prompts tracked across batches) need no special code:
//! every reduction is an `index_add` into `K` slots followed by an `index_select` back.

use candle_core::{DType, Device, Tensor};

use crate::error::{CoreError, Result};

/// Which group each of `N` samples belongs to.
///
/// Built once per batch (it validates the ids with one host read); every reduction after that
/// stays on the ids' device.
#[derive(Debug, Clone)]
pub struct Groups {
    ids: Tensor,
    sizes: Vec<usize>,
}

impl Groups {
    /// Groups from host ids: sample `i` belongs to group `ids[i]`, with `num_groups` groups.
    ///
    /// Errors if an id is `>= num_groups`. Empty groups are allowed (they reduce to zero).
    pub fn new(ids: &[u32], num_groups: usize, device: &Device) -> Result<Self> {
        let mut sizes = vec![0usize; num_groups];
        for (index, &id) in ids.iter().enumerate() {
            match sizes.get_mut(id as usize) {
                Some(n) => *n += 1,
                None => return Err(CoreError::GroupId { id: u64::from(id), index, num_groups }),
            }
        }
        let ids = Tensor::from_slice(ids, ids.len(), device)?;
        Ok(Self { ids, sizes })
    }

    /// `num_groups` consecutive groups of `group_size` samples each: the usual `P` prompts ×
    /// `G` samples layout, ids `[0,0,…,0,1,1,…]`.
    pub fn contiguous(num_groups: usize, group_size: usize, device: &Device) -> Result<Self> {
        let ids: Vec<u32> =
            (0..num_groups * group_size).map(|i| (i / group_size.max(1)) as u32).collect();
        Self::new(&ids, num_groups, device)
    }

    /// Groups from an id tensor of shape `[N]` (any integer dtype). Reads the ids to the host
    /// once to validate them.
    pub fn from_tensor(ids: &Tensor, num_groups: usize) -> Result<Self> {
        if ids.rank() != 1 {
            return Err(CoreError::Shape {
                name: "group_ids",
                got: ids.dims().to_vec(),
                expected: "[N]".into(),
            });
        }
        let host = ids.to_dtype(DType::U32)?.to_vec1::<u32>()?;
        Self::new(&host, num_groups, ids.device())
    }

    /// Number of samples `N`.
    pub fn len(&self) -> usize {
        self.sizes.iter().sum()
    }

    /// Whether the batch is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Number of groups `K`.
    pub fn num_groups(&self) -> usize {
        self.sizes.len()
    }

    /// Samples per group, `n_k`.
    pub fn sizes(&self) -> &[usize] {
        &self.sizes
    }

    /// The id tensor, `[N]` u32.
    pub fn ids(&self) -> &Tensor {
        &self.ids
    }

    /// `n_k` as a `[K]` tensor of `dtype` on `device`.
    pub fn size_tensor(&self, dtype: DType, device: &Device) -> Result<Tensor> {
        let sizes: Vec<f64> = self.sizes.iter().map(|&n| n as f64).collect();
        Ok(Tensor::from_vec(sizes, self.sizes.len(), device)?.to_dtype(dtype)?)
    }

    /// Per-group sums `s_k = Σ_{i∈k} x_i` of a `[N]` tensor, as `[K]`.
    pub fn sum(&self, x: &Tensor) -> Result<Tensor> {
        self.check(x)?;
        let zeros = Tensor::zeros(self.num_groups(), x.dtype(), x.device())?;
        Ok(zeros.index_add(&self.ids, x, 0)?)
    }

    /// Per-group means `μ_k = s_k / n_k` of a `[N]` tensor, as `[K]` (0 for an empty group).
    pub fn mean(&self, x: &Tensor) -> Result<Tensor> {
        let n = self.size_tensor(x.dtype(), x.device())?.clamp(1.0, f64::INFINITY)?;
        Ok(self.sum(x)?.div(&n)?)
    }

    /// Spreads a per-group `[K]` tensor back to the samples: `y_i = v_{g_i}`, `[N]`.
    pub fn broadcast(&self, per_group: &Tensor) -> Result<Tensor> {
        Ok(per_group.index_select(&self.ids, 0)?)
    }

    fn check(&self, x: &Tensor) -> Result<()> {
        if x.dims() != [self.len()] {
            return Err(CoreError::Shape {
                name: "per-sample tensor",
                got: x.dims().to_vec(),
                expected: format!("[{}] (one value per sample of the groups)", self.len()),
            });
        }
        Ok(())
    }
}

/// Permutes the rewards of every group of `g` consecutive rows by a permutation keyed by
/// `key.row(group)`: the shuffled-reward null control of the RL trainers (`shuffle_rewards`).
/// Each group keeps its multiset of rewards, so advantages keep their sizes, masks and
/// degenerate groups; only which sample earned which reward is gone.
pub fn shuffle_within_groups(rewards: &mut [f32], g: usize, key: crate::rng::RngKey) {
    for (k, group) in rewards.chunks_mut(g.max(1)).enumerate() {
        let orig = group.to_vec();
        for (slot, &from) in group.iter_mut().zip(&key.row(k as u64).permutation_vec(orig.len())) {
            *slot = orig[from as usize];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ragged_sums_and_means() -> Result<()> {
        let dev = Device::Cpu;
        let g = Groups::new(&[2, 0, 0, 2, 2], 3, &dev)?;
        assert_eq!(g.sizes(), &[2, 0, 3]);
        let x = Tensor::new(&[1f32, 2., 4., 8., 16.], &dev)?;
        assert_eq!(g.sum(&x)?.to_vec1::<f32>()?, vec![6., 0., 25.]);
        let m = g.mean(&x)?.to_vec1::<f32>()?;
        assert_eq!(m, vec![3., 0., 25. / 3.]);
        assert_eq!(
            g.broadcast(&Tensor::new(&[10f32, 20., 30.], &dev)?)?.to_vec1::<f32>()?,
            vec![30., 10., 10., 30., 30.]
        );
        Ok(())
    }

    #[test]
    fn out_of_range_id_is_named() {
        let err = Groups::new(&[0, 3], 2, &Device::Cpu).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("group id 3") && msg.contains("sample 1"), "{msg}");
    }

    #[test]
    fn contiguous_layout() -> Result<()> {
        let g = Groups::contiguous(2, 3, &Device::Cpu)?;
        assert_eq!(g.ids().to_vec1::<u32>()?, vec![0, 0, 0, 1, 1, 1]);
        Ok(())
    }
}
