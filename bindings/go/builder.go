package kvcache

// ConfigBuilder configures a cache with one error check: each method
// records a setting and returns the builder, and Build (or NewCache)
// applies the settings in order to a new Config, stopping at the first
// one the library refuses and returning its error (Op names the C setter,
// Message the value at fault):
//
//	cache, err := kvcache.NewConfigBuilder().
//		NumLayers(32).KVHeads(8).HeadDim(128).
//		DType(kvcache.DTypeBF16).MaxTokens(65536).
//		NewCache()
//
// Settings not given keep the defaults of NewConfig. A builder holds no C
// memory and may be reused: every Build makes a new Config. Slices passed
// to it are copied.
type ConfigBuilder struct {
	steps []func(*Config) error
}

// NewConfigBuilder returns an empty builder (the defaults of NewConfig).
func NewConfigBuilder() *ConfigBuilder { return &ConfigBuilder{} }

// set records one setting. On a nil builder it returns a builder whose
// Build fails, so a chain never panics.
func (b *ConfigBuilder) set(f func(*Config) error) *ConfigBuilder {
	if b == nil {
		return &ConfigBuilder{steps: []func(*Config) error{
			func(*Config) error { return nilReceiver("kvcache.ConfigBuilder", "ConfigBuilder") },
		}}
	}
	b.steps = append(b.steps, f)
	return b
}

// Build makes a Config holding every setting, or returns the error of the
// first setting refused (the config is then freed). The caller closes the
// Config.
func (b *ConfigBuilder) Build() (*Config, error) {
	if b == nil {
		return nil, nilReceiver("kvcache.ConfigBuilder.Build", "ConfigBuilder")
	}
	cfg, err := NewConfig()
	if err != nil {
		return nil, err
	}
	for _, step := range b.steps {
		if err := step(cfg); err != nil {
			cfg.Close()
			return nil, err
		}
	}
	return cfg, nil
}

// Validate builds the config and validates it as NewCache will.
func (b *ConfigBuilder) Validate() error {
	cfg, err := b.Build()
	if err != nil {
		return err
	}
	defer cfg.Close()
	return cfg.Validate()
}

// NewCache builds the config, creates a cache from it and frees the
// config: the first error of the settings or of the creation.
func (b *ConfigBuilder) NewCache() (*Cache, error) {
	cfg, err := b.Build()
	if err != nil {
		return nil, err
	}
	defer cfg.Close()
	return NewCache(cfg)
}

// NewStatefulCache builds the config and creates a stateful cache from it
// with options o (see NewStatefulCache), then frees the config.
func (b *ConfigBuilder) NewStatefulCache(o *StatefulOptions) (*StatefulCache, error) {
	cfg, err := b.Build()
	if err != nil {
		return nil, err
	}
	defer cfg.Close()
	return NewStatefulCache(cfg, o)
}

// NumLayers is Config.SetNumLayers.
func (b *ConfigBuilder) NumLayers(n uint32) *ConfigBuilder {
	return b.set(func(c *Config) error { return c.SetNumLayers(n) })
}

// KVHeads is Config.SetKVHeads.
func (b *ConfigBuilder) KVHeads(n uint32) *ConfigBuilder {
	return b.set(func(c *Config) error { return c.SetKVHeads(n) })
}

// KVHeadsPerLayer is Config.SetKVHeadsPerLayer.
func (b *ConfigBuilder) KVHeadsPerLayer(heads []uint32) *ConfigBuilder {
	heads = append([]uint32(nil), heads...)
	return b.set(func(c *Config) error { return c.SetKVHeadsPerLayer(heads) })
}

// HeadDim is Config.SetHeadDim.
func (b *ConfigBuilder) HeadDim(n uint32) *ConfigBuilder {
	return b.set(func(c *Config) error { return c.SetHeadDim(n) })
}

// DType is Config.SetDType.
func (b *ConfigBuilder) DType(t DType) *ConfigBuilder {
	return b.set(func(c *Config) error { return c.SetDType(t) })
}

// KVFactor is Config.SetKVFactor.
func (b *ConfigBuilder) KVFactor(n uint32) *ConfigBuilder {
	return b.set(func(c *Config) error { return c.SetKVFactor(n) })
}

// Layout is Config.SetLayout.
func (b *ConfigBuilder) Layout(l Layout) *ConfigBuilder {
	return b.set(func(c *Config) error { return c.SetLayout(l) })
}

// TokensPerBlock is Config.SetTokensPerBlock.
func (b *ConfigBuilder) TokensPerBlock(n uint32) *ConfigBuilder {
	return b.set(func(c *Config) error { return c.SetTokensPerBlock(n) })
}

// AttentionWindows is Config.SetAttentionWindows.
func (b *ConfigBuilder) AttentionWindows(windows []uint32) *ConfigBuilder {
	windows = append([]uint32(nil), windows...)
	return b.set(func(c *Config) error { return c.SetAttentionWindows(windows) })
}

// Ranks is Config.SetRanks.
func (b *ConfigBuilder) Ranks(kind DeviceKind, ordinals []int32) *ConfigBuilder {
	ordinals = append([]int32(nil), ordinals...)
	return b.set(func(c *Config) error { return c.SetRanks(kind, ordinals) })
}

// Device is Config.SetDevice.
func (b *ConfigBuilder) Device(kind DeviceKind, ordinal int32) *ConfigBuilder {
	return b.set(func(c *Config) error { return c.SetDevice(kind, ordinal) })
}

// PrimaryBytes is Config.SetPrimaryBytes.
func (b *ConfigBuilder) PrimaryBytes(n uint64) *ConfigBuilder {
	return b.set(func(c *Config) error { return c.SetPrimaryBytes(n) })
}

// MaxPrimaryBytes is Config.SetMaxPrimaryBytes.
func (b *ConfigBuilder) MaxPrimaryBytes(n uint64) *ConfigBuilder {
	return b.set(func(c *Config) error { return c.SetMaxPrimaryBytes(n) })
}

// MaxStateSlots is Config.SetMaxStateSlots.
func (b *ConfigBuilder) MaxStateSlots(n uint32) *ConfigBuilder {
	return b.set(func(c *Config) error { return c.SetMaxStateSlots(n) })
}

// MaxStateSnapshots is Config.SetMaxStateSnapshots.
func (b *ConfigBuilder) MaxStateSnapshots(n uint32) *ConfigBuilder {
	return b.set(func(c *Config) error { return c.SetMaxStateSnapshots(n) })
}

// MaxTokens is Config.SetMaxTokens.
func (b *ConfigBuilder) MaxTokens(n uint64) *ConfigBuilder {
	return b.set(func(c *Config) error { return c.SetMaxTokens(n) })
}

// FreeGPUMemoryFraction is Config.SetFreeGPUMemoryFraction.
func (b *ConfigBuilder) FreeGPUMemoryFraction(f float64) *ConfigBuilder {
	return b.set(func(c *Config) error { return c.SetFreeGPUMemoryFraction(f) })
}

// HostCacheBytes is Config.SetHostCacheBytes.
func (b *ConfigBuilder) HostCacheBytes(n uint64) *ConfigBuilder {
	return b.set(func(c *Config) error { return c.SetHostCacheBytes(n) })
}

// SecondaryOffloadMinPriority is Config.SetSecondaryOffloadMinPriority.
func (b *ConfigBuilder) SecondaryOffloadMinPriority(p uint32) *ConfigBuilder {
	return b.set(func(c *Config) error { return c.SetSecondaryOffloadMinPriority(p) })
}

// ManualClock is Config.SetManualClock.
func (b *ConfigBuilder) ManualClock(on bool) *ConfigBuilder {
	return b.set(func(c *Config) error { return c.SetManualClock(on) })
}

// BlockReuse is Config.SetBlockReuse.
func (b *ConfigBuilder) BlockReuse(on bool) *ConfigBuilder {
	return b.set(func(c *Config) error { return c.SetBlockReuse(on) })
}

// PartialReuse is Config.SetPartialReuse.
func (b *ConfigBuilder) PartialReuse(on bool) *ConfigBuilder {
	return b.set(func(c *Config) error { return c.SetPartialReuse(on) })
}

// CopyOnPartialReuse is Config.SetCopyOnPartialReuse.
func (b *ConfigBuilder) CopyOnPartialReuse(on bool) *ConfigBuilder {
	return b.set(func(c *Config) error { return c.SetCopyOnPartialReuse(on) })
}

// EventBufferSize is Config.SetEventBufferSize.
func (b *ConfigBuilder) EventBufferSize(n uint32) *ConfigBuilder {
	return b.set(func(c *Config) error { return c.SetEventBufferSize(n) })
}

// EventHashSeed is Config.SetEventHashSeed.
func (b *ConfigBuilder) EventHashSeed(seed uint64) *ConfigBuilder {
	return b.set(func(c *Config) error { return c.SetEventHashSeed(seed) })
}
