package kvcache

// Moving blocks between caches for disaggregated prefill/decode
// (transfer.h): Cache.ExportSequence holds a sequence's committed blocks
// and gives their ids and the key blob; Cache.ImportBegin verifies a
// peer's blob against the receiver's own prompt and names the blocks to
// write; Import.Complete publishes them. The caller moves the bytes
// (addresses from LayerView).

import (
	"sync"

	"kvcache/kvc"
)

// TransferDesc is what an export or an import covers (kvc_transfer_desc_t).
type TransferDesc struct {
	NumGroups      uint32
	TokensPerBlock uint32
	SeqID          uint64 // the sequence exported, or the import's
	NumBlocks      uint64 // full blocks the key blob names (positions 0..NumBlocks-1)
	FirstBlock     uint64 // export: 0; import: the first position the caller writes
	NumTokens      uint64 // NumBlocks * TokensPerBlock
	KeysBytes      uint64 // size of the key blob (import: 0)
}

func transferDesc(op string, describe func(d kvc.Kvc_transfer_desc_t) error) (TransferDesc, error) {
	d := kvc.NewKvc_transfer_desc_t()
	defer kvc.DeleteKvc_transfer_desc_t(d)
	kvc.Kvc_transfer_desc_init(d)
	if err := describe(d); err != nil {
		return TransferDesc{}, wrap(op, err)
	}
	return TransferDesc{
		NumGroups:      d.GetNum_groups(),
		TokensPerBlock: d.GetTokens_per_block(),
		SeqID:          d.GetSeq_id(),
		NumBlocks:      d.GetNum_blocks(),
		FirstBlock:     d.GetFirst_block(),
		NumTokens:      d.GetNum_tokens(),
		KeysBytes:      d.GetKeys_bytes(),
	}, nil
}

// blockIDs fills a slice through a capacity-in/count-out call.
func blockIDs(op string, call func(ids *int32, capacity uint64, count *uint64) error) ([]int32, error) {
	var ids []int32
	for {
		var count uint64
		err := call(firstInt32(ids), uint64(len(ids)), &count)
		if err == nil {
			return ids[:count], nil
		}
		if e, ok := err.(*kvc.Error); !ok || Status(e.Status) != StatusBufferTooSmall || count <= uint64(len(ids)) {
			return nil, wrap(op, err)
		}
		ids = make([]int32, count)
	}
}

// Export is blocks held for a transfer (kvc_export_t). Close releases
// them. An Export is used by one goroutine at a time; close it before its
// Cache (a closed cache has released it: Close then only frees it).
type Export struct {
	mu    sync.Mutex
	h     kvc.Export
	cache *Cache
}

// ExportSequence holds the committed full blocks of sequence id for a
// transfer (kvc_cache_export_sequence): numTokens 0 for every committed
// full block, else a block-aligned count no larger than that. The blocks
// outlive eviction, ResetReuse and the sequence's removal until Close.
func (c *Cache) ExportSequence(id uint64, numTokens uint64) (*Export, error) {
	const op = "kvc_cache_export_sequence"
	return withCache(c, op, func(h kvc.Cache) (*Export, error) {
		var e kvc.Export
		if err := kvc.Kvc_cache_export_sequence(h, id, numTokens, &e); err != nil {
			return nil, wrap(op, err)
		}
		return &Export{h: e, cache: c}, nil
	})
}

// with runs f with the export handle while its cache cannot close.
func (e *Export) with(op string, f func(h kvc.Export) error) error {
	if e == nil {
		return nilReceiver(op, "Export")
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.h == 0 {
		return closedError(op)
	}
	e.cache.mu.RLock()
	defer e.cache.mu.RUnlock()
	return f(e.h)
}

// Close releases the blocks and frees the export (kvc_export_release).
// Closing twice is fine.
func (e *Export) Close() error {
	if e == nil {
		return nilReceiver("kvcache.Export.Close", "Export")
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.h != 0 {
		e.cache.mu.RLock()
		kvc.Kvc_export_release(e.h)
		e.cache.mu.RUnlock()
		e.h = 0
	}
	return nil
}

// Describe reports what the export covers (kvc_export_describe).
func (e *Export) Describe() (TransferDesc, error) {
	const op = "kvc_export_describe"
	var out TransferDesc
	err := e.with(op, func(h kvc.Export) (err error) {
		out, err = transferDesc(op, func(d kvc.Kvc_transfer_desc_t) error { return kvc.Kvc_export_describe(h, d) })
		return err
	})
	return out, err
}

// BlockIDs returns the exported block ids of layer group group, position 0
// first (kvc_export_block_ids).
func (e *Export) BlockIDs(group uint32) ([]int32, error) {
	const op = "kvc_export_block_ids"
	var out []int32
	err := e.with(op, func(h kvc.Export) (err error) {
		out, err = blockIDs(op, func(ids *int32, capacity uint64, count *uint64) error {
			return kvc.Kvc_export_block_ids(h, group, ids, capacity, count)
		})
		return err
	})
	return out, err
}

// Keys returns the key blob to send to the receiver (kvc_export_keys; the
// format is documented in transfer.h).
func (e *Export) Keys() ([]byte, error) {
	const op = "kvc_export_keys"
	var out []byte
	err := e.with(op, func(h kvc.Export) error {
		var size uint64
		if err := kvc.Kvc_export_keys(h, 0, 0, &size); err != nil {
			if ke, ok := err.(*kvc.Error); !ok || Status(ke.Status) != StatusBufferTooSmall {
				return wrap(op, err)
			}
		}
		buf := kvc.Kvcgo_buffer_new(nil, size)
		if buf == 0 {
			return &Error{Status: StatusOutOfMemory, Message: "out of C memory for the key blob", Op: op}
		}
		defer kvc.Kvcgo_buffer_free(buf)
		if err := kvc.Kvc_export_keys(h, buf, size, &size); err != nil {
			return wrap(op, err)
		}
		out = make([]byte, size)
		if size > 0 {
			kvc.Kvcgo_buffer_read(&out[0], buf, size)
		}
		return nil
	})
	return out, err
}

// Import is blocks reserved for a transfer into a cache (kvc_import_t).
// Close frees it, aborting it first if it is still open. An Import is used
// by one goroutine at a time; close it before its Cache.
type Import struct {
	mu    sync.Mutex
	h     kvc.Import
	cache *Cache
}

// ImportBegin verifies a peer's key blob against this cache and the
// receiver's own tokens and opts, then adds sequence id with them,
// reserving blocks for the positions this cache lacks
// (kvc_cache_import_begin). A blob of another prompt, salt, geometry or
// format is refused with nothing changed, naming the first block that
// differs.
func (c *Cache) ImportBegin(id uint64, tokens []int32, opts *SequenceOptions, keys []byte) (*Import, error) {
	const op = "kvc_cache_import_begin"
	return withCache(c, op, func(h kvc.Cache) (*Import, error) {
		o, err := newCOptions(opts)
		if err != nil {
			return nil, err
		}
		defer o.free()
		buf := kvc.Kvcgo_buffer_new(firstByte(keys), uint64(len(keys)))
		if buf == 0 {
			return nil, &Error{Status: StatusOutOfMemory, Message: "out of C memory for the key blob", Op: op}
		}
		defer kvc.Kvcgo_buffer_free(buf)
		var i kvc.Import
		err = kvc.Kvc_cache_import_begin(h, id, firstInt32(tokens), uint64(len(tokens)), o.handle(), buf, uint64(len(keys)), &i)
		if err != nil {
			return nil, wrap(op, err)
		}
		return &Import{h: i, cache: c}, nil
	})
}

func (i *Import) with(op string, f func(h kvc.Import) error) error {
	if i == nil {
		return nilReceiver(op, "Import")
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.h == 0 {
		return closedError(op)
	}
	i.cache.mu.RLock()
	defer i.cache.mu.RUnlock()
	return f(i.h)
}

// Close frees the import, aborting it if it is still open
// (kvc_import_destroy). Closing twice is fine.
func (i *Import) Close() error {
	if i == nil {
		return nilReceiver("kvcache.Import.Close", "Import")
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.h != 0 {
		i.cache.mu.RLock()
		kvc.Kvc_import_destroy(i.h)
		i.cache.mu.RUnlock()
		i.h = 0
	}
	return nil
}

// Describe reports what the import covers: write positions
// FirstBlock..NumBlocks-1 (kvc_import_describe).
func (i *Import) Describe() (TransferDesc, error) {
	const op = "kvc_import_describe"
	var out TransferDesc
	err := i.with(op, func(h kvc.Import) (err error) {
		out, err = transferDesc(op, func(d kvc.Kvc_transfer_desc_t) error { return kvc.Kvc_import_describe(h, d) })
		return err
	})
	return out, err
}

// BlockIDs returns the block ids to write in layer group group: entry i is
// position FirstBlock+i; -1 where nothing is to be written
// (kvc_import_block_ids).
func (i *Import) BlockIDs(group uint32) ([]int32, error) {
	const op = "kvc_import_block_ids"
	var out []int32
	err := i.with(op, func(h kvc.Import) (err error) {
		out, err = blockIDs(op, func(ids *int32, capacity uint64, count *uint64) error {
			return kvc.Kvc_import_block_ids(h, group, ids, capacity, count)
		})
		return err
	})
	return out, err
}

// Complete publishes the written blocks (kvc_import_complete).
// blocksWritten must be NumBlocks-FirstBlock; another count is refused and
// the import stays open.
func (i *Import) Complete(blocksWritten uint64) error {
	const op = "kvc_import_complete"
	return i.with(op, func(h kvc.Import) error { return wrap(op, kvc.Kvc_import_complete(h, blocksWritten)) })
}

// Abort gives every block back, removing the import's sequence
// (kvc_import_abort).
func (i *Import) Abort() error {
	const op = "kvc_import_abort"
	return i.with(op, func(h kvc.Import) error { return wrap(op, kvc.Kvc_import_abort(h)) })
}

// PoolShare is the memory backing one rank's pool, for another process to
// map (kvc_pool_share_t; CUDA IPC, see transfer.h).
type PoolShare struct {
	DeviceOrdinal int32  // the CUDA device, in this process's numbering
	Rank          uint32 // the rank described
	Pool          uint32 // the pool described
	HandleType    uint32 // ShareHandlePosixFD
	NumChunks     uint64 // physical allocations backing the pool now
	Granularity   uint64 // every offset and size is a multiple of it
	ReservedBytes uint64 // address space of the pool's reservation
	MappedBytes   uint64 // bytes backed from the pool's base
}

// ShareHandlePosixFD is PoolShare.HandleType for POSIX file descriptors
// (KVC_SHARE_HANDLE_POSIX_FD).
const ShareHandlePosixFD = 1

// ShareChunk is one exported chunk of a pool (kvc_share_chunk_t).
type ShareChunk struct {
	FD     int32  // a new POSIX file descriptor, owned by the caller (send it, then close it)
	Index  uint64 // the chunk
	Offset uint64 // its place from the pool's base
	Size   uint64 // its bytes
}

// DescribePoolShare describes the memory backing pool `pool` of rank
// `rank` for another process to map (kvc_cache_describe_pool_share). The
// CPU backend, and memory the driver would not create shareable, give
// StatusUnsupported with the reason.
func (c *Cache) DescribePoolShare(rank, pool uint32) (PoolShare, error) {
	const op = "kvc_cache_describe_pool_share"
	return withCache(c, op, func(h kvc.Cache) (PoolShare, error) {
		d := kvc.NewKvc_pool_share_t()
		defer kvc.DeleteKvc_pool_share_t(d)
		kvc.Kvc_pool_share_init(d)
		if err := kvc.Kvc_cache_describe_pool_share(h, rank, pool, d); err != nil {
			return PoolShare{}, wrap(op, err)
		}
		return PoolShare{
			DeviceOrdinal: d.GetDevice_ordinal(),
			Rank:          d.GetRank(),
			Pool:          d.GetPool(),
			HandleType:    d.GetHandle_type(),
			NumChunks:     d.GetNum_chunks(),
			Granularity:   d.GetGranularity(),
			ReservedBytes: d.GetReserved_bytes(),
			MappedBytes:   d.GetMapped_bytes(),
		}, nil
	})
}

// ExportPoolChunk exports chunk `chunk` of pool `pool` of rank `rank`
// (kvc_cache_export_pool_chunk): a new POSIX file descriptor the caller
// owns and closes (os.NewFile takes it).
func (c *Cache) ExportPoolChunk(rank, pool uint32, chunk uint64) (ShareChunk, error) {
	const op = "kvc_cache_export_pool_chunk"
	return withCache(c, op, func(h kvc.Cache) (ShareChunk, error) {
		s := kvc.NewKvc_share_chunk_t()
		defer kvc.DeleteKvc_share_chunk_t(s)
		kvc.Kvc_share_chunk_init(s)
		if err := kvc.Kvc_cache_export_pool_chunk(h, rank, pool, chunk, s); err != nil {
			return ShareChunk{}, wrap(op, err)
		}
		return ShareChunk{FD: s.GetFd(), Index: s.GetIndex(), Offset: s.GetOffset(), Size: s.GetSize()}, nil
	})
}
