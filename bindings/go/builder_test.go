package kvcache_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"kvcache"
)

// Every Config setter has its ConfigBuilder method (SetX -> X).
func TestBuilderCoversEverySetter(t *testing.T) {
	cfgType := reflect.TypeOf((*kvcache.Config)(nil))
	bType := reflect.TypeOf((*kvcache.ConfigBuilder)(nil))
	for i := 0; i < cfgType.NumMethod(); i++ {
		name := cfgType.Method(i).Name
		if !strings.HasPrefix(name, "Set") {
			continue
		}
		m, ok := bType.MethodByName(strings.TrimPrefix(name, "Set"))
		if !ok {
			t.Errorf("ConfigBuilder has no %s (for Config.%s)", strings.TrimPrefix(name, "Set"), name)
			continue
		}
		set := cfgType.Method(i).Type
		if m.Type.NumIn() != set.NumIn() || m.Type.NumOut() != 1 || m.Type.Out(0) != bType {
			t.Errorf("ConfigBuilder.%s does not take Config.%s's arguments or does not return the builder", m.Name, name)
		}
	}
}

// The builder gives the config the setters give.
func TestBuilderBuildsWhatSettersSet(t *testing.T) {
	cfg, err := kvcache.NewConfigBuilder().
		NumLayers(4).KVHeads(2).HeadDim(64).DType(kvcache.DTypeF16).
		TokensPerBlock(32).AttentionWindows([]uint32{0, 256}).MaxTokens(8192).
		HostCacheBytes(1 << 20).SecondaryOffloadMinPriority(10).ManualClock(true).
		PartialReuse(false).Build()
	must(t, err)
	defer cfg.Close()
	check := func(name string, got, want interface{}, err error) {
		t.Helper()
		must(t, err)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	n, err := cfg.NumLayers()
	check("NumLayers", n, uint32(4), err)
	n, err = cfg.KVHeads(3)
	check("KVHeads(3)", n, uint32(2), err)
	n, err = cfg.HeadDim()
	check("HeadDim", n, uint32(64), err)
	dt, err := cfg.DType()
	check("DType", dt, kvcache.DTypeF16, err)
	n, err = cfg.TokensPerBlock()
	check("TokensPerBlock", n, uint32(32), err)
	n, err = cfg.AttentionWindow(3)
	check("AttentionWindow(3)", n, uint32(256), err)
	m, err := cfg.MaxTokens()
	check("MaxTokens", m, uint64(8192), err)
	m, err = cfg.HostCacheBytes()
	check("HostCacheBytes", m, uint64(1<<20), err)
	n, err = cfg.SecondaryOffloadMinPriority()
	check("SecondaryOffloadMinPriority", n, uint32(10), err)
	on, err := cfg.ManualClock()
	check("ManualClock", on, true, err)
	on, err = cfg.PartialReuse()
	check("PartialReuse", on, false, err)
	on, err = cfg.BlockReuse()
	check("BlockReuse (default)", on, true, err)
}

// One error check: the first refused setting fails Build, NewCache and
// Validate, naming the C setter and the value; later settings do not run.
func TestBuilderReportsTheFirstRefusedSetting(t *testing.T) {
	b := kvcache.NewConfigBuilder().NumLayers(2).KVHeads(2).HeadDim(64).
		TokensPerBlock(12).FreeGPUMemoryFraction(7).MaxTokens(1024)
	const want = "kvcache: kvc_config_set_tokens_per_block: KVC_ERR_INVALID_ARGUMENT: "
	for name, err := range map[string]error{
		"Build":    func() error { _, err := b.Build(); return err }(),
		"NewCache": func() error { c, err := b.NewCache(); c.Close(); return err }(),
		"Validate": b.Validate(),
		"NewStatefulCache": func() error {
			c, err := b.NewStatefulCache(&kvcache.StatefulOptions{Batch: 1})
			c.Close()
			return err
		}(),
	} {
		if !errors.Is(err, kvcache.ErrInvalidArgument) || !strings.HasPrefix(err.Error(), want) ||
			!strings.Contains(err.Error(), "12") {
			t.Errorf("%s = %v, want %q... naming 12", name, err, want)
		}
	}
	// Settings are valid one by one but not together: NewCache's error.
	_, err := kvcache.NewConfigBuilder().NumLayers(2).KVHeads(2).NewCache()
	if !errors.Is(err, kvcache.ErrInvalidArgument) || !strings.Contains(err.Error(), "kvc_cache_create") {
		t.Errorf("NewCache without head dim = %v, want a kvc_cache_create ErrInvalidArgument", err)
	}
	// A working cache in one expression, and a builder reused.
	good := kvcache.NewConfigBuilder().NumLayers(2).KVHeads(2).HeadDim(64).
		DType(kvcache.DTypeF32).TokensPerBlock(4).MaxTokens(256)
	for i := 0; i < 2; i++ {
		c, err := good.NewCache()
		must(t, err)
		d, err := c.Describe()
		must(t, err)
		if d.NumBlocks != 64 {
			t.Errorf("NumBlocks = %d, want 64", d.NumBlocks)
		}
		must(t, c.Close())
	}
}
