package shard

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/augmentdata/augment/internal/nodetest"
	"github.com/augmentdata/augment/stages/record"
)

// duckdbOut is what testdata/duckdb_check.mjs prints.
type duckdbOut struct {
	Types   map[string]string `json:"types"`
	Records []struct {
		ID       string       `json:"id"`
		Row      string       `json:"row"`
		Messages int          `json:"messages"`
		Tags     []record.Tag `json:"tags"`
		Lang     *string      `json:"lang"`
		Lineage  []string     `json:"lineage"`
	} `json:"records"`
	Messages []struct {
		Rec, I                   int
		Role, Content, Reasoning string
		Calls                    int
		Results                  []string
	} `json:"messages"`
	Calls []struct {
		Rec, I, J       int
		Name, Arguments string
		Valid           bool
	} `json:"calls"`
	Tools []struct {
		Rec, I                        int
		Name, Description, Parameters string
		Response, Type                *string
	} `json:"tools"`
	Compression []string `json:"compression"`
}

var duckdbTypes = map[string]string{
	"id":       "VARCHAR",
	"source":   "VARCHAR",
	"format":   "VARCHAR",
	"row":      "BIGINT",
	"system":   "VARCHAR",
	"tools":    `STRUCT("name" VARCHAR, description VARCHAR, parameters JSON, response JSON)[]`,
	"messages": `STRUCT("role" VARCHAR, "content" VARCHAR, reasoning VARCHAR, calls STRUCT("name" VARCHAR, arguments JSON)[], results STRUCT("name" VARCHAR, "content" VARCHAR)[])[]`,
	"tags":     `STRUCT("key" VARCHAR, "value" VARCHAR)[]`,
	"lineage":  `STRUCT(stage VARCHAR, provider VARCHAR, model VARCHAR)[]`,
}

// TestDuckDB opens shards with DuckDB through testdata/duckdb_check.mjs
// and compares what DuckDB sees (types, unnest of messages, calls and
// tools, map_from_entries of tags, JSON functions on the JSON columns, the
// codec) with the records written. It needs node and a node_modules dir
// holding @duckdb/node-api in AUGMENT_DUCKDB_NODE_MODULES.
func TestDuckDB(t *testing.T) {
	node, modules := nodetest.Need(t, "AUGMENT_DUCKDB_NODE_MODULES", "@duckdb/node-api")
	script, err := filepath.Abs(filepath.Join("testdata", "duckdb_check.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]func(t *testing.T) []*record.Record{
		"fixtures":  func(*testing.T) []*record.Record { return fixtureRecords() },
		"synthetic": func(*testing.T) []*record.Record { return syntheticRecords(700, 7) },
		"llamafactory": func(t *testing.T) []*record.Record {
			return llamaFactoryRecords(t)
		},
		"responses": func(*testing.T) []*record.Record { return responseRunRecords() },
	}
	// Every codec with every set, DefaultCompression ("") included.
	codecs := map[string]string{"": "SNAPPY", CompressionSnappy: "SNAPPY", CompressionZstd: "ZSTD", CompressionNone: "UNCOMPRESSED"}
	for _, name := range []string{"fixtures", "synthetic", "llamafactory", "responses"} {
		for _, c := range append([]string{""}, Compressions...) {
			t.Run(name+"/"+c, func(t *testing.T) {
				recs := cases[name](t)
				path := writeShard(t, recs, Options{Version: "duck", RowGroupRows: 256, Compression: c})
				cmd := exec.Command(node, script, path)
				cmd.Env = append(os.Environ(), "AUGMENT_DUCKDB_NODE_MODULES="+modules)
				var stderr strings.Builder
				cmd.Stderr = &stderr
				stdout, err := cmd.Output()
				if err != nil {
					t.Fatalf("duckdb_check.mjs: %v\n%s", err, stderr.String())
				}
				var got duckdbOut
				if err := json.Unmarshal(stdout, &got); err != nil {
					t.Fatalf("duckdb_check.mjs output: %v", err)
				}
				checkDuckDB(t, &got, recs, codecs[c])
			})
		}
	}
}

func checkDuckDB(t *testing.T, got *duckdbOut, recs []*record.Record, codec string) {
	t.Helper()
	if !reflect.DeepEqual(got.Types, duckdbTypes) {
		t.Errorf("DESCRIBE:\n got %v\nwant %v", got.Types, duckdbTypes)
	}
	if !reflect.DeepEqual(got.Compression, []string{codec}) {
		t.Errorf("codecs %v", got.Compression)
	}
	if len(got.Records) != len(recs) {
		t.Fatalf("duckdb sees %d records, want %d", len(got.Records), len(recs))
	}
	var nMsgs, nCalls, nTools int
	for ri, r := range recs {
		g := got.Records[ri]
		var lang *string
		if v := r.Tag("lang"); v != "" {
			lang = &v
		}
		var lineage []string
		for _, s := range r.Lineage {
			lineage = append(lineage, s.Stage+"/"+s.Provider+"/"+s.Model)
		}
		if g.ID != r.ID || g.Row != strconv.FormatInt(r.Row, 10) || g.Messages != len(r.Messages) ||
			!reflect.DeepEqual(nilIfEmpty(g.Tags), nilIfEmpty(r.Tags)) ||
			!reflect.DeepEqual(g.Lang, lang) || !reflect.DeepEqual(nilIfEmpty(g.Lineage), lineage) {
			t.Fatalf("record %d: duckdb sees %+v", ri, g)
		}
		for mi, m := range r.Messages {
			gm := got.Messages[nMsgs]
			nMsgs++
			var results []string
			for _, res := range m.Results {
				results = append(results, res.Content)
			}
			if gm.Rec != ri || gm.I != mi+1 || gm.Role != m.Role || gm.Content != m.Content || gm.Reasoning != m.Reasoning ||
				gm.Calls != len(m.Calls) || !reflect.DeepEqual(nilIfEmpty(gm.Results), results) {
				t.Fatalf("record %d message %d: duckdb sees %.300v", ri, mi, gm)
			}
			for ci, c := range m.Calls {
				gc := got.Calls[nCalls]
				nCalls++
				if gc.Rec != ri || gc.I != mi+1 || gc.J != ci+1 || gc.Name != c.Name || gc.Arguments != string(c.Arguments) || !gc.Valid {
					t.Fatalf("record %d message %d call %d: duckdb sees %+v", ri, mi, ci, gc)
				}
			}
		}
		for ti, tool := range r.Tools {
			gt := got.Tools[nTools]
			nTools++
			var resp, typ *string
			if len(tool.Response) > 0 {
				s := string(tool.Response)
				resp = &s
			}
			var params struct {
				Type *string `json:"type"`
			}
			if err := json.Unmarshal(tool.Parameters, &params); err == nil {
				typ = params.Type
			}
			if gt.Rec != ri || gt.I != ti+1 || gt.Name != tool.Name || gt.Description != tool.Description ||
				gt.Parameters != string(tool.Parameters) || !reflect.DeepEqual(gt.Response, resp) || !reflect.DeepEqual(gt.Type, typ) {
				t.Fatalf("record %d tool %d: duckdb sees %+v", ri, ti, gt)
			}
		}
	}
	if nMsgs != len(got.Messages) || nCalls != len(got.Calls) || nTools != len(got.Tools) {
		t.Errorf("duckdb unnests %d messages, %d calls, %d tools; want %d, %d, %d",
			len(got.Messages), len(got.Calls), len(got.Tools), nMsgs, nCalls, nTools)
	}
}

// nilIfEmpty is s, or nil when s is empty (Normalize's form).
func nilIfEmpty[S ~[]E, E any](s S) S {
	if len(s) == 0 {
		return nil
	}
	return s
}
