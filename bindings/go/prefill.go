package kvcache

import (
	"fmt"
	"unsafe"

	"kvcache/kvc"
)

// PrefillArgs is what PrefillAttention computes (kvc_prefill_args_t): a
// ragged batch of new query tokens, causal among themselves, against all
// the cached K/V of their sequences through a block table (chunked
// prefill, prefix reuse, mixed prefill and decode steps). QOIndptr and
// KVLens are Go slices on every device (the library reads them on the
// host); the addresses are device memory on a CUDA cache (C memory on a
// CPU cache; for Go memory use PrefillAttentionHost).
type PrefillArgs struct {
	Layer          uint32
	Rank           uint32 // tensor parallelism: the rank whose pool is used (Config.SetRanks); 0 with one rank
	QHeads         uint32 // a multiple of the layer's kv heads
	QDType         DType
	TableFormat    TableFormat // 0 means TablePadded
	QOIndptr       []int32     // [batch+1] query row offsets from 0 (FlashInfer's qo_indptr)
	KVLens         []int32     // [batch] tokens per sequence, new ones included; batch = len(KVLens)
	Query          uintptr     // [QOIndptr[batch]][QHeads][head_dim]
	Out            uintptr     // same shape, written
	LSE            uintptr     // [QOIndptr[batch]][QHeads]float32 log-sum-exp, or 0
	BlockTable     uintptr     // padded [batch][TableStride]int32, or CSR indices
	Indptr         uintptr     // CSR: [batch+1]int32; 0 if padded
	TableStride    uint32      // padded: entries per row; 0 for CSR
	MaxKVLen       uint32      // upper bound of every KVLens entry
	Window         uint32      // 0 = the layer's configured window
	SoftmaxScale   float32     // 0 = 1/sqrt(head_dim)
	LogitsSoftCap  float32     // cap * tanh(s / cap); 0 = none
	KScale         float32     // fp8 dequantization scale of K; 0 means 1
	VScale         float32     // 0 means 1
	Workspace      uintptr     // scratch (device memory on CUDA)
	WorkspaceBytes uint64      // see PrefillWorkspaceSize
	// TotalQ is the number of query rows for PrefillWorkspaceSize when
	// QOIndptr is nil (sizing a workspace for a largest step); otherwise
	// QOIndptr[batch] is used.
	TotalQ uint32
}

// fillPrefillArgs sets s from a; the host arrays are copied into bufs.
func fillPrefillArgs(op string, s kvc.Kvc_prefill_args_t, a *PrefillArgs, bufs *cBuffers) error {
	kvc.Kvc_prefill_args_init(s)
	s.SetLayer(a.Layer)
	s.SetRank(a.Rank)
	s.SetBatch(uint32(len(a.KVLens)))
	total := a.TotalQ
	if len(a.QOIndptr) > 0 {
		total = uint32(a.QOIndptr[len(a.QOIndptr)-1])
	}
	s.SetTotal_q(total)
	s.SetQ_heads(a.QHeads)
	s.SetQ_dtype(uint32(a.QDType))
	if a.TableFormat != 0 {
		s.SetTable_format(uint32(a.TableFormat))
	}
	if len(a.QOIndptr) != 0 && len(a.QOIndptr) != len(a.KVLens)+1 {
		return &Error{Status: StatusInvalidArgument, Op: op,
			Message: "QOIndptr must hold len(KVLens) + 1 offsets"}
	}
	p, n := int32Bytes(a.QOIndptr)
	qo, err := bufs.copyIn(op, p, n)
	if err != nil {
		return err
	}
	s.SetQo_indptr(qo)
	p, n = int32Bytes(a.KVLens)
	kl, err := bufs.copyIn(op, p, n)
	if err != nil {
		return err
	}
	s.SetKv_lens(kl)
	s.SetQuery(a.Query)
	s.SetOut(a.Out)
	s.SetLse(a.LSE)
	s.SetBlock_table(a.BlockTable)
	s.SetIndptr(a.Indptr)
	s.SetTable_stride(a.TableStride)
	s.SetMax_kv_len(a.MaxKVLen)
	s.SetWindow(a.Window)
	s.SetSoftmax_scale(a.SoftmaxScale)
	s.SetLogits_soft_cap(a.LogitsSoftCap)
	s.SetK_scale(scaleOrOne(a.KScale))
	s.SetV_scale(scaleOrOne(a.VScale))
	s.SetWorkspace(a.Workspace)
	s.SetWorkspace_bytes(a.WorkspaceBytes)
	return nil
}

// PrefillWorkspaceSize is the workspace PrefillAttention needs for a's
// layer, batch, total query rows, QHeads and MaxKVLen
// (kvc_prefill_workspace_size); 0 on a CPU cache. It never decreases as
// one of them grows: size one workspace for the largest step.
func (c *Cache) PrefillWorkspaceSize(a *PrefillArgs) (bytes uint64, err error) {
	const op = "kvc_prefill_workspace_size"
	return withCache(c, op, func(h kvc.Cache) (uint64, error) {
		if a == nil {
			return 0, invalidArgument(op, "a is a nil *kvcache.PrefillArgs")
		}
		var bufs cBuffers
		defer bufs.free()
		s := kvc.NewKvc_prefill_args_t()
		defer kvc.DeleteKvc_prefill_args_t(s)
		if err := fillPrefillArgs(op, s, a, &bufs); err != nil {
			return 0, err
		}
		err = kvc.Kvc_prefill_workspace_size(h, s, &bytes)
		return bytes, wrap(op, err)
	})
}

// PrefillAttention runs paged prefill attention of one layer
// (kvc_prefill_attention), enqueued on stream on a CUDA cache.
func (c *Cache) PrefillAttention(a *PrefillArgs, stream Stream) error {
	const op = "kvc_prefill_attention"
	return c.with(op, func(h kvc.Cache) error {
		if a == nil {
			return invalidArgument(op, "a is a nil *kvcache.PrefillArgs")
		}
		var bufs cBuffers
		defer bufs.free()
		s := kvc.NewKvc_prefill_args_t()
		defer kvc.DeleteKvc_prefill_args_t(s)
		if err := fillPrefillArgs(op, s, a, &bufs); err != nil {
			return err
		}
		return wrap(op, kvc.Kvc_prefill_attention(h, s, uintptr(stream)))
	})
}

// HostPrefillArgs is PrefillArgs over Go memory, for PrefillAttentionHost
// on a CPU cache. Query and Out hold QOIndptr[batch] * QHeads * head_dim
// elements of QDType, little-endian; LSE, when not nil, QOIndptr[batch] *
// QHeads values. Indptr nil means a padded table of TableStride entries
// per row.
type HostPrefillArgs struct {
	Layer         uint32
	Rank          uint32 // tensor parallelism: the rank whose pool is used (Config.SetRanks); 0 with one rank
	QHeads        uint32
	QDType        DType
	QOIndptr      []int32
	KVLens        []int32
	Query         []byte
	Out           []byte    // written
	LSE           []float32 // written when not nil
	BlockTable    []int32
	Indptr        []int32
	TableStride   uint32
	MaxKVLen      uint32
	Window        uint32
	SoftmaxScale  float32
	LogitsSoftCap float32
	KScale        float32
	VScale        float32
}

// PrefillAttentionHost is PrefillAttention on a CPU cache with Go
// buffers: they are copied to C memory and Out (and LSE) copied back (the
// work is done before it returns).
func (c *Cache) PrefillAttentionHost(a *HostPrefillArgs) error {
	const op = "kvcache.PrefillAttentionHost"
	return c.with(op, func(h kvc.Cache) error {
		if a == nil {
			return invalidArgument(op, "a is a nil *kvcache.HostPrefillArgs")
		}
		if err := requireCPU(h, op); err != nil {
			return err
		}
		var bufs cBuffers
		defer bufs.free()
		d := PrefillArgs{
			Layer: a.Layer, Rank: a.Rank, QHeads: a.QHeads, QDType: a.QDType, TableFormat: TablePadded,
			QOIndptr: a.QOIndptr, KVLens: a.KVLens, TableStride: a.TableStride, MaxKVLen: a.MaxKVLen,
			Window: a.Window, SoftmaxScale: a.SoftmaxScale, LogitsSoftCap: a.LogitsSoftCap,
			KScale: a.KScale, VScale: a.VScale,
		}
		if a.Indptr != nil {
			d.TableFormat = TableCSR
		}
		var err error
		if d.Query, err = bufs.copyIn(op, firstByte(a.Query), len(a.Query)); err != nil {
			return err
		}
		if d.Out, err = bufs.copyIn(op, firstByte(a.Out), len(a.Out)); err != nil {
			return err
		}
		if len(a.LSE) > 0 {
			if d.LSE, err = bufs.alloc(op, (*byte)(unsafe.Pointer(&a.LSE[0])), 4*len(a.LSE)); err != nil {
				return err
			}
		}
		for _, in := range []struct {
			dst *uintptr
			s   []int32
		}{{&d.BlockTable, a.BlockTable}, {&d.Indptr, a.Indptr}} {
			p, n := int32Bytes(in.s)
			if *in.dst, err = bufs.copyIn(op, p, n); err != nil {
				return err
			}
		}
		// The library reads Query, Out and LSE for QOIndptr[batch] rows: check
		// that the Go buffers hold that many before handing over their copies
		// (a short one would be read past its end).
		if len(a.QOIndptr) > 0 {
			if err := checkPrefillHostSizes(h, op, a); err != nil {
				return err
			}
		}
		s := kvc.NewKvc_prefill_args_t()
		defer kvc.DeleteKvc_prefill_args_t(s)
		if err := fillPrefillArgs(op, s, &d, &bufs); err != nil {
			return err
		}
		if err := kvc.Kvc_prefill_attention(h, s, 0); err != nil {
			return wrap("kvc_prefill_attention", err)
		}
		if len(a.Out) > 0 {
			kvc.Kvcgo_buffer_read(&a.Out[0], d.Out, uint64(len(a.Out)))
		}
		if len(a.LSE) > 0 {
			kvc.Kvcgo_buffer_read((*byte)(unsafe.Pointer(&a.LSE[0])), d.LSE, uint64(4*len(a.LSE)))
		}
		return nil
	})
}

// checkPrefillHostSizes checks Query, Out and LSE against the rows
// QOIndptr gives and the layer's head dim (an unknown layer or dtype is
// left to the library's own checks).
func checkPrefillHostSizes(h kvc.Cache, op string, a *HostPrefillArgs) error {
	rows := int64(a.QOIndptr[len(a.QOIndptr)-1])
	if rows < 0 {
		return nil // the library refuses it
	}
	v, err := layerView(h, "kvc_cache_layer_view", a.Layer)
	if err != nil {
		return nil // the library names the bad layer
	}
	elem := map[DType]int64{DTypeF32: 4, DTypeF16: 2, DTypeBF16: 2, DTypeFP8E4M3: 1}[a.QDType]
	want := rows * int64(a.QHeads) * int64(v.HeadDim) * elem
	if elem != 0 && (int64(len(a.Query)) < want || int64(len(a.Out)) < want) {
		return &Error{Status: StatusInvalidArgument, Op: op,
			Message: fmt.Sprintf("Query and Out must hold %d bytes (%d rows x %d heads x head dim %d), got %d and %d",
				want, rows, a.QHeads, v.HeadDim, len(a.Query), len(a.Out))}
	}
	if len(a.LSE) > 0 && int64(len(a.LSE)) != rows*int64(a.QHeads) {
		return &Error{Status: StatusInvalidArgument, Op: op,
			Message: fmt.Sprintf("LSE must hold %d values (%d rows x %d heads), got %d",
				rows*int64(a.QHeads), rows, a.QHeads, len(a.LSE))}
	}
	return nil
}
