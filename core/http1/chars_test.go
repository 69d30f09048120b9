package http1

import "testing"

// TestValidValueMatchesTable checks the word-at-a-time validator against
// the byte table for every byte value at every position of a word.
func TestValidValueMatchesTable(t *testing.T) {
	for c := 0; c < 256; c++ {
		for pos := 0; pos < 19; pos++ {
			v := []byte("abcdefghijklmnopqrs")
			v[pos] = byte(c)
			want := charClass[c]&cValue != 0
			if got := validValue(v); got != want {
				t.Fatalf("byte %#x at %d: got %v want %v", c, pos, got, want)
			}
		}
	}
}

func TestAuthority(t *testing.T) {
	cases := []struct {
		in       string
		needPort bool
		ok       bool
	}{
		{"example.com", false, true},
		{"example.com:8080", false, true},
		{"example.com:", false, true},
		{"", false, true},
		{"", true, false},
		{"example.com", true, false},
		{"example.com:443", true, true},
		{"[::1]", false, true},
		{"[::1]:443", true, true},
		{"[::1]x", false, false},
		{"[]", false, false},
		{"[::1%eth0]", false, false},
		{"a%41b", false, true},
		{"a%4", false, false},
		{"a%zz", false, false},
		{":80", false, false},
		{"a:b", false, false},
		{"u@h", false, false},
		{"a b", false, false},
		{"a/b", false, false},
		{"a_b-c.d~e!$&'()*+,;=", false, true},
	}
	for _, tc := range cases {
		if got := validAuthority([]byte(tc.in), tc.needPort); got != tc.ok {
			t.Errorf("validAuthority(%q, %v) = %v, want %v", tc.in, tc.needPort, got, tc.ok)
		}
	}
}
