package kvcache

import (
	"kvcache/kvc"
)

// Status is a kvc_status_t: StatusOK (0) or a negative error code.
type Status int32

// The status codes of common.h. TestStatusValues checks them against the C
// library.
const (
	StatusOK              Status = 0
	StatusInvalidArgument Status = -1
	StatusNotFound        Status = -2
	StatusAlreadyExists   Status = -3
	StatusOutOfBlocks     Status = -4
	StatusBufferTooSmall  Status = -5
	StatusUnsupported     Status = -6
	StatusDevice          Status = -7
	StatusOutOfMemory     Status = -8
	StatusInvalidState    Status = -9
	StatusInternal        Status = -100
)

// String is the C name of the status ("KVC_ERR_NOT_FOUND"), from
// kvc_status_string.
func (s Status) String() string { return kvc.Kvc_status_string(int32(s)) }

// Error is a failed kvcache call.
type Error struct {
	// Status is the kvc_status_t the call returned.
	Status Status
	// Message is kvc_last_error_message() as it was right after the call,
	// read in the same C call ("tokens_per_block must be a power of two > 1,
	// got 12").
	Message string
	// Op is the C function that failed ("kvc_config_set_tokens_per_block"),
	// or the Go method for errors raised by the binding itself.
	Op string
}

func (e *Error) Error() string {
	if e == nil {
		return "kvcache: <nil *kvcache.Error>"
	}
	s := "kvcache: "
	if e.Op != "" {
		s += e.Op + ": "
	}
	s += e.Status.String()
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// Is reports whether target is an *Error with the same Status and, if
// target has a Message, the same Message: errors.Is(err, ErrNotFound).
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	if !ok || e == nil || t == nil || t.Status != e.Status {
		return false
	}
	return t.Message == "" || t.Message == e.Message
}

// Sentinels for errors.Is: they match any *Error of their Status.
var (
	ErrInvalidArgument = &Error{Status: StatusInvalidArgument}
	ErrNotFound        = &Error{Status: StatusNotFound}
	ErrAlreadyExists   = &Error{Status: StatusAlreadyExists}
	ErrOutOfBlocks     = &Error{Status: StatusOutOfBlocks}
	ErrBufferTooSmall  = &Error{Status: StatusBufferTooSmall}
	ErrUnsupported     = &Error{Status: StatusUnsupported}
	ErrDevice          = &Error{Status: StatusDevice}
	ErrOutOfMemory     = &Error{Status: StatusOutOfMemory}
	ErrInvalidState    = &Error{Status: StatusInvalidState}
	ErrInternal        = &Error{Status: StatusInternal}
)

// ErrClosed is returned by every method of a Config or Cache after Close.
// It is a StatusInvalidState error, so errors.Is(err, ErrInvalidState)
// holds too.
var ErrClosed = &Error{Status: StatusInvalidState, Message: "use of a closed kvcache handle"}

// wrap turns the low-level error of C function op into an *Error.
func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	if e, ok := err.(*kvc.Error); ok {
		return &Error{Status: Status(e.Status), Message: e.Message, Op: op}
	}
	return err
}

func closedError(op string) error {
	return &Error{Status: ErrClosed.Status, Message: ErrClosed.Message, Op: op}
}

func invalidArgument(op, message string) error {
	return &Error{Status: StatusInvalidArgument, Message: message, Op: op}
}

// nilReceiver is the error of method op called on a nil *T.
func nilReceiver(op, typ string) error {
	return invalidArgument(op, "nil *kvcache."+typ)
}
