package proxyproto

// Error is a refusal: the bytes are not a PROXY header this package
// accepts. Parse returns pointers to the fixed values below, never a new
// Error, so failing costs no allocation and errors compare with ==.
// ErrIncomplete is not an Error: it is the one answer that means "read
// more".
type Error struct {
	Reason string
}

func (e *Error) Error() string { return "proxyproto: " + e.Reason }

type incomplete struct{}

func (incomplete) Error() string { return "proxyproto: incomplete header, more bytes needed" }

// ErrIncomplete means that b is a valid prefix of a header and that more
// bytes are needed. It is the only error after which calling Parse again
// with more bytes can succeed.
var ErrIncomplete error = incomplete{}

var (
	ErrNotProxy  = &Error{"not a PROXY protocol header (first bytes)"}
	ErrTooLarge  = &Error{"header longer than its version allows (v1: 107 bytes, v2: MaxHeader)"}
	ErrMalformed = &Error{"malformed header"}
	ErrVersion   = &Error{"unsupported version or command"}
	ErrFamily    = &Error{"unsupported address family or transport"}
	ErrAddress   = &Error{"malformed address or port"}
	ErrTLV       = &Error{"malformed TLV"}
	ErrAuthority = &Error{"authority TLV is not a host name"}
	ErrChecksum  = &Error{"CRC32C TLV does not match the header"}
)
