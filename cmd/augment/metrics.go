package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// serveMetrics serves h at /metrics on ln until stop is called, and writes
// the bound address to stderr (so port 0 can be found).
func serveMetrics(ln net.Listener, h http.Handler, stderr io.Writer) (stop func()) {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", h)
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(stderr, "metrics listening on http://%s/metrics\n", ln.Addr())
	go hs.Serve(ln)
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		hs.Shutdown(ctx)
	}
}
