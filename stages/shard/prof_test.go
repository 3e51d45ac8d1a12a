package shard

import (
	"bytes"
	"os"
	"testing"
	"time"

	"github.com/augmentdata/augment/stages/record"
)

func TestProfOne(t *testing.T) {
	for _, f := range []string{"/tmp/probe/big.bin", "/tmp/probe/slow.bin"} {
		in, _ := os.ReadFile(f)
		st := time.Now()
		err := scanReader(bytes.NewReader(in), int64(len(in)), "x", nil, func(*record.Record) error { return nil })
		t.Log(f, time.Since(st), err)
	}
}
