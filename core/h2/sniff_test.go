package h2

import "testing"

func TestSniffPreface(t *testing.T) {
	for _, tc := range []struct {
		in       string
		h2, more bool
	}{
		{"", false, true},
		{"PRI * HTTP/2.0\r\n", false, true},
		{Preface, true, false},
		{Preface + "\x00\x00\x00\x04", true, false},
		{"GET / HTTP/1.1\r\n", false, false},
		{"PRI * HTTP/1.1\r\n", false, false},
		{"P", false, true},
		{"POST / HTTP/1.1", false, false},
	} {
		h2, more := SniffPreface([]byte(tc.in))
		if h2 != tc.h2 || more != tc.more {
			t.Errorf("SniffPreface(%q) = %v, %v; want %v, %v", tc.in, h2, more, tc.h2, tc.more)
		}
	}
}
