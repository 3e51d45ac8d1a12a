// Package verify checks tool-use records, calls and training samples.
//
// Checks are values (go/analysis style): a [Checker] has a stable Name, a
// one-line Doc and either a rule-based Check or an LLM-backed CheckLLM.
// Problems are data ([Problem]: check, kind, path, message); an error from
// CheckLLM only ever means the judge could not be asked. [Checkers] lists
// every checker in a fixed order and [Lookup] finds one by the name used in
// pipeline.yaml.
//
// # Record checkers
//
//	roles                dialogue shape
//	calls_resolved       every call names an available tool
//	args_schema          arguments fit the tool's parameters schema
//	meta_tool_shape      meta_tool calls have exactly their two arguments
//	judge_hallucination  LLM judge (Meta-Tool Fig 9), per call turn (not get_user_input replies)
//	judge_consistency    LLM judge (Meta-Tool Fig 9), per call turn (not get_user_input replies)
//	judge_multistep      LLM judge (Meta-Tool Fig 9), per call turn (not get_user_input replies)
//	judge_completeness   LLM judge (ComplexEval Fig 11), per final answer, score 0-2
//	judge_correctness    LLM judge (ComplexEval Fig 12), per final answer after tool results, score 0-2
//
// Each judge renders its prompt from prompts/<name>.tmpl and carries an
// offline stand-in, a deterministic rule that approximates the judge (see the
// checker's Doc), which the llm layer uses under provider "offline".
//
// # Call-level functions
//
// [CheckCall] is Tool-DC's Check step and ComplexFuncBench's format check of
// one call. [MatchCalls] compares predicted calls with gold calls
// (BFCL/ComplexEval style, parallel calls paired by [Hungarian]).
// [Equivalent] decides whether two argument values mean the same, by rules
// and then by the equiv_value judge. [CheckShareGPT] applies LLaMA-Factory's
// sharegpt rules to an export sample, for the template it is written for:
// [LFTemplate] holds what augment knows of LLaMA-Factory's common templates
// (thought words, tool format, parallel calls, text with calls) and
// simulates their function and tool formatters. [Tokens] and [RecordTokens] count
// tokens offline (o200k); [StudentTokens] counts them with the student
// model's tokenizer (package hftok) inside its chat template's framing.
//
// # Problem kinds
//
// Format kinds (CheckCall, args_schema, meta_tool_shape):
//
//	func_not_found   the function is not among the available tools (also calls_resolved)
//	bad_json         the arguments are not one JSON object
//	param_missing    a required parameter (or nested key) is absent
//	unknown_param    a parameter (or nested key) the schema does not declare
//	wrong_type       a value of another JSON type than declared
//	bad_enum         a value outside the declared enum
//	constraint       a value outside minimum/maximum, length, item count or pattern
//	bad_schema       the tool's parameters are not a JSON object
//	empty_value      meta_tool's tool_description is blank
//
// Match kinds (MatchCalls, after ComplexEval's error taxonomy):
//
//	func_error       a wrong function, or a predicted call with no gold counterpart
//	param_missing    a gold argument the prediction lacks (and that is not the default)
//	hallucination    a predicted argument the gold call lacks (and that is not the default)
//	value_error      an argument with another value than gold
//	stop_early       a gold call that was not made
//	bad_json         arguments that are not a JSON object
//
// Dialogue kinds (roles, calls_resolved):
//
//	empty_dialogue   no messages
//	unknown_role     a role other than system, user, assistant, tool
//	misplaced_system a system turn after the first message
//	first_not_user   the first turn after the optional system turn is not a user turn
//	role_order       two user or two assistant turns in a row, or a user turn right after a tool turn
//	orphan_tool_turn a tool turn not right after an assistant turn with calls
//	missing_results  a call turn followed by a user turn (except get_user_input calls)
//	result_count     a tool turn with another number of results than calls
//	result_name      a result named differently from its call
//	empty_turn       a blank user turn, or an assistant turn with neither text nor calls
//	bad_ending       the dialogue does not end on an assistant turn
//	bad_meta_result  a meta_tool result that is not a tool definition, a list of them, or seed 000 Fig 12's envelope of either
//
// Judge kinds:
//
//	hallucination    judge_hallucination answered 1
//	inconsistent     judge_consistency answered 1
//	no_multi_step    judge_multistep answered 1
//	incomplete       judge_completeness scored below LLMEnv.MinCompleteness
//	incorrect        judge_correctness scored below LLMEnv.MinCorrectness
//	judge_unparseable no readable answer within LLMEnv.Attempts asks
//
// LLaMA-Factory kinds (CheckShareGPT, LFTemplate.CheckThinkingOff; also the
// export's reject reasons), and empty_turn, augment's own rule there:
//
//	lf_empty, lf_missing_field, lf_role_order, lf_odd_count,
//	lf_bad_function_call, lf_template_no_parallel, lf_bad_tools,
//	lf_thought_removed, empty_turn
package verify
