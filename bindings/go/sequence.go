package kvcache

import (
	"kvcache/kvc"
)

// DefaultPriority is the eviction priority of a block unless set (0 is
// evicted first, 100 last).
const DefaultPriority = kvc.KVC_DEFAULT_PRIORITY

// ExtraKey is an extra key (a multimodal item hash, say) covering tokens
// [Offset, Offset+Length) of a sequence: two prompts with equal tokens but
// different extra keys never share those blocks (kvc_extra_key_t).
type ExtraKey struct {
	Offset uint64
	Length uint64 // > 0
	Data   []byte
}

// RetentionOpenEnd is the End of a RetentionRange reaching to the end of
// the sequence (KVC_RETENTION_OPEN_END).
const RetentionOpenEnd = ^uint64(0)

// RetentionRange gives prompt tokens [Start, End) the eviction Priority
// (0..100) for DurationMs milliseconds (0: for ever) after their block
// becomes reusable; a block takes the range holding its first token
// (kvc_retention_range_t). Ranges must not overlap; only the last may end
// at RetentionOpenEnd.
type RetentionRange struct {
	Start      uint64
	End        uint64
	Priority   uint32
	DurationMs uint64
}

// SequenceOptions are the options of AddSequence and Probe
// (kvc_sequence_options_t). The zero value, like a nil *SequenceOptions,
// means the defaults: priority 35, no salt, no LoRA, no extra keys.
//
// The scope of a sequence is its salt, LoRA id and extra keys: only
// sequences of equal scope share blocks.
type SequenceOptions struct {
	// PromptPriority and DecodePriority (0..100) of the sequence's prompt
	// blocks and of blocks holding only generated tokens; nil means
	// DefaultPriority. Priority(p) makes the pointer.
	PromptPriority *uint32
	DecodePriority *uint32
	// LoRA is the adapter id; nil means none, which differs from id 0.
	LoRA *uint64
	// Salt is the cache salt; nil means none, which differs from an empty
	// non-nil salt ([]byte{}).
	Salt      []byte
	ExtraKeys []ExtraKey
	// RetentionRanges over the prompt, in token order; prompt blocks
	// outside every range take PromptPriority for ever.
	RetentionRanges []RetentionRange
	// DecodeDurationMs bounds how long DecodePriority lasts after a
	// generated block becomes reusable; 0 means for ever.
	DecodeDurationMs uint64
}

// Priority returns a pointer to p, for SequenceOptions.
func Priority(p uint32) *uint32 { return &p }

// LoRA returns a pointer to id, for SequenceOptions.
func LoRA(id uint64) *uint64 { return &id }

// cOptions is a kvc_sequence_options_t in C memory with its salt and extra
// keys copied into C memory (Go memory may not be stored in C memory).
type cOptions struct {
	opts    kvc.Kvc_sequence_options_t
	buffers []uintptr
}

// newCOptions returns nil for the defaults (nil or zero options), which
// the C API takes as NULL.
func newCOptions(o *SequenceOptions) (*cOptions, error) {
	if o == nil || (o.PromptPriority == nil && o.DecodePriority == nil && o.LoRA == nil &&
		o.Salt == nil && len(o.ExtraKeys) == 0 && len(o.RetentionRanges) == 0 &&
		o.DecodeDurationMs == 0) {
		return nil, nil
	}
	c := &cOptions{opts: kvc.NewKvc_sequence_options_t()}
	kvc.Kvc_sequence_options_init(c.opts)
	if o.PromptPriority != nil {
		c.opts.SetPrompt_priority(*o.PromptPriority)
	}
	if o.DecodePriority != nil {
		c.opts.SetDecode_priority(*o.DecodePriority)
	}
	if o.LoRA != nil {
		c.opts.SetHas_lora(true)
		c.opts.SetLora_id(*o.LoRA)
	}
	if o.Salt != nil {
		p, err := c.buffer(o.Salt)
		if err != nil {
			return nil, err
		}
		c.opts.SetSalt(p)
		c.opts.SetSalt_size(uint64(len(o.Salt)))
	}
	if n := len(o.ExtraKeys); n > 0 {
		keys, err := c.buffer(make([]byte, uint64(n)*kvc.Kvcgo_extra_key_size()))
		if err != nil {
			return nil, err
		}
		for i, k := range o.ExtraKeys {
			var data uintptr
			if len(k.Data) > 0 {
				if data, err = c.buffer(k.Data); err != nil {
					return nil, err
				}
			}
			kvc.Kvcgo_extra_key_set(keys, uint64(i), k.Offset, k.Length, data, uint64(len(k.Data)))
		}
		c.opts.SetExtra_keys(kvc.SwigcptrKvc_extra_key_t(keys))
		c.opts.SetNum_extra_keys(uint64(n))
	}
	if n := len(o.RetentionRanges); n > 0 {
		ranges, err := c.buffer(make([]byte, uint64(n)*kvc.Kvcgo_retention_range_size()))
		if err != nil {
			return nil, err
		}
		for i, r := range o.RetentionRanges {
			kvc.Kvcgo_retention_range_set(ranges, uint64(i), r.Start, r.End, r.Priority, r.DurationMs)
		}
		c.opts.SetRetention_ranges(kvc.SwigcptrKvc_retention_range_t(ranges))
		c.opts.SetNum_retention_ranges(uint64(n))
	}
	c.opts.SetDecode_duration_ms(o.DecodeDurationMs)
	return c, nil
}

func (c *cOptions) buffer(b []byte) (uintptr, error) {
	p := kvc.Kvcgo_buffer_new(firstByte(b), uint64(len(b)))
	if p == 0 {
		c.free()
		return 0, &Error{Status: StatusOutOfMemory, Message: "cannot copy sequence options into C memory", Op: "kvcache.SequenceOptions"}
	}
	c.buffers = append(c.buffers, p)
	return p, nil
}

// handle is the options to pass: nil (NULL) for the defaults.
func (c *cOptions) handle() kvc.Kvc_sequence_options_t {
	if c == nil {
		return nil
	}
	return c.opts
}

func (c *cOptions) free() {
	if c == nil {
		return
	}
	for _, p := range c.buffers {
		kvc.Kvcgo_buffer_free(p)
	}
	c.buffers = nil
	if c.opts != nil {
		kvc.DeleteKvc_sequence_options_t(c.opts)
		c.opts = nil
	}
}

// AddSequence adds sequence id with its prompt and reuses its cached prefix
// (kvc_sequence_add). It returns how many prompt tokens are already cached:
// the caller skips computing them (the last prompt token is never reported
// cached). opts may be nil. stream orders a partial-block copy (CUDA).
// Errors: ErrAlreadyExists, ErrOutOfBlocks (nothing is evicted then),
// ErrInvalidArgument.
func (c *Cache) AddSequence(id uint64, tokens []int32, opts *SequenceOptions, stream Stream) (cached uint64, err error) {
	const op = "kvc_sequence_add"
	return withCache(c, op, func(h kvc.Cache) (uint64, error) {
		o, err := newCOptions(opts)
		if err != nil {
			return 0, err
		}
		defer o.free()
		err = kvc.Kvc_sequence_add(h, id, firstInt32(tokens), uint64(len(tokens)), o.handle(), uintptr(stream), &cached)
		return cached, wrap(op, err)
	})
}

// Probe reports how many tokens of this prompt AddSequence would find
// cached, with no side effect (kvc_cache_probe). opts must carry the scope
// the add will use; nil means the default scope. It looks at the primary
// and host tiers only: an add on a cache with a disk or remote tier may
// find more (the blocks it loads from them).
func (c *Cache) Probe(tokens []int32, opts *SequenceOptions) (cached uint64, err error) {
	const op = "kvc_cache_probe"
	return withCache(c, op, func(h kvc.Cache) (uint64, error) {
		o, err := newCOptions(opts)
		if err != nil {
			return 0, err
		}
		defer o.free()
		err = kvc.Kvc_cache_probe(h, firstInt32(tokens), uint64(len(tokens)), o.handle(), &cached)
		return cached, wrap(op, err)
	})
}

// ExtendSequence appends tokens to sequence id, allocating blocks as needed
// (kvc_sequence_extend). A shared partial tail is copied on stream first.
func (c *Cache) ExtendSequence(id uint64, tokens []int32, stream Stream) error {
	const op = "kvc_sequence_extend"
	return c.with(op, func(h kvc.Cache) error {
		return wrap(op, kvc.Kvc_sequence_extend(h, id, firstInt32(tokens), uint64(len(tokens)), uintptr(stream)))
	})
}

// CommitSequence declares the KV of the first numComputed tokens of
// sequence id written: its full blocks become reusable
// (kvc_sequence_commit).
func (c *Cache) CommitSequence(id uint64, numComputed uint64) error {
	const op = "kvc_sequence_commit"
	return c.with(op, func(h kvc.Cache) error {
		return wrap(op, kvc.Kvc_sequence_commit(h, id, numComputed))
	})
}

// RewindSequence drops the last numTokens tokens of sequence id (rejected
// draft tokens of speculative decoding; kvc_sequence_rewind).
func (c *Cache) RewindSequence(id uint64, numTokens uint64) error {
	const op = "kvc_sequence_rewind"
	return c.with(op, func(h kvc.Cache) error {
		return wrap(op, kvc.Kvc_sequence_rewind(h, id, numTokens))
	})
}

// ForkSequence creates sequence child sharing every block of parent (beam
// search, parallel sampling; kvc_sequence_fork).
func (c *Cache) ForkSequence(parent, child uint64) error {
	const op = "kvc_sequence_fork"
	return c.with(op, func(h kvc.Cache) error {
		return wrap(op, kvc.Kvc_sequence_fork(h, parent, child))
	})
}

// RemoveSequence removes sequence id; its committed blocks stay cached for
// reuse until evicted (kvc_sequence_remove).
func (c *Cache) RemoveSequence(id uint64) error {
	const op = "kvc_sequence_remove"
	return c.with(op, func(h kvc.Cache) error {
		return wrap(op, kvc.Kvc_sequence_remove(h, id))
	})
}

// PinSequence pins the current blocks of sequence id: they are never
// evicted, even after the sequence is removed, until UnpinSequence(id)
// (kvc_sequence_pin).
func (c *Cache) PinSequence(id uint64) error {
	const op = "kvc_sequence_pin"
	return c.with(op, func(h kvc.Cache) error {
		return wrap(op, kvc.Kvc_sequence_pin(h, id))
	})
}

// UnpinSequence releases the blocks pinned by PinSequence(id)
// (kvc_sequence_unpin).
func (c *Cache) UnpinSequence(id uint64) error {
	const op = "kvc_sequence_unpin"
	return c.with(op, func(h kvc.Cache) error {
		return wrap(op, kvc.Kvc_sequence_unpin(h, id))
	})
}

// SequenceDesc is the state of one sequence (kvc_sequence_desc_t).
type SequenceDesc struct {
	PromptPriority  uint32
	DecodePriority  uint32
	NumTokens       uint64 // current length
	PromptTokens    uint64 // length of the prompt given to AddSequence
	CachedTokens    uint64 // prompt tokens reused at add
	CommittedTokens uint64
	NumBlocks       uint64 // block positions (blocks per layer group)
}

// DescribeSequence returns the state of sequence id
// (kvc_sequence_describe).
func (c *Cache) DescribeSequence(id uint64) (SequenceDesc, error) {
	const op = "kvc_sequence_describe"
	return withCache(c, op, func(h kvc.Cache) (SequenceDesc, error) { return describeSequence(h, op, id) })
}

// SequenceBlockIDs returns the block ids of sequence id in layer group
// group, in token order (kvc_sequence_block_ids). They index the group's
// pool (see LayerView).
func (c *Cache) SequenceBlockIDs(id uint64, group uint32) ([]int32, error) {
	return c.AppendSequenceBlockIDs(nil, id, group)
}

// AppendSequenceBlockIDs appends the block ids of sequence id in group to
// dst and returns the extended slice; with enough capacity in dst it does
// not allocate.
func (c *Cache) AppendSequenceBlockIDs(dst []int32, id uint64, group uint32) ([]int32, error) {
	const op = "kvc_sequence_block_ids"
	out := dst // what a closed cache returns
	err := c.with(op, func(h kvc.Cache) error {
		if cap(dst)-len(dst) == 0 {
			// A guess that fits most sequences: a buffer that is too small costs
			// a failed call (KVC_ERR_BUFFER_TOO_SMALL) and a retry.
			grown := make([]int32, len(dst), len(dst)+initialBlocksPerSequence)
			copy(grown, dst)
			dst = grown
		}
		for {
			spare := dst[len(dst):cap(dst)]
			var count uint64
			err := kvc.Kvc_sequence_block_ids(h, id, group, firstInt32(spare), uint64(len(spare)), &count)
			if err == nil {
				out = dst[:len(dst)+int(count)]
				return nil
			}
			if e, ok := err.(*kvc.Error); !ok || Status(e.Status) != StatusBufferTooSmall || count <= uint64(len(spare)) {
				out = dst
				return wrap(op, err)
			}
			grown := make([]int32, len(dst), len(dst)+int(count))
			copy(grown, dst)
			dst = grown
		}
	})
	return out, err
}

// BlocksNeeded is the number of blocks per layer group that numTokens more
// tokens of sequence id need, a copy of a shared tail included
// (kvc_sequence_blocks_needed).
func (c *Cache) BlocksNeeded(id uint64, numTokens uint64) (n uint64, err error) {
	const op = "kvc_sequence_blocks_needed"
	return withCache(c, op, func(h kvc.Cache) (uint64, error) {
		err = kvc.Kvc_sequence_blocks_needed(h, id, numTokens, &n)
		return n, wrap(op, err)
	})
}
