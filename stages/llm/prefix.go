package llm

import (
	"encoding/binary"
	"hash/maphash"
	"sync"
)

// A PrefixMeter measures how much of a stage's prompts repeats the start
// of an earlier prompt: the part a server with prefix caching (vLLM's
// automatic prefix caching, SGLang's radix cache) computes once. It cuts
// each prompt (the messages' roles and contents in order) into blocks of
// prefixBlock bytes, about the 16 tokens of a vLLM cache block, and hashes
// each block together with everything before it, as those servers key
// their cache; a block counts as shared when an earlier prompt had the
// same chain up to it. Bytes stand in for tokens: the share is the same to
// within a block per prompt.
//
// Memory is bounded: it remembers at most prefixMaxBlocks block hashes
// (8 bytes each); later blocks are only looked up.
type PrefixMeter struct {
	mu            sync.Mutex
	seed          maphash.Seed
	seen          map[uint64]struct{} // chained block hashes
	maxRemembered int
	blockSize     int
	total, shared int64 // prompt bytes
}

const (
	prefixBlock     = 64
	prefixMaxBlocks = 1 << 18
)

// NewPrefixMeter returns an empty meter.
func NewPrefixMeter() *PrefixMeter {
	return &PrefixMeter{seen: map[uint64]struct{}{}, seed: maphash.MakeSeed(), maxRemembered: prefixMaxBlocks, blockSize: prefixBlock}
}

// Observe counts one prompt.
func (m *PrefixMeter) Observe(msgs []Message) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var h maphash.Hash
	h.SetSeed(m.seed)
	var chain uint64
	var lenBuf [8]byte
	n, inBlock, shared, matching := int64(0), 0, int64(0), true
	flush := func() {
		binary.LittleEndian.PutUint64(lenBuf[:], chain)
		h.Write(lenBuf[:])
		chain = h.Sum64()
		h.Reset()
		if _, ok := m.seen[chain]; ok && matching {
			shared += int64(inBlock)
		} else {
			matching = false
			if len(m.seen) < m.maxRemembered {
				m.seen[chain] = struct{}{}
			}
		}
		inBlock = 0
	}
	write := func(s string) {
		for len(s) > 0 {
			k := min(len(s), m.blockSize-inBlock)
			h.WriteString(s[:k])
			inBlock += k
			n += int64(k)
			s = s[k:]
			if inBlock == m.blockSize {
				flush()
			}
		}
	}
	for _, msg := range msgs {
		write(msg.Role)
		write("\n")
		write(msg.Content)
		write("\x00")
	}
	// The last, partial block is never shared (servers cache full blocks).
	m.total += n
	m.shared += shared
}

// Share is the fraction of prompt bytes that repeated an earlier prompt's
// prefix, 0 before any prompt.
func (m *PrefixMeter) Share() float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.total == 0 {
		return 0
	}
	return float64(m.shared) / float64(m.total)
}

// Totals returns the prompt bytes observed and how many of them were a
// repeated prefix.
func (m *PrefixMeter) Totals() (total, shared int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.total, m.shared
}
