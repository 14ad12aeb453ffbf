//! The structs this crate initializes itself equal what the library's
//! `kvc_x_init()` functions produce (the crate does not call them, to save
//! a call per use).

use kvcache_sys as sys;

use crate::cache::sized;
use crate::kernels::{RawDecodeArgs, RawPrefillArgs, RawStoreArgs, StoreStrides};
use crate::sequence::SequenceOptions;
use crate::stateful_args::{RawStatefulAppend, RawStatefulDecode, StatefulOptions};

/// Debug output compares every field (padding bytes excluded).
fn same<T: std::fmt::Debug>(ours: T, theirs: T) {
    assert_eq!(format!("{ours:?}"), format!("{theirs:?}"));
}

/// A C-initialized struct: zeroed, then passed to its `_init` function.
macro_rules! c_init {
    ($t:ty, $init:ident) => {{
        // SAFETY: all-zero bytes are a valid value of these plain structs;
        // the init function writes the struct it is given.
        let mut value: $t = unsafe { std::mem::zeroed() };
        unsafe { sys::$init(&mut value) };
        value
    }};
}

#[test]
fn descriptors_match_their_init_functions() {
    same(
        sized!(sys::kvc_cache_desc_t),
        c_init!(sys::kvc_cache_desc_t, kvc_cache_desc_init),
    );
    same(
        sized!(sys::kvc_group_desc_t),
        c_init!(sys::kvc_group_desc_t, kvc_group_desc_init),
    );
    same(
        sized!(sys::kvc_transfer_desc_t),
        c_init!(sys::kvc_transfer_desc_t, kvc_transfer_desc_init),
    );
    same(
        sized!(sys::kvc_pool_share_t),
        c_init!(sys::kvc_pool_share_t, kvc_pool_share_init),
    );
    // kvc_share_chunk_init sets fd to -1 (no descriptor).
    let mut chunk = sized!(sys::kvc_share_chunk_t);
    chunk.fd = -1;
    same(chunk, c_init!(sys::kvc_share_chunk_t, kvc_share_chunk_init));
    same(
        sized!(sys::kvc_pool_desc_t),
        c_init!(sys::kvc_pool_desc_t, kvc_pool_desc_init),
    );
    same(
        sized!(sys::kvc_layer_view_t),
        c_init!(sys::kvc_layer_view_t, kvc_layer_view_init),
    );
    same(
        sized!(sys::kvc_cache_stats_t),
        c_init!(sys::kvc_cache_stats_t, kvc_cache_stats_init),
    );
    same(
        sized!(sys::kvc_group_stats_t),
        c_init!(sys::kvc_group_stats_t, kvc_group_stats_init),
    );
    same(
        sized!(sys::kvc_tier_stats_t),
        c_init!(sys::kvc_tier_stats_t, kvc_tier_stats_init),
    );
    same(
        sized!(sys::kvc_sequence_desc_t),
        c_init!(sys::kvc_sequence_desc_t, kvc_sequence_desc_init),
    );
    same(
        sized!(sys::kvc_event_drain_t),
        c_init!(sys::kvc_event_drain_t, kvc_event_drain_init),
    );
    same(
        sized!(sys::kvc_stateful_view_t),
        c_init!(sys::kvc_stateful_view_t, kvc_stateful_view_init),
    );
    same(
        sized!(sys::kvc_stateful_stats_t),
        c_init!(sys::kvc_stateful_stats_t, kvc_stateful_stats_init),
    );
    same(
        sized!(sys::kvc_stateful_layer_stats_t),
        c_init!(
            sys::kvc_stateful_layer_stats_t,
            kvc_stateful_layer_stats_init
        ),
    );
}

#[test]
fn argument_defaults_match_their_init_functions() {
    same(
        crate::resize::ResizeInputs::default().to_c(),
        c_init!(sys::kvc_resize_inputs_t, kvc_resize_inputs_init),
    );
    same(
        crate::kv_resource::kv_resource_desc_init(),
        c_init!(sys::kvc_kv_resource_desc_t, kvc_kv_resource_desc_init),
    );
    same(
        crate::kv_resource::kv_resource_init(),
        c_init!(sys::kvc_kv_resource_t, kvc_kv_resource_init),
    );
    same(
        crate::state::resource_desc_init(),
        c_init!(sys::kvc_resource_desc_t, kvc_resource_desc_init),
    );
    same(
        crate::state::snapshot_stats_init(),
        c_init!(sys::kvc_snapshot_stats_t, kvc_snapshot_stats_init),
    );
    same(
        sized!(sys::kvc_resize_plan_t),
        c_init!(sys::kvc_resize_plan_t, kvc_resize_plan_init),
    );
    same(
        *SequenceOptions::default().as_raw(),
        c_init!(sys::kvc_sequence_options_t, kvc_sequence_options_init),
    );
    same(
        RawStoreArgs::default().to_c(),
        c_init!(sys::kvc_store_args_t, kvc_store_args_init),
    );
    same(
        RawDecodeArgs::default().to_c(),
        c_init!(sys::kvc_decode_args_t, kvc_decode_args_init),
    );
    same(
        StoreStrides::default().to_c(),
        c_init!(sys::kvc_store_strides_t, kvc_store_strides_init),
    );
    same(
        RawStatefulAppend::default().to_c(),
        c_init!(
            sys::kvc_stateful_append_args_t,
            kvc_stateful_append_args_init
        ),
    );
    same(
        RawStatefulDecode::default().to_c(),
        c_init!(
            sys::kvc_stateful_decode_args_t,
            kvc_stateful_decode_args_init
        ),
    );
    // The options' defaults differ from the C initializer in batch only
    // (which has no default) and in spelling out HND and staggered growth.
    let mut ours = StatefulOptions::new(0).to_c();
    ours.layout = 0;
    ours.growth_policy = 0;
    same(
        ours,
        c_init!(sys::kvc_stateful_options_t, kvc_stateful_options_init),
    );
    same(
        RawPrefillArgs::default().to_c(),
        c_init!(sys::kvc_prefill_args_t, kvc_prefill_args_init),
    );
}
