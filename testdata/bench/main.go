// Command bench measures ingest→export throughput and peak memory of the
// augment binary on a synthetic dump built from the real rows in
// ../shared/data/derived: `make bench` runs it.
//
// It writes one dump per raw format (ToolACE, glaive, xlam; JSON arrays, as
// the datasets ship), each row a real row with its user turns marked by the
// copy number so no two rows are identical, then runs `augment run` on an
// ingest → export pipeline as a child process and reports input MB/s and the
// child's peak RSS. With -double it repeats with twice the rows, to show
// that memory stays flat as the input grows.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

func main() {
	records := flag.Int("records", 200_000, "records in the synthetic dump (split over the three formats)")
	double := flag.Bool("double", true, "also run with twice the records")
	bin := flag.String("augment", "bin/augment", "augment binary")
	shared := flag.String("shared", "../shared/data", "the shared data directory")
	work := flag.String("work", "", "work directory (default: a temp dir, removed afterwards)")
	flag.Parse()
	if err := run(*records, *double, *bin, *shared, *work); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

type format struct{ name, file, key string }

var formats = []format{
	{"toolace", "toolace_format_glaive_toolcall_%s_demo.json", "conversations"},
	{"glaive", "glaive_v2_format_glaive_toolcall_%s_demo.json", "chat"},
	{"xlam", "xlam_format_glaive_toolcall_%s_demo.json", "query"},
}

func run(records int, double bool, bin, shared, work string) error {
	if _, err := os.Stat(filepath.Join(shared, "derived")); err != nil {
		return fmt.Errorf("needs %s/derived (the shared data): %w", shared, err)
	}
	abin, err := filepath.Abs(bin)
	if err != nil {
		return err
	}
	if work == "" {
		if work, err = os.MkdirTemp("", "augment-bench-"); err != nil {
			return err
		}
		defer os.RemoveAll(work)
	}
	sizes := []int{records}
	if double {
		sizes = append(sizes, 2*records)
	}
	fmt.Printf("%-9s %10s %9s %8s %9s %12s\n", "records", "input MB", "seconds", "MB/s", "records/s", "peak RSS MiB")
	for _, n := range sizes {
		dir := filepath.Join(work, fmt.Sprint(n))
		bytes, err := generate(shared, dir, n)
		if err != nil {
			return err
		}
		secs, rss, err := measure(abin, dir)
		if err != nil {
			return err
		}
		mb := float64(bytes) / 1e6
		fmt.Printf("%-9d %10.1f %9.1f %8.1f %9.0f %12.0f\n", n, mb, secs, mb/secs, float64(n)/secs, float64(rss)/1024)
	}
	return nil
}

// generate writes the three dumps and the pipeline; it returns the dumps'
// total size.
func generate(shared, dir string, n int) (int64, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, err
	}
	var total int64
	pipeline := "seed: 1\noutput: {dir: out, shard_size: 5000}\nsources:\n"
	for i, f := range formats {
		var rows []map[string]any
		for _, lang := range []string{"en", "zh"} {
			b, err := os.ReadFile(filepath.Join(shared, "derived", fmt.Sprintf(f.file, lang)))
			if err != nil {
				return 0, err
			}
			var part []map[string]any
			if err := json.Unmarshal(b, &part); err != nil {
				return 0, err
			}
			rows = append(rows, part...)
		}
		want := n / len(formats)
		if i == 0 {
			want += n % len(formats)
		}
		path := filepath.Join(dir, f.name+".json")
		size, err := writeDump(path, rows, want, f)
		if err != nil {
			return 0, err
		}
		total += size
		pipeline += fmt.Sprintf("  - {name: %s, path: %s.json, format: %s}\n", f.name, f.name, f.name)
	}
	pipeline += "stages:\n  - export: {}\n"
	return total, os.WriteFile(filepath.Join(dir, "pipeline.yaml"), []byte(pipeline), 0o644)
}

// writeDump writes want rows cycling through rows, each copy's user text
// marked with its copy number.
func writeDump(path string, rows []map[string]any, want int, f format) (int64, error) {
	out, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	defer out.Close()
	w := bufio.NewWriterSize(out, 1<<20)
	w.WriteString("[\n")
	for i := range want {
		row := rows[i%len(rows)]
		mark := fmt.Sprintf(" (#%d)", i)
		c := map[string]any{}
		for k, v := range row {
			c[k] = v
		}
		switch f.name {
		case "toolace":
			var turns []any
			for _, t := range row["conversations"].([]any) {
				m := t.(map[string]any)
				if m["from"] == "user" {
					m = map[string]any{"from": "user", "value": m["value"].(string) + mark}
				}
				turns = append(turns, m)
			}
			c["conversations"] = turns
		case "glaive":
			c["chat"] = strings.Replace(row["chat"].(string), "\n\n\nASSISTANT:", mark+"\n\n\nASSISTANT:", 1)
		case "xlam":
			c["query"] = row["query"].(string) + mark
			c["id"] = i
		}
		b, err := json.Marshal(c)
		if err != nil {
			return 0, err
		}
		if i > 0 {
			w.WriteString(",\n")
		}
		w.Write(b)
	}
	w.WriteString("\n]\n")
	if err := w.Flush(); err != nil {
		return 0, err
	}
	fi, err := out.Stat()
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

// measure runs the pipeline once and returns wall seconds and the child's
// peak RSS in KiB.
func measure(bin, dir string) (float64, int64, error) {
	cmd := exec.Command(bin, "run", "-quiet", "pipeline.yaml")
	cmd.Dir = dir
	cmd.Stderr = os.Stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return 0, 0, fmt.Errorf("augment run: %w", err)
	}
	secs := time.Since(start).Seconds()
	ru, _ := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if ru == nil {
		return secs, 0, nil
	}
	return secs, ru.Maxrss, nil
}
