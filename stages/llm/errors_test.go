package llm

import "testing"

func TestTransient(t *testing.T) {
	for reason, want := range map[string]bool{
		"llm_error_timeout": true, "llm_error_connection": true, "llm_error_rate_limited": true,
		"llm_error_server": true, "llm_error_request_timeout": true, "llm_error_invalid_response": true,
		"llm_error_unavailable": true, "llm_embed_error_server": true, "llm_embed_error_unavailable": true,
		"llm_error_bad_request": false, "llm_embed_error_bad_request": false, "llm_truncated": false,
		"llm_error_expired": true, "llm_error_missing": true, "llm_error_batch_failed": true, "llm_error_batch_error": true,
		"llm_invalid_answer": false, "reason_missing_function": false, "llm_error_rate": false, "": false,
	} {
		if got := Transient(reason); got != want {
			t.Errorf("Transient(%q) = %v, want %v", reason, got, want)
		}
	}
}
