package shard

import (
	"bytes"
	"math/rand/v2"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/augmentdata/augment/stages/record"
)

func TestHunt(t *testing.T) {
	var buf bytes.Buffer
	writeParquet(&buf, syntheticRecords(3, 8), Options{RowGroupRows: 2})
	seed := buf.Bytes()
	rng := rand.New(rand.NewPCG(1, 2))
	var maxD time.Duration
	var maxA uint64
	var ms runtime.MemStats
	st0 := time.Now()
	for it := 0; it < 20000; it++ {
		in := bytes.Clone(seed)
		for k := 0; k < 1+rng.IntN(4); k++ {
			if rng.IntN(2) == 0 {
				in[rng.IntN(len(in))] = byte(rng.IntN(256))
			} else {
				i := rng.IntN(len(in) - 4)
				copy(in[i:], []byte{0xff, 0xff, 0xff, 0x7f})
			}
		}
		runtime.ReadMemStats(&ms)
		a0 := ms.TotalAlloc
		st := time.Now()
		scanReader(bytes.NewReader(in), int64(len(in)), "x", nil, func(*record.Record) error { return nil })
		d := time.Since(st)
		runtime.ReadMemStats(&ms)
		if d > maxD {
			maxD = d
			os.WriteFile("/tmp/probe/slow.bin", in, 0o644)
			t.Logf("it %d: %v", it, d)
		}
		if a := ms.TotalAlloc - a0; a > maxA {
			maxA = a
			os.WriteFile("/tmp/probe/big.bin", in, 0o644)
			t.Logf("it %d: alloc %d KB", it, a>>10)
		}
	}
	t.Log(time.Since(st0))
}
