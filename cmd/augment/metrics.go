package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// serveMetrics serves h at http://addr/metrics until stop is called, and
// writes the bound address to stderr (so port 0 can be found).
func serveMetrics(addr string, h http.Handler, stderr io.Writer) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("-metrics-addr: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", h)
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(stderr, "metrics listening on http://%s/metrics\n", ln.Addr())
	go hs.Serve(ln)
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		hs.Shutdown(ctx)
	}, nil
}
