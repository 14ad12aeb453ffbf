package kvcache

import (
	"unsafe"

	"kvcache/kvc"
)

// TableFormat is the block table format of decode attention
// (kvc_table_format_t).
type TableFormat uint32

// Block table formats (enum kvc_table_format).
const (
	// TablePadded: BlockTable[b*TableStride+j] is block j of sequence b.
	TablePadded TableFormat = 1
	// TableCSR: the blocks of sequence b are BlockTable[Indptr[b]:Indptr[b+1]].
	TableCSR TableFormat = 2
)

// StoreArgs is what StoreKV writes (kvc_store_args_t). Key and Value are
// contiguous [num_tokens][kv_heads][head_dim] arrays of SrcDType; token i
// goes to slot SlotMapping[i] (-1 skips it). The addresses are device
// memory on a CUDA cache (C memory on a CPU cache; for Go memory use
// StoreKVHost) and must stay valid until the stream reaches the work.
type StoreArgs struct {
	Layer       uint32
	Rank        uint32 // tensor parallelism: the rank whose pool is used (Config.SetRanks); 0 with one rank
	NumTokens   uint32
	SrcDType    DType
	Key         uintptr
	Value       uintptr // 0 iff the cache's kv factor is 1
	SlotMapping uintptr // [NumTokens]int64
	KScale      float32 // fp8 quantization scale of K; 0 means 1
	VScale      float32 // fp8 quantization scale of V; 0 means 1
}

func scaleOrOne(s float32) float32 {
	if s == 0 {
		return 1
	}
	return s
}

// StoreKV writes the K (and V) of NumTokens tokens of one layer into their
// slots (kvc_store_kv), enqueued on stream on a CUDA cache. Kernels run
// without the cache's lock; a Close must wait for the stream.
func (c *Cache) StoreKV(a *StoreArgs, stream Stream) error {
	const op = "kvc_store_kv"
	return c.with(op, func(h kvc.Cache) error {
		if a == nil {
			return invalidArgument(op, "a is a nil *kvcache.StoreArgs")
		}
		s := kvc.NewKvc_store_args_t()
		defer kvc.DeleteKvc_store_args_t(s)
		kvc.Kvc_store_args_init(s)
		s.SetLayer(a.Layer)
		s.SetRank(a.Rank)
		s.SetNum_tokens(a.NumTokens)
		s.SetSrc_dtype(uint32(a.SrcDType))
		s.SetKey(a.Key)
		s.SetValue(a.Value)
		s.SetSlot_mapping(a.SlotMapping)
		s.SetK_scale(scaleOrOne(a.KScale))
		s.SetV_scale(scaleOrOne(a.VScale))
		return wrap(op, kvc.Kvc_store_kv(h, s, uintptr(stream)))
	})
}

// StoreStrides says where StoreKVStrided reads each token's K and V
// (kvc_store_strides_t): token i is token i % SeqLen of source sequence
// i / SeqLen (SeqLen 0: one sequence), and head h of it starts at element
// b*Key[0] + t*Key[1] + h*Key[2] of the key (Value likewise); the head
// dimension is contiguous. Strides count elements of SrcDType, of any
// sign. A model's [batch][kv_heads][n][head_dim] tensor with strides
// (s0, s1, s2, 1) is SeqLen n, Key {s0, s2, s1}.
type StoreStrides struct {
	SeqLen uint32
	Key    [3]int64 // sequence, token, head
	Value  [3]int64 // unread when the kv factor is 1
}

func fillStoreStrides(s kvc.Kvc_store_strides_t, st *StoreStrides) {
	kvc.Kvc_store_strides_init(s)
	s.SetSeq_len(st.SeqLen)
	s.SetKey_seq_stride(st.Key[0])
	s.SetKey_token_stride(st.Key[1])
	s.SetKey_head_stride(st.Key[2])
	s.SetValue_seq_stride(st.Value[0])
	s.SetValue_token_stride(st.Value[1])
	s.SetValue_head_stride(st.Value[2])
}

// StoreKVStrided is StoreKV reading K and V through strides
// (kvc_store_kv_strided), so a model's K/V views are stored without a
// copy: Key and Value are the addresses of element 0 of their tensors.
func (c *Cache) StoreKVStrided(a *StoreArgs, st *StoreStrides, stream Stream) error {
	const op = "kvc_store_kv_strided"
	return c.with(op, func(h kvc.Cache) error {
		if a == nil {
			return invalidArgument(op, "a is a nil *kvcache.StoreArgs")
		}
		if st == nil {
			return invalidArgument(op, "st is a nil *kvcache.StoreStrides")
		}
		s := kvc.NewKvc_store_args_t()
		defer kvc.DeleteKvc_store_args_t(s)
		kvc.Kvc_store_args_init(s)
		s.SetLayer(a.Layer)
		s.SetRank(a.Rank)
		s.SetNum_tokens(a.NumTokens)
		s.SetSrc_dtype(uint32(a.SrcDType))
		s.SetKey(a.Key)
		s.SetValue(a.Value)
		s.SetSlot_mapping(a.SlotMapping)
		s.SetK_scale(scaleOrOne(a.KScale))
		s.SetV_scale(scaleOrOne(a.VScale))
		t := kvc.NewKvc_store_strides_t()
		defer kvc.DeleteKvc_store_strides_t(t)
		fillStoreStrides(t, st)
		return wrap(op, kvc.Kvc_store_kv_strided(h, s, t, uintptr(stream)))
	})
}

// StoreKVStridedHost is StoreKVStrided on a CPU cache with Go buffers:
// Key and Value start at element 0 of their tensors and are copied to C
// memory whole for the call; the strides must stay inside them (the
// library cannot check that: a stride reaching past a buffer reads C
// memory beyond the copy).
func (c *Cache) StoreKVStridedHost(a *HostStoreArgs, st *StoreStrides) error {
	const op = "kvcache.StoreKVStridedHost"
	return c.with(op, func(h kvc.Cache) error {
		if a == nil {
			return invalidArgument(op, "a is a nil *kvcache.HostStoreArgs")
		}
		if st == nil {
			return invalidArgument(op, "st is a nil *kvcache.StoreStrides")
		}
		if err := requireCPU(h, op); err != nil {
			return err
		}
		var bufs cBuffers
		defer bufs.free()
		key, err := bufs.copyIn(op, firstByte(a.Key), len(a.Key))
		if err != nil {
			return err
		}
		var value uintptr
		if a.Value != nil {
			if value, err = bufs.alloc(op, firstByte(a.Value), len(a.Value)); err != nil {
				return err
			}
		}
		p, n := int64Bytes(a.SlotMapping)
		slots, err := bufs.copyIn(op, p, n)
		if err != nil {
			return err
		}
		s := kvc.NewKvc_store_args_t()
		defer kvc.DeleteKvc_store_args_t(s)
		kvc.Kvc_store_args_init(s)
		s.SetLayer(a.Layer)
		s.SetRank(a.Rank)
		s.SetNum_tokens(uint32(len(a.SlotMapping)))
		s.SetSrc_dtype(uint32(a.SrcDType))
		s.SetKey(key)
		s.SetValue(value)
		s.SetSlot_mapping(slots)
		s.SetK_scale(scaleOrOne(a.KScale))
		s.SetV_scale(scaleOrOne(a.VScale))
		t := kvc.NewKvc_store_strides_t()
		defer kvc.DeleteKvc_store_strides_t(t)
		fillStoreStrides(t, st)
		return wrap("kvc_store_kv_strided", kvc.Kvc_store_kv_strided(h, s, t, 0))
	})
}

// HostStoreArgs is StoreArgs over Go memory, for StoreKVHost on a CPU
// cache: NumTokens is len(SlotMapping); Key and Value hold NumTokens *
// kv_heads * head_dim elements of SrcDType, little-endian.
type HostStoreArgs struct {
	Layer       uint32
	Rank        uint32 // tensor parallelism: the rank whose pool is used (Config.SetRanks); 0 with one rank
	SrcDType    DType
	Key         []byte
	Value       []byte // nil iff the cache's kv factor is 1
	SlotMapping []int64
	KScale      float32 // 0 means 1
	VScale      float32 // 0 means 1
}

// cBuffers holds C copies of Go memory for one call.
type cBuffers []uintptr

// copyIn copies n bytes at p into C memory; nothing (0) when p is nil.
func (b *cBuffers) copyIn(op string, p *byte, n int) (uintptr, error) {
	if p == nil {
		return 0, nil
	}
	return b.alloc(op, p, n)
}

// alloc copies n bytes at p (nil when n is 0) into a new C buffer, which
// is never 0, so that an empty buffer is not NULL.
func (b *cBuffers) alloc(op string, p *byte, n int) (uintptr, error) {
	addr := kvc.Kvcgo_buffer_new(p, uint64(n))
	if addr == 0 {
		return 0, &Error{Status: StatusOutOfMemory, Message: "cannot copy a host buffer into C memory", Op: op}
	}
	*b = append(*b, addr)
	return addr, nil
}

func (b *cBuffers) free() {
	for _, p := range *b {
		kvc.Kvcgo_buffer_free(p)
	}
	*b = nil
}

func int64Bytes(s []int64) (*byte, int) {
	if len(s) == 0 {
		return nil, 0
	}
	return (*byte)(unsafe.Pointer(&s[0])), len(s) * 8
}

func int32Bytes(s []int32) (*byte, int) {
	if len(s) == 0 {
		return nil, 0
	}
	return (*byte)(unsafe.Pointer(&s[0])), len(s) * 4
}

// requireCPU fails unless the cache's pool is in host memory: the Host
// kernels hand Go memory to the library, which a CUDA kernel cannot read.
func requireCPU(h kvc.Cache, op string) error {
	d, err := describeCache(h, "kvc_cache_describe")
	if err != nil {
		return err
	}
	if d.DeviceKind != DeviceCPU {
		return &Error{Status: StatusUnsupported, Message: "host buffers need a CPU cache; pass device addresses to the non-Host method", Op: op}
	}
	return nil
}

// StoreKVHost is StoreKV on a CPU cache with Go buffers: they are copied to
// C memory for the call (the work is done before it returns).
func (c *Cache) StoreKVHost(a *HostStoreArgs) error {
	const op = "kvcache.StoreKVHost"
	return c.with(op, func(h kvc.Cache) error {
		if a == nil {
			return invalidArgument(op, "a is a nil *kvcache.HostStoreArgs")
		}
		if err := requireCPU(h, op); err != nil {
			return err
		}
		var bufs cBuffers
		defer bufs.free()
		key, err := bufs.copyIn(op, firstByte(a.Key), len(a.Key))
		if err != nil {
			return err
		}
		var value uintptr
		if a.Value != nil {
			if value, err = bufs.alloc(op, firstByte(a.Value), len(a.Value)); err != nil {
				return err
			}
		}
		p, n := int64Bytes(a.SlotMapping)
		slots, err := bufs.copyIn(op, p, n)
		if err != nil {
			return err
		}
		s := kvc.NewKvc_store_args_t()
		defer kvc.DeleteKvc_store_args_t(s)
		kvc.Kvc_store_args_init(s)
		s.SetLayer(a.Layer)
		s.SetRank(a.Rank)
		s.SetNum_tokens(uint32(len(a.SlotMapping)))
		s.SetSrc_dtype(uint32(a.SrcDType))
		s.SetKey(key)
		s.SetValue(value)
		s.SetSlot_mapping(slots)
		s.SetK_scale(scaleOrOne(a.KScale))
		s.SetV_scale(scaleOrOne(a.VScale))
		return wrap("kvc_store_kv", kvc.Kvc_store_kv(h, s, 0))
	})
}

// CopyBlocks copies blocks of layer group group inside its pool, every
// layer of the group at once (kvc_copy_blocks): block src[i] to dst[i],
// whole, or only the first numTokens[i] token rows when numTokens is not
// nil. len(src), len(dst) (and len(numTokens)) must be equal.
func (c *Cache) CopyBlocks(group uint32, src, dst []int32, numTokens []uint32, stream Stream) error {
	const op = "kvc_copy_blocks"
	if len(src) != len(dst) || (numTokens != nil && len(numTokens) != len(src)) {
		return c.argError(op, "src, dst and numTokens differ in length")
	}
	return c.with(op, func(h kvc.Cache) error {
		return wrap(op, kvc.Kvc_copy_blocks(h, group, firstInt32(src), firstInt32(dst), firstUint32(numTokens), uint32(len(src)), uintptr(stream)))
	})
}

// DecodeArgs is what DecodeAttention computes (kvc_decode_args_t): one
// query token per sequence against its cached K/V through a block table.
// The addresses are device memory on a CUDA cache (C memory on a CPU
// cache; for Go memory use DecodeAttentionHost).
type DecodeArgs struct {
	Layer          uint32
	Rank           uint32 // tensor parallelism: the rank whose pool is used (Config.SetRanks); 0 with one rank
	Batch          uint32
	QHeads         uint32 // a multiple of the layer's kv heads
	QDType         DType
	TableFormat    TableFormat // 0 means TablePadded
	Query          uintptr     // [Batch][QHeads][head_dim]
	Out            uintptr     // [Batch][QHeads][head_dim], written
	SeqLens        uintptr     // [Batch]int32
	BlockTable     uintptr     // padded [Batch][TableStride]int32, or CSR indices
	Indptr         uintptr     // CSR: [Batch+1]int32; 0 if padded
	TableStride    uint32      // padded: entries per row; 0 for CSR
	MaxSeqLen      uint32      // upper bound of every sequence length
	Window         uint32      // 0 = the layer's configured window
	SoftmaxScale   float32     // 0 = 1/sqrt(head_dim)
	KScale         float32     // fp8 dequantization scale of K; 0 means 1
	VScale         float32     // 0 means 1
	Workspace      uintptr     // scratch (device memory on CUDA)
	WorkspaceBytes uint64      // see DecodeWorkspaceSize
}

func fillDecodeArgs(s kvc.Kvc_decode_args_t, a *DecodeArgs) {
	kvc.Kvc_decode_args_init(s)
	s.SetLayer(a.Layer)
	s.SetRank(a.Rank)
	s.SetBatch(a.Batch)
	s.SetQ_heads(a.QHeads)
	s.SetQ_dtype(uint32(a.QDType))
	if a.TableFormat != 0 {
		s.SetTable_format(uint32(a.TableFormat))
	}
	s.SetQuery(a.Query)
	s.SetOut(a.Out)
	s.SetSeq_lens(a.SeqLens)
	s.SetBlock_table(a.BlockTable)
	s.SetIndptr(a.Indptr)
	s.SetTable_stride(a.TableStride)
	s.SetMax_seq_len(a.MaxSeqLen)
	s.SetWindow(a.Window)
	s.SetSoftmax_scale(a.SoftmaxScale)
	s.SetK_scale(scaleOrOne(a.KScale))
	s.SetV_scale(scaleOrOne(a.VScale))
	s.SetWorkspace(a.Workspace)
	s.SetWorkspace_bytes(a.WorkspaceBytes)
}

// DecodeWorkspaceSize is the workspace DecodeAttention needs for a's
// layer, Batch, QHeads and MaxSeqLen (kvc_decode_workspace_size); 0 on a
// CPU cache.
func (c *Cache) DecodeWorkspaceSize(a *DecodeArgs) (bytes uint64, err error) {
	const op = "kvc_decode_workspace_size"
	return withCache(c, op, func(h kvc.Cache) (uint64, error) {
		if a == nil {
			return 0, invalidArgument(op, "a is a nil *kvcache.DecodeArgs")
		}
		s := kvc.NewKvc_decode_args_t()
		defer kvc.DeleteKvc_decode_args_t(s)
		fillDecodeArgs(s, a)
		err = kvc.Kvc_decode_workspace_size(h, s, &bytes)
		return bytes, wrap(op, err)
	})
}

// DecodeAttention runs paged decode attention of one layer
// (kvc_decode_attention), enqueued on stream on a CUDA cache.
func (c *Cache) DecodeAttention(a *DecodeArgs, stream Stream) error {
	const op = "kvc_decode_attention"
	return c.with(op, func(h kvc.Cache) error {
		if a == nil {
			return invalidArgument(op, "a is a nil *kvcache.DecodeArgs")
		}
		s := kvc.NewKvc_decode_args_t()
		defer kvc.DeleteKvc_decode_args_t(s)
		fillDecodeArgs(s, a)
		return wrap(op, kvc.Kvc_decode_attention(h, s, uintptr(stream)))
	})
}

// HostDecodeArgs is DecodeArgs over Go memory, for DecodeAttentionHost on
// a CPU cache. The batch is len(SeqLens); Query and Out hold batch *
// QHeads * head_dim elements of QDType, little-endian. Indptr nil means a
// padded table of TableStride entries per row.
type HostDecodeArgs struct {
	Layer        uint32
	Rank         uint32 // tensor parallelism: the rank whose pool is used (Config.SetRanks); 0 with one rank
	QHeads       uint32
	QDType       DType
	Query        []byte
	Out          []byte // written
	SeqLens      []int32
	BlockTable   []int32
	Indptr       []int32
	TableStride  uint32
	MaxSeqLen    uint32
	Window       uint32
	SoftmaxScale float32
	KScale       float32
	VScale       float32
}

// DecodeAttentionHost is DecodeAttention on a CPU cache with Go buffers:
// they are copied to C memory and Out is copied back (the work is done
// before it returns).
func (c *Cache) DecodeAttentionHost(a *HostDecodeArgs) error {
	const op = "kvcache.DecodeAttentionHost"
	return c.with(op, func(h kvc.Cache) error {
		if a == nil {
			return invalidArgument(op, "a is a nil *kvcache.HostDecodeArgs")
		}
		if err := requireCPU(h, op); err != nil {
			return err
		}
		var bufs cBuffers
		defer bufs.free()
		d := DecodeArgs{
			Layer: a.Layer, Rank: a.Rank, Batch: uint32(len(a.SeqLens)), QHeads: a.QHeads, QDType: a.QDType,
			TableFormat: TablePadded, TableStride: a.TableStride, MaxSeqLen: a.MaxSeqLen,
			Window: a.Window, SoftmaxScale: a.SoftmaxScale, KScale: a.KScale, VScale: a.VScale,
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
		for _, in := range []struct {
			dst *uintptr
			s   []int32
		}{{&d.SeqLens, a.SeqLens}, {&d.BlockTable, a.BlockTable}, {&d.Indptr, a.Indptr}} {
			p, n := int32Bytes(in.s)
			if *in.dst, err = bufs.copyIn(op, p, n); err != nil {
				return err
			}
		}
		s := kvc.NewKvc_decode_args_t()
		defer kvc.DeleteKvc_decode_args_t(s)
		fillDecodeArgs(s, &d)
		if err := kvc.Kvc_decode_attention(h, s, 0); err != nil {
			return wrap("kvc_decode_attention", err)
		}
		if len(a.Out) > 0 {
			kvc.Kvcgo_buffer_read(&a.Out[0], d.Out, uint64(len(a.Out)))
		}
		return nil
	})
}

// AsyncError waits for the kernel work enqueued on stream (CUDA) and
// reports the first error this cache's kernels recorded since the last
// report (kvc_cache_get_async_error): nil when there is none, else an
// *Error whose message describes it ("store_kv: slot_mapping[17] = 70000
// is outside [-1, 65536)"). A failure of the check itself is an *Error
// too, with Op "kvc_cache_get_async_error".
func (c *Cache) AsyncError(stream Stream) error {
	const op = "kvc_cache_get_async_error"
	return c.with(op, func(h kvc.Cache) error {
		var callFailed bool
		err := kvc.Kvcgo_cache_async_error(h, uintptr(stream), &callFailed)
		if err != nil && !callFailed {
			return wrap("kvc_cache_get_async_error (enqueued work)", err)
		}
		return wrap(op, err)
	})
}
