package http1

// ValidAuthority reports whether a is host [":" port] as the parser accepts
// it in Host and in absolute-form or authority-form targets (see
// validAuthority); needPort requires a non-empty port (CONNECT). Other
// muxes (HTTP/2's :authority) use it so that what they write as an
// HTTP/1.1 head parses back here.
func ValidAuthority(a []byte, needPort bool) bool { return validAuthority(a, needPort) }

// ValidFieldValue reports whether every byte of v may appear in a field
// value as the parser accepts it (HTAB, SP, VCHAR, obs-text): no CR, LF,
// NUL or other control byte.
func ValidFieldValue(v []byte) bool { return validValue(v) }
