package http1

import (
	"net/netip"
	"testing"
)

// TestValidIPv6AgreesWithNetip pins validIPv6 to net/netip's reading of the
// same text (zones aside, which a URI cannot carry), on hand-picked cases
// and on the fuzzer's find: CONNECT "[0]:0" was accepted as an authority.
func TestValidIPv6AgreesWithNetip(t *testing.T) {
	cases := []string{
		"::", "::1", "1::", "1::2", "0", "1", "1:2", "::ffff:1.2.3.4", "1.2.3.4",
		"1:2:3:4:5:6:7:8", "1:2:3:4:5:6:7:8:9", "1:2:3:4:5:6:7::", "::2:3:4:5:6:7:8",
		"1:2:3:4:5:6:7", "1::2::3", ":1::", "1:::2", "12345::", "::1.2.3", "::1.2.3.4.5",
		"::01.2.3.4", "::256.1.1.1", "1:2:3:4:5:6:1.2.3.4", "1:2:3:4:5:6:7:1.2.3.4",
		"fe80::1", "FE80::A", "g::", "::1:", ":", "", "1.2.3.4::", "::1.2.3.4:5",
		"0:0:0:0:0:0:0:0", "::0.0.0.0", "1::1.2.3.4", "::1:2:3:4:5:6:7",
	}
	for _, c := range cases {
		a, err := netip.ParseAddr(c)
		want := err == nil && a.Is6() && a.Zone() == ""
		if got := validIPv6([]byte(c)); got != want {
			t.Errorf("validIPv6(%q) = %v, net/netip says %v", c, got, want)
		}
	}
}

func FuzzValidIPv6(f *testing.F) {
	for _, s := range []string{"::1", "0", "::ffff:1.2.3.4", "1:2:3:4:5:6:7:8"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := netip.ParseAddr(s)
		want := err == nil && a.Is6() && a.Zone() == ""
		if got := validIPv6([]byte(s)); got != want {
			t.Fatalf("validIPv6(%q) = %v, net/netip says %v", s, got, want)
		}
	})
}
