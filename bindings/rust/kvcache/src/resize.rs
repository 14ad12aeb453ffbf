//! Resizing the primary pools in place from measured memory
//! (`kvc_cache_plan_resize`, `kvc_cache_resize`; AutoDeploy's phase 6).

use kvcache_sys as sys;

use crate::cache::{sized, Cache};
use crate::error::{check, Result};

/// What AutoDeploy measures after a forward pass (`kvc_resize_inputs_t`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ResizeInputs {
    /// Share of what is left, in (0, 1] (default 0.9).
    pub free_gpu_memory_fraction: f64,
    /// Free device memory as measured; 0: the device's free memory now plus
    /// the cache's primary bytes.
    pub free_bytes: u64,
    /// Memory outside the paged pools that must stay.
    pub non_paged_bytes: u64,
    /// Activation memory of the forward pass.
    pub forward_bytes: u64,
}

impl Default for ResizeInputs {
    fn default() -> Self {
        ResizeInputs {
            free_gpu_memory_fraction: 0.9,
            free_bytes: 0,
            non_paged_bytes: 0,
            forward_bytes: 0,
        }
    }
}

impl ResizeInputs {
    pub(crate) fn to_c(self) -> sys::kvc_resize_inputs_t {
        let mut c = sized!(sys::kvc_resize_inputs_t);
        c.reserved = 0;
        c.free_gpu_memory_fraction = self.free_gpu_memory_fraction;
        c.free_bytes = self.free_bytes;
        c.non_paged_bytes = self.non_paged_bytes;
        c.forward_bytes = self.forward_bytes;
        c
    }
}

/// The pools a resize would give (`kvc_resize_plan_t`).
#[derive(Clone, Debug, PartialEq)]
pub struct ResizePlan {
    /// The free memory the formula used.
    pub free_bytes: u64,
    /// `(free - non_paged - forward) * fraction`, rounded down.
    pub mem_for_paged: u64,
    /// What to pass to [`Cache::resize`]: `mem_for_paged` held to the ceiling.
    pub primary_bytes: u64,
    /// The cache's ceiling (`max_primary_bytes` at creation, at least the
    /// budget then).
    pub max_primary_bytes: u64,
    /// Blocks every layer group gets.
    pub blocks_per_group: u64,
    /// Tokens every layer can hold.
    pub token_capacity: u64,
    /// Blocks over all pools.
    pub num_blocks: u64,
    /// Bytes the pools take.
    pub total_bytes: u64,
    /// Blocks of each pool.
    pub pool_blocks: Vec<u64>,
}

impl Cache {
    /// Plans a resize from measured memory, changing nothing
    /// (`kvc_cache_plan_resize`): `mem_for_paged = (free_mem - non_paged -
    /// forward_mem) * free_gpu_fraction`, as AutoDeploy computes it.
    pub fn plan_resize(&self, inputs: &ResizeInputs) -> Result<ResizePlan> {
        let c_in = inputs.to_c();
        let mut p = sized!(sys::kvc_resize_plan_t);
        let mut pools = vec![0u64; self.describe()?.num_pools as usize];
        // SAFETY: live cache, valid structs, pools holds pools.len() entries.
        check(unsafe {
            sys::kvc_cache_plan_resize(
                self.as_ptr(),
                &c_in,
                &mut p,
                pools.as_mut_ptr(),
                pools.len(),
            )
        })?;
        pools.truncate(p.num_pools as usize);
        Ok(ResizePlan {
            free_bytes: p.free_bytes,
            mem_for_paged: p.mem_for_paged,
            primary_bytes: p.primary_bytes,
            max_primary_bytes: p.max_primary_bytes,
            blocks_per_group: p.blocks_per_group,
            token_capacity: p.token_capacity,
            num_blocks: p.num_blocks,
            total_bytes: p.total_bytes,
            pool_blocks: pools,
        })
    }

    /// Resizes the primary pools in place (`kvc_cache_resize`): base
    /// pointers, layer views and the ids of blocks in use stay; a grow adds
    /// blocks, a shrink evicts cached blocks in victim order (to the host
    /// tier where they qualify) until the rest fit, moves the cached blocks
    /// past the new end below it, and is refused (`Status::OutOfBlocks`,
    /// nothing changed) over a block in use past the end. Takes
    /// the cache exclusively: the layer shapes this handle keeps for its
    /// kernels' checks are read again.
    pub fn resize(&mut self, primary_bytes: u64) -> Result<()> {
        let _memory = self.memory_write();
        // SAFETY: live cache.
        check(unsafe { sys::kvc_cache_resize(self.as_ptr(), primary_bytes) })?;
        drop(_memory);
        self.refresh_shape()
    }
}
