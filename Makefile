# augment — run `make help` for the targets.
GO       ?= go
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -X main.version=$(VERSION)

.PHONY: help build run test race bench fuzz chaos fmt vet lint check clean

help: ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-8s %s\n", $$1, $$2}'

build: ## build bin/augment
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/augment ./cmd/augment

run: build ## run the bundled demo pipeline (offline teacher, no server needed); writes out/demo
	./bin/augment run testdata/demo/pipeline.yaml

test: ## the whole test suite (tests on ../shared/data skip when it is absent)
	$(GO) test ./...

race: ## the test suite with the race detector
	$(GO) test -race ./...

bench: build ## benchmarks: parsers, shards, stages (dedup of 1M records), teacher layer, then the deterministic chain on 100 MB dumps per format beside a plain Python script (testdata/bench)
	$(GO) test -run '^$$' -bench . -benchmem ./storage/ ./stages/ ./stages/formats/ ./stages/shard/ ./stages/toollib/ ./stages/near/ ./verify/ ./verify/hftok/ ./translate/...
	$(GO) test -run '^$$' -bench . -benchtime=10000x ./stages/llm/
	./testdata/bench/ingest_export.sh $(ARGS)

fuzz: ## run every fuzz target for FUZZTIME each (default 10s)
	./testdata/fuzz.sh $(or $(FUZZTIME),10s)

chaos: build ## the chaos suite's full form against bin/augment: teacher faults (20%, 60%) with kills and resumes, damaged dumps, a 50 MB row (its short form runs in make test)
	AUGMENT_CHAOS=full AUGMENT_BIN=$(CURDIR)/bin/augment $(GO) test -count=1 -v -timeout 60m -run '^TestChaos' ./cmd/augment/
	AUGMENT_LOAD_TESTS=1 $(GO) test -count=3 -run 'SixtyPercent|Outage|KeyNever|FailedProbes|WaitersSurvive|LatencyBackoffFollowsTheQueue' ./stages/ ./stages/llm/

fmt: ## gofmt the tree
	gofmt -w .

vet: ## gofmt check and go vet
	@test -z "$$(gofmt -l .)" || (gofmt -l .; echo "gofmt needed"; exit 1)
	$(GO) vet ./...

lint: ## staticcheck (pinned; fetched by go run)
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.6.1 ./...

check: vet lint test ## vet, lint, then test

clean: ## remove build and run outputs
	rm -rf bin out
