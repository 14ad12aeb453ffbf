//! State resources beside the paged attention KV (`kvcache/state.h`):
//! Mamba SSM state, causal-conv state, generic per-sequence state and
//! unpaged per-token resources, held in per-sequence state slots.

use std::ffi::{c_void, CStr};

use kvcache_sys as sys;

use crate::cache::{sized, Cache, OnStream};
use crate::config::Config;
use crate::error::{check, Result};
use crate::types::Dtype;
use crate::types::Stream;

/// `resource` of [`Cache::state_slots_all`]'s C call: every resource.
pub const STATE_ALL: u32 = sys::KVC_STATE_ALL;

/// [`Config::set_max_state_snapshots`]'s value for no snapshot pool.
pub const STATE_SNAPSHOTS_NONE: u32 = u32::MAX;

/// The state snapshot pool and its counters (`kvc_snapshot_stats_t`; all 0
/// without state resources).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SnapshotStats {
    /// Snapshot slots of the pool.
    pub num_slots: u32,
    /// Snapshots cached now.
    pub slots_used: u32,
    /// Bytes one publish or restore copies.
    pub bytes_per_snapshot: u64,
    /// Bytes of the pool (out of the primary budget).
    pub bytes: u64,
    /// Publishes that stored a snapshot.
    pub published: u64,
    /// Adds that reused a prefix (restored a snapshot).
    pub hits: u64,
    /// Tokens those adds reused.
    pub hit_tokens: u64,
    /// Rewinds that restored a snapshot.
    pub restores: u64,
    /// Snapshots a publish into a full pool evicted for good (not offloaded).
    pub evicted: u64,
    /// Snapshots dropped with their node, from either pool.
    pub dropped: u64,
    /// Host snapshot slots (a quarter of `host_cache_bytes`; 0 without a host tier).
    pub host_num_slots: u32,
    /// Snapshots in the host pool now.
    pub host_slots_used: u32,
    /// Bytes of the host pool (out of `host_cache_bytes`).
    pub host_bytes: u64,
    /// Snapshots a publish into a full pool moved to the host pool.
    pub offloaded: u64,
    /// Reuses and rewinds that restored a host snapshot.
    pub onboarded: u64,
    /// Host snapshots evicted to make room for an offload.
    pub host_evicted: u64,
}

/// What a resource is (`kvc_resource_kind_t`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResourceKind {
    /// Mamba SSM state `[num_heads][head_dim][d_state]`.
    Ssm,
    /// Causal-conv state `[conv_dim][d_conv]`.
    Conv,
    /// Opaque per-sequence bytes.
    Generic,
    /// Per-token bytes, one row of `max_tokens` per slot.
    Unpaged,
    /// A value this binding does not know.
    Other(u32),
}

impl ResourceKind {
    fn from_raw(raw: u32) -> ResourceKind {
        match raw {
            sys::KVC_RESOURCE_SSM => ResourceKind::Ssm,
            sys::KVC_RESOURCE_CONV => ResourceKind::Conv,
            sys::KVC_RESOURCE_GENERIC => ResourceKind::Generic,
            sys::KVC_RESOURCE_UNPAGED => ResourceKind::Unpaged,
            other => ResourceKind::Other(other),
        }
    }
}

/// Why a resource is managed or local (`kvc_resource_reason_t`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResourceReason {
    /// Managed with the others.
    Managed,
    /// SSM shape or dtype differ from the first SSM resource's.
    SsmShapeDiffers,
    /// A conv resource without an SSM resource to pair with.
    NoSsm,
    /// `conv_dim` fails the n_groups constraint.
    NGroups,
    /// Conv shape or dtype differ from the first managed conv's.
    ConvShapeDiffers,
    /// A value this binding does not know.
    Other(u32),
}

impl ResourceReason {
    fn from_raw(raw: u32) -> ResourceReason {
        match raw {
            sys::KVC_RESOURCE_REASON_MANAGED => ResourceReason::Managed,
            sys::KVC_RESOURCE_REASON_SSM_SHAPE_DIFFERS => ResourceReason::SsmShapeDiffers,
            sys::KVC_RESOURCE_REASON_NO_SSM => ResourceReason::NoSsm,
            sys::KVC_RESOURCE_REASON_N_GROUPS => ResourceReason::NGroups,
            sys::KVC_RESOURCE_REASON_CONV_SHAPE_DIFFERS => ResourceReason::ConvShapeDiffers,
            other => ResourceReason::Other(other),
        }
    }
}

/// One resource of a cache and the view a kernel addresses it by
/// (`kvc_resource_desc_t`): slot `s` starts at `base + s * slot_stride`;
/// strides in bytes as documented in `state.h`.
#[derive(Clone, Debug, PartialEq)]
pub struct ResourceDesc {
    /// Kind.
    pub kind: ResourceKind,
    /// Managed (a shared slot index) or local.
    pub managed: bool,
    /// Why.
    pub reason: ResourceReason,
    /// The reason in words.
    pub reason_text: String,
    /// SSM and conv: element type; else `None`.
    pub dtype: Option<Dtype>,
    /// SSM heads.
    pub num_heads: u32,
    /// SSM head dimension.
    pub head_dim: u32,
    /// SSM state size.
    pub d_state: u32,
    /// Conv channels.
    pub conv_dim: u32,
    /// Conv kernel width.
    pub d_conv: u32,
    /// Conv meeting the constraint: its n_groups.
    pub n_groups: u32,
    /// Slots of the resource.
    pub num_slots: u32,
    /// Slots held by live sequences.
    pub slots_used: u32,
    /// Unpaged: bytes per token.
    pub bytes_per_token: u64,
    /// Unpaged: tokens per slot.
    pub max_tokens: u64,
    /// Alignment of every slot's start.
    pub alignment: u64,
    /// Bytes of the state in one slot.
    pub slot_bytes: u64,
    /// Bytes from one slot to the next.
    pub slot_stride: u64,
    /// Per-dimension strides (see `state.h`).
    pub strides: [u64; 3],
    /// Slot 0 (device memory on CUDA); valid while the cache lives.
    pub base: *mut c_void,
}

fn index_of(f: impl FnOnce(*mut u32) -> sys::kvc_status_t) -> Result<u32> {
    let mut index = 0u32;
    check(f(&mut index))?;
    Ok(index)
}

impl Config {
    /// Adds a Mamba SSM state resource (`kvc_config_add_ssm_state`);
    /// returns its index.
    pub fn add_ssm_state(
        &mut self,
        num_heads: u32,
        head_dim: u32,
        d_state: u32,
        dtype: Dtype,
    ) -> Result<u32> {
        let c = self.as_mut_ptr();
        // SAFETY: live config, exclusively borrowed; valid out pointer.
        index_of(|i| unsafe {
            sys::kvc_config_add_ssm_state(c, num_heads, head_dim, d_state, dtype.raw(), i)
        })
    }

    /// Adds a causal-conv state resource (`kvc_config_add_conv_state`).
    pub fn add_conv_state(&mut self, conv_dim: u32, d_conv: u32, dtype: Dtype) -> Result<u32> {
        let c = self.as_mut_ptr();
        // SAFETY: as above.
        index_of(|i| unsafe { sys::kvc_config_add_conv_state(c, conv_dim, d_conv, dtype.raw(), i) })
    }

    /// Adds a generic per-sequence state (`kvc_config_add_generic_state`;
    /// alignment 0 = 256).
    pub fn add_generic_state(&mut self, bytes: u64, alignment: u64) -> Result<u32> {
        let c = self.as_mut_ptr();
        // SAFETY: as above.
        index_of(|i| unsafe { sys::kvc_config_add_generic_state(c, bytes, alignment, i) })
    }

    /// Adds an unpaged per-token resource (`kvc_config_add_unpaged_resource`).
    pub fn add_unpaged_resource(&mut self, bytes_per_token: u64, max_tokens: u64) -> Result<u32> {
        let c = self.as_mut_ptr();
        // SAFETY: as above.
        index_of(|i| unsafe {
            sys::kvc_config_add_unpaged_resource(c, bytes_per_token, max_tokens, i)
        })
    }

    /// Number of resources added (`kvc_config_get_num_resources`).
    pub fn num_resources(&self) -> Result<u32> {
        let mut out = 0;
        // SAFETY: live config, valid out pointer.
        check(unsafe { sys::kvc_config_get_num_resources(self.as_ptr(), &mut out) })?;
        Ok(out)
    }

    /// State slots; 0 = planned from the budget
    /// (`kvc_config_set_max_state_slots`).
    pub fn set_max_state_slots(&mut self, slots: u32) -> Result<()> {
        // SAFETY: live config, exclusively borrowed.
        check(unsafe { sys::kvc_config_set_max_state_slots(self.as_mut_ptr(), slots) })
    }

    /// The state slot setting (`kvc_config_get_max_state_slots`).
    pub fn max_state_slots(&self) -> Result<u32> {
        let mut out = 0;
        // SAFETY: live config, valid out pointer.
        check(unsafe { sys::kvc_config_get_max_state_slots(self.as_ptr(), &mut out) })?;
        Ok(out)
    }

    /// State snapshot slots; 0 = planned, [`STATE_SNAPSHOTS_NONE`] = none
    /// (`kvc_config_set_max_state_snapshots`).
    pub fn set_max_state_snapshots(&mut self, slots: u32) -> Result<()> {
        // SAFETY: live config, exclusively borrowed.
        check(unsafe { sys::kvc_config_set_max_state_snapshots(self.as_mut_ptr(), slots) })
    }

    /// The snapshot slot setting (`kvc_config_get_max_state_snapshots`).
    pub fn max_state_snapshots(&self) -> Result<u32> {
        let mut out = 0;
        // SAFETY: live config, valid out pointer.
        check(unsafe { sys::kvc_config_get_max_state_snapshots(self.as_ptr(), &mut out) })?;
        Ok(out)
    }
}

pub(crate) fn snapshot_stats_init() -> sys::kvc_snapshot_stats_t {
    sized!(sys::kvc_snapshot_stats_t)
}

impl OnStream<'_> {
    /// Publishes sequence `id`'s state at `position` (a positive multiple
    /// of tokens_per_block, at most its committed tokens) as the snapshot
    /// of its block ending there, copied on this stream
    /// (`kvc_sequence_publish_state`).
    pub fn publish_state(&self, id: u64, position: u64) -> Result<()> {
        let _memory = self.cache().memory_write();
        // SAFETY: live cache; the stream was vouched for.
        check(unsafe {
            sys::kvc_sequence_publish_state(
                self.cache().as_ptr(),
                id,
                position,
                self.stream().as_raw(),
            )
        })
    }
}

pub(crate) fn resource_desc_init() -> sys::kvc_resource_desc_t {
    sized!(sys::kvc_resource_desc_t)
}

impl Cache {
    /// [`OnStream::publish_state`] on the default stream.
    pub fn publish_state(&self, id: u64, position: u64) -> Result<()> {
        self.on(Stream::DEFAULT).publish_state(id, position)
    }

    /// The snapshot pool and its counters (`kvc_cache_get_snapshot_stats`).
    pub fn snapshot_stats(&self) -> Result<SnapshotStats> {
        let mut d = snapshot_stats_init();
        // SAFETY: live cache, valid struct.
        check(unsafe { sys::kvc_cache_get_snapshot_stats(self.as_ptr(), &mut d) })?;
        Ok(SnapshotStats {
            num_slots: d.num_slots,
            slots_used: d.slots_used,
            bytes_per_snapshot: d.bytes_per_snapshot,
            bytes: d.bytes,
            published: d.published,
            hits: d.hits,
            hit_tokens: d.hit_tokens,
            restores: d.restores,
            evicted: d.evicted,
            dropped: d.dropped,
            host_num_slots: d.host_num_slots,
            host_slots_used: d.host_slots_used,
            host_bytes: d.host_bytes,
            offloaded: d.offloaded,
            onboarded: d.onboarded,
            host_evicted: d.host_evicted,
        })
    }

    /// Describes resource `index` (`kvc_cache_describe_resource`).
    pub fn describe_resource(&self, index: u32) -> Result<ResourceDesc> {
        let mut d = resource_desc_init();
        // SAFETY: live cache, valid struct.
        check(unsafe { sys::kvc_cache_describe_resource(self.as_ptr(), index, &mut d) })?;
        // SAFETY: the reason text is a NUL-terminated string the cache owns.
        let reason_text = if d.reason_text.is_null() {
            String::new()
        } else {
            unsafe { CStr::from_ptr(d.reason_text) }
                .to_string_lossy()
                .into_owned()
        };
        Ok(ResourceDesc {
            kind: ResourceKind::from_raw(d.kind),
            managed: d.managed != 0,
            reason: ResourceReason::from_raw(d.reason),
            reason_text,
            dtype: if d.dtype == 0 {
                None
            } else {
                Some(Dtype::from_raw(d.dtype))
            },
            num_heads: d.num_heads,
            head_dim: d.head_dim,
            d_state: d.d_state,
            conv_dim: d.conv_dim,
            d_conv: d.d_conv,
            n_groups: d.n_groups,
            num_slots: d.num_slots,
            slots_used: d.slots_used,
            bytes_per_token: d.bytes_per_token,
            max_tokens: d.max_tokens,
            alignment: d.alignment,
            slot_bytes: d.slot_bytes,
            slot_stride: d.slot_stride,
            strides: [d.stride0, d.stride1, d.stride2],
            base: d.base,
        })
    }

    /// Each sequence's slot of `resource` (`kvc_batch_state_slots`).
    pub fn state_slots(&self, ids: &[u64], resource: u32) -> Result<Vec<i32>> {
        let mut slots = vec![0i32; ids.len()];
        // SAFETY: live cache; ids and slots hold ids.len() entries.
        check(unsafe {
            sys::kvc_batch_state_slots(
                self.as_ptr(),
                ids.as_ptr(),
                ids.len(),
                resource,
                slots.as_mut_ptr(),
            )
        })?;
        Ok(slots)
    }

    /// Each sequence's slot of every resource, `[i * num_resources + r]`
    /// (`kvc_batch_state_slots` with `KVC_STATE_ALL`).
    pub fn state_slots_all(&self, ids: &[u64]) -> Result<Vec<i32>> {
        let n = self.describe()?.num_resources as usize;
        let mut slots = vec![0i32; ids.len() * n];
        // SAFETY: live cache; slots holds ids.len() * num_resources entries.
        check(unsafe {
            sys::kvc_batch_state_slots(
                self.as_ptr(),
                ids.as_ptr(),
                ids.len(),
                STATE_ALL,
                slots.as_mut_ptr(),
            )
        })?;
        Ok(slots)
    }
}
