package kvcache

import (
	"sync"
	"unsafe"

	"kvcache/kvc"
)

// GrowthPolicy is how a stateful cache's layers grow (kvc_growth_policy_t).
type GrowthPolicy uint32

// Growth policies (enum kvc_growth_policy).
const (
	// GrowthStaggered gives each layer its own offset so that no two
	// layers grow on the same decode step (the default).
	GrowthStaggered GrowthPolicy = 1
	// GrowthUniform puts every layer on the same grid.
	GrowthUniform GrowthPolicy = 2
)

// AllRows is the row of StatefulCache.Trim meaning every row.
const AllRows uint32 = 0xffffffff

// StatefulOptions are the settings of a stateful cache beside the config's
// model spec (kvc_stateful_options_t). Zero fields take their defaults.
type StatefulOptions struct {
	Batch         uint32       // rows (beams or requests), 1..1024
	Layout        Layout       // 0 = LayoutHND (OpenVINO's), or LayoutNHD
	GrowthStep    uint32       // tokens a growth adds; 0 = 128
	GrowthPolicy  GrowthPolicy // 0 = GrowthStaggered
	MaxLength     uint32       // longest row; 0 = 2^30
	InitialLength uint32       // tokens per row allocated at creation
}

// StatefulCache is the stateful contiguous mode (kvc_stateful_t,
// OpenVINO's stateful KV cache): per layer one K/V buffer for a fixed
// batch of rows, in-place append, beam search through a beam table,
// indirect decode attention. It owns device memory: Close it (there is no
// finalizer). Methods may be called from any goroutine; Close waits for
// the calls in flight, and every method after Close returns ErrClosed.
type StatefulCache struct {
	mu    sync.RWMutex
	h     kvc.Stateful
	batch uint32
	cpu   bool
}

// NewStatefulCache creates a stateful cache for the model of cfg (layers,
// kv heads, head dim, dtype, kv factor, device; the paged settings are not
// read) with options o.
func NewStatefulCache(cfg *Config, o *StatefulOptions) (*StatefulCache, error) {
	const op = "kvc_stateful_create"
	switch {
	case cfg == nil:
		return nil, invalidArgument(op, "cfg is a nil *kvcache.Config")
	case o == nil:
		return nil, invalidArgument(op, "o is a nil *kvcache.StatefulOptions (Batch must be set)")
	}
	opts := kvc.NewKvc_stateful_options_t()
	defer kvc.DeleteKvc_stateful_options_t(opts)
	kvc.Kvc_stateful_options_init(opts)
	opts.SetBatch(o.Batch)
	opts.SetLayout(uint32(o.Layout))
	opts.SetGrowth_step(o.GrowthStep)
	opts.SetGrowth_policy(uint32(o.GrowthPolicy))
	opts.SetMax_length(o.MaxLength)
	opts.SetInitial_length(o.InitialLength)
	var h kvc.Stateful
	var cpu bool
	err := cfg.with(op, func(ch kvc.Config) error {
		var kind uint32
		var ordinal int32
		if err := kvc.Kvc_config_get_device(ch, &kind, &ordinal); err != nil {
			return err
		}
		cpu = DeviceKind(kind) == DeviceCPU
		return kvc.Kvc_stateful_create(ch, opts, &h)
	})
	if err != nil {
		return nil, err
	}
	return &StatefulCache{h: h, batch: o.Batch, cpu: cpu}, nil
}

// Close frees the cache after the calls in flight return. Idempotent; an
// ErrInvalidArgument error on a nil *StatefulCache.
func (c *StatefulCache) Close() error {
	if c == nil {
		return nilReceiver("kvcache.StatefulCache.Close", "StatefulCache")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.h != 0 {
		kvc.Kvc_stateful_destroy(c.h)
		c.h = 0
	}
	return nil
}

// call runs f with the handle under the read lock: ErrClosed after Close,
// an ErrInvalidArgument error on a nil *StatefulCache.
func (c *StatefulCache) call(op string, f func(h kvc.Stateful) error) error {
	if c == nil {
		return nilReceiver(op, "StatefulCache")
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.h == 0 {
		return closedError(op)
	}
	return wrap(op, f(c.h))
}

// argError is the error of op for a bad argument, unless c is nil or
// closed: those errors come first, as for every other call.
func (c *StatefulCache) argError(op, message string) error {
	return c.call(op, func(kvc.Stateful) error { return invalidArgument(op, message) })
}

// Batch is the number of rows (0 on a nil *StatefulCache).
func (c *StatefulCache) Batch() uint32 {
	if c == nil {
		return 0
	}
	return c.batch
}

// StatefulView is where one layer's K/V are (kvc_stateful_view_t): element
// (row r, head h, position t, dim d) of K at Key + r*RowStride +
// h*HeadStride + t*TokenStride + d*elem_size; with a beam table, position t
// of row r is read from row BeamTable[r*BeamTableStride+t]. Addresses are
// device memory on CUDA, valid until the next Append, ImportRow, Compact or
// Reset.
type StatefulView struct {
	Layer           uint32
	Key, Value      uintptr // Value == Key when the kv factor is 1
	RowStride       uint64
	HeadStride      uint64
	TokenStride     uint64
	Batch           uint32
	Capacity        uint32
	KVHeads         uint32
	HeadDim         uint32
	DType           DType
	Layout          Layout
	MaxLength       uint32  // longest row now
	Lengths         uintptr // [Batch]int32
	BeamTable       uintptr // [Batch][BeamTableStride]int32, or 0 without a table
	BeamTableStride uint32
}

// View describes layer layer.
func (c *StatefulCache) View(layer uint32) (StatefulView, error) {
	const op = "kvc_stateful_layer_view"
	var out StatefulView
	err := c.call(op, func(h kvc.Stateful) (err error) {
		out, err = statefulView(h, op, layer)
		return err
	})
	return out, err
}

// Lengths returns the rows' lengths in layer layer.
func (c *StatefulCache) Lengths(layer uint32) ([]uint32, error) {
	var out []uint32
	err := c.call("kvc_stateful_get_lengths", func(h kvc.Stateful) error {
		out = make([]uint32, c.batch)
		return kvc.Kvc_stateful_get_lengths(h, layer, &out[0], c.batch)
	})
	return out, err
}

// StatefulAppendArgs is what Append writes (kvc_stateful_append_args_t):
// NumTokens positions per row, Key and Value [batch][NumTokens][heads][dim]
// (NHD) or [batch][heads][NumTokens][dim] (HND) of SrcDType at device
// addresses (C memory on a CPU cache; for Go memory use AppendHost). Row r
// takes its first RowTokens[r] positions (all when RowTokens is nil).
type StatefulAppendArgs struct {
	Layer     uint32
	NumTokens uint32
	SrcDType  DType
	Key       uintptr
	Value     uintptr // 0 iff the kv factor is 1
	RowTokens []uint32
	KScale    float32 // fp8 quantization scale of K; 0 means 1
	VScale    float32 // 0 means 1
}

// Append writes new tokens of one layer in place, growing the layer when a
// row would pass its capacity (kvc_stateful_append).
func (c *StatefulCache) Append(a *StatefulAppendArgs, stream Stream) error {
	const op = "kvc_stateful_append"
	if c == nil || a == nil {
		return c.argError(op, "a is a nil *kvcache.StatefulAppendArgs")
	}
	if a.RowTokens != nil && len(a.RowTokens) != int(c.batch) {
		return c.argError(op, "RowTokens must hold one entry per row")
	}
	var bufs cBuffers
	defer bufs.free()
	var rows uintptr
	if a.RowTokens != nil {
		var err error
		if rows, err = bufs.alloc(op, (*byte)(unsafe.Pointer(&a.RowTokens[0])), 4*len(a.RowTokens)); err != nil {
			return err
		}
	}
	return c.call(op, func(h kvc.Stateful) error {
		s := kvc.NewKvc_stateful_append_args_t()
		defer kvc.DeleteKvc_stateful_append_args_t(s)
		kvc.Kvc_stateful_append_args_init(s)
		s.SetLayer(a.Layer)
		s.SetNum_tokens(a.NumTokens)
		s.SetSrc_dtype(uint32(a.SrcDType))
		s.SetKey(a.Key)
		s.SetValue(a.Value)
		s.SetRow_tokens(rows)
		s.SetK_scale(scaleOrOne(a.KScale))
		s.SetV_scale(scaleOrOne(a.VScale))
		return kvc.Kvc_stateful_append(h, s, uintptr(stream))
	})
}

func (c *StatefulCache) requireCPU(op string) error {
	if c == nil {
		return nilReceiver(op, "StatefulCache")
	}
	if !c.cpu {
		return &Error{Status: StatusUnsupported, Message: "host buffers need a CPU cache; pass device addresses to the non-Host method", Op: op}
	}
	return nil
}

// AppendHost is Append on a CPU cache with Go buffers (little-endian
// elements), copied to C memory for the call.
func (c *StatefulCache) AppendHost(layer, numTokens uint32, srcDType DType, key, value []byte, rowTokens []uint32) error {
	const op = "kvcache.StatefulCache.AppendHost"
	if err := c.requireCPU(op); err != nil {
		return err
	}
	var bufs cBuffers
	defer bufs.free()
	k, err := bufs.alloc(op, firstByte(key), len(key))
	if err != nil {
		return err
	}
	var v uintptr
	if value != nil {
		if v, err = bufs.alloc(op, firstByte(value), len(value)); err != nil {
			return err
		}
	}
	return c.Append(&StatefulAppendArgs{Layer: layer, NumTokens: numTokens, SrcDType: srcDType,
		Key: k, Value: v, RowTokens: rowTokens}, 0)
}

// Reorder makes row b continue row beamIdx[b]'s history; only beam table
// entries move (kvc_stateful_reorder).
func (c *StatefulCache) Reorder(beamIdx []int32, stream Stream) error {
	return c.call("kvc_stateful_reorder", func(h kvc.Stateful) error {
		return kvc.Kvc_stateful_reorder(h, firstInt32(beamIdx), uint32(len(beamIdx)), uintptr(stream))
	})
}

// Compact gathers the K/V by the beam table and drops the table
// (kvc_stateful_compact).
func (c *StatefulCache) Compact(stream Stream) error {
	return c.call("kvc_stateful_compact", func(h kvc.Stateful) error {
		return kvc.Kvc_stateful_compact(h, uintptr(stream))
	})
}

// Trim drops the last numTokens tokens of row (AllRows: every row) in
// every layer (kvc_stateful_trim).
func (c *StatefulCache) Trim(row, numTokens uint32, stream Stream) error {
	return c.call("kvc_stateful_trim", func(h kvc.Stateful) error {
		return kvc.Kvc_stateful_trim(h, row, numTokens, uintptr(stream))
	})
}

// Reset empties every row and drops the table; releaseMemory frees the
// buffers too (kvc_stateful_reset).
func (c *StatefulCache) Reset(releaseMemory bool, stream Stream) error {
	return c.call("kvc_stateful_reset", func(h kvc.Stateful) error {
		return kvc.Kvc_stateful_reset(h, releaseMemory, uintptr(stream))
	})
}

// ExportRow returns row row's state (kvc_stateful_export_row).
func (c *StatefulCache) ExportRow(row uint32, stream Stream) ([]byte, error) {
	const op = "kvc_stateful_export_row"
	var out []byte
	err := c.call(op, func(h kvc.Stateful) error {
		var size uint64
		err := kvc.Kvc_stateful_export_row(h, row, 0, 0, &size, uintptr(stream))
		if e, ok := err.(*kvc.Error); err != nil && (!ok || Status(e.Status) != StatusBufferTooSmall) {
			return err
		}
		var bufs cBuffers
		defer bufs.free()
		buf, aerr := bufs.alloc(op, nil, int(size))
		if aerr != nil {
			return aerr
		}
		if err := kvc.Kvc_stateful_export_row(h, row, buf, size, &size, uintptr(stream)); err != nil {
			return err
		}
		out = make([]byte, size)
		if size > 0 {
			kvc.Kvcgo_buffer_read(&out[0], buf, size)
		}
		return nil
	})
	return out, err
}

// ImportRow restores a state from ExportRow into row row
// (kvc_stateful_import_row).
func (c *StatefulCache) ImportRow(row uint32, state []byte, stream Stream) error {
	const op = "kvc_stateful_import_row"
	var bufs cBuffers
	defer bufs.free()
	buf, err := bufs.alloc(op, firstByte(state), len(state))
	if err != nil {
		return err
	}
	return c.call(op, func(h kvc.Stateful) error {
		return kvc.Kvc_stateful_import_row(h, row, buf, uint64(len(state)), uintptr(stream))
	})
}
