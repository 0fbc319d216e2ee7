package acp

// lineBlockSize is the size of the blocks a long line is gathered in.
const lineBlockSize = 1 << 20

// lineBlocks gathers one long line in fixed-size blocks, up to a cap.
type lineBlocks struct {
	blocks [][]byte
	n, max int
	// over is set once the line is past the cap; nothing more is kept.
	over bool
}

// newLineBlocks starts a line of at most max bytes; spare, when it has
// room, is reused as the first block.
func newLineBlocks(spare []byte, max int) *lineBlocks {
	b := &lineBlocks{max: max}
	if cap(spare) >= lineBlockSize {
		b.blocks = append(b.blocks, spare[:0])
	}
	return b
}

// add appends a fragment of the line.
func (b *lineBlocks) add(frag []byte) {
	if b.over {
		return
	}
	if b.n+len(frag) > b.max {
		b.over = true
		b.blocks = b.blocks[:min(len(b.blocks), 1)]
		return
	}
	b.n += len(frag)
	for len(frag) > 0 {
		if len(b.blocks) == 0 || len(b.blocks[len(b.blocks)-1]) == lineBlockSize {
			b.blocks = append(b.blocks, make([]byte, 0, lineBlockSize))
		}
		last := &b.blocks[len(b.blocks)-1]
		k := min(len(frag), lineBlockSize-len(*last))
		*last = append(*last, frag[:k]...)
		frag = frag[k:]
	}
}

// first returns the first block, for reuse by the next long line.
func (b *lineBlocks) first() []byte {
	if len(b.blocks) == 0 {
		return nil
	}
	return b.blocks[0][:0]
}

// join returns the line and the block to reuse next time. A line that fits
// one block is returned in it (valid until the next line, like any line
// the reader returns); a longer one gets a buffer of its own (owned),
// exactly its size, and the blocks are let go.
func (b *lineBlocks) join() (line, spare []byte, owned bool) {
	if len(b.blocks) == 1 {
		return b.blocks[0], b.blocks[0], false
	}
	line = make([]byte, 0, b.n)
	for _, blk := range b.blocks {
		line = append(line, blk...)
	}
	return line, b.blocks[0][:0], true
}
