package formats

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the testdata/*.golden files")

// fixtures are small dumps written for these tests, one per format.
var fixtures = []struct{ file, format string }{
	{"toolace.json", "toolace"},
	{"glaive.jsonl", "glaive"},
	{"xlam.json", "xlam"},
	{"sharegpt.json", "sharegpt"},
	{"openai.jsonl", "openai"},
}

// fixtureRows returns the raw rows of a fixture.
func fixtureRows(tb testing.TB, file string) [][]byte {
	tb.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		tb.Fatal(err)
	}
	return scanRows(tb, data)
}

// TestFixtures pins the records read from the fixtures (run with -update
// after an intended change and review the diff), and checks that reading
// is deterministic.
func TestFixtures(t *testing.T) {
	for _, fx := range fixtures {
		t.Run(fx.format, func(t *testing.T) {
			var out bytes.Buffer
			for i, row := range fixtureRows(t, fx.file) {
				rec, err := Parse(fx.format, fx.format, int64(i), row)
				if err != nil {
					t.Fatalf("row %d: %v", i, err)
				}
				if err := checkInvariants(rec); err != nil {
					t.Fatalf("row %d: %v", i, err)
				}
				b, err := json.MarshalIndent(rec, "", " ")
				if err != nil {
					t.Fatal(err)
				}
				again, _ := Parse(fx.format, fx.format, int64(i), row)
				b2, _ := json.MarshalIndent(again, "", " ")
				if !bytes.Equal(b, b2) {
					t.Fatalf("row %d: two reads differ", i)
				}
				out.Write(b)
				out.WriteByte('\n')
			}
			golden := filepath.Join("testdata", fx.file+".golden")
			if *update {
				if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if !bytes.Equal(out.Bytes(), want) {
				t.Fatalf("records differ from %s (run go test -update and review the diff):\n%s", golden, out.Bytes())
			}
		})
	}
}

// TestParseConcurrent reads the fixtures from several goroutines at once
// (run with -race): Parse shares only its pools.
func TestParseConcurrent(t *testing.T) {
	type job struct {
		format string
		index  int64
		row    []byte
		want   string
	}
	var jobs []job
	for _, fx := range fixtures {
		for i, row := range fixtureRows(t, fx.file) {
			rec, err := Parse(fx.format, "c", int64(i), row)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := json.Marshal(rec)
			jobs = append(jobs, job{fx.format, int64(i), row, string(b)})
		}
	}
	done := make(chan error)
	for range 4 {
		go func() {
			for range 50 {
				for _, j := range jobs {
					rec, err := Parse(j.format, "c", j.index, j.row)
					if err != nil {
						done <- err
						return
					}
					if b, _ := json.Marshal(rec); string(b) != j.want {
						done <- errors.New("a concurrent read differs")
						return
					}
				}
			}
			done <- nil
		}()
	}
	for range 4 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}
