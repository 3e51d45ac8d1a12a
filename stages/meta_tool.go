package stages

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/augmentdata/augment/jsonout"
	"github.com/augmentdata/augment/stages/contract"
	"github.com/augmentdata/augment/stages/llm"
	"github.com/augmentdata/augment/stages/record"
	"github.com/augmentdata/augment/stages/toollib"
	"github.com/augmentdata/augment/verify"
)

// MetaToolConfig is the `meta_tool:` stage (seed 000, §3.2, A.2, A.4): it
// turns each dialogue into one Meta-Bench-style variant, open-world (the
// model must retrieve its tools through the meta_tool function) or
// closed-world (the tools are listed), simple or hard.
//
//	stages:
//	  - meta_tool:
//	      open_world_ratio: 0.5
//	      hard_ratio: 0.5
//	      result_mode: oracle     # or retrieved
//	      result_format: paper    # or bare
//	      get_user_input: true
//
// # What changes in a record
//
// The tools a dialogue calls anywhere are its invoked tools (in order of
// first call); the other listed tools are unused. Per record, seeded by its
// ID, the stage draws the world (open with probability open_world_ratio),
// the difficulty (hard with probability hard_ratio, or, with
// hard_min_calls, hard when the dialogue has that many calls) and, for open-world
// records with calls, whether the invoked tools stay listed
// (existing_ratio).
//
// Tool list, in this order: meta_tool (open world only, the Fig 4
// definition); the kept tools; get_user_input last when enabled. Kept are
// the invoked tools (closed world, or open world with existing tools) and,
// in hard records, the unused tools plus irrelevant tools from the run's
// tool library until at least min_tools tools are listed (meta_tool counts,
// get_user_input does not: Fig 17 lists meta_tool and four unrelated tools).
// In hard records the kept tools are shuffled, so the position of a tool says
// nothing about whether it is needed; simple records keep the source order.
// Names in the final list are unique (a later duplicate name is dropped).
// No tool added or kept as unused may stand in for an invoked tool: its
// definition (description and parameters) differs from every invoked
// tool's, its similarity to every invoked tool (Algorithm 1 with the run's
// embedder, both directions) is at most distractor_max_similarity, and it is
// no near-twin of an invoked tool (toollib.NearTwins: names near, such as
// generate_password and generate_random_password, and descriptions whose
// offline lexical cosine reaches twin_description_similarity, whatever
// embedder the run uses); unused tools failing this are dropped (an
// open-world record must not list a twin of the tool it retrieves), and
// irrelevant tools also do not share a name with any tool of the input.
//
// Messages (open world, invoked tools not kept): before the first call of
// each invoked tool, two turns are inserted: an assistant turn calling
// meta_tool with arguments {"tool_description": …, "param_description":
// […]} (the tool's description and its parameters' descriptions in
// declaration order, see toollib.QueryOf), and a tool turn answering it.
// A call turn that calls several tools not yet retrieved gets one inserted
// assistant turn with one meta_tool call per such tool (in the order of
// their first call in that turn, each tool once) and one tool turn with the
// results in the same order. Tools already retrieved get no new meta_tool
// call, so later calls of a tool, and the retrieved tools of a turn mixing
// old and new ones, go straight to the tool. Inserted turns have no
// content and no reasoning (the reason stage writes reasoning later).
//
// # The meta_tool result format
//
// Each meta_tool call's result (record.Result with Name "meta_tool") has as
// Content compact JSON, without HTML escaping. What it returns:
//   - result_mode oracle (the paper's Fig 12): the invoked tool's
//     definition exactly as the record listed it, one JSON object
//     {"name": …, "description": …, "parameters": {…}} plus "response"
//     when the tool has a response schema;
//   - result_mode retrieved: a JSON array of such objects, at most top_k:
//     the invoked tool and the top_k−1 library tools most similar to the
//     query (Algorithm 1, alpha) that are eligible, in a seeded shuffled
//     order (a real retriever's ranking would put the oracle tool first
//     almost always, since the query is written from it; shuffling makes
//     the model read the definitions). Eligible library tools do not share
//     a name with a listed tool, an invoked tool or a tool returned by an
//     earlier meta_tool call of the dialogue with another definition, nor
//     repeat the invoked tool's definition under another name.
//
// How it is written (result_format):
//   - paper (default): seed 000 Fig 12's tool turn, a JSON list of
//     {"name": "meta_tool", "function_id": i, "results": <what it returns>},
//     one per call of the turn, function_id being the call's position in
//     the turn. A tool turn holds one Result per call and the exporter
//     writes a lone result as it is and several as a JSON list of them, so
//     the Content of a lone meta_tool call's result is the one-element list
//     [{"name": "meta_tool", "function_id": 0, "results": …}] and that of
//     each of several calls its own {"name": "meta_tool", "function_id": i,
//     "results": …}: either way the exported tool turn reads as Fig 12.
//   - bare: what it returns, as it is.
//
// formats.MetaToolResult reads every one of these shapes; calls_resolved,
// reason, response_schema and the sharegpt reader use it.
//
// Every tool a result returns is available from that turn on; every call
// of the output names a tool listed or returned by an earlier meta_tool
// result, and in oracle mode each invoked tool is returned exactly once.
//
// get_user_input (seed 000, Fig 6 and 19), when enabled, is listed in every
// record, and every assistant turn without calls becomes a call turn with
// the single call get_user_input({}) whose Content keeps the turn's text
// (the paper's "reason, then <|python_tag|> get_user_input"). No tool turn
// answers a get_user_input call: the next user turn is its answer, or the
// dialogue ends.
//
// # Tags
//
//   - world: open | closed
//   - difficulty: simple | hard
//   - category (Meta-Bench, §3.3.1), counting calls other than meta_tool and
//     get_user_input: chat (none); function_missing (open world, tools
//     retrieved through meta_tool); function_existing (open world, calls to
//     listed tools, no meta_tool call); single_call (closed world, one
//     tool called, once or more: Meta-Bench's "invoking a single tool");
//     multi_call (closed world, several tools called, parallel or in
//     several turns)
//   - result_mode: oracle | retrieved, on open-world records only
//
// # Rejects
//
// meta_tool_reserved_name (the input already lists or calls meta_tool or
// get_user_input), meta_tool_unknown_call (a call names a tool the record
// does not list), meta_tool_bad_parameters (an invoked tool's parameters
// are not a JSON Schema object), meta_tool_few_distractors (the library
// holds too few eligible irrelevant tools for a hard record), or the
// embedder's llm_embed_error_* when a tool changed since ingest cannot be
// embedded. A library that cannot be embedded fails the shard instead.
//
// # Scale
//
// Hard records and retrieved mode need the library embedded: every library
// tool's texts are embedded once per run, in requests of 512 texts,
// through the run's embedder (which caches), and kept in memory as a
// toollib.Index (memory: distinct texts × dimensions × 4 bytes; the demo
// data has ~2 distinct texts per tool, so 30k tools take ~120 MB at the
// offline embedder's 512 dimensions, ~250 MB at 1024). Retrieval ranks the
// whole library per meta_tool call (exact Algorithm 1, pruned and with
// shared parameter texts compared once).
type MetaToolConfig struct {
	// OpenWorldRatio is the share of records made open-world, in [0, 1];
	// default 0.5 (seed 000, A.1: half of the training set).
	OpenWorldRatio *float64 `yaml:"open_world_ratio" json:"open_world_ratio"`
	// HardRatio is the share of records made hard, in [0, 1]; default 0.5.
	// Not used when HardMinCalls is set.
	HardRatio *float64 `yaml:"hard_ratio" json:"hard_ratio"`
	// HardMinCalls, when above 0, makes a record hard when its dialogue
	// has at least that many calls (every call of a parallel turn and every
	// repeat counts; the input has no meta_tool call), simple otherwise:
	// seed 000 §3.3.1 splits Meta-Bench by the frequency of function
	// calling within conversations, excluding meta_tool's, without giving
	// a threshold. 0 (the default) is the seeded draw by hard_ratio, which
	// is not the paper's criterion.
	HardMinCalls int `yaml:"hard_min_calls" json:"hard_min_calls,omitempty"`
	// ExistingRatio is the share of open-world records with calls whose
	// invoked tools stay listed next to meta_tool (function_existing), in
	// [0, 1]; default 0.
	ExistingRatio float64 `yaml:"existing_ratio" json:"existing_ratio"`
	// MinTools is the number of tools a hard record lists at least; default
	// 5 (seed 000, §3.3.1).
	MinTools int `yaml:"min_tools" json:"min_tools"`
	// DistractorMaxSimilarity is the highest Algorithm-1 similarity an
	// irrelevant tool may have to an invoked tool, in (0, 1]; default 0.85.
	// Models like multilingual-e5 put unrelated texts near 0.7, so keep it
	// well above that with such an embedder.
	DistractorMaxSimilarity float64 `yaml:"distractor_max_similarity" json:"distractor_max_similarity"`
	// ResultMode is "oracle" (default: meta_tool returns the invoked tool)
	// or "retrieved" (it returns top_k library tools including it).
	ResultMode string `yaml:"result_mode" json:"result_mode"`
	// TopK is the number of tools a retrieved-mode result holds; default 5
	// (the paper's HR@5).
	TopK int `yaml:"top_k" json:"top_k"`
	// Alpha weighs tool against parameter descriptions in Algorithm 1, in
	// [0, 1]; default 0.5 (the paper's setting; its ablation finds
	// 0.65–0.8 best).
	Alpha *float64 `yaml:"alpha" json:"alpha"`
	// ResultFormat is "paper" (default: seed 000 Fig 12's envelope around
	// each result) or "bare" (the definitions alone); see the result format
	// above.
	ResultFormat string `yaml:"result_format" json:"result_format"`
	// TwinDescriptionSimilarity is the lexical cosine of descriptions from
	// which a tool whose name is near an invoked tool's counts as its
	// near-twin and is never listed beside it (toollib.NearTwins), in
	// [0, 1]; default 0.4 (chosen on ../shared/data, descriptions in one
	// language: near-twin pairs score 0.40–1.0 there, related but different
	// tools such as generate_barcode and generate_qr_code, or calculate_age
	// and calculate_age_difference, 0.23–0.39). Near-named tools described
	// in different languages are near-twins whatever this is. 1 keeps out
	// only near-named tools worded identically (and those).
	TwinDescriptionSimilarity *float64 `yaml:"twin_description_similarity" json:"twin_description_similarity"`
	// GetUserInput lists get_user_input and turns plain-text assistant
	// turns into get_user_input calls.
	GetUserInput bool `yaml:"get_user_input" json:"get_user_input,omitempty"`
}

// Result modes and formats of the meta_tool stage.
const (
	MetaToolOracle    = "oracle"
	MetaToolRetrieved = "retrieved"
	MetaToolPaper     = "paper"
	MetaToolBare      = "bare"
)

// Reject reasons of the meta_tool stage.
const (
	MetaToolReservedName     = "meta_tool_reserved_name"
	MetaToolUnknownCall      = "meta_tool_unknown_call"
	MetaToolBadParameters    = "meta_tool_bad_parameters"
	MetaToolFewDistractors   = "meta_tool_few_distractors"
	metaToolEmbedBatch       = 512
	metaToolDefaultAlpha     = 0.5
	metaToolDefaultOpenWorld = 0.5
	metaToolDefaultHard      = 0.5
	metaToolDefaultTwin      = 0.4
	// metaToolTwinDim is the dimension of the offline lexical embedding
	// that compares descriptions of near-named tools (its default size).
	metaToolTwinDim = 512
)

func ratioOr(p *float64, def float64) float64 {
	if p == nil {
		return def
	}
	return *p
}

func (c *MetaToolConfig) defaults() {
	if c.OpenWorldRatio == nil {
		c.OpenWorldRatio = new(float64(metaToolDefaultOpenWorld))
	}
	if c.HardRatio == nil {
		c.HardRatio = new(float64(metaToolDefaultHard))
	}
	if c.MinTools == 0 {
		c.MinTools = 5
	}
	if c.DistractorMaxSimilarity == 0 {
		c.DistractorMaxSimilarity = 0.85
	}
	if c.ResultMode == "" {
		c.ResultMode = MetaToolOracle
	}
	if c.ResultFormat == "" {
		c.ResultFormat = MetaToolPaper
	}
	if c.TwinDescriptionSimilarity == nil {
		c.TwinDescriptionSimilarity = new(float64(metaToolDefaultTwin))
	}
	if c.TopK == 0 {
		c.TopK = 5
	}
	if c.Alpha == nil {
		c.Alpha = new(float64(metaToolDefaultAlpha))
	}
}

func (c *MetaToolConfig) validate() []string {
	var probs []string
	unit := func(key string, v float64) {
		if !(v >= 0 && v <= 1) {
			probs = append(probs, fmt.Sprintf("%s: %v is outside [0, 1]", key, v))
		}
	}
	unit("open_world_ratio", ratioOr(c.OpenWorldRatio, metaToolDefaultOpenWorld))
	unit("hard_ratio", ratioOr(c.HardRatio, metaToolDefaultHard))
	unit("existing_ratio", c.ExistingRatio)
	if c.HardMinCalls < 0 {
		probs = append(probs, fmt.Sprintf("hard_min_calls: must be at least 0 (0: the draw by hard_ratio), got %d", c.HardMinCalls))
	}
	unit("alpha", ratioOr(c.Alpha, metaToolDefaultAlpha))
	unit("twin_description_similarity", ratioOr(c.TwinDescriptionSimilarity, metaToolDefaultTwin))
	if c.MinTools < 1 {
		probs = append(probs, fmt.Sprintf("min_tools: must be at least 1, got %d", c.MinTools))
	}
	if !(c.DistractorMaxSimilarity > 0 && c.DistractorMaxSimilarity <= 1) {
		probs = append(probs, fmt.Sprintf("distractor_max_similarity: %v is outside (0, 1]", c.DistractorMaxSimilarity))
	}
	if c.ResultMode != MetaToolOracle && c.ResultMode != MetaToolRetrieved {
		probs = append(probs, fmt.Sprintf("result_mode: %q is not one of %s, %s", c.ResultMode, MetaToolOracle, MetaToolRetrieved))
	}
	if c.ResultFormat != MetaToolPaper && c.ResultFormat != MetaToolBare {
		probs = append(probs, fmt.Sprintf("result_format: %q is not one of %s, %s", c.ResultFormat, MetaToolPaper, MetaToolBare))
	}
	if c.TopK < 1 {
		probs = append(probs, fmt.Sprintf("top_k: must be at least 1, got %d", c.TopK))
	}
	return probs
}

// readsLibrary: the stage draws from the run's tool library (libraryReader).
func (c *MetaToolConfig) readsLibrary() {}

// version 2: results in seed 000 Fig 12's envelope by default, Fig 6's
// get_user_input description, near-twins of invoked tools never listed. 3:
// a tool without a description is asked for by its name's words
// (toollib.QueryOf), not by an empty tool_description; a record calling
// one tool several times is single_call (Meta-Bench's single tool).
func (c *MetaToolConfig) version() int { return 3 }

func (c *MetaToolConfig) build(env *Env) (Stage, error) {
	s := &metaToolStage{
		cfg:   *c,
		env:   env,
		open:  ratioOr(c.OpenWorldRatio, metaToolDefaultOpenWorld),
		hard:  ratioOr(c.HardRatio, metaToolDefaultHard),
		alpha: ratioOr(c.Alpha, metaToolDefaultAlpha),
		twin:  ratioOr(c.TwinDescriptionSimilarity, metaToolDefaultTwin),
		seed:  env.reseeder(),
	}
	for i, open := range []bool{false, true} {
		var l []record.Tool
		if open {
			l = append(l, metaToolDef)
		}
		if c.GetUserInput {
			l = append(l, getUserInputDef)
		}
		s.onlySpecial[i] = slices.Clip(l)
	}
	needsLib := c.ResultMode == MetaToolRetrieved || s.hard > 0 || c.HardMinCalls > 0
	s.embeds = needsLib
	if needsLib && env.Library == nil {
		return nil, errors.New("meta_tool: hard records and retrieved results need the run's tool library, and none is available")
	}
	if needsLib && env.Embedder == nil {
		return nil, errors.New("meta_tool: hard records and retrieved results need an embedder, and none is configured")
	}
	return s, nil
}

func (s *metaToolStage) usesModels() (teacher, embedder bool) { return false, s.embeds }

type metaToolStage struct {
	cfg               MetaToolConfig
	env               *Env
	open, hard, alpha float64
	twin              float64  // twin_description_similarity
	seed              reseeder // env's, for the records' generators
	steps             stepper
	embeds            bool // hard records or retrieved results: the library is embedded
	// onlySpecial is the tool list of a closed- and of an open-world
	// record that keeps none of its tools and draws none (see
	// withSpecialTools), shared by all such records.
	onlySpecial [2][]record.Tool

	mu  sync.Mutex
	lib atomic.Pointer[metaToolLibrary] // nil until first needed; set under mu
}

// metaToolLibrary is the run's library with what the stage derives from it
// once: each tool's Algorithm-1 query and, when first needed, the embedding
// index.
type metaToolLibrary struct {
	lib    *toollib.Library
	usable []bool // the tool's parameters parse (QueryOf succeeded)
	qs     []toollib.Query
	qok    []bool         // QueryOf succeeded
	twins  []toollib.Twin // per tool, for near-twin tests of distractors
	// encoded holds, per tool once first needed, its meta_tool arguments
	// and oracle result as the stage writes them.
	encoded []atomic.Pointer[metaToolEncoded]
	// standIn remembers, per library tool a record invokes, which library
	// tools could stand in for it (see standsIn), up to standInBudget
	// bytes of rows: the library is fixed, the same tools are invoked
	// record after record, and testing a drawn distractor against them
	// (names, descriptions, vectors) was most of a draw.
	standIn       []atomic.Pointer[standInRow]
	standInUsed   atomic.Int64
	standInBudget int64 // standInBudget, or what a test sets

	ixMu sync.Mutex
	ix   *toollib.Index
}

func (s *metaToolStage) library() (*metaToolLibrary, error) {
	if ml := s.lib.Load(); ml != nil {
		return ml, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if ml := s.lib.Load(); ml != nil {
		return ml, nil
	}
	lib, err := s.env.Library()
	if err != nil {
		return nil, err
	}
	ml := &metaToolLibrary{lib: lib, usable: make([]bool, len(lib.Tools)), qs: make([]toollib.Query, len(lib.Tools)),
		qok: make([]bool, len(lib.Tools)), twins: make([]toollib.Twin, len(lib.Tools)),
		encoded: make([]atomic.Pointer[metaToolEncoded], len(lib.Tools)), standIn: make([]atomic.Pointer[standInRow], len(lib.Tools)), standInBudget: standInBudget}
	for i, t := range lib.Tools {
		q, err := toollib.QueryOf(t)
		ml.usable[i] = err == nil && t.Name != verify.MetaTool && t.Name != verify.GetUserInput
		ml.qs[i], ml.qok[i] = q, err == nil
		ml.twins[i] = toollib.NewTwin(t)
	}
	s.lib.Store(ml)
	return ml, nil
}

// queryAt is toollib.QueryOf(t), taken from the library when it is loaded
// and holds t's exact definition (QueryOf reads only the description and
// the parameters, which sameDefinition compares): parsing the same
// parameters again for every record was most of the stage's own CPU. The
// query is shared; callers do not change it. It also returns the library
// it took the query from and the tool's index there (nil and -1 when it
// computed the query).
func (s *metaToolStage) queryAt(t record.Tool) (toollib.Query, *metaToolLibrary, int, error) {
	ml := s.lib.Load()
	if ml == nil && s.env.Library != nil {
		// Records that need no library (simple ones) take their queries
		// and encodings from it too when the run has one.
		if lib, err := s.env.Library(); err == nil && lib != nil {
			ml, _ = s.library()
		}
	}
	if ml != nil {
		if i := ml.find(t); i >= 0 && ml.qok[i] {
			return ml.qs[i], ml, i, nil
		}
	}
	q, err := toollib.QueryOf(t)
	return q, nil, -1, err
}

// queryFound is queryAt(t) for a tool whose ml.find is i.
func (ml *metaToolLibrary) queryFound(t record.Tool, i int) (toollib.Query, error) {
	if i >= 0 && ml.qok[i] {
		return ml.qs[i], nil
	}
	return toollib.QueryOf(t)
}

// metaToolEncoded is a library tool's meta_tool arguments and oracle
// result, encoded once for every record that retrieves it.
type metaToolEncoded struct {
	args    []byte // jsonout of its query
	tool    string // jsonout of the tool
	paper   string // tool in the paper envelope of a lone call (paperEnvelope(tool, 0, 1))
	argsErr error
	toolErr error
	// The inserted turns' lists of a lone call in oracle mode with the
	// paper envelope (see loneTurns), shared by every record that makes
	// them: no stage changes a list of calls or results in place.
	call   [1]record.Call
	result [1]record.Result
}

// encodedAt returns library tool i's encodings, making them on first use
// (two records racing make the same bytes; either is kept).
func (ml *metaToolLibrary) encodedAt(i int) *metaToolEncoded {
	if e := ml.encoded[i].Load(); e != nil {
		return e
	}
	e := &metaToolEncoded{}
	e.args, e.argsErr = jsonout.Marshal(ml.qs[i])
	var b []byte
	b, e.toolErr = jsonout.Marshal(ml.lib.Tools[i])
	e.tool = string(b)
	e.paper = paperEnvelope(e.tool, 0, 1)
	e.call[0] = record.Call{Name: verify.MetaTool, Arguments: e.args}
	e.result[0] = record.Result{Name: verify.MetaTool, Content: e.paper}
	ml.encoded[i].Store(e)
	return e
}

// A standInRow holds, for one invoked library tool, two bits per library
// tool: whether its answer is known, and the answer.
type standInRow struct{ bits []atomic.Uint32 }

// standInBudget bounds the memory of the stand-in rows (a row is a
// quarter byte per library tool: 32 MB hold 4,000 rows of a 30,000-tool
// library); an invoked tool without a row is tested every time.
const standInBudget = 32 << 20

// standInKnown returns the remembered answer of whether library tool i
// could stand in for invoked library tool j.
func (ml *metaToolLibrary) standInKnown(j, i int) (standsIn, known bool) {
	row := ml.standIn[j].Load()
	if row == nil {
		return false, false
	}
	w := row.bits[i/16].Load() >> (2 * (i % 16))
	return w&2 != 0, w&1 != 0
}

// rememberStandIn records standInKnown's answer for (j, i), making j's row
// while the budget lasts.
func (ml *metaToolLibrary) rememberStandIn(j, i int, standsIn bool) {
	row := ml.standIn[j].Load()
	if row == nil {
		words := (len(ml.lib.Tools) + 15) / 16
		if ml.standInUsed.Add(int64(4*words)) > ml.standInBudget {
			ml.standInUsed.Add(-int64(4 * words))
			return
		}
		row = &standInRow{bits: make([]atomic.Uint32, words)}
		if !ml.standIn[j].CompareAndSwap(nil, row) {
			ml.standInUsed.Add(-int64(4 * words))
			row = ml.standIn[j].Load()
		}
	}
	v := uint32(1)
	if standsIn {
		v = 3
	}
	row.bits[i/16].Or(v << (2 * (i % 16)))
}

// index embeds the library on first use. A failure is a systemic error;
// it is not remembered, so the next record tries again.
func (ml *metaToolLibrary) index(ctx context.Context, e toollib.Embedder) (*toollib.Index, error) {
	ml.ixMu.Lock()
	defer ml.ixMu.Unlock()
	if ml.ix != nil {
		return ml.ix, nil
	}
	ix, err := toollib.NewIndex(ctx, e, ml.qs, metaToolEmbedBatch)
	if err != nil {
		// A library that cannot be embedded is the run's problem, not the
		// record's, even when the embedder's error would reject a record.
		return nil, contract.Fatal(fmt.Errorf("embedding the tool library: %w", err))
	}
	ml.ix = ix
	return ix, nil
}

// twinOf is toollib.NewTwin(t), taken from a library tool of the same name
// and description (all a Twin reads) when there is one.
func (ml *metaToolLibrary) twinOf(t record.Tool) toollib.Twin {
	for _, i := range ml.lib.Named(t.Name) {
		if ml.lib.Tools[i].Description == t.Description {
			return ml.twins[i]
		}
	}
	return toollib.NewTwin(t)
}

// find returns the library index of a tool with t's exact definition, or -1.
func (ml *metaToolLibrary) find(t record.Tool) int { return ml.lib.Find(t) }

// metaToolPlan is one record's draw and derived facts.
type metaToolPlan struct {
	in       *record.Record
	rng      *rand.Rand
	open     bool
	hard     bool
	existing bool // open world, invoked tools stay listed
	invoked  []record.Tool
	calls    int               // the input's calls (collect)
	queries  []toollib.Query   // per invoked tool, once needed
	queryLib *metaToolLibrary  // the library queries came from, if any
	queryAt  []int             // per invoked tool, its index in queryLib, or -1
	vecs     []toollib.Vectors // per invoked tool, once needed
	twins    []toollib.Twin    // per invoked tool, once needed
	taken    *nameSet          // names a library tool may not use

	sc *metaToolScratch
}

// metaToolScratch is the maps a record's plan works with, kept for the
// next record (Process made eight small maps a record): the plan's maps
// and buffers, which nothing the stage returns refers to.
type metaToolScratch struct {
	// src and rng are the record's generator, reseeded per record
	// (Env.reseed), rng reading src.
	src          rand.PCG
	rng          *rand.Rand
	invokedBuf   []record.Tool
	taken, names nameSet
	returned     map[string]int
	retrieved    []bool
	// Buffers of the plan's per-record slices (see where each is
	// filled), none of them part of what Process returns.
	queries, unusedQs                    []toollib.Query
	queryAt, drawn, fresh                []int
	vecs, unusedVecs                     []toollib.Vectors
	twins                                []toollib.Twin
	refs, unused, unusedAt, comparableAt []int
	comparable                           []record.Tool
}

// invokedIndex returns the position in p.invoked of the tool called name,
// or -1 (a record invokes a handful of tools: a scan beats a map).
func (p *metaToolPlan) invokedIndex(name string) int {
	for k := range p.invoked {
		if p.invoked[k].Name == name {
			return k
		}
	}
	return -1
}

// nameSet is a set of tool names of one record: a list while it holds at
// most nameSetSmall names (a record lists a handful of tools, and a scan
// of a few strings costs less than hashing and clearing a map), a map
// beyond.
type nameSet struct {
	list []string
	m    map[string]struct{}
}

const nameSetSmall = 16

func (ns *nameSet) has(name string) bool {
	if ns.m != nil {
		_, ok := ns.m[name]
		return ok
	}
	return slices.Contains(ns.list, name)
}

// add adds name and reports whether it was new.
func (ns *nameSet) add(name string) bool {
	if ns.has(name) {
		return false
	}
	ns.list = append(ns.list, name)
	if ns.m != nil {
		ns.m[name] = struct{}{}
	} else if len(ns.list) > nameSetSmall {
		ns.m = make(map[string]struct{}, 2*len(ns.list))
		for _, n := range ns.list {
			ns.m[n] = struct{}{}
		}
	}
	return true
}

// all returns the names, in the order they were added.
func (ns *nameSet) all() []string { return ns.list }

// reset empties the set, keeping the list's array (and dropping a map,
// which a clear would walk whole for every later record).
func (ns *nameSet) reset() {
	clear(ns.list)
	ns.list = ns.list[:0]
	ns.m = nil
}

// resized returns buf with length n, reallocated when it has not the room,
// never nil.
func resized[T any](buf []T, n int) []T {
	if buf == nil || cap(buf) < n {
		return make([]T, n)
	}
	return buf[:n]
}

var metaToolScratches = sync.Pool{New: func() any {
	sc := &metaToolScratch{returned: map[string]int{}}
	sc.rng = rand.New(&sc.src)
	return sc
}}

// start starts p, the plan of in, with empty scratch and the generator
// Env.Rand(in.ID) would return. p is the caller's, on its stack: a plan
// kept in the scratch ran write barriers for every field set and cleared
// while GC marks.
func (p *metaToolPlan) start(in *record.Record, seed reseeder) {
	sc := metaToolScratches.Get().(*metaToolScratch)
	seed.reseed(&sc.src, in.ID)
	*p = metaToolPlan{in: in, rng: sc.rng, invoked: sc.invokedBuf[:0], taken: &sc.taken, sc: sc}
	p.taken.add(verify.MetaTool)
	p.taken.add(verify.GetUserInput)
}

// release hands the plan's scratch on to the next record.
func (p *metaToolPlan) release() {
	sc := p.sc
	clear(p.invoked) // no references to the record kept
	sc.invokedBuf = p.invoked[:0]
	sc.taken.reset()
	sc.names.reset()
	clear(sc.returned)
	// No references to the record or its tools kept (each buffer is
	// stored back with the length it was filled to).
	clear(sc.queries)
	clear(sc.unusedQs)
	clear(sc.vecs)
	clear(sc.unusedVecs)
	clear(sc.twins)
	clear(sc.comparable)
	metaToolScratches.Put(sc)
}

// Process returns the record's open- or closed-world variant (see
// MetaToolConfig). A nil error always comes with exactly one record.
func (s *metaToolStage) Process(ctx context.Context, in *record.Record) ([]*record.Record, error) {
	var plan metaToolPlan
	p := &plan
	p.start(in, s.seed)
	defer p.release()
	if err := s.collect(p); err != nil {
		return nil, err
	}
	// Draw all three choices for every record, so changing one ratio does
	// not change the other choices.
	p.open = p.rng.Float64() < s.open
	p.hard = p.rng.Float64() < s.hard
	if s.cfg.HardMinCalls > 0 {
		p.hard = p.calls >= s.cfg.HardMinCalls // the draw above is still made
	}
	p.existing = p.rng.Float64() < s.cfg.ExistingRatio && p.open && len(p.invoked) > 0
	insert := p.open && !p.existing && len(p.invoked) > 0
	if insert {
		if err := s.invokedQueries(p); err != nil {
			return nil, err
		}
	}
	// The lists the stage changes are new (messages only once changed);
	// tools, calls and results are shared.
	out, list := relabelled(in)
	tools, err := s.toolList(ctx, p)
	if err != nil {
		return nil, err
	}
	out.Tools = tools
	if insert {
		if out.Messages, err = s.insertMetaCalls(ctx, p, out.Messages); err != nil {
			return nil, err
		}
	}
	if s.cfg.GetUserInput {
		if !insert {
			out.Messages = slices.Clone(out.Messages)
		}
		for i := range out.Messages {
			m := &out.Messages[i]
			if m.Role == record.RoleAssistant && len(m.Calls) == 0 {
				m.Calls = getUserInputCalls()
			}
		}
	}
	world := "closed"
	if p.open {
		world = "open"
	}
	difficulty := "simple"
	if p.hard {
		difficulty = "hard"
	}
	set := [4]record.Tag{{Key: "category", Value: metaToolCategory(out, p.open)}, {Key: "difficulty", Value: difficulty},
		{Key: "result_mode", Value: s.cfg.ResultMode}, {Key: "world", Value: world}} // sorted by key
	if p.open {
		out.Tags = record.WithTags(in.Tags, set[:]...)
	} else {
		out.Tags = record.WithTags(in.Tags, set[0], set[1], set[3])
	}
	s.steps.add(out, s.env.Stage, "rule", "")
	return list, nil
}

// collect finds the invoked tools and checks the record can be handled.
func (s *metaToolStage) collect(p *metaToolPlan) error {
	// Tools, messages and calls are read in place: a copy of each per
	// iteration was much of this pass.
	tools := p.in.Tools
	for i := range tools {
		name := tools[i].Name
		if name == verify.MetaTool || name == verify.GetUserInput {
			return contract.Rejectf(MetaToolReservedName, "the record already lists a tool named %q", name)
		}
		p.taken.add(name)
	}
	msgs := p.in.Messages
	for i := range msgs {
		calls := msgs[i].Calls
		p.calls += len(calls)
		for j := range calls {
			name := calls[j].Name
			if name == verify.MetaTool || name == verify.GetUserInput {
				return contract.Rejectf(MetaToolReservedName, "messages[%d] already calls %q", i, name)
			}
			if p.invokedIndex(name) >= 0 {
				continue
			}
			k := record.ToolIndex(tools, name)
			if k < 0 {
				return contract.Rejectf(MetaToolUnknownCall, "messages[%d] calls %q, which the record does not list", i, name)
			}
			p.invoked = append(p.invoked, tools[k])
		}
	}
	return nil
}

// invokedQueries computes the invoked tools' queries (the meta_tool
// arguments and Algorithm 1's input) once per record.
func (s *metaToolStage) invokedQueries(p *metaToolPlan) error {
	if p.queries != nil {
		return nil
	}
	qs := resized(p.sc.queries, len(p.invoked))
	at := resized(p.sc.queryAt, len(p.invoked))
	p.sc.queries, p.sc.queryAt = qs, at
	for i := range p.invoked {
		q, ml, j, err := s.queryAt(p.invoked[i])
		if err != nil {
			return contract.Rejectf(MetaToolBadParameters, "invoked %v", err)
		}
		qs[i], at[i] = q, j
		if ml != nil {
			p.queryLib = ml
		}
	}
	p.queries, p.queryAt = qs, at
	return nil
}

// invokedVectors embeds the invoked tools once per record.
func (s *metaToolStage) invokedVectors(ctx context.Context, p *metaToolPlan, ml *metaToolLibrary, ix *toollib.Index) error {
	if p.vecs != nil {
		return nil
	}
	if err := s.invokedQueries(p); err != nil {
		return err
	}
	var at []int // the invoked tools' library indexes, when known
	if p.queryLib == ml {
		at = p.queryAt
	}
	p.sc.vecs = resized(p.sc.vecs, len(p.invoked))
	if err := s.vectorsOf(ctx, p.sc.vecs, ml, ix, p.queries, p.invoked, at); err != nil {
		return err
	}
	p.vecs = p.sc.vecs
	return nil
}

// vectorsOf returns the vectors of tools (whose queries are qs): from the
// library index for tools it holds unchanged, else embedded now (a tool
// changed since ingest, e.g. translated), into vecs (of len(tools)). at,
// when not nil, holds each tool's ml.find where it is known (else -1).
func (s *metaToolStage) vectorsOf(ctx context.Context, vecs []toollib.Vectors, ml *metaToolLibrary, ix *toollib.Index, qs []toollib.Query, tools []record.Tool, at []int) error {
	var missing []int
	var mq []toollib.Query
	for i := range tools {
		j := -1
		if at != nil {
			j = at[i]
		}
		if j < 0 {
			j = ml.find(tools[i])
		}
		if j >= 0 {
			vecs[i] = ix.Vectors(j)
		} else {
			missing = append(missing, i)
			mq = append(mq, qs[i])
		}
	}
	if len(missing) > 0 {
		vs, err := toollib.Embed(ctx, s.env.Embedder, mq, metaToolEmbedBatch)
		if err != nil {
			return fmt.Errorf("embedding the record's tools: %w", err)
		}
		for j, i := range missing {
			vecs[i] = vs[j]
		}
	}
	return nil
}

// toolList builds the record's new tool list.
//
// It gathers the list as references (see toolRef) and copies each tool
// once, into the record's own list of its exact length; hard records
// shuffle the references.
func (s *metaToolStage) toolList(ctx context.Context, p *metaToolPlan) ([]record.Tool, error) {
	refs := p.sc.refs[:0] // the kept invoked tools, the kept unused tools, the distractors
	defer func() { p.sc.refs = refs }()
	unused := p.sc.unused[:0] // positions in p.in.Tools
	defer func() { p.sc.unused = unused }()
	names := &p.sc.names
	for i := range p.in.Tools {
		if !names.add(p.in.Tools[i].Name) {
			continue
		}
		switch {
		case p.invokedIndex(p.in.Tools[i].Name) >= 0:
			if !p.open || p.existing {
				refs = append(refs, i)
			}
		case p.hard:
			unused = append(unused, i)
		}
	}
	if !p.hard {
		return s.withSpecialTools(p, refs, nil), nil
	}
	var ml *metaToolLibrary
	var ix *toollib.Index
	if len(p.invoked) > 0 {
		var err error
		if ml, err = s.library(); err != nil {
			return nil, err
		}
		if ix, err = ml.index(ctx, s.env.Embedder); err != nil {
			return nil, err
		}
		if err := s.invokedVectors(ctx, p, ml, ix); err != nil {
			return nil, err
		}
		if unused, err = s.dropStandIns(ctx, p, ml, ix, unused); err != nil {
			return nil, err
		}
	}
	refs = append(refs, unused...)
	listed := len(refs)
	if p.open {
		listed++ // meta_tool
	}
	drawn, ml, err := s.distractors(p, ml, ix, s.cfg.MinTools-listed)
	if err != nil {
		return nil, err
	}
	for _, i := range drawn {
		refs = append(refs, len(p.in.Tools)+i)
	}
	p.rng.Shuffle(len(refs), func(i, j int) { refs[i], refs[j] = refs[j], refs[i] })
	return s.withSpecialTools(p, refs, ml), nil
}

// A toolRef is a tool of a record's new list: i < len(p.in.Tools) is
// p.in.Tools[i], else library tool i−len(p.in.Tools).
func (p *metaToolPlan) toolRef(i int, ml *metaToolLibrary) *record.Tool {
	if i < len(p.in.Tools) {
		return &p.in.Tools[i]
	}
	return &ml.lib.Tools[i-len(p.in.Tools)]
}

// dropStandIns returns the unused tools (positions in p.in.Tools) that
// could not stand in for an invoked tool, in order: an open-world record
// must not list a twin of the tool it retrieves. A tool whose parameters
// do not parse is compared by definition only. A tool with the definition
// of a usable library tool (so its twin and vectors too) takes that tool's
// answer (standsIn, remembered per pair).
func (s *metaToolStage) dropStandIns(ctx context.Context, p *metaToolPlan, ml *metaToolLibrary, ix *toollib.Index, unused []int) ([]int, error) {
	found := resized(p.sc.unusedAt, len(unused)) // ml.find of each unused tool
	p.sc.unusedAt = found
	comparable, at, qs := p.sc.comparable[:0], p.sc.comparableAt[:0], p.sc.unusedQs[:0]
	for u, i := range unused {
		t := &p.in.Tools[i]
		j := ml.find(*t)
		found[u] = j
		if j >= 0 && ml.usable[j] {
			continue // standsIn decides
		}
		q, err := ml.queryFound(*t, j)
		if err == nil {
			comparable = append(comparable, *t)
			at = append(at, j)
			qs = append(qs, q)
		}
	}
	p.sc.comparable, p.sc.comparableAt, p.sc.unusedQs = comparable, at, qs
	vecs := resized(p.sc.unusedVecs, len(comparable))
	p.sc.unusedVecs = vecs
	if err := s.vectorsOf(ctx, vecs, ml, ix, qs, comparable, at); err != nil {
		return nil, err
	}
	s.invokedTwins(p) // for standsIn
	kept := unused[:0]
	for u, i := range unused {
		t := &p.in.Tools[i]
		if j := found[u]; j >= 0 && ml.usable[j] {
			if !s.standsIn(p, ml, ix, j) {
				kept = append(kept, i)
			}
			continue
		}
		var tw toollib.Twin
		if j := found[u]; j >= 0 {
			tw = ml.twins[j] // the same name and description, all a Twin reads
		} else {
			tw = ml.twinOf(*t)
		}
		if s.twinOfInvoked(p, *t, &tw) {
			continue
		}
		if c := record.ToolIndex(comparable, t.Name); c >= 0 && s.likeInvoked(p, vecs[c]) {
			continue
		}
		kept = append(kept, i)
	}
	return kept, nil
}

// withSpecialTools returns the record's new list: meta_tool first (open
// world), the tools refs refer to, get_user_input last (when enabled), in
// an array of its exact length (a stage appending to the list gets its
// own): the record's own list, clipped, when that is the list, the
// stage's shared list of the special tools when refs is empty, else a new
// one.
func (s *metaToolStage) withSpecialTools(p *metaToolPlan, refs []int, ml *metaToolLibrary) []record.Tool {
	n := len(refs)
	if n > 0 && n == len(p.in.Tools) && !p.open && !s.cfg.GetUserInput && inOrder(refs) {
		return slices.Clip(p.in.Tools)
	}
	if l := s.onlySpecial[boolIndex(p.open)]; n == 0 && len(l) > 0 {
		return l
	}
	if p.open {
		n++
	}
	if s.cfg.GetUserInput {
		n++
	}
	out := make([]record.Tool, 0, n)
	if p.open {
		out = append(out, metaToolDef)
	}
	for _, r := range refs {
		out = append(out, *p.toolRef(r, ml))
	}
	if s.cfg.GetUserInput {
		out = append(out, getUserInputDef)
	}
	return out
}

// boolIndex is 1 for true, 0 for false.
func boolIndex(b bool) int {
	if b {
		return 1
	}
	return 0
}

// inOrder reports whether refs is 0, 1, … len(refs)−1.
func inOrder(refs []int) bool {
	for i, r := range refs {
		if r != i {
			return false
		}
	}
	return true
}

// The special tools' definitions, shared by every record that lists them
// (no stage changes a tool in place).
var metaToolDef, getUserInputDef = verify.MetaToolDef(), verify.GetUserInputDef()

// getUserInputCalls is the calls of an assistant turn that answers the
// user in a record listing get_user_input: the one call get_user_input({}),
// the turn's Content keeping its text (seed 000 Fig 6, 19). meta_tool
// writes every plain answer so, and negatives its teacher replies. A new
// list each time.
func getUserInputCalls() []record.Call {
	return []record.Call{{Name: verify.GetUserInput, Arguments: json.RawMessage(`{}`)}}
}

// asksUser reports whether r's plain answers are get_user_input calls, so
// that a reply added to it (negatives) and its system text (the inline
// export) take that form: r lists get_user_input and either meta_tool made
// it (its world tag; meta_tool refuses input that lists get_user_input) or
// one of its assistant turns is such a call. A source row that lists
// get_user_input and answers in plain text keeps plain answers.
func asksUser(r *record.Record) bool {
	if record.ToolIndex(r.Tools, verify.GetUserInput) < 0 {
		return false
	}
	if r.Tag("world") != "" {
		return true
	}
	for _, m := range r.Messages {
		if m.Role == record.RoleAssistant && verify.Reply(m.Calls) {
			return true
		}
	}
	return false
}

// distractors draws need irrelevant tools from the library (see
// MetaToolConfig for what may not be drawn), seeded by the record, and
// returns their library indexes and the library. ml and ix are loaded when
// the record has invoked tools, else nil.
func (s *metaToolStage) distractors(p *metaToolPlan, ml *metaToolLibrary, ix *toollib.Index, need int) ([]int, *metaToolLibrary, error) {
	if need <= 0 {
		return nil, ml, nil
	}
	if ml == nil {
		var err error
		if ml, err = s.library(); err != nil {
			return nil, nil, err
		}
	}
	n := len(ml.lib.Tools)
	// Give up after a bounded number of draws: a library this unfit is a
	// reject, not a reason to scan it whole for every record.
	budget := min(n, 64+32*need)
	s.invokedTwins(p) // for standsIn
	drawn := toollib.AppendSample(p.sc.drawn[:0], p.rng, n, need, budget, func(i int) bool {
		t := &ml.lib.Tools[i]
		if !ml.usable[i] || p.taken.has(t.Name) || s.standsIn(p, ml, ix, i) {
			return false
		}
		p.taken.add(t.Name)
		return true
	})
	p.sc.drawn = drawn
	if len(drawn) < need {
		return nil, nil, contract.Rejectf(MetaToolFewDistractors, "a hard record needs %d irrelevant tools and %d draws from the %d-tool library found %d", need, budget, n, len(drawn))
	}
	return drawn, ml, nil // the tools are shared, as every tool of a record: no stage changes a tool in place
}

// A tool could stand in for an invoked tool when it has the same
// definition, is a near-twin (toollib.NearTwins), or (when its vectors are
// known) has an Algorithm-1 similarity above distractor_max_similarity in
// either direction. The tests without vectors come first: they decide
// most candidates they reject, and the vectors cost a lookup.

// standsIn reports whether library tool i (a usable one) could stand in
// for an invoked tool: twinOfInvoked, or, when ix is loaded, likeInvoked.
// The answer for an invoked tool the library holds (its definition, so its
// twin and vectors too) depends on the two library tools alone and is
// remembered (ml.standIn). The invoked tools' twins are prepared
// (invokedTwins).
func (s *metaToolStage) standsIn(p *metaToolPlan, ml *metaToolLibrary, ix *toollib.Index, i int) bool {
	cand := &ml.lib.Tools[i]
	for k := range p.invoked {
		j := -1
		if ix != nil && p.queryLib == ml {
			j = p.queryAt[k]
		}
		if j >= 0 {
			if v, ok := ml.standInKnown(j, i); ok {
				if v {
					return true
				}
				continue
			}
		}
		v := toollib.SameDefinition(p.invoked[k], *cand) || p.twins[k].Near(&ml.twins[i], lexicalTwinEmbedding, s.twin) ||
			ix != nil && toollib.ScoresExceed(s.alpha, p.vecs[k], ix.Vectors(i), s.cfg.DistractorMaxSimilarity)
		if j >= 0 {
			ml.rememberStandIn(j, i, v)
		}
		if v {
			return true
		}
	}
	return false
}

// invokedTwins prepares the invoked tools' twins once per record.
func (s *metaToolStage) invokedTwins(p *metaToolPlan) {
	if p.twins == nil {
		p.twins = resized(p.sc.twins, len(p.invoked))
		p.sc.twins = p.twins
		for k, t := range p.invoked {
			if p.queryLib != nil && p.queryAt[k] >= 0 {
				p.twins[k] = p.queryLib.twins[p.queryAt[k]] // the same name and description
			} else {
				p.twins[k] = toollib.NewTwin(t)
			}
		}
	}
}

// twinOfInvoked reports whether cand, prepared as tw, has the definition of
// an invoked tool or is the near-twin of one.
func (s *metaToolStage) twinOfInvoked(p *metaToolPlan, cand record.Tool, tw *toollib.Twin) bool {
	s.invokedTwins(p)
	for k := range p.invoked {
		if toollib.SameDefinition(p.invoked[k], cand) || p.twins[k].Near(tw, lexicalTwinEmbedding, s.twin) {
			return true
		}
	}
	return false
}

// likeInvoked reports whether a tool with vectors v is more similar to an
// invoked tool than distractor_max_similarity allows, in either direction
// (false until the invoked tools' vectors are known).
func (s *metaToolStage) likeInvoked(p *metaToolPlan, v toollib.Vectors) bool {
	for k := range p.vecs {
		if toollib.ScoresExceed(s.alpha, p.vecs[k], v, s.cfg.DistractorMaxSimilarity) {
			return true
		}
	}
	return false
}

// lexicalTwinEmbedding embeds descriptions for toollib.NearTwins.
func lexicalTwinEmbedding(text string) []float32 { return llm.LexicalEmbedding(text, metaToolTwinDim) }

// insertMetaCalls inserts the meta_tool call and result turns before the
// first call of each invoked tool.
func (s *metaToolStage) insertMetaCalls(ctx context.Context, p *metaToolPlan, msgs []record.Message) ([]record.Message, error) {
	retrieved := resized(p.sc.retrieved, len(p.invoked)) // per invoked tool
	clear(retrieved)
	p.sc.retrieved = retrieved
	returned := p.sc.returned // name → library index of a retrieved-mode distractor already returned
	out := make([]record.Message, 0, len(msgs)+2*len(p.invoked))
	// Each invoked tool is retrieved at most once: the inserted turns'
	// calls and results take their lists from one array each, made when
	// a turn needs them (a lone call's are the library's: loneTurns).
	var calls []record.Call
	var results []record.Result
	fresh := p.sc.fresh[:0]
	defer func() { p.sc.fresh = fresh }()
	last := 0 // msgs before it are in out
	for i := range msgs {
		if m := &msgs[i]; m.Role == record.RoleAssistant {
			fresh = fresh[:0]
			for j := range m.Calls {
				k := p.invokedIndex(m.Calls[j].Name)
				if !retrieved[k] && !slices.Contains(fresh, k) {
					fresh = append(fresh, k)
				}
			}
			if e := s.loneTurns(p, fresh); e != nil {
				retrieved[fresh[0]] = true
				out = append(out, msgs[last:i]...)
				last = i
				out = append(out, record.Message{Role: record.RoleAssistant, Calls: e.call[:]},
					record.Message{Role: record.RoleTool, Results: e.result[:]})
			} else if len(fresh) > 0 {
				if calls == nil {
					calls = make([]record.Call, 0, len(p.invoked))
					results = make([]record.Result, 0, len(p.invoked))
				}
				from := len(calls)
				for id, k := range fresh {
					args, err := p.argsJSON(k)
					if err != nil {
						return nil, err
					}
					content, err := s.resultContent(ctx, p, k, id, len(fresh), returned)
					if err != nil {
						return nil, err
					}
					calls = append(calls, record.Call{Name: verify.MetaTool, Arguments: args})
					results = append(results, record.Result{Name: verify.MetaTool, Content: content})
					retrieved[k] = true
				}
				to := len(calls)
				// The messages up to this one in one copy (a copy per
				// message ran the write barrier per message while GC
				// marks).
				out = append(out, msgs[last:i]...)
				last = i
				out = append(out, record.Message{Role: record.RoleAssistant, Calls: calls[from:to:to]},
					record.Message{Role: record.RoleTool, Results: results[from:to:to]})
			}
		}
	}
	return append(out, msgs[last:]...), nil
}

// loneTurns returns the library's encodings of the one tool fresh holds
// when the turns inserted for it are the ones encoded there (its
// arguments and its result content are the library's, without errors),
// else nil.
func (s *metaToolStage) loneTurns(p *metaToolPlan, fresh []int) *metaToolEncoded {
	if len(fresh) != 1 || s.cfg.ResultMode != MetaToolOracle || s.cfg.ResultFormat != MetaToolPaper {
		return nil
	}
	e := p.oracleEncoded(fresh[0])
	if e == nil || e.argsErr != nil || e.toolErr != nil {
		return nil
	}
	return e
}

// argsJSON is the arguments of invoked tool k's meta_tool call: its query
// as JSON, encoded once per library tool.
func (p *metaToolPlan) argsJSON(k int) (json.RawMessage, error) {
	if i := p.queryAt[k]; i >= 0 {
		e := p.queryLib.encodedAt(i)
		return e.args, e.argsErr
	}
	return jsonout.Marshal(p.queries[k])
}

// paperEnvelope wraps what the meta_tool call at position id of a turn of
// n calls returns in seed 000 Fig 12's envelope (see MetaToolConfig).
func paperEnvelope(returns string, id, n int) string {
	var b strings.Builder
	b.Grow(len(returns) + len(verify.MetaTool) + 48)
	if n == 1 {
		b.WriteByte('[')
	}
	b.WriteString(`{"name":"` + verify.MetaTool + `","function_id":`)
	b.WriteString(strconv.Itoa(id))
	b.WriteString(`,"results":`)
	b.WriteString(returns)
	b.WriteByte('}')
	if n == 1 {
		b.WriteByte(']')
	}
	return b.String()
}

// resultContent is the Content of the result of invoked tool k's
// meta_tool call at position id of a turn of n calls: metaResult in the
// form result_format says.
func (s *metaToolStage) resultContent(ctx context.Context, p *metaToolPlan, k, id, n int, returned map[string]int) (string, error) {
	if s.cfg.ResultMode == MetaToolOracle && s.cfg.ResultFormat == MetaToolPaper && n == 1 {
		if e := p.oracleEncoded(k); e != nil {
			return e.paper, e.toolErr
		}
	}
	content, err := s.metaResult(ctx, p, k, returned)
	if err == nil && s.cfg.ResultFormat == MetaToolPaper {
		content = paperEnvelope(content, id, n)
	}
	return content, err
}

// oracleEncoded returns the library's encodings of invoked tool k when the
// library holds it byte for byte, else nil.
func (p *metaToolPlan) oracleEncoded(k int) *metaToolEncoded {
	if i := p.queryAt[k]; i >= 0 {
		// The library's tool has the same name and description; its
		// encoding is the invoked tool's when parameters and response
		// have the same bytes too.
		u, t := &p.queryLib.lib.Tools[i], &p.invoked[k]
		if bytes.Equal(u.Parameters, t.Parameters) && bytes.Equal(u.Response, t.Response) {
			return p.queryLib.encodedAt(i)
		}
	}
	return nil
}

// metaResult is what invoked tool k's meta_tool call returns, before
// result_format applies (see MetaToolConfig).
func (s *metaToolStage) metaResult(ctx context.Context, p *metaToolPlan, k int, returned map[string]int) (string, error) {
	target := p.invoked[k]
	if s.cfg.ResultMode == MetaToolOracle {
		if e := p.oracleEncoded(k); e != nil {
			return e.tool, e.toolErr
		}
		b, err := jsonout.Marshal(target)
		return string(b), err
	}
	ml, err := s.library()
	if err != nil {
		return "", err
	}
	ix, err := ml.index(ctx, s.env.Embedder)
	if err != nil {
		return "", err
	}
	if err := s.invokedVectors(ctx, p, ml, ix); err != nil {
		return "", err
	}
	// Library tools that may not appear: every tool named like a listed
	// or invoked tool (the target itself is added explicitly).
	blocked := map[int]bool{}
	for _, name := range p.taken.all() {
		for _, i := range ml.lib.Named(name) {
			blocked[i] = true
		}
	}
	keep := func(i int) bool { return ml.usable[i] && !blocked[i] }
	want := s.cfg.TopK - 1
	var chosen []int
	for m := 2*want + 8; want > 0; m *= 2 {
		hits := ix.Top(s.alpha, p.vecs[k], m, keep)
		chosen = chosen[:0]
		names := map[string]bool{}
		for _, h := range hits {
			t := ml.lib.Tools[h.Doc]
			if names[t.Name] || toollib.SameDefinition(t, target) {
				continue
			}
			if j, ok := returned[t.Name]; ok && j != h.Doc {
				continue
			}
			names[t.Name] = true
			chosen = append(chosen, h.Doc)
			if len(chosen) == want {
				break
			}
		}
		if len(chosen) == want || len(hits) < m {
			break
		}
	}
	list := []record.Tool{target}
	for _, i := range chosen {
		returned[ml.lib.Tools[i].Name] = i
		list = append(list, ml.lib.Tools[i])
	}
	p.rng.Shuffle(len(list), func(i, j int) { list[i], list[j] = list[j], list[i] })
	b, err := jsonout.Marshal(list)
	return string(b), err
}

// metaToolCategory is the Meta-Bench category of a finished record (see
// MetaToolConfig).
func metaToolCategory(r *record.Record, open bool) string {
	calls, meta := 0, 0
	first, several := "", false // the first tool called; another one called too
	for i := range r.Messages {
		cs := r.Messages[i].Calls
		for j := range cs {
			switch name := cs[j].Name; name {
			case verify.MetaTool:
				meta++
			case verify.GetUserInput:
			default:
				calls++
				if first == "" {
					first = name
				}
				several = several || name != first
			}
		}
	}
	switch {
	case calls == 0:
		return "chat"
	case open && meta > 0:
		return "function_missing"
	case open:
		return "function_existing"
	case !several:
		return "single_call"
	default:
		return "multi_call"
	}
}
