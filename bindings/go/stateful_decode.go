package kvcache

import "kvcache/kvc"

// StatefulDecodeArgs is what StatefulCache.Decode computes
// (kvc_stateful_decode_args_t): one query token per row against its
// history, read through the beam table. Query and Out are
// [batch][QHeads][head_dim] of QDType at device addresses (C memory on a
// CPU cache; for Go memory use DecodeHost).
type StatefulDecodeArgs struct {
	Layer          uint32
	QHeads         uint32 // a multiple of the layer's kv heads
	QDType         DType
	Query          uintptr
	Out            uintptr
	MaxSeqLen      uint32  // workspace sizing only; 0 = the longest row now
	SoftmaxScale   float32 // 0 = 1/sqrt(head_dim)
	KScale         float32 // fp8 dequantization scale of K; 0 means 1
	VScale         float32 // 0 means 1
	Workspace      uintptr // scratch (device memory on CUDA)
	WorkspaceBytes uint64
}

func (a *StatefulDecodeArgs) toC() kvc.Kvc_stateful_decode_args_t {
	s := kvc.NewKvc_stateful_decode_args_t()
	kvc.Kvc_stateful_decode_args_init(s)
	s.SetLayer(a.Layer)
	s.SetQ_heads(a.QHeads)
	s.SetQ_dtype(uint32(a.QDType))
	s.SetQuery(a.Query)
	s.SetOut(a.Out)
	s.SetMax_seq_len(a.MaxSeqLen)
	s.SetSoftmax_scale(a.SoftmaxScale)
	s.SetK_scale(scaleOrOne(a.KScale))
	s.SetV_scale(scaleOrOne(a.VScale))
	s.SetWorkspace(a.Workspace)
	s.SetWorkspace_bytes(a.WorkspaceBytes)
	return s
}

// DecodeWorkspaceSize is the workspace Decode needs for a's layer, heads,
// dtype and MaxSeqLen (kvc_stateful_decode_workspace_size); 0 on a CPU cache.
func (c *StatefulCache) DecodeWorkspaceSize(a *StatefulDecodeArgs) (uint64, error) {
	const op = "kvc_stateful_decode_workspace_size"
	if a == nil {
		return 0, c.argError(op, "a is a nil *kvcache.StatefulDecodeArgs")
	}
	var bytes uint64
	err := c.call(op, func(h kvc.Stateful) error {
		s := a.toC()
		defer kvc.DeleteKvc_stateful_decode_args_t(s)
		return kvc.Kvc_stateful_decode_workspace_size(h, s, &bytes)
	})
	return bytes, err
}

// Decode runs decode attention of one layer for every row through the beam
// table (kvc_stateful_decode), enqueued on stream on CUDA.
func (c *StatefulCache) Decode(a *StatefulDecodeArgs, stream Stream) error {
	const op = "kvc_stateful_decode"
	if a == nil {
		return c.argError(op, "a is a nil *kvcache.StatefulDecodeArgs")
	}
	return c.call(op, func(h kvc.Stateful) error {
		s := a.toC()
		defer kvc.DeleteKvc_stateful_decode_args_t(s)
		return kvc.Kvc_stateful_decode(h, s, uintptr(stream))
	})
}

// DecodeHost is Decode on a CPU cache with Go buffers: query and out hold
// batch * qHeads * head_dim elements of qDType; out is written.
func (c *StatefulCache) DecodeHost(layer, qHeads uint32, qDType DType, query, out []byte) error {
	const op = "kvcache.StatefulCache.DecodeHost"
	if err := c.requireCPU(op); err != nil {
		return err
	}
	if len(query) != len(out) {
		return c.argError(op, "query and out differ in length")
	}
	var bufs cBuffers
	defer bufs.free()
	q, err := bufs.alloc(op, firstByte(query), len(query))
	if err != nil {
		return err
	}
	o, err := bufs.alloc(op, nil, len(out))
	if err != nil {
		return err
	}
	if err := c.Decode(&StatefulDecodeArgs{Layer: layer, QHeads: qHeads, QDType: qDType, Query: q, Out: o}, 0); err != nil {
		return err
	}
	if len(out) > 0 {
		kvc.Kvcgo_buffer_read(&out[0], o, uint64(len(out)))
	}
	return nil
}

// AsyncError waits for stream and reports the first error of work this
// cache enqueued (kvc_stateful_get_async_error): nil when there is none.
func (c *StatefulCache) AsyncError(stream Stream) error {
	const op = "kvc_stateful_get_async_error"
	return c.call(op, func(h kvc.Stateful) error {
		var callFailed bool
		err := kvc.Kvcgo_stateful_async_error(h, uintptr(stream), &callFailed)
		if err != nil && !callFailed {
			return wrap(op+" (enqueued work)", err)
		}
		return err // call wraps it as op
	})
}

// StatefulStats are a stateful cache's memory and work counts
// (kvc_stateful_stats_t).
type StatefulStats struct {
	NumLayers          uint32
	BytesAllocated     uint64 // held now: K/V, beam table, lengths
	PeakBytes          uint64 // most held at once since creation
	KVBytes            uint64 // the layers' buffers
	TableBytes         uint64 // the beam table
	Reallocations      uint64 // layer growths (a first allocation is not one)
	Reorders           uint64 // reorders that moved rows
	TableEntriesCopied uint64 // beam table entries they copied
	Compactions        uint64
}

// Stats returns the cache's statistics.
func (c *StatefulCache) Stats() (StatefulStats, error) {
	const op = "kvc_stateful_get_stats"
	var out StatefulStats
	err := c.call(op, func(h kvc.Stateful) (err error) {
		out, err = statefulStats(h, op)
		return err
	})
	return out, err
}

// StatefulLayerStats describe one layer (kvc_stateful_layer_stats_t).
type StatefulLayerStats struct {
	Layer            uint32
	Capacity         uint32 // positions allocated per row
	GrowthOffset     uint32 // the growth policy's offset of this layer
	Bytes            uint64
	Reallocations    uint64
	LastGrowthLength uint32 // longest row when it last grew
	MaxLength        uint32 // longest row now
}

// LayerStats returns layer layer's statistics.
func (c *StatefulCache) LayerStats(layer uint32) (StatefulLayerStats, error) {
	const op = "kvc_stateful_get_layer_stats"
	var out StatefulLayerStats
	err := c.call(op, func(h kvc.Stateful) (err error) {
		out, err = statefulLayerStats(h, op, layer)
		return err
	})
	return out, err
}
