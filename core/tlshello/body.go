package tlshello

// reader reads the handshake message across its records. scanRecords has
// checked every record header and that all of the message is in b, so the
// reader only moves through bytes that are there; bounds against the
// message's own length fields are the parser's (have).
type reader struct {
	b    []byte
	pos  int // next byte in b
	frag int // bytes left in the current record's fragment
	off  int // message bytes read, handshake header included
}

func (r *reader) nextRecord() {
	for r.frag == 0 {
		r.frag = int(r.b[r.pos+3])<<8 | int(r.b[r.pos+4])
		r.pos += recordHeader
	}
}

// have says whether n more bytes fit before end, the end of the current
// container (as an offset in the message).
func (r *reader) have(n, end int) bool { return n >= 0 && r.off+n <= end }

func (r *reader) u8() int {
	r.nextRecord()
	c := r.b[r.pos]
	r.pos++
	r.frag--
	r.off++
	return int(c)
}

func (r *reader) u16() int { return r.u8()<<8 | r.u8() }

func (r *reader) skip(n int) {
	for n > 0 {
		r.nextRecord()
		k := min(n, r.frag)
		r.pos += k
		r.frag -= k
		r.off += k
		n -= k
	}
}

func (r *reader) copy(dst []byte) {
	for len(dst) > 0 {
		r.nextRecord()
		k := copy(dst, r.b[r.pos:r.pos+min(len(dst), r.frag)])
		r.pos += k
		r.frag -= k
		r.off += k
		dst = dst[k:]
	}
}

// parseBody reads the ClientHello body (RFC 8446 §4.1.2, RFC 5246 §7.4.1.2)
// once scanRecords found all of it. Every vector's length must fit its
// container and every container must be consumed exactly.
func parseBody(h *Hello, r *reader, msgLen int) error {
	end := handshakeHeader + msgLen
	if !r.have(2+32+1, end) {
		return ErrMalformed
	}
	v := r.u16()
	if v < 0x0301 || v > 0x0303 {
		// SSL 3.0 (0x0300) and anything else; TLS 1.3 clients send 0x0303.
		return ErrLegacyVersion
	}
	h.LegacyVersion = uint16(v)
	h.Version = uint16(v)
	r.skip(32) // random
	sid := r.u8()
	if sid > 32 || !r.have(sid, end) {
		return ErrMalformed
	}
	r.skip(sid)
	if !r.have(2, end) {
		return ErrMalformed
	}
	cs := r.u16()
	if cs < 2 || cs%2 != 0 || !r.have(cs, end) {
		return ErrMalformed
	}
	r.skip(cs)
	if !r.have(1, end) {
		return ErrMalformed
	}
	cm := r.u8()
	if cm < 1 || !r.have(cm, end) {
		return ErrMalformed
	}
	r.skip(cm)
	if r.off == end {
		return nil // no extensions: allowed up to TLS 1.2 (RFC 5246 §7.4.1.2)
	}
	if !r.have(2, end) {
		return ErrMalformed
	}
	if l := r.u16(); r.off+l != end {
		return ErrMalformed
	}
	var seen [MaxExtensions]uint16
	n := 0
	for r.off < end {
		if !r.have(4, end) {
			return ErrMalformed
		}
		typ, l := r.u16(), r.u16()
		if !r.have(l, end) {
			return ErrMalformed
		}
		// RFC 8446 §4.2: at most one extension of each type.
		for _, s := range seen[:n] {
			if int(s) == typ {
				return ErrDuplicateExt
			}
		}
		if n == MaxExtensions {
			return ErrTooManyExt
		}
		seen[n] = uint16(typ)
		n++
		extEnd := r.off + l
		var err error
		switch typ {
		case extServerName:
			err = parseServerName(h, r, extEnd)
		case extALPN:
			err = parseALPN(h, r, extEnd)
		case extSupportedVersions:
			err = parseSupportedVersions(h, r, extEnd)
		default:
			r.skip(l)
		}
		if err != nil {
			return err
		}
		if r.off != extEnd {
			return ErrMalformed
		}
	}
	return nil
}

// parseServerName reads server_name (RFC 6066 §3): a list that must hold
// exactly one entry, of type host_name. Several entries are refused, not
// resolved: routing on the first while a server reads another is the
// confusion a strict parser exists to prevent.
func parseServerName(h *Hello, r *reader, end int) error {
	if !r.have(2, end) {
		return ErrMalformed
	}
	if l := r.u16(); r.off+l != end {
		return ErrMalformed
	}
	if !r.have(3, end) {
		return ErrMalformed // empty list: the vector is <1..2^16-1>
	}
	if r.u8() != 0 {
		return ErrNameType
	}
	l := r.u16()
	if !r.have(l, end) {
		return ErrMalformed
	}
	if r.off+l != end {
		return ErrSeveralNames
	}
	if l == 0 || l > MaxHostName {
		return ErrBadHostName
	}
	name := h.name[:l]
	r.copy(name)
	if !hostName(name) {
		return ErrBadHostName
	}
	h.nameLen = uint8(l)
	return nil
}

// hostName lower-cases name in place and says whether it is a DNS host
// name as SNI allows (RFC 6066 §3, RFC 1123 §2.1): dot-separated labels of
// 1..63 letters, digits and hyphens, no hyphen at either end of a label,
// no empty label (so no leading, trailing or double dot), and a last label
// that is not all digits (so no IPv4 literal; an IPv6 literal has colons).
func hostName(name []byte) bool {
	label, digits := 0, true
	for i, c := range name {
		switch {
		case c >= 'A' && c <= 'Z':
			name[i] = c + 'a' - 'A'
			digits = false
		case c >= 'a' && c <= 'z':
			digits = false
		case c >= '0' && c <= '9':
		case c == '-':
			if label == 0 || i+1 == len(name) || name[i+1] == '.' {
				return false
			}
			digits = false
		case c == '.':
			if label == 0 {
				return false
			}
			label, digits = 0, true
			continue
		default:
			return false
		}
		label++
		if label > 63 {
			return false
		}
	}
	return label > 0 && !digits
}

// parseALPN reads application_layer_protocol_negotiation (RFC 7301 §3.1):
// a list <2..2^16-1> of names <1..2^8-1>, copied into h when it fits in
// MaxALPNList bytes and refused otherwise.
func parseALPN(h *Hello, r *reader, end int) error {
	if !r.have(2, end) {
		return ErrMalformed
	}
	l := r.u16()
	if r.off+l != end || l < 2 {
		return ErrALPN
	}
	if l > MaxALPNList {
		return ErrALPN
	}
	list := h.alpn[:l]
	r.copy(list)
	n := 0
	for i := 0; i < l; {
		pl := int(list[i])
		if pl == 0 || i+1+pl > l {
			return ErrALPN
		}
		i += 1 + pl
		n++
	}
	h.alpnLen, h.numProto = uint8(l), uint8(n)
	return nil
}

// parseSupportedVersions reads supported_versions in a ClientHello
// (RFC 8446 §4.2.1): a list <2..254> of versions. Version becomes the
// highest of TLS 1.0..1.3 listed; a list with none of them is refused.
func parseSupportedVersions(h *Hello, r *reader, end int) error {
	if !r.have(1, end) {
		return ErrMalformed
	}
	l := r.u8()
	if r.off+l != end || l < 2 || l%2 != 0 {
		return ErrSupportedVersion
	}
	best := 0
	for range l / 2 {
		v := r.u16()
		if v >= 0x0301 && v <= 0x0304 && v > best {
			best = v
		}
	}
	if best == 0 {
		return ErrSupportedVersion
	}
	h.Version, h.HasSupportedVersions = uint16(best), true
	return nil
}
