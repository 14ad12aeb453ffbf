// Sequences and batch tables through the Go binding.
package kvcache_test

import (
	"errors"
	"reflect"
	"testing"

	"kvcache"
)

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
