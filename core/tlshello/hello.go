package tlshello

const (
	// MaxRecord is the largest TLSPlaintext fragment (RFC 8446 §5.1).
	MaxRecord = 1 << 14
	// MaxHello bounds the ClientHello handshake message, its 4-byte header
	// included. Real ones are 200..2000 bytes (a post-quantum key share
	// brings Chrome's to about 1800); 16 KiB is one full record.
	MaxHello = 1 << 14
	// MaxInspect bounds how many bytes of input Parse ever needs: the
	// ClientHello's records must end within it, record headers included,
	// else ErrTooLarge. A caller buffers at most this much before it has
	// an answer. The 2 KiB over MaxHello leave room for about 400 record
	// headers: a hello split into small records still fits.
	MaxInspect = MaxHello + 2048
	// MaxExtensions bounds the extensions of one ClientHello (browsers
	// send 15..20, GREASE included); it keeps the duplicate check a short
	// scan of a fixed array.
	MaxExtensions = 64
	// MaxALPNList bounds the ALPN protocol_name_list in bytes (2 bytes for
	// "h2" and 9 for "http/1.1" with their length bytes); it is copied into
	// the Hello.
	MaxALPNList = 255
	// MaxHostName is the longest DNS name in text form, without a trailing dot.
	MaxHostName = 253
)

const (
	recordHeader    = 5
	handshakeHeader = 4
	typeHandshake   = 22
	typeClientHello = 1

	extServerName        = 0
	extALPN              = 16
	extSupportedVersions = 43
)

// Hello is what routing needs from a ClientHello. It is a value: the name
// and protocols are copied out of the input (a hello may span records, so
// they are not always contiguous there), so it stays valid after the
// buffer is reused.
type Hello struct {
	// Len is how many bytes of the input the ClientHello's records take;
	// the proxy forwards them unchanged, and input[Len:] (early data, or
	// nothing) is not inspected.
	Len int
	// LegacyVersion is the ClientHello's legacy_version (0x0301..0x0303).
	LegacyVersion uint16
	// Version is the highest version offered: the highest of
	// 0x0301..0x0304 listed in supported_versions when the extension is
	// there (GREASE and unknown values ignored), else LegacyVersion.
	// 0x0304 is TLS 1.3.
	Version uint16
	// HasSupportedVersions says the supported_versions extension was sent.
	HasSupportedVersions bool

	nameLen  uint8
	alpnLen  uint8
	numProto uint8
	name     [MaxHostName]byte
	alpn     [MaxALPNList]byte // the protocol_name_list as sent, without its 2-byte length
}

// ServerName is the SNI host name, lower-cased, or nil when the hello has
// no server_name extension. The slice points into h.
func (h *Hello) ServerName() []byte {
	if h.nameLen == 0 {
		return nil
	}
	return h.name[:h.nameLen]
}

// NumProtocols is the number of ALPN protocols offered (0 without ALPN).
func (h *Hello) NumProtocols() int { return int(h.numProto) }

// Protocol returns the i-th ALPN protocol offered, in the client's order
// of preference. The slice points into h. It panics if i is out of range.
func (h *Hello) Protocol(i int) []byte {
	if i < 0 || i >= int(h.numProto) {
		panic("tlshello: protocol index out of range")
	}
	l := h.alpn[:h.alpnLen]
	for {
		n := int(l[0])
		if i == 0 {
			return l[1 : 1+n]
		}
		l = l[1+n:]
		i--
	}
}

// Parse reads the ClientHello at the start of b, the bytes a client sent
// on a new connection. It returns ErrIncomplete (allocation-free) while b
// is a valid but unfinished prefix, a *Error as soon as the bytes seen
// cannot start an acceptable ClientHello, and the Hello otherwise. The
// first byte alone tells plain HTTP (or anything not starting with 22)
// from TLS. Parse is pure: it keeps no state between calls, so the caller
// calls it again on the whole buffer when more bytes arrive.
func Parse(b []byte) (Hello, error) {
	var h Hello
	msgLen, end, err := scanRecords(b)
	if err != nil {
		return h, err
	}
	h.Len = end
	r := reader{b: b}
	r.skip(handshakeHeader)
	if err := parseBody(&h, &r, msgLen); err != nil {
		return Hello{}, err
	}
	return h, nil
}

// scanRecords walks the record headers, checking each byte as it becomes
// available, until the records hold the whole handshake message. It
// returns the message body length and the end of its last record in b.
func scanRecords(b []byte) (msgLen, end int, err error) {
	var hs [handshakeHeader]byte // the handshake header, which may span records
	got := 0                     // handshake bytes seen
	need := handshakeHeader      // handshake bytes needed: the header, then the whole message
	pos := 0
	for {
		// A record header at pos; the message is not finished, so this
		// record must fit at least one byte within MaxInspect.
		if pos+recordHeader >= MaxInspect {
			return 0, 0, ErrTooLarge
		}
		if pos >= len(b) {
			return 0, 0, ErrIncomplete
		}
		if b[pos] != typeHandshake {
			if pos == 0 {
				return 0, 0, ErrNotTLS
			}
			return 0, 0, ErrNotHandshake
		}
		if pos+1 >= len(b) {
			return 0, 0, ErrIncomplete
		}
		if b[pos+1] != 3 {
			return 0, 0, ErrNotTLS
		}
		if pos+2 >= len(b) {
			return 0, 0, ErrIncomplete
		}
		if b[pos+2] < 1 || b[pos+2] > 3 {
			return 0, 0, ErrRecordVersion
		}
		if pos+4 >= len(b) {
			return 0, 0, ErrIncomplete
		}
		frag := int(b[pos+3])<<8 | int(b[pos+4])
		if frag == 0 || frag > MaxRecord {
			// RFC 8446 §5.1: no zero-length handshake fragments.
			return 0, 0, ErrRecordLength
		}
		pos += recordHeader
		if pos+frag > MaxInspect {
			return 0, 0, ErrTooLarge
		}
		// Take this record's bytes into the message, checking the
		// handshake header as its bytes arrive; the body is only counted
		// here (parseBody reads it once it is all there).
		i := 0
		for i < frag && got < handshakeHeader {
			if pos+i >= len(b) {
				return 0, 0, ErrIncomplete
			}
			hs[got] = b[pos+i]
			got++
			i++
			if got == 1 && hs[0] != typeClientHello {
				return 0, 0, ErrNotClientHello
			}
			if got == handshakeHeader {
				msgLen = int(hs[1])<<16 | int(hs[2])<<8 | int(hs[3])
				if handshakeHeader+msgLen > MaxHello {
					return 0, 0, ErrTooLarge
				}
				need = handshakeHeader + msgLen
			}
		}
		if got >= handshakeHeader {
			take := min(frag-i, need-got)
			got += take
			i += take
			if got == need {
				// A client sends nothing after its ClientHello until the
				// server answers (early data comes in records of its own).
				if i < frag {
					return 0, 0, ErrTrailing
				}
				if pos+frag > len(b) {
					return 0, 0, ErrIncomplete
				}
				return msgLen, pos + frag, nil
			}
		}
		pos += frag
	}
}
