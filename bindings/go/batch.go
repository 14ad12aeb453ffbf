package kvcache

import (
	"errors"

	"kvcache/kvc"
)

// initialBlocksPerSequence sizes the buffers the methods allocate
// themselves: a buffer that turns out too small costs a failed call
// (KVC_ERR_BUFFER_TOO_SMALL, which says the size needed) and a retry, so
// the first guess is generous. The ...Into variants reuse the caller's.
const initialBlocksPerSequence = 64

// BatchExtend is one decode step: it appends tokens[i] to sequence ids[i]
// for every i, all or nothing (kvc_batch_extend). len(ids) must equal
// len(tokens).
func (c *Cache) BatchExtend(ids []uint64, tokens []int32, stream Stream) error {
	const op = "kvc_batch_extend"
	if len(ids) != len(tokens) {
		return c.argError(op, "len(ids) and len(tokens) differ")
	}
	return c.with(op, func(h kvc.Cache) error {
		return wrap(op, kvc.Kvc_batch_extend(h, firstUint64(ids), firstInt32(tokens), uint64(len(ids)), uintptr(stream)))
	})
}

// BlockTable returns the padded block tables of sequences ids in layer
// group group (kvc_batch_block_table): a row-major [len(ids)][stride]
// table whose row i holds the block ids of ids[i], then pad. stride is the
// longest row.
func (c *Cache) BlockTable(group uint32, ids []uint64, pad int32) (table []int32, stride int, err error) {
	return c.BlockTableInto(make([]int32, 0, len(ids)*initialBlocksPerSequence), group, ids, 0, pad)
}

// BlockTableInto is BlockTable writing into dst's storage when it is large
// enough, with rows of max(minStride, longest row) entries (minStride > 0
// gives a kernel a fixed stride). It allocates only when dst is too small.
func (c *Cache) BlockTableInto(dst []int32, group uint32, ids []uint64, minStride int, pad int32) (table []int32, stride int, err error) {
	const op = "kvc_batch_block_table"
	err = c.with(op, func(h kvc.Cache) error {
		if len(ids) == 0 {
			table, stride = dst[:0], minStride
			return nil
		}
		stride = minStride
		if stride < 1 {
			stride = cap(dst) / len(ids)
		}
		for {
			if stride > 0 && cap(dst) < len(ids)*stride {
				dst = make([]int32, len(ids)*stride)
			}
			dst = dst[:len(ids)*stride]
			needed, err := blockTable(h, op, group, ids, dst, stride, pad)
			if err == nil {
				table, stride = compactRows(dst, len(ids), stride, max(minStride, int(needed))), max(minStride, int(needed))
				return nil
			}
			if !errors.Is(err, ErrBufferTooSmall) || int(needed) <= stride {
				table, stride = nil, 0
				return err
			}
			stride = int(needed)
		}
	})
	return table, stride, err
}

// CSRTable is a batch's block tables in CSR form, as FlashInfer takes them
// (paged_kv_indptr, paged_kv_indices, paged_kv_last_page_len): sequence
// i's blocks are Indices[Indptr[i]:Indptr[i+1]], and its last block holds
// LastPageLen[i] tokens.
type CSRTable struct {
	Indptr      []int32
	Indices     []int32
	LastPageLen []int32
}

// BlockTableCSR returns the block tables of sequences ids in layer group
// group in CSR form (kvc_batch_block_table_csr).
func (c *Cache) BlockTableCSR(group uint32, ids []uint64) (CSRTable, error) {
	var t CSRTable
	err := c.BlockTableCSRInto(&t, group, ids)
	return t, err
}

// BlockTableCSRInto is BlockTableCSR reusing the slices of t when they are
// large enough.
func (c *Cache) BlockTableCSRInto(t *CSRTable, group uint32, ids []uint64) error {
	const op = "kvc_batch_block_table_csr"
	if t == nil {
		return c.argError(op, "t is a nil *kvcache.CSRTable")
	}
	n := len(ids)
	return c.with(op, func(h kvc.Cache) error {
		t.Indptr = resizeInt32(t.Indptr, n+1)
		t.LastPageLen = resizeInt32(t.LastPageLen, n)
		if n == 0 {
			t.Indptr[0] = 0
			t.Indices = t.Indices[:0]
			return nil
		}
		indices := t.Indices[:cap(t.Indices)]
		if len(indices) == 0 {
			indices = make([]int32, n*initialBlocksPerSequence)
		}
		for {
			total, err := blockTableCSR(h, op, group, ids, t.Indptr, indices, t.LastPageLen)
			if err == nil {
				t.Indices = indices[:total]
				return nil
			}
			if !errors.Is(err, ErrBufferTooSmall) || total <= uint64(len(indices)) {
				return err
			}
			indices = make([]int32, total)
		}
	})
}

// SequenceLengths returns the current lengths of sequences ids
// (kvc_batch_sequence_lengths).
func (c *Cache) SequenceLengths(ids []uint64) ([]int32, error) {
	lengths := make([]int32, len(ids))
	err := c.SequenceLengthsInto(lengths, ids)
	return lengths, err
}

// SequenceLengthsInto writes the lengths of sequences ids into lengths,
// which must hold len(ids) entries.
func (c *Cache) SequenceLengthsInto(lengths []int32, ids []uint64) error {
	const op = "kvc_batch_sequence_lengths"
	if len(lengths) < len(ids) {
		return c.argError(op, "lengths is shorter than ids")
	}
	return c.with(op, func(h kvc.Cache) error {
		if len(ids) == 0 {
			return nil
		}
		return sequenceLengths(h, op, ids, lengths)
	})
}

// SlotMapping returns the slot mapping of the tokens added to each of the
// sequences ids since the last call for layer group group
// (kvc_batch_slot_mapping): one slot per token, block_id*tokens_per_block
// + offset, or -1 for a token whose KV is already cached; the sequences'
// tokens follow each other. newTokens[i] is the number of slots of ids[i].
// It advances each sequence's cursor for group.
func (c *Cache) SlotMapping(group uint32, ids []uint64) (slots []int64, newTokens []int32, err error) {
	newTokens = make([]int32, len(ids))
	slots, err = c.SlotMappingInto(nil, newTokens, group, ids)
	return slots, newTokens, err
}

// SlotMappingInto is SlotMapping writing into the storage of slots when it
// is large enough (it allocates otherwise) and into newTokens, which must
// hold len(ids) entries (or be nil).
func (c *Cache) SlotMappingInto(slots []int64, newTokens []int32, group uint32, ids []uint64) ([]int64, error) {
	const op = "kvc_batch_slot_mapping"
	if newTokens != nil && len(newTokens) < len(ids) {
		return nil, c.argError(op, "newTokens is shorter than ids")
	}
	return withCache(c, op, func(h kvc.Cache) ([]int64, error) {
		buf := slots[:cap(slots)]
		if len(buf) == 0 {
			buf = make([]int64, len(ids)*initialBlocksPerSequence)
		}
		for {
			n, err := slotMapping(h, op, group, ids, buf, newTokens)
			if err == nil {
				return buf[:n], nil
			}
			if !errors.Is(err, ErrBufferTooSmall) || n <= uint64(len(buf)) {
				return nil, err
			}
			buf = make([]int64, n)
		}
	})
}

// compactRows moves the rows of a [rows][from] table to a [rows][to]
// layout (to <= from) in place, dropping the padding past column to.
func compactRows(t []int32, rows, from, to int) []int32 {
	if to >= from {
		return t
	}
	for r := 1; r < rows; r++ {
		copy(t[r*to:(r+1)*to], t[r*from:r*from+to])
	}
	return t[:rows*to]
}

func max(a, b int) int {
	if a > b {
		return a
	}
	return b
}

func resizeInt32(s []int32, n int) []int32 {
	if cap(s) < n {
		return make([]int32, n)
	}
	return s[:n]
}
