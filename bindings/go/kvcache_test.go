package kvcache_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
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

func TestPrefixReuseCounts(t *testing.T) {
	for _, partial := range []bool{false, true} {
		t.Run(fmt.Sprintf("partial=%v", partial), func(t *testing.T) {
			c := newCache(t, 64, func(cfg *kvcache.Config) { must(t, cfg.SetPartialReuse(partial)) })
			prompt := tokens(100, 10) // 2 full blocks of 4 + 2 tokens
			if n := mustU64(t)(c.AddSequence(1, prompt, nil, 0)); n != 0 {
				t.Fatalf("first add: %d cached, want 0", n)
			}
			// Nothing is reusable before the commit.
			if n := mustU64(t)(c.Probe(prompt, nil)); n != 0 {
				t.Errorf("probe before commit: %d, want 0", n)
			}
			must(t, c.CommitSequence(1, 10))
			must(t, c.RemoveSequence(1))

			// Full blocks are reused; with partial reuse the tail's tokens
			// too, except the last prompt token, always recomputed.
			want := uint64(8)
			if partial {
				want = 9
			}
			if n := mustU64(t)(c.Probe(prompt, nil)); n != want {
				t.Errorf("probe: %d, want %d", n, want)
			}
			if n := mustU64(t)(c.AddSequence(2, prompt, nil, 0)); n != want {
				t.Errorf("second add: %d cached, want %d", n, want)
			}
			s := stats(t, c)
			if s.ReusedBlocks != 2+boolU64(partial) || s.MissedBlocks != 3+1-boolU64(partial) || s.NumSequences != 1 {
				t.Errorf("stats %+v", s)
			}
			if s.FreeBlocks+s.CachedBlocks+s.InUseBlocks != s.NumBlocks {
				t.Errorf("block states do not add up: %+v", s)
			}
			d, err := c.DescribeSequence(2)
			must(t, err)
			if d.NumTokens != 10 || d.PromptTokens != 10 || d.CachedTokens != want || d.NumBlocks != 3 {
				t.Errorf("DescribeSequence(2) = %+v", d)
			}
			// A prompt sharing only the first block.
			other := append(tokens(100, 4), tokens(500, 6)...)
			if n := mustU64(t)(c.AddSequence(3, other, nil, 0)); n != 4 {
				t.Errorf("shared first block: %d cached, want 4", n)
			}
			ids2, err := c.SequenceBlockIDs(2, 0)
			must(t, err)
			ids3, err := c.SequenceBlockIDs(3, 0)
			must(t, err)
			if len(ids2) != 3 || len(ids3) != 3 || ids2[0] != ids3[0] || ids2[1] == ids3[1] {
				t.Errorf("block ids %v and %v: want the first shared only", ids2, ids3)
			}
			must(t, c.Check())
		})
	}
}

func boolU64(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

func TestSaltIsolation(t *testing.T) {
	c := newCache(t, 256, nil)
	prompt := tokens(7, 9) // 2 full blocks + 1 token
	add := func(id uint64, o *kvcache.SequenceOptions) uint64 {
		t.Helper()
		n := mustU64(t)(c.AddSequence(id, prompt, o, 0))
		must(t, c.CommitSequence(id, uint64(len(prompt))))
		return n
	}
	alice := &kvcache.SequenceOptions{Salt: []byte("alice")}
	if n := add(1, alice); n != 0 {
		t.Fatalf("first add: %d", n)
	}
	for _, tc := range []struct {
		name string
		o    *kvcache.SequenceOptions
		want uint64
	}{
		{"same salt", &kvcache.SequenceOptions{Salt: []byte("alice")}, 8},
		{"other salt", &kvcache.SequenceOptions{Salt: []byte("bob")}, 0},
		{"no salt", nil, 0},
		{"empty salt", &kvcache.SequenceOptions{Salt: []byte{}}, 0},
		{"salt as LoRA", &kvcache.SequenceOptions{LoRA: kvcache.LoRA(0)}, 0},
		{"salt and extra key", &kvcache.SequenceOptions{Salt: []byte("alice"),
			ExtraKeys: []kvcache.ExtraKey{{Offset: 4, Length: 2, Data: []byte("image-1")}}}, 4},
	} {
		if n := mustU64(t)(c.Probe(prompt, tc.o)); n != tc.want {
			t.Errorf("%s: probe %d cached, want %d", tc.name, n, tc.want)
		}
	}
	// Absent and empty salts, no LoRA and LoRA 0 are four scopes: each hits
	// only itself.
	scopes := []*kvcache.SequenceOptions{nil, {Salt: []byte{}}, {LoRA: kvcache.LoRA(0)}, {LoRA: kvcache.LoRA(1)}}
	for i, o := range scopes {
		add(uint64(10+i), o)
	}
	for i, o := range scopes {
		if n := mustU64(t)(c.Probe(prompt, o)); n != 8 {
			t.Errorf("scope %d: probe %d cached, want 8", i, n)
		}
	}
	// Priorities go through to the sequence.
	_, err := c.AddSequence(20, tokens(900, 3), &kvcache.SequenceOptions{
		PromptPriority: kvcache.Priority(80), DecodePriority: kvcache.Priority(5)}, 0)
	must(t, err)
	d, err := c.DescribeSequence(20)
	must(t, err)
	if d.PromptPriority != 80 || d.DecodePriority != 5 {
		t.Errorf("priorities %d/%d, want 80/5", d.PromptPriority, d.DecodePriority)
	}
	if _, err := c.AddSequence(21, tokens(900, 3), &kvcache.SequenceOptions{PromptPriority: kvcache.Priority(101)}, 0); !errors.Is(err, kvcache.ErrInvalidArgument) {
		t.Errorf("priority 101: %v", err)
	}
	must(t, c.Check())
}

func TestOutOfBlocksLeavesStateUnchanged(t *testing.T) {
	c := newCache(t, 32, func(cfg *kvcache.Config) { must(t, cfg.SetPartialReuse(false)) }) // 8 blocks
	_, err := c.AddSequence(1, tokens(0, 12), nil, 0)                                       // 3 blocks
	must(t, err)
	must(t, c.CommitSequence(1, 12))
	_, err = c.AddSequence(2, tokens(100, 8), nil, 0) // 2 blocks
	must(t, err)
	must(t, c.CommitSequence(2, 8))
	must(t, c.RemoveSequence(2)) // 2 cached blocks, 3 free

	type snapshot struct {
		stats    kvcache.Stats
		ids      []int32
		desc     kvcache.SequenceDesc
		probeOld uint64
	}
	snap := func() snapshot {
		ids, err := c.SequenceBlockIDs(1, 0)
		must(t, err)
		d, err := c.DescribeSequence(1)
		must(t, err)
		return snapshot{stats(t, c), ids, d, mustU64(t)(c.Probe(tokens(100, 8), nil))}
	}
	before := snap()

	// 6 blocks needed, 3 free + 2 evictable.
	_, err = c.AddSequence(3, tokens(200, 24), nil, 0)
	var e *kvcache.Error
	if !errors.As(err, &e) || e.Status != kvcache.StatusOutOfBlocks || e.Message == "" {
		t.Fatalf("add beyond capacity = %v, want KVC_ERR_OUT_OF_BLOCKS with a message", err)
	}
	if after := snap(); !reflect.DeepEqual(before, after) {
		t.Errorf("a failed add changed the cache\nbefore %+v\n after %+v", before, after)
	}
	if _, err := c.DescribeSequence(3); !errors.Is(err, kvcache.ErrNotFound) {
		t.Errorf("failed add left sequence 3: %v", err)
	}
	// An extend beyond capacity fails the same way.
	if err := c.ExtendSequence(1, tokens(300, 24), 0); !errors.Is(err, kvcache.ErrOutOfBlocks) {
		t.Fatalf("extend beyond capacity = %v", err)
	}
	if after := snap(); !reflect.DeepEqual(before, after) {
		t.Errorf("a failed extend changed the cache\nbefore %+v\n after %+v", before, after)
	}
	// A batch step where one sequence does not fit changes none.
	_, err = c.AddSequence(4, tokens(400, 4), nil, 0)
	must(t, err)
	before = snap()
	if err := c.BatchExtend([]uint64{1, 4, 99}, []int32{1, 2, 3}, 0); !errors.Is(err, kvcache.ErrNotFound) {
		t.Errorf("batch with an unknown id = %v", err)
	}
	if after := snap(); !reflect.DeepEqual(before, after) {
		t.Errorf("a failed batch extend changed the cache\nbefore %+v\n after %+v", before, after)
	}
	must(t, c.Check())
}

func TestSequenceLifecycle(t *testing.T) {
	c := newCache(t, 64, nil)
	_, err := c.AddSequence(1, tokens(0, 6), nil, 0)
	must(t, err)
	must(t, c.ExtendSequence(1, tokens(6, 3), 0))
	if n := mustU64(t)(c.BlocksNeeded(1, 4)); n != 1 {
		t.Errorf("BlocksNeeded(1, 4) = %d, want 1", n)
	}
	must(t, c.RewindSequence(1, 2))
	must(t, c.CommitSequence(1, 7))
	must(t, c.ForkSequence(1, 2))
	d, err := c.DescribeSequence(2)
	must(t, err)
	if d.NumTokens != 7 || d.NumBlocks != 2 {
		t.Errorf("forked child %+v", d)
	}
	a, err := c.SequenceBlockIDs(1, 0)
	must(t, err)
	b, err := c.AppendSequenceBlockIDs(make([]int32, 1, 8), 2, 0)
	must(t, err)
	if !reflect.DeepEqual(a, b[1:]) || b[0] != 0 {
		t.Errorf("fork shares blocks: parent %v, child %v", a, b[1:])
	}
	must(t, c.PinSequence(1))
	if err := c.PinSequence(1); !errors.Is(err, kvcache.ErrAlreadyExists) {
		t.Errorf("pin twice = %v", err)
	}
	must(t, c.RemoveSequence(1))
	must(t, c.RemoveSequence(2))
	if s := stats(t, c); s.NumPinned != 1 || s.NumSequences != 0 {
		t.Errorf("after remove: %+v", s)
	}
	must(t, c.UnpinSequence(1))
	if err := c.UnpinSequence(1); !errors.Is(err, kvcache.ErrNotFound) {
		t.Errorf("unpin twice = %v", err)
	}
	must(t, c.ResetReuse())
	if s := stats(t, c); s.CachedBlocks != 0 || s.FreeBlocks != s.NumBlocks {
		t.Errorf("after ResetReuse: %+v", s)
	}
	must(t, c.Check())
}

func TestBatchTables(t *testing.T) {
	c := newCache(t, 128, func(cfg *kvcache.Config) { must(t, cfg.SetPartialReuse(false)) })
	// Sequence 1 computed and committed, so that 2 reuses its first block.
	_, err := c.AddSequence(1, tokens(0, 9), nil, 0)
	must(t, err)
	_, _, err = c.SlotMapping(0, []uint64{1})
	must(t, err)
	must(t, c.CommitSequence(1, 9))
	cached, err := c.AddSequence(2, append(tokens(0, 4), tokens(50, 2)...), nil, 0)
	must(t, err)
	if cached != 4 {
		t.Fatalf("cached %d, want 4", cached)
	}
	_, err = c.AddSequence(3, tokens(70, 1), nil, 0)
	must(t, err)
	ids := []uint64{1, 2, 3}
	blocks := map[uint64][]int32{}
	for _, id := range ids {
		b, err := c.SequenceBlockIDs(id, 0)
		must(t, err)
		blocks[id] = b
	}

	table, stride, err := c.BlockTable(0, ids, -1)
	must(t, err)
	if stride != 3 || len(table) != 9 {
		t.Fatalf("table %v stride %d", table, stride)
	}
	for i, id := range ids {
		row := table[i*stride : (i+1)*stride]
		for j := range row {
			want := int32(-1)
			if j < len(blocks[id]) {
				want = blocks[id][j]
			}
			if row[j] != want {
				t.Errorf("row %d = %v, blocks %v", i, row, blocks[id])
				break
			}
		}
	}
	// A fixed stride, reusing storage.
	buf := make([]int32, 0, 64)
	table2, stride2, err := c.BlockTableInto(buf, 0, ids, 8, 0)
	must(t, err)
	if stride2 != 8 || len(table2) != 24 || &table2[0] != &buf[:1][0] || table2[8] != blocks[2][0] || table2[10] != 0 {
		t.Errorf("BlockTableInto: %v stride %d", table2, stride2)
	}

	csr, err := c.BlockTableCSR(0, ids)
	must(t, err)
	wantCSR := kvcache.CSRTable{
		Indptr:      []int32{0, 3, 5, 6},
		Indices:     append(append(append([]int32{}, blocks[1]...), blocks[2]...), blocks[3]...),
		LastPageLen: []int32{1, 2, 1},
	}
	if !reflect.DeepEqual(csr, wantCSR) {
		t.Errorf("CSR\n got %+v\nwant %+v", csr, wantCSR)
	}

	lengths, err := c.SequenceLengths(ids)
	must(t, err)
	if !reflect.DeepEqual(lengths, []int32{9, 6, 1}) {
		t.Errorf("lengths %v", lengths)
	}

	// Sequence 1's slots were taken already; 2 has 4 cached tokens (-1) and
	// 2 new ones; 3 has 1.
	must(t, c.BatchExtend([]uint64{1, 3}, []int32{9, 71}, 0))
	slots, newTokens, err := c.SlotMapping(0, ids)
	must(t, err)
	slot := func(id uint64, pos int) int64 { return int64(blocks[id][pos/4])*4 + int64(pos%4) }
	b1, err := c.SequenceBlockIDs(1, 0)
	must(t, err)
	wantSlots := []int64{int64(b1[2])*4 + 1, -1, -1, -1, -1, slot(2, 4), slot(2, 5), slot(3, 0), slot(3, 1)}
	if !reflect.DeepEqual(newTokens, []int32{1, 6, 2}) || !reflect.DeepEqual(slots, wantSlots) {
		t.Errorf("slot mapping %v (per sequence %v), want %v (1 6 2)", slots, newTokens, wantSlots)
	}
	// The cursors advanced: nothing new now.
	slots, newTokens, err = c.SlotMapping(0, ids)
	must(t, err)
	if len(slots) != 0 || !reflect.DeepEqual(newTokens, []int32{0, 0, 0}) {
		t.Errorf("second slot mapping %v %v", slots, newTokens)
	}
	if err := c.BatchExtend([]uint64{1}, []int32{1, 2}, 0); !errors.Is(err, kvcache.ErrInvalidArgument) {
		t.Errorf("BatchExtend with mismatched lengths = %v", err)
	}
	if _, err := c.SequenceLengths([]uint64{1, 42}); !errors.Is(err, kvcache.ErrNotFound) {
		t.Errorf("SequenceLengths(unknown) = %v", err)
	}
	must(t, c.Check())
}

func TestConcurrentGoroutines(t *testing.T) {
	c := newCache(t, 4096, nil)
	const workers, rounds = 8, 200
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	shared := tokens(1000, 16) // every worker's prompts share this prefix
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for r := 0; r < rounds; r++ {
				id := uint64(w*rounds + r + 1)
				prompt := append(append([]int32{}, shared...), tokens(w*100000+r*10, 5)...)
				if _, err := c.AddSequence(id, prompt, nil, 0); err != nil {
					errs <- err
					return
				}
				if err := c.ExtendSequence(id, []int32{int32(r)}, 0); err != nil {
					errs <- err
					return
				}
				if _, _, err := c.SlotMapping(0, []uint64{id}); err != nil {
					errs <- err
					return
				}
				if err := c.CommitSequence(id, uint64(len(prompt)+1)); err != nil {
					errs <- err
					return
				}
				if _, err := c.Stats(); err != nil {
					errs <- err
					return
				}
				if err := c.RemoveSequence(id); err != nil {
					errs <- err
					return
				}
				// An expected failure from every goroutine, with its own message.
				_, err := c.DescribeSequence(id)
				var e *kvcache.Error
				if !errors.As(err, &e) || e.Status != kvcache.StatusNotFound || !strings.Contains(e.Message, fmt.Sprint(id)) {
					errs <- fmt.Errorf("describe removed %d: %v", id, err)
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	s := stats(t, c)
	if s.NumSequences != 0 || s.InUseBlocks != 0 || s.ReusedBlocks == 0 {
		t.Errorf("after the workers: %+v", s)
	}
	must(t, c.Check())
}

// Close racing with calls on other goroutines: every call either works or
// returns ErrClosed; nothing crashes.
func TestCloseWhileInUse(t *testing.T) {
	for round := 0; round < 20; round++ {
		cfg := newConfig(t, 1024)
		c, err := kvcache.NewCache(cfg)
		must(t, err)
		cfg.Close()
		var wg sync.WaitGroup
		errs := make(chan error, 4)
		for w := 0; w < 4; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				for i := 0; i < 200; i++ {
					id := uint64(w*1000 + i)
					_, err := c.AddSequence(id, tokens(i, 5), nil, 0)
					if err == nil {
						err = c.RemoveSequence(id)
					}
					if errors.Is(err, kvcache.ErrClosed) {
						return
					}
					if err != nil {
						errs <- err
						return
					}
				}
			}(w)
		}
		runtime.Gosched()
		must(t, c.Close())
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	}
}

func f32Bytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

func TestKernelsOnHostMemory(t *testing.T) {
	c := newCache(t, 64, nil)
	_, err := c.AddSequence(1, tokens(0, 3), nil, 0)
	must(t, err)
	slots, _, err := c.SlotMapping(0, []uint64{1})
	must(t, err)
	const heads, dim = 2, 64
	key := make([]float32, 3*heads*dim)
	value := make([]float32, 3*heads*dim)
	for i := range key {
		key[i] = float32(i%7) * 0.01
		value[i] = float32(i)
	}
	must(t, c.StoreKVHost(&kvcache.HostStoreArgs{
		Layer: 1, SrcDType: kvcache.DTypeF32, Key: f32Bytes(key), Value: f32Bytes(value), SlotMapping: slots,
	}))
	// With keys all zero, attention averages V over the 3 tokens.
	for i := range key {
		key[i] = 0
	}
	must(t, c.StoreKVHost(&kvcache.HostStoreArgs{
		Layer: 1, SrcDType: kvcache.DTypeF32, Key: f32Bytes(key), Value: f32Bytes(value), SlotMapping: slots,
	}))
	table, stride, err := c.BlockTable(0, []uint64{1}, -1)
	must(t, err)
	query := f32Bytes(make([]float32, 4*dim)) // 4 query heads: GQA over 2 kv heads
	out := make([]byte, len(query))
	// kvc_decode_workspace_size checks that the pointers are set (though it
	// does not read them): give it a C buffer.
	scratch := kvc.Kvcgo_buffer_new(nil, 64)
	defer kvc.Kvcgo_buffer_free(scratch)
	ws, err := c.DecodeWorkspaceSize(&kvcache.DecodeArgs{Layer: 1, Batch: 1, QHeads: 4, QDType: kvcache.DTypeF32, MaxSeqLen: 3,
		Query: scratch, Out: scratch, SeqLens: scratch, BlockTable: scratch, TableStride: 1})
	must(t, err)
	if ws != 0 {
		t.Errorf("workspace on a CPU cache: %d", ws)
	}
	must(t, c.DecodeAttentionHost(&kvcache.HostDecodeArgs{
		Layer: 1, QHeads: 4, QDType: kvcache.DTypeF32, Query: query, Out: out,
		SeqLens: []int32{3}, BlockTable: table, TableStride: uint32(stride), MaxSeqLen: 3,
	}))
	for h := 0; h < 4; h++ {
		kvh := h / 2
		for d := 0; d < dim; d++ {
			want := (value[(0*heads+kvh)*dim+d] + value[(1*heads+kvh)*dim+d] + value[(2*heads+kvh)*dim+d]) / 3
			got := math.Float32frombits(binary.LittleEndian.Uint32(out[4*(h*dim+d):]))
			if math.Abs(float64(got-want)) > 1e-3*math.Abs(float64(want))+1e-4 {
				t.Fatalf("out[head %d][%d] = %g, want %g", h, d, got, want)
			}
		}
	}
	// CSR gives the same.
	csr, err := c.BlockTableCSR(0, []uint64{1})
	must(t, err)
	out2 := make([]byte, len(out))
	must(t, c.DecodeAttentionHost(&kvcache.HostDecodeArgs{
		Layer: 1, QHeads: 4, QDType: kvcache.DTypeF32, Query: query, Out: out2,
		SeqLens: []int32{3}, BlockTable: csr.Indices, Indptr: csr.Indptr, MaxSeqLen: 3,
	}))
	if !reflect.DeepEqual(out, out2) {
		t.Errorf("CSR and padded tables differ")
	}
	// Block copies, and their argument checks.
	ids, err := c.SequenceBlockIDs(1, 0)
	must(t, err)
	must(t, c.CopyBlocks(0, []int32{ids[0]}, []int32{15}, []uint32{2}, 0))
	if err := c.CopyBlocks(0, []int32{ids[0]}, []int32{16}, nil, 0); !errors.Is(err, kvcache.ErrInvalidArgument) {
		t.Errorf("copy to block 16 of 16 = %v", err)
	}
	// Argument errors of the kernels carry the library's message.
	err = c.StoreKVHost(&kvcache.HostStoreArgs{Layer: 5, SrcDType: kvcache.DTypeF32, Key: f32Bytes(key[:heads*dim]),
		Value: f32Bytes(value[:heads*dim]), SlotMapping: []int64{0}})
	var e *kvcache.Error
	if !errors.As(err, &e) || e.Status != kvcache.StatusInvalidArgument || e.Op != "kvc_store_kv" || !strings.Contains(e.Message, "5") {
		t.Errorf("store to layer 5 = %v", err)
	}
	err = c.StoreKVHost(&kvcache.HostStoreArgs{Layer: 0, SrcDType: kvcache.DTypeF32, Key: f32Bytes(key[:heads*dim]),
		Value: f32Bytes(value[:heads*dim]), SlotMapping: []int64{64}})
	if !errors.Is(err, kvcache.ErrInvalidArgument) {
		t.Errorf("store to slot 64 of 64 = %v", err)
	}
	if err := c.StoreKV(&kvcache.StoreArgs{Layer: 0, NumTokens: 1, SrcDType: kvcache.DTypeF32}, 0); !errors.Is(err, kvcache.ErrInvalidArgument) {
		t.Errorf("StoreKV with NULL buffers = %v", err)
	}
	if err := c.DecodeAttention(&kvcache.DecodeArgs{Layer: 0, Batch: 1, QHeads: 3, QDType: kvcache.DTypeF32, MaxSeqLen: 3}, 0); !errors.Is(err, kvcache.ErrInvalidArgument) {
		t.Errorf("DecodeAttention with 3 query heads = %v", err)
	}
	must(t, c.AsyncError(0))
	must(t, c.Check())
}

// A second request reuses the first one's prefix: it stores K/V only where
// its slot mapping is not -1, and decode attention reads the reused blocks
// written for the first request.
func TestReusedPrefixIsReadBack(t *testing.T) {
	c := newCache(t, 64, func(cfg *kvcache.Config) { must(t, cfg.SetPartialReuse(false)) })
	const heads, dim = 2, 64
	// K is zero, so attention averages V; V of token position p is p+1.
	kv := func(positions []int) (key, value []byte) {
		k := make([]float32, len(positions)*heads*dim)
		v := make([]float32, len(positions)*heads*dim)
		for i, p := range positions {
			for j := 0; j < heads*dim; j++ {
				v[i*heads*dim+j] = float32(p + 1)
			}
		}
		return f32Bytes(k), f32Bytes(v)
	}
	store := func(id uint64) int {
		t.Helper()
		slots, _, err := c.SlotMapping(0, []uint64{id})
		must(t, err)
		var positions []int
		var written []int64
		d, err := c.DescribeSequence(id)
		must(t, err)
		first := int(d.NumTokens) - len(slots)
		for i, s := range slots {
			if s >= 0 {
				positions = append(positions, first+i)
				written = append(written, s)
			}
		}
		if len(written) > 0 {
			k, v := kv(positions)
			for layer := uint32(0); layer < 2; layer++ {
				must(t, c.StoreKVHost(&kvcache.HostStoreArgs{Layer: layer, SrcDType: kvcache.DTypeF32, Key: k, Value: v, SlotMapping: written}))
			}
		}
		return len(written)
	}
	prompt := tokens(40, 10)
	_, err := c.AddSequence(1, prompt, nil, 0)
	must(t, err)
	if n := store(1); n != 10 {
		t.Fatalf("request 1 wrote %d tokens, want 10", n)
	}
	must(t, c.CommitSequence(1, 10))
	must(t, c.RemoveSequence(1))

	cached := mustU64(t)(c.AddSequence(2, prompt, nil, 0))
	if cached != 8 {
		t.Fatalf("request 2: %d cached, want 8", cached)
	}
	if n := store(2); n != 2 {
		t.Fatalf("request 2 wrote %d tokens, want 2 (the rest is reused)", n)
	}
	table, stride, err := c.BlockTable(0, []uint64{2}, -1)
	must(t, err)
	out := make([]byte, heads*dim*4)
	must(t, c.DecodeAttentionHost(&kvcache.HostDecodeArgs{
		Layer: 1, QHeads: heads, QDType: kvcache.DTypeF32, Query: make([]byte, len(out)), Out: out,
		SeqLens: []int32{10}, BlockTable: table, TableStride: uint32(stride), MaxSeqLen: 10,
	}))
	const want = float32(5.5) // mean of 1..10
	for i := 0; i < heads*dim; i++ {
		if got := math.Float32frombits(binary.LittleEndian.Uint32(out[4*i:])); math.Abs(float64(got-want)) > 1e-4 {
			t.Fatalf("out[%d] = %g, want %g: reused blocks do not hold request 1's V", i, got, want)
		}
	}
}

func TestBatchExtendOutOfBlocks(t *testing.T) {
	c := newCache(t, 16, nil) // 4 blocks
	_, err := c.AddSequence(1, tokens(0, 4), nil, 0)
	must(t, err)
	_, err = c.AddSequence(2, tokens(10, 4), nil, 0)
	must(t, err)
	_, err = c.AddSequence(3, tokens(20, 7), nil, 0) // 2 blocks, 1 free slot left in its tail
	must(t, err)
	before := stats(t, c)
	lengths, err := c.SequenceLengths([]uint64{1, 2, 3})
	must(t, err)
	// 1 and 2 need a new block each; none is free.
	err = c.BatchExtend([]uint64{3, 1, 2}, []int32{1, 2, 3}, 0)
	if !errors.Is(err, kvcache.ErrOutOfBlocks) {
		t.Fatalf("BatchExtend = %v, want ErrOutOfBlocks", err)
	}
	after, err := c.SequenceLengths([]uint64{1, 2, 3})
	must(t, err)
	if !reflect.DeepEqual(lengths, after) || !reflect.DeepEqual(before, stats(t, c)) {
		t.Errorf("failed BatchExtend changed the cache: lengths %v -> %v, stats %+v -> %+v", lengths, after, before, stats(t, c))
	}
	must(t, c.BatchExtend([]uint64{3}, []int32{1}, 0)) // fits in 3's tail
	must(t, c.Check())
}

// Buffers too small for the tables are grown from the size the library
// reports, and the result is the same as with a large buffer.
func TestTablesGrowWhenTooSmall(t *testing.T) {
	c := newCache(t, 4096, nil)
	_, err := c.AddSequence(1, tokens(0, 400), nil, 0) // 100 blocks: more than the first guess
	must(t, err)
	_, err = c.AddSequence(2, tokens(5000, 9), nil, 0)
	must(t, err)
	ids := []uint64{1, 2}

	all, err := c.SequenceBlockIDs(1, 0)
	must(t, err)
	grown, err := c.AppendSequenceBlockIDs(make([]int32, 0, 1), 1, 0)
	must(t, err)
	if len(all) != 100 || !reflect.DeepEqual(all, grown) {
		t.Errorf("block ids: %d, grown from capacity 1: %d", len(all), len(grown))
	}

	table, stride, err := c.BlockTable(0, ids, -1)
	must(t, err)
	small, smallStride, err := c.BlockTableInto(make([]int32, 0, 2), 0, ids, 0, -1)
	must(t, err)
	if stride != 100 || len(table) != 200 || smallStride != stride || !reflect.DeepEqual(table, small) {
		t.Errorf("block table stride %d (len %d), from a small buffer stride %d", stride, len(table), smallStride)
	}
	if !reflect.DeepEqual(table[:100], all) || table[103] != -1 {
		t.Errorf("block table rows wrong")
	}

	csr, err := c.BlockTableCSR(0, ids)
	must(t, err)
	tiny := kvcache.CSRTable{Indices: make([]int32, 0, 1)}
	must(t, c.BlockTableCSRInto(&tiny, 0, ids))
	if len(csr.Indices) != 103 || !reflect.DeepEqual(csr, tiny) {
		t.Errorf("CSR: %d indices; from a small buffer %+v", len(csr.Indices), tiny.Indptr)
	}

	newTokens := make([]int32, 2)
	slots, err := c.SlotMappingInto(make([]int64, 0, 3), newTokens, 0, ids)
	must(t, err)
	if len(slots) != 409 || !reflect.DeepEqual(newTokens, []int32{400, 9}) || slots[0] != int64(all[0])*4 || slots[399] != int64(all[99])*4+3 {
		t.Errorf("slot mapping from a small buffer: %d slots, per sequence %v", len(slots), newTokens)
	}
	if _, err := c.SequenceLengths(nil); err != nil {
		t.Errorf("SequenceLengths(nil) = %v", err)
	}
	if tb, st, err := c.BlockTable(0, nil, -1); err != nil || len(tb) != 0 || st != 0 {
		t.Errorf("BlockTable(no ids) = %v, %d, %v", tb, st, err)
	}
}
