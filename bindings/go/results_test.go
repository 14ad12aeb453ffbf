package kvcache_test

import (
	"reflect"
	"testing"

	"kvcache"
	"kvcache/kvc"
)

// The one-call readers of results.go give, member for member, what the
// SWIG layer's getters read from the same C struct: two caches built and
// driven alike, one through package kvcache, one through package kvc
// (addresses apart, which differ between caches).
func TestOneCallResultsMatchTheSWIGGetters(t *testing.T) {
	cache, err := kvcache.NewConfigBuilder().NumLayers(4).KVHeads(2).HeadDim(64).
		DType(kvcache.DTypeF32).TokensPerBlock(4).AttentionWindows([]uint32{0, 8}).
		MaxTokens(256).HostCacheBytes(1 << 20).NewCache()
	must(t, err)
	defer cache.Close()
	var lcfg kvc.Config
	must(t, kvc.Kvc_config_create(&lcfg))
	defer kvc.Kvc_config_destroy(lcfg)
	for _, err := range []error{
		kvc.Kvc_config_set_num_layers(lcfg, 4), kvc.Kvc_config_set_kv_heads(lcfg, 2),
		kvc.Kvc_config_set_head_dim(lcfg, 64), kvc.Kvc_config_set_dtype(lcfg, uint32(kvcache.DTypeF32)),
		kvc.Kvc_config_set_tokens_per_block(lcfg, 4), kvc.Kvc_config_set_max_tokens(lcfg, 256),
		kvc.Kvc_config_set_host_cache_bytes(lcfg, 1<<20),
	} {
		must(t, err)
	}
	windows := []uint32{0, 8}
	must(t, kvc.Kvc_config_set_attention_windows(lcfg, &windows[0], 2))
	var lcache kvc.Cache
	must(t, kvc.Kvc_cache_create(lcfg, &lcache))
	defer kvc.Kvc_cache_destroy(lcache)

	// The same history on both: a committed prompt, a second one reusing
	// part of it, decode steps, a removal.
	p1, p2 := tokens(0, 37), append(tokens(0, 20), tokens(500, 9)...)
	var cached uint64
	for _, step := range []struct {
		id     uint64
		prompt []int32
	}{{1, p1}, {2, p2}} {
		_, err := cache.AddSequence(step.id, step.prompt, &kvcache.SequenceOptions{PromptPriority: kvcache.Priority(60)}, 0)
		must(t, err)
		must(t, cache.CommitSequence(step.id, uint64(len(step.prompt))))
		o := kvc.NewKvc_sequence_options_t()
		kvc.Kvc_sequence_options_init(o)
		o.SetPrompt_priority(60)
		must(t, kvc.Kvc_sequence_add(lcache, step.id, &step.prompt[0], uint64(len(step.prompt)), o, 0, &cached))
		kvc.DeleteKvc_sequence_options_t(o)
		must(t, kvc.Kvc_sequence_commit(lcache, step.id, uint64(len(step.prompt))))
	}
	ids, next := []uint64{1, 2}, []int32{7, 8}
	for i := 0; i < 5; i++ {
		must(t, cache.BatchExtend(ids, next, 0))
		must(t, kvc.Kvc_batch_extend(lcache, &ids[0], &next[0], 2, 0))
	}
	must(t, cache.RemoveSequence(1))
	must(t, kvc.Kvc_sequence_remove(lcache, 1))

	same := func(what string, got, want interface{}) {
		t.Helper()
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n kvcache %+v\n SWIG    %+v", what, got, want)
		}
	}

	s, err := cache.Stats()
	must(t, err)
	ls := kvc.NewKvc_cache_stats_t()
	defer kvc.DeleteKvc_cache_stats_t(ls)
	kvc.Kvc_cache_stats_init(ls)
	must(t, kvc.Kvc_cache_get_stats(lcache, ls))
	same("Stats", s, kvcache.Stats{
		NumBlocks: ls.GetNum_blocks(), FreeBlocks: ls.GetFree_blocks(), CachedBlocks: ls.GetCached_blocks(),
		InUseBlocks: ls.GetIn_use_blocks(), ReusedBlocks: ls.GetReused_blocks(), MissedBlocks: ls.GetMissed_blocks(),
		HitRate: ls.GetHit_rate(), EvictedBlocks: ls.GetEvicted_blocks(), NumSequences: ls.GetNum_sequences(),
		NumPinned: ls.GetNum_pinned(), TreeNodes: ls.GetTree_nodes(), OffloadedBlocks: ls.GetOffloaded_blocks(),
		OnboardedBlocks: ls.GetOnboarded_blocks(), OffloadedBytes: ls.GetOffloaded_bytes(),
		OnboardedBytes: ls.GetOnboarded_bytes(), HostBlocks: ls.GetHost_blocks(),
		HostFreeBlocks: ls.GetHost_free_blocks(), HostCachedBlocks: ls.GetHost_cached_blocks(),
	})
	if s.ReusedBlocks == 0 || s.HostBlocks == 0 || s.InUseBlocks == 0 {
		t.Errorf("the history left too little to compare: %+v", s)
	}

	d, err := cache.Describe()
	must(t, err)
	ld := kvc.NewKvc_cache_desc_t()
	defer kvc.DeleteKvc_cache_desc_t(ld)
	kvc.Kvc_cache_desc_init(ld)
	must(t, kvc.Kvc_cache_describe(lcache, ld))
	same("Describe", d, kvcache.CacheDesc{
		DeviceKind: kvcache.DeviceKind(ld.GetDevice_kind()), DeviceOrdinal: ld.GetDevice_ordinal(),
		DType: kvcache.DType(ld.GetDtype()), Layout: kvcache.Layout(ld.GetLayout()),
		NumLayers: ld.GetNum_layers(), NumGroups: ld.GetNum_groups(), NumPools: ld.GetNum_pools(),
		TokensPerBlock: ld.GetTokens_per_block(), KVFactor: ld.GetKv_factor(), NumBlocks: ld.GetNum_blocks(),
		TokenCapacity: ld.GetToken_capacity(), PrimaryBytes: ld.GetPrimary_bytes(),
		HostCacheBytes: ld.GetHost_cache_bytes(), DeviceFreeBytes: ld.GetDevice_free_bytes(),
		DeviceTotalBytes: ld.GetDevice_total_bytes(), NumResources: ld.GetNum_resources(),
		NumStateSlots: ld.GetNum_state_slots(), StateBytes: ld.GetState_bytes(),
		NumRanks: ld.GetNum_ranks(), MaxHeadReplication: ld.GetMax_head_replication(),
		NumKVResources: ld.GetNum_kv_resources(),
	})

	for g := uint32(0); g < d.NumGroups; g++ {
		gd, err := cache.DescribeGroup(g)
		must(t, err)
		lg := kvc.NewKvc_group_desc_t()
		kvc.Kvc_group_desc_init(lg)
		must(t, kvc.Kvc_cache_describe_group(lcache, g, lg))
		same("DescribeGroup", gd, kvcache.GroupDesc{Window: lg.GetWindow(), KVHeads: lg.GetKv_heads(),
			HeadDim: lg.GetHead_dim(), NumLayers: lg.GetNum_layers(), Pool: lg.GetPool(),
			BlockBytes: lg.GetBlock_bytes(), BytesPerToken: lg.GetBytes_per_token(),
			KVHeadsPerRank: lg.GetKv_heads_per_rank(), HeadReplication: lg.GetHead_replication(),
			DType: kvcache.DType(lg.GetDtype()), KVFactor: lg.GetKv_factor(),
			Layout: kvcache.Layout(lg.GetLayout())})
		kvc.DeleteKvc_group_desc_t(lg)

		gs, err := cache.GroupStats(g)
		must(t, err)
		lgs := kvc.NewKvc_group_stats_t()
		kvc.Kvc_group_stats_init(lgs)
		must(t, kvc.Kvc_cache_get_group_stats(lcache, g, lgs))
		same("GroupStats", gs, kvcache.GroupStats{Pool: lgs.GetPool(), InUseBlocks: lgs.GetIn_use_blocks(),
			CachedBlocks: lgs.GetCached_blocks(), PoolFreeBlocks: lgs.GetPool_free_blocks(),
			ReusedBlocks: lgs.GetReused_blocks(), MissedBlocks: lgs.GetMissed_blocks(),
			EvictedBlocks: lgs.GetEvicted_blocks(), ReleasedBlocks: lgs.GetReleased_blocks()})
		kvc.DeleteKvc_group_stats_t(lgs)
	}

	pd, err := cache.DescribePool(0)
	must(t, err)
	lp := kvc.NewKvc_pool_desc_t()
	defer kvc.DeleteKvc_pool_desc_t(lp)
	kvc.Kvc_pool_desc_init(lp)
	must(t, kvc.Kvc_cache_describe_pool(lcache, 0, lp))
	if pd.Base == 0 || lp.GetBase() == 0 {
		t.Errorf("pool bases %#x and %#x", pd.Base, lp.GetBase())
	}
	pd.Base = 0
	same("DescribePool", pd, kvcache.PoolDesc{NumGroups: lp.GetNum_groups(), BlockBytes: lp.GetBlock_bytes(),
		NumBlocks: lp.GetNum_blocks(), Bytes: lp.GetBytes()})

	v, err := cache.LayerView(3)
	must(t, err)
	lv := kvc.NewKvc_layer_view_t()
	defer kvc.DeleteKvc_layer_view_t(lv)
	kvc.Kvc_layer_view_init(lv)
	must(t, kvc.Kvc_cache_layer_view(lcache, 3, lv))
	if v.Base == 0 {
		t.Error("layer view base 0")
	}
	v.Base = 0
	same("LayerView", v, kvcache.LayerView{Group: lv.GetGroup(), Pool: lv.GetPool(),
		DType: kvcache.DType(lv.GetDtype()), Layout: kvcache.Layout(lv.GetLayout()), KVHeads: lv.GetKv_heads(),
		HeadDim: lv.GetHead_dim(), TokensPerBlock: lv.GetTokens_per_block(), KVFactor: lv.GetKv_factor(),
		ElemSize: lv.GetElem_size(), NumBlocks: lv.GetNum_blocks(), BlockStride: lv.GetBlock_stride(),
		KVStride: lv.GetKv_stride(), TokenStride: lv.GetToken_stride(), HeadStride: lv.GetHead_stride(),
		Rank: lv.GetRank(), FirstKVHead: lv.GetFirst_kv_head(), TotalKVHeads: lv.GetTotal_kv_heads()})

	sd, err := cache.DescribeSequence(2)
	must(t, err)
	lsd := kvc.NewKvc_sequence_desc_t()
	defer kvc.DeleteKvc_sequence_desc_t(lsd)
	kvc.Kvc_sequence_desc_init(lsd)
	must(t, kvc.Kvc_sequence_describe(lcache, 2, lsd))
	same("DescribeSequence", sd, kvcache.SequenceDesc{PromptPriority: lsd.GetPrompt_priority(),
		DecodePriority: lsd.GetDecode_priority(), NumTokens: lsd.GetNum_tokens(),
		PromptTokens: lsd.GetPrompt_tokens(), CachedTokens: lsd.GetCached_tokens(),
		CommittedTokens: lsd.GetCommitted_tokens(), NumBlocks: lsd.GetNum_blocks()})
	if sd.CachedTokens == 0 || sd.NumTokens != uint64(len(p2))+5 {
		t.Errorf("sequence 2: %+v", sd)
	}
}
