package http1

import "math/bits"

// Chunked validates a chunked body (RFC 9112 §7.1) incrementally, so the
// proxy can forward it: each Decode call tells how many input bytes were
// checked and which trailing part of them is payload. Forwarding the
// checked bytes unchanged (framing included) is the intended use; a caller
// that re-frames takes only the payload runs.
//
// It never allocates and never looks at a byte twice. The zero value is
// ready for a body with no MaxBody; Reset before each new body.
//
// The rules: chunk-size is HEXDIG only (no sign, no "0x", no leading
// whitespace), at most 16 digits counting leading zeros (as net/http) and
// below 2^62. Right after the size comes ';' or CRLF: the BWS that RFC
// 9112 §7.1.1 allows before ';' is refused (400), as net/http does,
// because parsers disagree on it and no client needs it. Extensions may
// hold HTAB, SP, visible ASCII and obs-text, and the size line is limited
// (MaxLine); chunk data must be followed by CRLF; trailer fields follow
// the header field rules; the body ends at the empty line after the last
// chunk. The proxy forwards the validated bytes as they arrived (framing
// included), which is simplest and what HAProxy's legacy mode did; MaxBody
// enforces a per-frontend body limit (413) before any byte of an oversized
// chunk is accepted.
type Chunked struct {
	// MaxBody bounds the sum of chunk sizes (0 = no bound): a chunk-size
	// line that would exceed it fails with 413 before any of its data.
	MaxBody int64
	// RefusePrefix, with Refuse, selects the trailer fields that fail the
	// body with ErrTrailerRefused: those whose name starts with it
	// (ASCII case-insensitively, '_' for '-', as AppendEndToEndStrip).
	RefusePrefix string
	// MaxLine bounds a chunk-size line with its extensions (0 = 4096).
	MaxLine int32
	// MaxTrailer bounds the trailer section (0 = 16384).
	MaxTrailer int32

	line  int32  // bytes of the current size line, or of the trailer section
	tmask uint32 // refused trailer names the current field name still matches (refusedTrailers bits, trPrefix)
	state uint8
	// Refuse (RefuseHopByHop, RefuseXForwardedFor, RefuseXForwardedProto)
	// selects the trailer fields that fail the body; 0 refuses none.
	Refuse uint8
	tpos   uint8  // bytes of the current trailer field name (saturates)
	size   uint64 // chunk-size being read, then data bytes left in the chunk
	total  int64  // payload bytes so far
	// The fields above are laid out so that Chunked stays 64 bytes: it is
	// in every body of every http connection (proxy's
	// TestConnectionObjectsKeepTheirSizeClass).
}

// Trailer fields a request may not carry (Chunked.Refuse): the proxy
// forwards the trailer section as it arrived, and servers and frameworks
// that merge trailers into the header fields would otherwise take a
// client's trailer for a field the proxy strips or sets in the head. A
// refused field fails the body with ErrTrailerRefused (400) as soon as its
// name is complete (at its ':'), before its value or the CRLF that ends
// its line is passed on: the server never receives the field, and the
// proxy closes the server connection as for any malformed body. Refusing
// rather than dropping the line: the proxy forwards validated chunked
// bytes without holding them back, and a trailer name split over two
// reads would have to be buffered to be dropped.
const (
	// RefuseHopByHop refuses the framing, routing and hop-by-hop fields
	// (refusedTrailers up to X-Forwarded-For), which RFC 9110 §6.5.1
	// forbids in trailers and the proxy drops or frames with in a head.
	RefuseHopByHop uint8 = 1 << iota
	// RefuseXForwardedFor refuses X-Forwarded-For, when the proxy
	// appends its own (the value a server trusts is the last one).
	RefuseXForwardedFor
	// RefuseXForwardedProto refuses X-Forwarded-Proto, when the proxy
	// sets its own (DropXForwardedProto).
	RefuseXForwardedProto
)

// refusedTrailers are the names Refuse selects, lower case with '-';
// trXFF and trXFP are the indexes of the last two.
var refusedTrailers = [...]string{
	"host", "content-length", "transfer-encoding", "connection", "keep-alive",
	"proxy-connection", "te", "trailer", "upgrade", "expect",
	"x-forwarded-for", "x-forwarded-proto",
}

const (
	trXFF    = 10
	trXFP    = 11
	trPrefix = uint32(1) << 31 // RefusePrefix still matches
)

// ErrTrailerRefused: a request trailer field the proxy strips or sets in
// the head (Chunked.Refuse).
var ErrTrailerRefused = &Error{400, "trailer field not allowed"}

// trailerCandidates are the refused names a new trailer field name may be.
func (c *Chunked) trailerCandidates() uint32 {
	var m uint32
	if c.Refuse&RefuseHopByHop != 0 {
		m |= 1<<trXFF - 1
	}
	if c.Refuse&RefuseXForwardedFor != 0 {
		m |= 1 << trXFF
	}
	if c.Refuse&RefuseXForwardedProto != 0 {
		m |= 1 << trXFP
	}
	if c.RefusePrefix != "" {
		m |= trPrefix
	}
	return m
}

// trailerName takes the next byte b of a trailer field name: the refused
// names it no longer matches are dropped from tmask. Only the bits still
// set are compared, so a name that matches none costs one test a byte.
func (c *Chunked) trailerName(b byte) {
	if c.tmask == 0 {
		return
	}
	if b = lower(b); b == '_' {
		b = '-'
	}
	pos := int(c.tpos)
	for m := c.tmask &^ trPrefix; m != 0; m &= m - 1 {
		i := bits.TrailingZeros32(m)
		if name := refusedTrailers[i]; pos >= len(name) || name[pos] != b {
			c.tmask &^= 1 << i
		}
	}
	if c.tmask&trPrefix != 0 && pos < len(c.RefusePrefix) {
		p := lower(c.RefusePrefix[pos])
		if p == '_' {
			p = '-'
		}
		if p != b {
			c.tmask &^= trPrefix
		}
	}
	if c.tpos < 255 {
		c.tpos++
	}
}

// trailerRefused: the complete trailer field name is a refused one.
func (c *Chunked) trailerRefused() bool {
	m := c.tmask
	if m&trPrefix != 0 && int(c.tpos) >= len(c.RefusePrefix) {
		return true
	}
	for m &^= trPrefix; m != 0; m &= m - 1 {
		if len(refusedTrailers[bits.TrailingZeros32(m)]) == int(c.tpos) {
			return true
		}
	}
	return false
}

// Chunk decoder states. A line's value state (csExt, csTrailerValue) is
// followed by the state of the LF that ends that line: Decode moves from
// one to the other with state+1.
const (
	csSize0        uint8 = iota // first hex digit of a chunk-size
	csSize                      // more hex digits, ';' or CR
	csExt                       // chunk extension bytes up to CR
	csSizeLF                    // LF ending the size line
	csData                      // size bytes of data
	csDataCR                    // CR after data
	csDataLF                    // LF after data
	csTrailer                   // start of a trailer line (or the final CRLF)
	csTrailerName               // field name
	csTrailerValue              // field value up to CR
	csTrailerLF                 // LF ending a trailer line
	csEndLF                     // LF of the final empty line
	csDone
	csError
)

// maxChunkSize bounds one chunk: 2^62 leaves room to add sizes in int64.
const maxChunkSize = 1 << 62

// maxSizeDigits bounds the hex digits of a chunk-size, leading zeros included.
const maxSizeDigits = 16

// Chunked body errors (status 400 unless said otherwise).
var (
	ErrChunkSize      = &Error{400, "invalid chunk size"}
	ErrChunkTooLarge  = &Error{400, "chunk size too large"}
	ErrChunkExt       = &Error{400, "invalid chunk extension"}
	ErrChunkLine      = &Error{400, "chunk size line too long"}
	ErrChunkCRLF      = &Error{400, "chunk data not followed by CRLF"}
	ErrChunkBareCR    = &Error{400, "bare CR in chunked framing"}
	ErrTrailer        = &Error{400, "invalid trailer field"}
	ErrTrailerLarge   = &Error{431, "trailer section too large"}
	ErrTrailerObsFold = &Error{400, "obsolete line folding in trailer"}
	ErrTrailerColon   = &Error{400, "whitespace between trailer name and colon"}
	errChunkFailed    = &Error{400, "chunked body already failed"}
)

// Reset prepares c for a new body; the limits are kept.
func (c *Chunked) Reset() {
	c.state, c.size, c.line, c.total, c.tmask, c.tpos = csSize0, 0, 0, 0, 0, 0
}

// Done reports whether the last chunk and the trailer section were read.
func (c *Chunked) Done() bool { return c.state == csDone }

// Total is the number of payload bytes decoded so far.
func (c *Chunked) Total() int64 { return c.total }

// InData reports whether the decoder is inside chunk data, and how many data
// bytes of the current chunk are still expected: a caller may move that
// many bytes by other means (splice) and then call Skip.
func (c *Chunked) InData() (bool, uint64) { return c.state == csData, c.size }

// Skip records n data bytes consumed outside Decode; n must not exceed the
// remaining size reported by InData.
func (c *Chunked) Skip(n int) {
	if c.state != csData || uint64(n) > c.size {
		c.state = csError
		return
	}
	c.size -= uint64(n)
	if c.size == 0 {
		c.state = csDataCR
	}
}

// Unread gives back the last n data bytes of the previous Decode call
// (n at most the data it returned): the caller could not pass them on
// (an HTTP/2 window closed) and offers them again later, through Skip or
// Decode.
func (c *Chunked) Unread(n int) {
	if n <= 0 {
		return
	}
	if c.state != csData && c.state != csDataCR {
		c.state = csError
		return
	}
	c.state = csData
	c.size += uint64(n)
	c.total -= int64(n)
}

func (c *Chunked) maxLine() int {
	if c.MaxLine > 0 {
		return int(c.MaxLine)
	}
	return 4096
}

func (c *Chunked) maxTrailer() int {
	if c.MaxTrailer > 0 {
		return int(c.MaxTrailer)
	}
	return 16384
}

// Decode checks the body bytes in. It returns n, the number of bytes of in
// that were validated (the caller consumes them), of which the last data
// bytes, in[n-data:n], are chunk payload; the bytes before are framing. A
// call stops at the end of one data run, at the end of in, or at the end of
// the body (Done): call it again with in[n:] while n > 0 and !Done(). Bytes
// after the body are never consumed. After an error the decoder stays failed.
func (c *Chunked) Decode(in []byte) (n, data int, err error) {
	if c.state == csError {
		return 0, 0, errChunkFailed
	}
	i := 0
	for i < len(in) {
		b := in[i]
		switch c.state {
		case csData:
			return c.data(in, i)
		case csSize0, csSize:
			c.line++
			if charClass[b]&cHex != 0 {
				// c.line counts the digits here; more than 16, even
				// leading zeros, is refused as net/http does: parsers
				// that keep only the last digits would read another size.
				if c.size >= maxChunkSize>>4 || c.line > maxSizeDigits {
					return c.fail(i, ErrChunkTooLarge)
				}
				c.size = c.size<<4 | uint64(unhex(b))
				c.state = csSize
			} else if c.state == csSize0 {
				return c.fail(i, ErrChunkSize)
			} else {
				switch b {
				case '\r':
					c.state = csSizeLF
				case ';':
					c.state = csExt
				default:
					return c.fail(i, ErrChunkSize)
				}
			}
		case csExt, csTrailerValue:
			// a chunk extension or a trailer field value, up to its CR:
			// HTAB, SP, visible ASCII and obs-text (the field-value rule)
			c.line++
			if b == '\r' {
				c.state++ // to the LF ending the line
			} else if charClass[b]&cValue == 0 {
				if c.state == csExt {
					return c.fail(i, ErrChunkExt)
				}
				return c.fail(i, ErrTrailer)
			}
		case csSizeLF, csTrailerLF, csEndLF:
			if b != '\n' {
				return c.fail(i, ErrChunkBareCR)
			}
			switch c.state {
			case csTrailerLF:
				c.line++
				c.state = csTrailer
			case csEndLF:
				c.state = csDone
				return i + 1, 0, nil
			default: // csSizeLF: the size line is complete
				if c.MaxBody > 0 && int64(c.size) > c.MaxBody-c.total {
					return c.fail(i, ErrBodyTooLarge)
				}
				c.line = 0
				if c.size == 0 {
					c.state = csTrailer
					break
				}
				c.state = csData
				// the data run starts at i+1: report the framing now
				// unless data follows in this very input.
				if i+1 < len(in) {
					return c.data(in, i+1)
				}
			}
		case csDataCR:
			if b != '\r' {
				return c.fail(i, ErrChunkCRLF)
			}
			c.state = csDataLF
		case csDataLF:
			if b != '\n' {
				return c.fail(i, ErrChunkCRLF)
			}
			c.state = csSize0
			c.size = 0
		case csTrailer:
			c.line++
			switch {
			case b == '\r':
				c.state = csEndLF
			case b == ' ' || b == '\t':
				return c.fail(i, ErrTrailerObsFold)
			case isToken(b):
				c.state = csTrailerName
				c.tmask, c.tpos = c.trailerCandidates(), 0
				c.trailerName(b)
			default:
				return c.fail(i, ErrTrailer)
			}
		case csTrailerName:
			c.line++
			switch {
			case b == ':':
				if c.tmask != 0 && c.trailerRefused() {
					return c.fail(i, ErrTrailerRefused)
				}
				c.state = csTrailerValue
			case isToken(b):
				c.trailerName(b)
			case b == ' ' || b == '\t':
				return c.fail(i, ErrTrailerColon)
			default:
				return c.fail(i, ErrTrailer)
			}
		case csDone:
			return i, 0, nil
		}
		if c.state <= csSizeLF && int(c.line) > c.maxLine() {
			return c.fail(i, ErrChunkLine)
		}
		if c.state >= csTrailer && int(c.line) > c.maxTrailer() {
			return c.fail(i, ErrTrailerLarge)
		}
		i++
	}
	return i, 0, nil
}

// data takes the data of the current chunk that in[i:] holds, up to the
// chunk's end: one data run, which ends the Decode call.
func (c *Chunked) data(in []byte, i int) (n, data int, err error) {
	avail := min(uint64(len(in)-i), c.size)
	c.size -= avail
	c.total += int64(avail)
	if c.size == 0 {
		c.state = csDataCR
	}
	return i + int(avail), int(avail), nil
}

func (c *Chunked) fail(_ int, e *Error) (int, int, error) {
	c.state = csError
	return 0, 0, e
}

func unhex(b byte) byte {
	switch {
	case b <= '9':
		return b - '0'
	case b >= 'a':
		return b - 'a' + 10
	}
	return b - 'A' + 10
}
