package tlshello

// Error is a refusal: the bytes are not the start of a TLS connection this
// package accepts. Parse returns pointers to the fixed values below, never a
// new Error, so failing costs no allocation and errors compare with ==.
// ErrIncomplete is not an Error: it is the one answer that means "read more".
type Error struct {
	Reason string
}

func (e *Error) Error() string { return "tlshello: " + e.Reason }

type incomplete struct{}

func (incomplete) Error() string { return "tlshello: incomplete ClientHello, more bytes needed" }

// ErrIncomplete means that b is a valid prefix of a ClientHello (every
// byte seen so far is acceptable) and that more bytes are needed. It is
// the only error after which calling Parse again with more bytes can
// succeed.
var ErrIncomplete error = incomplete{}

var (
	// Record layer.
	ErrNotTLS        = &Error{"not a TLS handshake record (first bytes)"}
	ErrRecordVersion = &Error{"record version is not 0x0301..0x0303"}
	ErrNotHandshake  = &Error{"record of another content type inside the ClientHello"}
	ErrRecordLength  = &Error{"record length is 0 or over 2^14"}
	ErrTooLarge      = &Error{"ClientHello over MaxHello bytes or past MaxInspect bytes of input"}
	ErrTrailing      = &Error{"record carries bytes after the ClientHello"}

	// Handshake message.
	ErrNotClientHello   = &Error{"handshake message is not a ClientHello"}
	ErrLegacyVersion    = &Error{"legacy_version is not 0x0301..0x0303"}
	ErrMalformed        = &Error{"length field inconsistent with its container"}
	ErrDuplicateExt     = &Error{"extension type appears twice"}
	ErrTooManyExt       = &Error{"more than MaxExtensions extensions"}
	ErrSeveralNames     = &Error{"server_name carries more than one name"}
	ErrNameType         = &Error{"server_name entry is not host_name"}
	ErrBadHostName      = &Error{"server name is not a DNS host name"}
	ErrALPN             = &Error{"malformed or oversized ALPN list"}
	ErrSupportedVersion = &Error{"malformed supported_versions"}
)
