// Package formats reads raw tool-use dataset dumps into canonical records
// (stages/record): a Scanner splits a dump into rows, Parse turns one row of
// a given format into a *record.Record or a *contract.Reject whose Reason is a
// stable snake_case code. ToolACE's Python-call syntax is read by package
// pycall, JSON by package jsontree.
//
// # Dumps
//
// A dump is a JSON array of objects or JSON Lines; the first non-space byte
// decides ('[' for an array; a UTF-8 byte order mark is skipped, a UTF-16
// or UTF-32 one, or '[' or '{' beside a NUL byte, stops the reading at
// byte 0 with a ScanError). Blank
// lines in JSON Lines are skipped and not counted. The Scanner checks
// framing only, and damage costs as little as the framing allows: in JSON
// Lines each line is its own frame (a line that is not one object is one
// rejected row, bad_json, with its line number; reading goes on at the next
// line); in an array, a broken element is skipped up to the next element
// when the layout learned from the elements before (the same separator,
// holding a line break) makes that unambiguous (bad_framing); a row longer
// than the row limit is row_too_large and is never held whole. What cannot
// be skipped (a truncated array, text after it, a broken element in a
// compact array) stops the scan with a *ScanError naming the row and the
// byte offset from which the dump is not read.
//
// # Canonical form
//
// Every format is read into the same shape, which later stages rely on:
//
//   - ID is "<source>:<row>", Row the 0-based row, Format the reader's name.
//   - Tools use the OpenAI function shape {name, description, parameters}.
//     parameters is a JSON Schema object as compact JSON with the source's
//     key order: "type":"dict" becomes "object" at every level, Python type
//     annotations become JSON Schema (str→string, int→integer, float→number,
//     bool→boolean, List[X]/list/set/Tuple[…]→array with items when the
//     element type is known, Dict/dict→object, Union[…]→anyOf, Optional[X]
//     and ", optional" mark the parameter optional, unknown annotations and a
//     type that is neither a name nor a list of names (null, 5) lose their
//     type), "required": null is dropped, a tool-level "required" list
//     moves into parameters when they have none, and a tool without
//     parameters gets {"type":"object","properties":{}}. xlam's flat maps
//     {param: {description, type, default}} become {"type":"object",
//     "properties":…, "required":[every parameter not marked optional]};
//     defaults are kept.
//   - Calls hold a name and the arguments as a compact JSON object, key order
//     kept. Numbers keep their literal spelling (2.50 stays 2.50). Strings
//     are re-escaped one way: only '"', '\\' and control characters are
//     escaped; other text, including non-ASCII, is written as UTF-8.
//   - Messages have roles system, user, assistant and tool. An assistant
//     turn holds Content, Reasoning and/or Calls; a tool turn holds one
//     Result per call of the assistant turn just before it, in call order,
//     named after that call. A result's Content is compact JSON when the
//     result is JSON text, else the text as given.
//   - System is the source's system text without the tool definitions and
//     without boilerplate that only fits the source's own call syntax (see
//     the formats below); other system text is kept, trimmed.
//   - Tags: lang=zh when the user and assistant text is obviously Chinese;
//     system_template=toolace|glaive|glaive_no_tools when a known template
//     was recognised and removed; xlam_id for xlam rows; repairs=<kinds,
//     sorted, comma-separated> when the row was damaged and repaired.
//     Every format: a string holding invalid UTF-8 has each bad sequence
//     replaced by U+FFFD (repair invalid_utf8), and a \u escape of half a
//     surrogate pair decodes as U+FFFD (repair lone_surrogate), also inside
//     a JSON text or Python call held in a string (found as a record
//     holding more U+FFFD than its row wrote); ingest counts each kind as
//     repair.<kind>.
//
// Dialogues are kept as they are: a dialogue may end on a call (a third of
// ToolACE does) or on a user turn (glaive); turns are neither dropped nor
// added except by the repairs listed here.
//
// Checks shared by all formats, after reading:
//
//   - A tool defined twice identically is kept once (repair duplicate_tool).
//     A name defined twice differently is rejected (duplicate_tool_conflict):
//     the calls could be meant for either definition, and nothing downstream
//     could hold them to the right one.
//   - A call must name a listed tool, or one returned by an earlier result
//     of a meta_tool call (MetaToolResult; augment's own open-world
//     exports). A name that matches exactly one such tool when case and the
//     separators '-', '.' and ' ' are ignored is renamed to that tool
//     (repair call_name_normalized, e.g. create_to_do_list for the declared
//     create_to-do_list); otherwise undeclared_call.
//   - A call's arguments must not hold a number with a fraction or an
//     exponent beyond a float's range (1e400): Python's json.loads reads it
//     as infinity and LLaMA-Factory's json.dumps writes Infinity into the
//     training target, which is not JSON (number_out_of_range, as Infinity
//     itself is glaive_arguments_nonfinite). Integers of any size are kept.
//   - Rows that are not JSON are bad_json; rows that are not objects,
//     row_not_object; JSON text embedded in a string field that does not
//     decode is bad_json too. A tool that is not an object or has no name is
//     bad_tool; parameters that are neither a JSON Schema object nor a flat
//     parameter map, or whose top level is not an object schema with
//     properties as an object and required as a list of names, are
//     bad_tool_parameters; a tools value that is not a list is bad_tools.
//
// # toolace
//
// Rows {"system", "conversations": [{"from", "value"}]} with roles user,
// assistant and tool (others: toolace_unknown_role). A system that is
// missing or not a string is toolace_bad_system; a missing conversations array,
// toolace_missing_conversations; a turn that is not {from, value} strings,
// toolace_bad_turn.
//
// The tools are a JSON array inside the system text, between "…you can
// invoke:\n" and ". \nShould you decide". When the text around them is
// exactly ToolACE's template ("You are an expert in composing functions…",
// "…Put it in the format of [func1(params_name=params_value…)]\n\nNO other
// text MUST be included.", with or without the trailing " \n"), the template
// is dropped and the tag system_template=toolace set; any other text around
// it is kept. Without the anchors (other wordings), the list is the first
// "[{" and its matching "]", and the rest of the text is kept. No list at
// all: toolace_missing_tools; a list that is not JSON: toolace_bad_tools_json.
//
// An assistant value in brackets that parses as Python calls is a call
// turn; names may hold spaces and punctuation ("Market Trends API",
// "User Feed (Video Posts) V2"). A bracketed value that starts like a call
// (a listed tool's name, or an identifier, then "(") but does not parse is
// toolace_bad_call_syntax, or toolace_truncated_call when its closing "]"
// is missing; other values are prose.
//
// A tool turn is [{"name", "results"}, …] answering the call turn just
// before it (otherwise toolace_result_without_call). Results are matched to
// calls by name; results listed in another order are put in call order
// (repair results_reordered); a lone {"name", "results"} object answering a
// single call is accepted. A tool turn that is not JSON or whose items lack
// name/results is toolace_bad_tool_turn; a count or name mismatch is
// toolace_result_mismatch.
//
// # glaive
//
// glaive-function-calling-v2 rows {"system", "chat"}: two strings.
//
// System: "SYSTEM: You are a helpful assistant with access to the following
// functions. Use them if required -" followed by pretty-printed JSON
// objects separated by blank lines (not an array); the lead-in is dropped,
// the objects become the tools, text after them is kept as the system text
// (system_template=glaive). "SYSTEM: You are a helpful assistant, with no
// access to external functions." is dropped entirely
// (system_template=glaive_no_tools). Any other system text loses only its
// "SYSTEM:" label. A tool object that is not JSON, or tools joined by
// anything but white space: glaive_bad_tool_json.
//
// Chat: turns start with "USER:", "ASSISTANT:" or "FUNCTION RESPONSE:" at
// the start of a line and are separated by a blank line ("\n\n\n" or
// "\n\n", with "\r\n" line ends too); the text is split at the markers,
// and each turn trimmed.
// Assistant turns end with " <|endoftext|>", which is removed. A call is
// "<functioncall> {"name": "f", "arguments": '<JSON object>'}": the quoted
// span is read as JSON, so apostrophes and newlines inside it are fine. A
// FUNCTION RESPONSE is the result of the call just before it.
//
// Repaired (each repair is tagged):
//
//   - bare_object_arguments: arguments written as an object, not quoted.
//   - string_arguments: arguments written as a JSON string holding an object.
//   - escaped_apostrophe: \' inside the quoted JSON (not a JSON escape).
//   - parameters_key: "parameters" used instead of "arguments".
//   - missing_arguments: a call without arguments, read as {}.
//   - extra_closing_brace: closing braces after a complete call.
//   - ai_to_call_syntax: the call written "AI to= name: {JSON object}" on
//     its own line at the end of the turn.
//   - text_before_call: prose before <functioncall> in the same turn, kept
//     as the turn's Content.
//   - merged_assistant_turns: a prose assistant turn directly followed by a
//     call turn, read as one turn with text and call.
//   - merged_user_turns: two user turns in a row, joined by a blank line.
//   - stray_endoftext: " <|endoftext|>" ending a user or function-response
//     turn ("USER: Hi <|endoftext|>"), removed.
//
// Rejected:
//
//   - glaive_bad_field: chat missing or not a string, system not a string (a
//     missing or null system is an empty one).
//   - glaive_empty_chat: no turn marker at all.
//   - glaive_text_before_first_turn: text before the first marker.
//   - glaive_stray_turn_marker: a marker right after a single newline, inside
//     a turn (the source's "AI:" became "\nASSISTANT:" inside user turns and
//     function responses, which are damaged).
//   - glaive_consecutive_assistant_turns: two assistant turns in a row, other
//     than prose then call: a turn cut in two by a stray marker ("…recent
//     developments in <|endoftext|> ASSISTANT: 1. …"), two competing
//     answers, or a call followed by prose without a response.
//   - glaive_unterminated_assistant_turn: an assistant turn without
//     <|endoftext|>, i.e. cut off.
//   - glaive_stray_endoftext: <|endoftext|> inside a turn.
//   - glaive_multiple_calls: more than one <functioncall> in a turn.
//   - glaive_truncated_call: the call ends before it is complete.
//   - glaive_arguments_nonfinite: Infinity or NaN in the arguments (no JSON
//     number can stand for them).
//   - glaive_arguments_not_json: the quoted arguments are not JSON (e.g.
//     placeholder text like [User provided data]).
//   - glaive_arguments_not_object: arguments that are a list, null, or
//     another non-object.
//   - glaive_bad_call: a call that is not an object, has no name, or has
//     both arguments and parameters.
//   - glaive_text_after_call: text other than braces after the call.
//   - glaive_response_without_call: a FUNCTION RESPONSE that follows no call
//     (e.g. the call was written in prose).
//   - glaive_truncated_response: a response that starts as JSON and ends
//     inside it.
//
// # xlam
//
// xlam-function-calling-60k rows {"id", "query", "answers", "tools"};
// answers and tools are JSON held in strings (arrays are accepted too).
// The record is one user turn (the query) and, when answers is not empty,
// one assistant turn with all calls; the same tool may be called several
// times. xlam has no results and no system text. The id becomes the tag
// xlam_id (a missing or null id sets none). Rejects: xlam_bad_field (query
// or tools missing or of the wrong type, an id neither number nor string), xlam_bad_answers (answers not a list of {name, arguments}
// objects with object arguments). Arguments held in a JSON string are
// decoded (repair string_arguments).
//
// # sharegpt
//
// LLaMA-Factory's sharegpt rows {"conversations": [{"from", "value"}],
// "system"?, "tools"?} with roles human/user, gpt/assistant, function_call,
// observation/tool/function and system, and its v1 rows {"messages":
// [{"role", "content": [{"type": "text"|"reasoning"|"tool_call", "value"}]}],
// "tools"}. tools is a JSON string of a list (or a list) of bare or
// {"type":"function","function":…} tools; an empty string means none. A
// leading system turn overrides the system column, as LLaMA-Factory does.
//
// A function_call value is {"name", "arguments"} or a list of them;
// arguments may be an object or a JSON string of one; a leading
// <think>…</think> becomes the turn's Reasoning. In v1 rows, reasoning parts
// become Reasoning, text parts Content and tool_call parts Calls.
//
// Observations answer the call turn just before them. For k calls: k
// observation turns give one result each; otherwise one observation holding
// a JSON array of k items is split into k results (the layout written for
// parallel calls, since LLaMA-Factory allows one observation turn), where an
// item {"name", "content"|"results", "tool_call_id"?} stands for its
// content; for a single call the observation's text is the result.
//
// When the tools column is empty and the system text is ToolACE's or
// glaive's template, the tools are taken from the system text as for those
// formats (rows converted from those dumps).
//
// Rejects: sharegpt_bad_field (a system that is not a string),
// sharegpt_missing_conversations, sharegpt_empty_conversation,
// sharegpt_bad_turn (no role, content missing or null, or malformed parts),
// sharegpt_unknown_role, sharegpt_unsupported_content (non-text parts such
// as images), sharegpt_bad_tools, sharegpt_bad_function_call (not JSON, no
// name or arguments, an empty list), sharegpt_observation_without_call,
// sharegpt_observation_count_mismatch.
//
// # openai
//
// OpenAI chat rows {"messages": [{"role", "content", "tool_calls": [{"id",
// "type", "function": {"name", "arguments"}}], "tool_call_id"}], "tools":
// [{"type": "function", "function": {…}}]}. content may be a string, null or
// a list of text parts; reasoning_content (or reasoning) becomes Reasoning;
// the older function_call field and "function" role are read too. A leading
// system or developer message is the record's System; later ones stay
// system messages. The run of tool messages after an assistant turn answers
// its tool_calls, matched by tool_call_id when every message carries a
// distinct known id, else in order. Rejects: openai_missing_messages,
// openai_empty_messages, openai_bad_message, openai_unknown_role,
// openai_unsupported_content, openai_bad_tools, openai_bad_tool_call,
// openai_result_without_call, openai_tool_result_mismatch.

package formats
