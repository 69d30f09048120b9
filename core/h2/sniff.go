package h2

// SniffPreface tells, from the first bytes a client sent on a clear bind
// that speaks both versions, whether it is HTTP/2 with prior knowledge:
// h2 when p starts with the whole Preface; more when p is a proper prefix
// of it (read more before deciding, as an HTTP/1.1 request line cannot
// start with "PRI * HTTP/2.0" — RFC 9113 §3.4 chose the method so); else
// HTTP/1.1. The bytes stay in the buffer: give them to Feed or to the
// HTTP/1.1 parser.
func SniffPreface(p []byte) (h2, more bool) {
	n := min(len(p), len(Preface))
	if string(p[:n]) != Preface[:n] {
		return false, false
	}
	return n == len(Preface), n < len(Preface)
}
