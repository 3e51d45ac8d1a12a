package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/augmentdata/augment/atomicfs"
	"github.com/augmentdata/augment/stages"
	"github.com/augmentdata/augment/stages/llm/fakellm"
)

// cmdFakeLLM serves a fake OpenAI-compatible endpoint until interrupted, for
// dry runs of LLM stages: point teacher.endpoints at http://ADDR/v1.
func cmdFakeLLM(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("fake-llm", stderr, "[flags]")
	addr := fs.String("addr", "127.0.0.1:8089", "listen address (loopback by default)")
	config := fs.String("config", "", "JSON file with the full fake config (script rules, faults); flags override it")
	runBatch := fs.String("run-batch", "", "answer this OpenAI batch input file offline, as `vllm run-batch` would, write -o and exit")
	batchOut := fs.String("o", "", "the output file of -run-batch")
	var cfg fakellm.Config
	// A config file is read before the other flags so they can override
	// it: -config FILE, -config=FILE, with one dash or two.
	for i, a := range args {
		if a == "--" {
			break
		}
		name, val, eq := strings.Cut(a, "=")
		if name != "-config" && name != "--config" {
			continue
		}
		if !eq {
			if i+1 >= len(args) {
				break // the flag package says the value is missing
			}
			val = args[i+1]
		}
		if err := loadFakeConfig(val, &cfg); err != nil {
			return err
		}
	}
	cfg.RegisterFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	_ = config // read above
	if fs.NArg() > 0 {
		return usageError{fmt.Sprintf("fake-llm: unexpected argument %q", fs.Arg(0))}
	}
	srv, err := fakellm.New(cfg)
	if err != nil {
		return usageError{err.Error()}
	}
	if *runBatch != "" {
		return fakeRunBatch(srv, *runBatch, *batchOut)
	}
	ln, err := listenFlag("addr", *addr)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "fake-llm listening on http://%s/v1 (counters at /fake/counters); Ctrl-C stops it\n", ln.Addr())
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		hs.Shutdown(sctx)
	}()
	if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func loadFakeConfig(path string, cfg *fakellm.Config) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return &stages.ConfigError{Problems: []string{"fake-llm: -config: " + err.Error()}}
	}
	c, err := fakellm.ParseConfig(b)
	if err != nil {
		return &stages.ConfigError{Problems: []string{fmt.Sprintf("fake-llm: -config %s: %v", path, err)}}
	}
	*cfg = c
	return nil
}

// fakeRunBatch is the fake as an offline batch runner: every line of the
// input file answered into the output file (written atomically).
func fakeRunBatch(srv *fakellm.Server, in, out string) error {
	if out == "" {
		return usageError{"fake-llm -run-batch: want -o OUTPUT"}
	}
	f, err := os.Open(in)
	if err != nil {
		return err
	}
	defer f.Close()
	var buf bytes.Buffer
	if err := srv.RunBatch(f, &buf); err != nil {
		return err
	}
	root, err := atomicfs.OpenRoot(filepath.Dir(out))
	if err != nil {
		return err
	}
	defer root.Close()
	_, err = root.WriteFile(filepath.Base(out), buf.Bytes())
	return err
}
