package llm

import (
	"regexp"
	"strings"
)

// A redactor removes credentials from text a server sent back (error
// messages, error bodies) before it is logged or stored in a reject, a
// manifest or the cache: servers and gateways quote request headers in
// their errors, and a key quoted there must not reach the disk.
type redactor struct {
	secrets []string // literal values: the API key
}

// redacted replaces credentials.
const redacted = "[redacted]"

// minSecret is the shortest key removed wherever it occurs; a shorter one
// would match ordinary text (it is still removed after a header name).
const minSecret = 6

// credentialParam finds a header or parameter that carries a credential,
// quoted or not, in "name: value", "name=value" or JSON form; the value
// (group 4) may follow a scheme ("Bearer sk-…"). The value stops at
// punctuation and never includes "[", so text already redacted is left as
// it is.
var credentialParam = regexp.MustCompile(`(?i)\b((?:proxy-)?authorization|x-api-key|api[-_]?key|access[-_]?token)("?\s*[:=]\s*"?)((?:bearer|basic|token)\s+)?([^\s",;'}\])\[&]*)`)

var credentialText = []*regexp.Regexp{
	// A bearer token anywhere.
	regexp.MustCompile(`(?i)\bbearer\s+[A-Za-z0-9._~+/=-]{6,}`),
	// OpenAI-style secret keys, e.g. in "Incorrect API key provided: sk-…".
	regexp.MustCompile(`\bsk-[A-Za-z0-9_*-]{8,}`),
}

func newRedactor(secrets ...string) redactor {
	var r redactor
	for _, s := range secrets {
		if len(s) >= minSecret {
			r.secrets = append(r.secrets, s)
		}
	}
	return r
}

// text returns s with the secrets and any credential-carrying header or
// parameter value replaced by [redacted].
func (r redactor) text(s string) string {
	s = r.literal(s)
	if m := credentialParam.FindAllStringSubmatchIndex(s, -1); m != nil {
		var b strings.Builder
		last := 0
		for _, loc := range m {
			if v0, v1 := loc[8], loc[9]; v1 > v0 {
				b.WriteString(s[last:v0])
				b.WriteString(redacted)
				last = v1
			}
		}
		s = b.String() + s[last:]
	}
	for _, re := range credentialText {
		s = re.ReplaceAllStringFunc(s, func(m string) string {
			if i := strings.IndexAny(m, " \t\r\n"); i >= 0 && strings.EqualFold(m[:i], "bearer") {
				return m[:i+1] + redacted
			}
			return redacted
		})
	}
	return s
}

// literal replaces only the secrets themselves: for answers, whose text
// may rightly talk about Authorization headers.
func (r redactor) literal(s string) string {
	for _, k := range r.secrets {
		if strings.Contains(s, k) {
			s = strings.ReplaceAll(s, k, redacted)
		}
	}
	return s
}

// err returns err with its message redacted: err itself when there was
// nothing to redact, else an error that keeps nothing of the original but
// its redacted text, so no caller can unwrap the server's message.
func (r redactor) err(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if red := r.text(msg); red != msg {
		return &serverError{msg: red}
	}
	return err
}

// A serverError is a failed attempt's error with credentials removed.
type serverError struct{ msg string }

func (e *serverError) Error() string { return e.msg }
