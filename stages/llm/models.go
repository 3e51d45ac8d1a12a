package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// A ModelError says the teacher's endpoints cannot serve the configured
// model: it is not among the models an endpoint lists, or its context
// cannot hold the configured token limit, or cannot hold a stage's prompt
// and that limit. It is a configuration error (the CLI exits 2), found
// before the request concerned is sent.
type ModelError struct {
	Problems []string
}

func (e *ModelError) Error() string { return strings.Join(e.Problems, "; ") }

// modelList is the answer of GET /models (OpenAI; vLLM adds max_model_len).
type modelList struct {
	Data []struct {
		ID          string `json:"id"`
		MaxModelLen int    `json:"max_model_len"`
	} `json:"data"`
}

// CheckModels asks every endpoint which models it serves (GET /models)
// and returns a *ModelError when one does not list teacher.model, or when
// its context length (vLLM's max_model_len) is not larger than the
// configured max_tokens / max_completion_tokens. An endpoint that cannot
// be asked (down, or without the route) is skipped with a warning: the
// run's own retries and breakers deal with it. The offline provider has
// nothing to check.
//
// The smallest context length listed is kept: from then on every request
// that is not answered from the cache is checked before it is sent (see
// fits): a first ask whose prompt and token limit do not fit stops the
// run (a *FatalError wrapping a *ModelError) naming the stage, the
// prompt's size and the context; a re-ask that does not fit rejects its
// record.
func (t *Teacher) CheckModels(ctx context.Context) error {
	if t.cfg.Provider == ProviderOffline || len(t.cfg.Endpoints) == 0 {
		return nil
	}
	client := &http.Client{Timeout: 30 * time.Second}
	limit := max(t.cfg.MaxTokens, t.cfg.MaxCompletionTokens)
	var probs []string
	served := 0
	for _, ep := range t.cfg.Endpoints {
		base := strings.TrimRight(ep.BaseURL, "/")
		list, status, err := t.listModels(ctx, client, base)
		// Messages name the endpoint without its credentials.
		if shown := RedactURL(base); shown != base {
			if err != nil {
				err = errors.New(redactIn(err.Error(), base))
			}
			base = shown
		}
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case status == http.StatusUnauthorized || status == http.StatusForbidden:
			probs = append(probs, fmt.Sprintf("%s/models refused the credentials (HTTP %d); check the key in the variable named by teacher.api_key_env", base, status))
			continue
		case err != nil:
			t.log.Warn("cannot check the teacher model on an endpoint", "endpoint", base, "error", err)
			continue
		}
		var ids []string
		found := false
		for _, m := range list.Data {
			ids = append(ids, m.ID)
			if m.ID != t.cfg.Model {
				continue
			}
			found = true
			if m.MaxModelLen > 0 && (served == 0 || m.MaxModelLen < served) {
				served = m.MaxModelLen
			}
			if m.MaxModelLen > 0 && limit >= m.MaxModelLen {
				probs = append(probs, fmt.Sprintf("%s serves %s with a context of %d tokens, which a token limit of %d leaves no room for the prompt in; lower teacher.max_tokens", base, m.ID, m.MaxModelLen, limit))
			}
		}
		if !found {
			slices.Sort(ids)
			probs = append(probs, fmt.Sprintf("%s does not serve model %q (it lists: %s); check teacher.model (vLLM: the --served-model-name)", base, t.cfg.Model, strings.Join(clipList(ids, 8), ", ")))
		}
	}
	if len(probs) > 0 {
		return &ModelError{Problems: probs}
	}
	t.contextLen.Store(int64(served))
	return nil
}

// messageOverhead is what a chat template adds per message (role markers,
// separators), in tokens: a generous figure for Llama 3, Qwen and ChatML.
const messageOverhead = 8

// fits checks that req's prompt and its token limit fit the served
// context length found by CheckModels (nothing is checked before it, or
// when no endpoint lists one). Tokens are at most bytes, so most prompts
// are cleared without counting; the others are counted with
// Options.CountTokens (an estimate: the served model's tokenizer may
// differ).
//
// A first ask (Attempt 0) that does not fit stops the run: the stage's
// prompt for this input cannot be sent with this context and token limit,
// whatever the teacher answers. A re-ask (Attempt > 0) that does not fit
// grew from the teacher's own answer or feedback: only its record is
// rejected, as llm_context_exceeded.
func (t *Teacher) fits(req Request) error {
	ctxLen := int(t.contextLen.Load())
	if ctxLen == 0 {
		return nil
	}
	limit := max(req.MaxTokens, req.MaxCompletionTokens)
	bytes := len(req.Messages) * messageOverhead
	for _, m := range req.Messages {
		bytes += len(m.Content)
	}
	if bytes+limit <= ctxLen {
		return nil
	}
	n := t.promptTokens(req)
	if n+limit <= ctxLen {
		return nil
	}
	problem := fmt.Sprintf("stage %s: a prompt of about %d tokens (%d bytes, slot %s) and the token limit of %d do not fit the context of %d tokens (max_model_len) that %s is served with",
		req.Stage, n, bytes-len(req.Messages)*messageOverhead, req.Slot, limit, ctxLen, t.cfg.Model)
	if req.Attempt > 0 {
		return &AnswerError{Reason: ReasonContextExceeded, Stage: req.Stage, Slot: req.Slot, Attempts: req.Attempt,
			Err: fmt.Errorf("re-ask %d not sent: %s", req.Attempt, problem)}
	}
	return t.stop(&FatalError{Reason: ReasonContextExceeded, Msg: "stopping the run before the request is sent", Err: &ModelError{Problems: []string{
		problem + "; serve a longer context, lower teacher.max_tokens or shorten the stage's input"}}})
}

// ReasonContextExceeded is the reject reason of a re-ask whose prompt (the
// conversation with the rejected answer and its correction) and token
// limit do not fit the served context, and the stop reason of a first ask
// that does not.
const ReasonContextExceeded = "llm_context_exceeded"

// promptTokens estimates req's prompt in tokens: Options.CountTokens (or
// four bytes a token) over the messages, plus the chat template's
// overhead per message.
func (t *Teacher) promptTokens(req Request) int {
	n := len(req.Messages) * messageOverhead
	for _, m := range req.Messages {
		if t.countTokens != nil {
			n += t.countTokens(m.Content)
		} else {
			n += (len(m.Content) + 3) / 4
		}
	}
	return n
}

// lengthen applies Request.Longer to the token limits of the effective
// request req: the limits it took from the configuration are doubled once
// per Longer (a stage's own limits were doubled by Longer itself), and
// every limit is bounded by what the served context leaves beside the
// prompt, when CheckModels found it.
func (t *Teacher) lengthen(req Request, fromCfg, fromCfgCompletion bool) Request {
	if req.longer == 0 {
		return req
	}
	if fromCfg {
		req.MaxTokens <<= req.longer
	}
	if fromCfgCompletion {
		req.MaxCompletionTokens <<= req.longer
	}
	if ctxLen := int(t.contextLen.Load()); ctxLen > 0 {
		if room := ctxLen - t.promptTokens(req); room > 0 {
			req.MaxTokens = min(req.MaxTokens, room)
			req.MaxCompletionTokens = min(req.MaxCompletionTokens, room)
		}
	}
	return req
}

func (t *Teacher) listModels(ctx context.Context, client *http.Client, base string) (modelList, int, error) {
	var list modelList
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/models", nil)
	if err != nil {
		return list, 0, err
	}
	if t.key != "" {
		req.Header.Set("Authorization", "Bearer "+t.key)
	}
	resp, err := client.Do(req)
	if err != nil {
		return list, 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return list, resp.StatusCode, err
	}
	if resp.StatusCode != http.StatusOK {
		return list, resp.StatusCode, fmt.Errorf("GET %s/models: HTTP %d", base, resp.StatusCode)
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return list, resp.StatusCode, fmt.Errorf("GET %s/models: %w", base, err)
	}
	if list.Data == nil {
		return list, resp.StatusCode, errors.New("GET " + base + "/models: no data list")
	}
	return list, resp.StatusCode, nil
}

// redactIn hides in text the credentials of the URL u (its user name,
// password and query values), wherever they stand: an error quotes the URL
// it failed on.
func redactIn(text, u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return strings.ReplaceAll(text, u, "REDACTED")
	}
	var secrets []string
	if p.User != nil {
		pw, _ := p.User.Password()
		secrets = append(secrets, pw, p.User.Username())
	}
	for _, vs := range p.Query() {
		secrets = append(secrets, vs...)
	}
	for _, s := range secrets {
		if s != "" {
			text = strings.ReplaceAll(text, s, "REDACTED")
		}
	}
	return text
}
