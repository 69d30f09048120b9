package http1

// NormPath is the form of a request path that routes compare against:
//
//   - percent-encoded unreserved characters are decoded and the other
//     escapes get upper-case hex (RFC 3986 §6.2.2.1, §6.2.2.2), so "%2e"
//     and "%2E" are a dot and "/%61pi" is "/api";
//   - then dot segments are removed (RFC 3986 §5.2.4): "/api/../admin" is
//     "/admin", "/a/./b" is "/a/b", "/.." is "/";
//   - the query, from the first '?', is kept as it is.
//
// Nothing else changes: empty segments ("//") stay, "%2F" is not a slash.
// A path that does not start with '/' (asterisk or authority form) is
// returned unchanged. When p is already normal (no '%', no "/." in its
// path part: almost every request) p itself is returned; otherwise the
// result is built in *scratch, which is grown when too small (once per
// loop in practice: the request line is bounded) and is valid until the
// next call.
func NormPath(p []byte, scratch *[]byte) []byte {
	if len(p) == 0 || p[0] != '/' {
		return p
	}
	end := len(p)
	clean := true
	for i, c := range p {
		if c == '?' {
			end = i
			break
		}
		if c == '%' || c == '.' && p[i-1] == '/' {
			clean = false
		}
	}
	if clean {
		return p
	}
	if cap(*scratch) < len(p)+1 {
		*scratch = make([]byte, 0, max(len(p)+1, 1024))
	}
	out := (*scratch)[:0]
	for i := 0; i < end; {
		// p[i] == '/': copy one segment, decoding as we go.
		seg := len(out)
		out = append(out, '/')
		for i++; i < end && p[i] != '/'; i++ {
			c := p[i]
			if c == '%' && i+2 < end {
				hi, lo := pctHex(p[i+1]), pctHex(p[i+2])
				if hi >= 0 && lo >= 0 {
					if d := byte(hi<<4 | lo); unreserved(d) {
						out = append(out, d)
					} else {
						out = append(out, '%', upperHex[hi], upperHex[lo])
					}
					i += 2
					continue
				}
			}
			out = append(out, c)
		}
		last := i >= end
		switch name := out[seg+1:]; {
		case len(name) == 1 && name[0] == '.':
			out = out[:seg]
		case len(name) == 2 && name[0] == '.' && name[1] == '.':
			out = out[:seg]
			j := len(out) - 1
			for j >= 0 && out[j] != '/' {
				j--
			}
			out = out[:max(j, 0)]
		default:
			continue
		}
		if last {
			out = append(out, '/') // "/a/." and "/a/b/.." end with a slash
		}
	}
	if len(out) == 0 {
		out = append(out, '/')
	}
	out = append(out, p[end:]...)
	*scratch = out
	return out
}

func pctHex(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

const upperHex = "0123456789ABCDEF"

// unreserved: ALPHA / DIGIT / "-" / "." / "_" / "~" (RFC 3986 §2.3).
func unreserved(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~'
}
