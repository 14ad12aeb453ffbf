package kvcache_test

import (
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"

	"kvcache"
	"kvcache/kvc"
)

// newConfig is a small CPU model: 2 layers, 2 KV heads, head dim 64, f32,
// 4 tokens per block, maxTokens tokens per layer (maxTokens/4 blocks).
func newConfig(t testing.TB, maxTokens uint64) *kvcache.Config {
	t.Helper()
	cfg, err := kvcache.NewConfig()
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range []error{
		cfg.SetNumLayers(2),
		cfg.SetKVHeads(2),
		cfg.SetHeadDim(64),
		cfg.SetDType(kvcache.DTypeF32),
		cfg.SetTokensPerBlock(4),
		cfg.SetMaxTokens(maxTokens),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	return cfg
}

func newCache(t testing.TB, maxTokens uint64, tweak func(*kvcache.Config)) *kvcache.Cache {
	t.Helper()
	cfg := newConfig(t, maxTokens)
	defer cfg.Close()
	if tweak != nil {
		tweak(cfg)
	}
	c, err := kvcache.NewCache(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// mustU64(t)(f()) is f's uint64 when f's error is nil.
func mustU64(t testing.TB) func(uint64, error) uint64 {
	return func(v uint64, err error) uint64 {
		t.Helper()
		must(t, err)
		return v
	}
}

func tokens(from, n int) []int32 {
	s := make([]int32, n)
	for i := range s {
		s[i] = int32(from + i)
	}
	return s
}

func stats(t testing.TB, c *kvcache.Cache) kvcache.Stats {
	t.Helper()
	s, err := c.Stats()
	must(t, err)
	return s
}

func TestStatusValues(t *testing.T) {
	for _, tc := range []struct {
		got  kvcache.Status
		want kvc.Enum_SS_kvc_status_code
		name string
	}{
		{kvcache.StatusOK, kvc.KVC_OK, "KVC_OK"},
		{kvcache.StatusInvalidArgument, kvc.KVC_ERR_INVALID_ARGUMENT, "KVC_ERR_INVALID_ARGUMENT"},
		{kvcache.StatusNotFound, kvc.KVC_ERR_NOT_FOUND, "KVC_ERR_NOT_FOUND"},
		{kvcache.StatusAlreadyExists, kvc.KVC_ERR_ALREADY_EXISTS, "KVC_ERR_ALREADY_EXISTS"},
		{kvcache.StatusOutOfBlocks, kvc.KVC_ERR_OUT_OF_BLOCKS, "KVC_ERR_OUT_OF_BLOCKS"},
		{kvcache.StatusBufferTooSmall, kvc.KVC_ERR_BUFFER_TOO_SMALL, "KVC_ERR_BUFFER_TOO_SMALL"},
		{kvcache.StatusUnsupported, kvc.KVC_ERR_UNSUPPORTED, "KVC_ERR_UNSUPPORTED"},
		{kvcache.StatusDevice, kvc.KVC_ERR_DEVICE, "KVC_ERR_DEVICE"},
		{kvcache.StatusOutOfMemory, kvc.KVC_ERR_OUT_OF_MEMORY, "KVC_ERR_OUT_OF_MEMORY"},
		{kvcache.StatusInvalidState, kvc.KVC_ERR_INVALID_STATE, "KVC_ERR_INVALID_STATE"},
		{kvcache.StatusInternal, kvc.KVC_ERR_INTERNAL, "KVC_ERR_INTERNAL"},
	} {
		if int(tc.got) != int(tc.want) || tc.got.String() != tc.name {
			t.Errorf("%s: Go %d (%s), C %d", tc.name, tc.got, tc.got, tc.want)
		}
	}
	for _, tc := range []struct{ got, want int }{
		{int(kvcache.DTypeF32), int(kvc.KVC_DTYPE_F32)},
		{int(kvcache.DTypeF16), int(kvc.KVC_DTYPE_F16)},
		{int(kvcache.DTypeBF16), int(kvc.KVC_DTYPE_BF16)},
		{int(kvcache.DTypeFP8E4M3), int(kvc.KVC_DTYPE_FP8_E4M3)},
		{int(kvcache.LayoutNHD), int(kvc.KVC_LAYOUT_NHD)},
		{int(kvcache.LayoutHND), int(kvc.KVC_LAYOUT_HND)},
		{int(kvcache.DeviceCPU), int(kvc.KVC_DEVICE_CPU)},
		{int(kvcache.DeviceCUDA), int(kvc.KVC_DEVICE_CUDA)},
		{int(kvcache.TablePadded), int(kvc.KVC_TABLE_PADDED)},
		{int(kvcache.TableCSR), int(kvc.KVC_TABLE_CSR)},
		{int(kvcache.FeatureCUDACompiled), int(kvc.KVC_FEATURE_CUDA_COMPILED)},
		{int(kvcache.FeatureCUDADevice), int(kvc.KVC_FEATURE_CUDA_DEVICE)},
		{int(kvcache.FeatureRedis), int(kvc.KVC_FEATURE_REDIS)},
	} {
		if tc.got != tc.want {
			t.Errorf("enum value: Go %d, C %d", tc.got, tc.want)
		}
	}
}

func TestVersion(t *testing.T) {
	if got := kvcache.VersionString(); got != kvcache.HeaderVersion {
		t.Errorf("library %s, headers %s", got, kvcache.HeaderVersion)
	}
	want := uint32(kvcache.HeaderVersionMajor*10000 + kvcache.HeaderVersionMinor*100 + kvcache.HeaderVersionPatch)
	if got := kvcache.Version(); got != want {
		t.Errorf("Version() = %d, want %d", got, want)
	}
	if got := kvcache.ABIVersion(); got != uint32(kvc.KVC_ABI_VERSION) {
		t.Errorf("ABIVersion() = %d, want %d", got, kvc.KVC_ABI_VERSION)
	}
	_ = kvcache.Features()
}

func TestConfigRoundTrip(t *testing.T) {
	cfg, err := kvcache.NewConfig()
	must(t, err)
	defer cfg.Close()
	must(t, cfg.SetNumLayers(4))
	must(t, cfg.SetKVHeadsPerLayer([]uint32{8, 8, 4, 4}))
	must(t, cfg.SetHeadDim(128))
	must(t, cfg.SetDType(kvcache.DTypeF16))
	must(t, cfg.SetKVFactor(1))
	must(t, cfg.SetLayout(kvcache.LayoutHND))
	must(t, cfg.SetTokensPerBlock(32))
	must(t, cfg.SetAttentionWindows([]uint32{0, 256}))
	must(t, cfg.SetDevice(kvcache.DeviceCPU, 0))
	must(t, cfg.SetPrimaryBytes(1<<40))
	must(t, cfg.SetMaxTokens(1<<33))
	must(t, cfg.SetFreeGPUMemoryFraction(0.5))
	must(t, cfg.SetHostCacheBytes(1<<35))
	must(t, cfg.SetSecondaryOffloadMinPriority(60))
	must(t, cfg.SetBlockReuse(false))
	must(t, cfg.SetPartialReuse(false))
	must(t, cfg.SetCopyOnPartialReuse(false))
	if err := cfg.SetEventBufferSize(1<<24 + 1); !errors.Is(err, kvcache.ErrInvalidArgument) {
		t.Errorf("SetEventBufferSize(2^24+1) = %v, want ErrInvalidArgument", err)
	}
	must(t, cfg.SetEventBufferSize(1024))
	must(t, cfg.SetEventHashSeed(0xfeedface12345678))
	must(t, cfg.Validate())

	clone, err := cfg.Clone()
	must(t, err)
	defer clone.Close()
	get := func(v interface{}, err error) interface{} {
		t.Helper()
		must(t, err)
		return v
	}
	kind, ordinal, err := clone.Device()
	must(t, err)
	got := []interface{}{
		get(clone.NumLayers()), get(clone.KVHeads(0)), get(clone.KVHeads(3)), get(clone.HeadDim()),
		get(clone.DType()), get(clone.KVFactor()), get(clone.Layout()), get(clone.TokensPerBlock()),
		get(clone.AttentionWindow(2)), get(clone.AttentionWindow(3)), kind, ordinal,
		get(clone.PrimaryBytes()), get(clone.MaxTokens()), get(clone.FreeGPUMemoryFraction()),
		get(clone.HostCacheBytes()), get(clone.SecondaryOffloadMinPriority()), get(clone.BlockReuse()),
		get(clone.PartialReuse()), get(clone.CopyOnPartialReuse()), get(clone.EventBufferSize()),
		get(clone.EventHashSeed()),
	}
	want := []interface{}{
		uint32(4), uint32(8), uint32(4), uint32(128),
		kvcache.DTypeF16, uint32(1), kvcache.LayoutHND, uint32(32),
		uint32(0), uint32(256), kvcache.DeviceCPU, int32(0),
		uint64(1 << 40), uint64(1 << 33), 0.5,
		uint64(1 << 35), uint32(60), false,
		false, false, uint32(1024),
		uint64(0xfeedface12345678),
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("clone getters\n got %v\nwant %v", got, want)
	}
}

func TestErrorCarriesStatusAndMessage(t *testing.T) {
	cfg, err := kvcache.NewConfig()
	must(t, err)
	defer cfg.Close()
	err = cfg.SetTokensPerBlock(12)
	var e *kvcache.Error
	if !errors.As(err, &e) {
		t.Fatalf("SetTokensPerBlock(12) = %v, want *kvcache.Error", err)
	}
	if e.Status != kvcache.StatusInvalidArgument || e.Op != "kvc_config_set_tokens_per_block" ||
		!strings.Contains(e.Message, "tokens_per_block") || !strings.Contains(e.Message, "12") {
		t.Errorf("got %#v", e)
	}
	if !errors.Is(err, kvcache.ErrInvalidArgument) || errors.Is(err, kvcache.ErrNotFound) {
		t.Errorf("errors.Is does not match the status: %v", err)
	}
	want := "kvcache: kvc_config_set_tokens_per_block: KVC_ERR_INVALID_ARGUMENT: " + e.Message
	if err.Error() != want {
		t.Errorf("Error() = %q, want %q", err.Error(), want)
	}
	// A failing call changes nothing.
	if n, err := cfg.TokensPerBlock(); err != nil || n != 16 {
		t.Errorf("tokens per block after a failed set = %d, %v; want 16", n, err)
	}

	// Errors of the cache: not found, already exists, invalid state.
	c := newCache(t, 64, nil)
	if _, err := c.DescribeSequence(7); !errors.Is(err, kvcache.ErrNotFound) {
		t.Errorf("DescribeSequence(unknown) = %v", err)
	}
	_, err = c.AddSequence(1, tokens(0, 5), nil, 0)
	must(t, err)
	if _, err := c.AddSequence(1, tokens(0, 5), nil, 0); !errors.Is(err, kvcache.ErrAlreadyExists) {
		t.Errorf("AddSequence(duplicate) = %v", err)
	}
	if err := c.ResetReuse(); !errors.Is(err, kvcache.ErrInvalidState) {
		t.Errorf("ResetReuse with a live sequence = %v", err)
	}
	if _, err := c.AddSequence(2, nil, nil, 0); !errors.Is(err, kvcache.ErrInvalidArgument) {
		t.Errorf("AddSequence(empty prompt) = %v", err)
	}
	must(t, c.Check())
}

// The message must be the one of the call that failed, even when many
// goroutines fail at once and move between OS threads between calls.
func TestErrorMessageFromTheFailingCall(t *testing.T) {
	cfg, err := kvcache.NewConfig()
	must(t, err)
	defer cfg.Close()
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			local, err := kvcache.NewConfig()
			if err != nil {
				errs <- err
				return
			}
			defer local.Close()
			for i := 0; i < 500; i++ {
				bad := uint32(3 + 2*((g*500+i)%400)) // odd: never a power of two
				err := local.SetTokensPerBlock(bad)
				runtime.Gosched()
				var e *kvcache.Error
				if !errors.As(err, &e) || !strings.HasSuffix(e.Message, fmt.Sprintf("got %d", bad)) {
					errs <- fmt.Errorf("SetTokensPerBlock(%d) = %v", bad, err)
					return
				}
				// A successful call in between must not disturb the next message.
				if err := local.SetTokensPerBlock(16); err != nil {
					errs <- err
					return
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestCloseTwice(t *testing.T) {
	cfg := newConfig(t, 64)
	c, err := kvcache.NewCache(cfg)
	must(t, err)
	must(t, cfg.Close())
	must(t, cfg.Close())
	must(t, c.Close())
	must(t, c.Close())
}

func TestUseAfterClose(t *testing.T) {
	cfg := newConfig(t, 64)
	c, err := kvcache.NewCache(cfg)
	must(t, err)
	_, err = c.AddSequence(1, tokens(0, 6), nil, 0)
	must(t, err)
	must(t, c.Close())
	must(t, cfg.Close())

	ids := []uint64{1}
	calls := map[string]error{}
	record := func(name string, err error) { calls[name] = err }
	record("Clone", func() error { _, err := cfg.Clone(); return err }())
	record("Validate", cfg.Validate())
	record("SetNumLayers", cfg.SetNumLayers(1))
	record("NumLayers", func() error { _, err := cfg.NumLayers(); return err }())
	record("NewCache", func() error { _, err := kvcache.NewCache(cfg); return err }())
	record("Describe", func() error { _, err := c.Describe(); return err }())
	record("DescribeGroup", func() error { _, err := c.DescribeGroup(0); return err }())
	record("DescribePool", func() error { _, err := c.DescribePool(0); return err }())
	record("LayerView", func() error { _, err := c.LayerView(0); return err }())
	record("LayerViewRank", func() error { _, err := c.LayerViewRank(0, 0); return err }())
	record("Stats", func() error { _, err := c.Stats(); return err }())
	record("ResetReuse", c.ResetReuse())
	record("Check", c.Check())
	record("AddSequence", func() error { _, err := c.AddSequence(2, tokens(0, 3), nil, 0); return err }())
	record("Probe", func() error { _, err := c.Probe(tokens(0, 3), nil); return err }())
	record("ExtendSequence", c.ExtendSequence(1, tokens(0, 1), 0))
	record("CommitSequence", c.CommitSequence(1, 1))
	record("RewindSequence", c.RewindSequence(1, 1))
	record("ForkSequence", c.ForkSequence(1, 3))
	record("RemoveSequence", c.RemoveSequence(1))
	record("PinSequence", c.PinSequence(1))
	record("UnpinSequence", c.UnpinSequence(1))
	record("DescribeSequence", func() error { _, err := c.DescribeSequence(1); return err }())
	record("SequenceBlockIDs", func() error { _, err := c.SequenceBlockIDs(1, 0); return err }())
	record("BlocksNeeded", func() error { _, err := c.BlocksNeeded(1, 1); return err }())
	record("BatchExtend", c.BatchExtend(ids, []int32{1}, 0))
	record("BlockTable", func() error { _, _, err := c.BlockTable(0, ids, -1); return err }())
	record("BlockTableCSR", func() error { _, err := c.BlockTableCSR(0, ids); return err }())
	record("SequenceLengths", func() error { _, err := c.SequenceLengths(ids); return err }())
	record("SlotMapping", func() error { _, _, err := c.SlotMapping(0, ids); return err }())
	record("StoreKV", c.StoreKV(&kvcache.StoreArgs{}, 0))
	record("StoreKVHost", c.StoreKVHost(&kvcache.HostStoreArgs{}))
	record("StoreKVStrided", c.StoreKVStrided(&kvcache.StoreArgs{}, &kvcache.StoreStrides{}, 0))
	record("StoreKVStridedHost", c.StoreKVStridedHost(&kvcache.HostStoreArgs{}, &kvcache.StoreStrides{}))
	record("CopyBlocks", c.CopyBlocks(0, nil, nil, nil, 0))
	record("DecodeWorkspaceSize", func() error { _, err := c.DecodeWorkspaceSize(&kvcache.DecodeArgs{}); return err }())
	record("DecodeAttention", c.DecodeAttention(&kvcache.DecodeArgs{}, 0))
	record("DecodeAttentionHost", c.DecodeAttentionHost(&kvcache.HostDecodeArgs{}))
	record("PrefillWorkspaceSize", func() error { _, err := c.PrefillWorkspaceSize(&kvcache.PrefillArgs{}); return err }())
	record("PrefillAttention", c.PrefillAttention(&kvcache.PrefillArgs{}, 0))
	record("PrefillAttentionHost", c.PrefillAttentionHost(&kvcache.HostPrefillArgs{}))
	record("AsyncError", c.AsyncError(0))
	for name, err := range calls {
		if !errors.Is(err, kvcache.ErrClosed) || !errors.Is(err, kvcache.ErrInvalidState) {
			t.Errorf("%s after Close = %v, want ErrClosed", name, err)
		}
	}
}

func TestDescribe(t *testing.T) {
	c := newCache(t, 64, nil)
	d, err := c.Describe()
	must(t, err)
	want := kvcache.CacheDesc{
		DeviceKind: kvcache.DeviceCPU, DType: kvcache.DTypeF32, Layout: kvcache.LayoutNHD,
		NumLayers: 2, NumGroups: 1, NumPools: 1, TokensPerBlock: 4, KVFactor: 2,
		NumBlocks: 16, TokenCapacity: 64, PrimaryBytes: 16 * 2 * 2 * 4 * 2 * 64 * 4,
		NumRanks: 1, MaxHeadReplication: 1,
	}
	if d != want {
		t.Errorf("Describe\n got %+v\nwant %+v", d, want)
	}
	g, err := c.DescribeGroup(0)
	must(t, err)
	blockBytes := uint64(2 * 2 * 4 * 2 * 64 * 4) // layers, kv, tokens, heads, dim, f32
	if g != (kvcache.GroupDesc{KVHeads: 2, HeadDim: 64, NumLayers: 2, BlockBytes: blockBytes, BytesPerToken: blockBytes / 4,
		KVHeadsPerRank: 2, HeadReplication: 1, DType: kvcache.DTypeF32, KVFactor: 2,
		Layout: kvcache.LayoutNHD}) {
		t.Errorf("DescribeGroup = %+v", g)
	}
	p, err := c.DescribePool(0)
	must(t, err)
	if p.NumGroups != 1 || p.BlockBytes != blockBytes || p.NumBlocks != 16 || p.Bytes != 16*blockBytes || p.Base == 0 {
		t.Errorf("DescribePool = %+v", p)
	}
	v, err := c.LayerView(1)
	must(t, err)
	if v.Base != p.Base+uintptr(blockBytes/2) || v.BlockStride != blockBytes || v.ElemSize != 4 ||
		v.HeadStride != 64*4 || v.TokenStride != 2*64*4 || v.KVStride != 4*2*64*4 || v.NumBlocks != 16 {
		t.Errorf("LayerView(1) = %+v (pool base %#x)", v, p.Base)
	}
	if _, err := c.DescribeGroup(1); !errors.Is(err, kvcache.ErrInvalidArgument) {
		t.Errorf("DescribeGroup(1) = %v", err)
	}
	if _, err := c.LayerView(2); !errors.Is(err, kvcache.ErrInvalidArgument) {
		t.Errorf("LayerView(2) = %v", err)
	}
}
