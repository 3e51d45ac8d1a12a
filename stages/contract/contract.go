// Package contract is the contract between a stage and the runner about what
// became of one record. A stage's Process returns records and an error; the
// runner reads them with Classify, and nothing else decides:
//
//   - records and no error: the record is kept (several records: the extras
//     are counted as added);
//   - no records and no error, or a *Filter: the record is filtered, dropped
//     on purpose and counted under the filter's reason ("empty" without one);
//   - an error that carries a reject reason (a *Reject, or any error with a
//     RejectReason method, found with errors.As): the record is rejected,
//     written to the rejects file under that reason, and the run goes on;
//   - any other error, or one marked with Fatal: the run stops; nothing of
//     the shard becomes visible and the next run redoes it.
//
// A reject must reach the runner through %w wrapping (or unwrapped): one
// formatted with %v is only text and would stop the run. Code that means to
// stop the run on an error that happens to carry a reject reason says so with
// Fatal instead of hiding the reason with %v. TestErrorfWrapsErrors keeps
// the module to that rule.
//
// The package imports nothing of the project, so every layer (readers, the
// teacher client, translate, the stages) can speak it.
package contract

import (
	"errors"
	"fmt"
)

// A Rejecter is an error that rejects one record under a reason code. Most
// code returns a *Reject; errors that carry more context for their own
// callers (the teacher layer's answer errors, the readers' row errors)
// implement it themselves.
type Rejecter interface {
	error
	RejectReason() string
}

// Reject is the error for a record a stage (or a reader, or a layer below)
// cannot handle.
type Reject struct {
	Reason string // stable snake_case code, e.g. "no_valid_candidate"
	Detail string // what exactly was wrong, for people; Err's text when empty
	Err    error  // the underlying error, if any
}

func (e *Reject) Error() string {
	switch {
	case e.Detail != "":
		return e.Reason + ": " + e.Detail
	case e.Err != nil:
		return e.Reason + ": " + e.Err.Error()
	}
	return e.Reason
}

// RejectReason returns the reason code.
func (e *Reject) RejectReason() string { return e.Reason }

func (e *Reject) Unwrap() error { return e.Err }

// Rejectf returns a *Reject with a formatted detail.
func Rejectf(reason, format string, args ...any) error {
	return &Reject{Reason: reason, Detail: fmt.Sprintf(format, args...)}
}

// Filter is the error a stage returns with zero records to drop a record on
// purpose, e.g. because a sample quota is full.
type Filter struct{ Reason string }

func (e *Filter) Error() string { return "filtered: " + e.Reason }

// Fatal marks err as stopping the run even when it wraps a reject: a tool
// library that cannot be embedded is the run's problem, not the record's,
// whatever the embedder's error says. Its text is err's.
func Fatal(err error) error {
	if err == nil {
		return nil
	}
	return &fatal{err}
}

type fatal struct{ err error }

func (e *fatal) Error() string { return e.err.Error() }
func (e *fatal) Unwrap() error { return e.err }

// Kind is what became of a record.
type Kind uint8

const (
	Kept     Kind = iota // passed on
	Filtered             // dropped on purpose, counted, written nowhere
	Rejected             // written to the rejects file with its reason
	Stop                 // the run stops
)

func (k Kind) String() string {
	switch k {
	case Kept:
		return "kept"
	case Filtered:
		return "filtered"
	case Rejected:
		return "rejected"
	}
	return "stop"
}

// ReasonOf returns the reject reason err carries, if it carries one and is
// not marked Fatal.
func ReasonOf(err error) (string, bool) {
	if err == nil {
		return "", false
	}
	var f *fatal
	if errors.As(err, &f) {
		return "", false
	}
	var rr Rejecter
	if errors.As(err, &rr) {
		return rr.RejectReason(), true
	}
	return "", false
}

// Classify says what became of a record for which Process returned outputs
// records and err, and the reason it is counted under (empty when kept or
// stopped). It is the only place the rules of the package doc are coded.
func Classify(outputs int, err error) (Kind, string) {
	if err == nil {
		if outputs == 0 {
			return Filtered, "empty"
		}
		return Kept, ""
	}
	var fl *Filter
	var f *fatal
	switch {
	case errors.As(err, &f):
		return Stop, ""
	case errors.As(err, &fl):
		return Filtered, fl.Reason
	}
	if reason, ok := ReasonOf(err); ok {
		return Rejected, reason
	}
	return Stop, ""
}
