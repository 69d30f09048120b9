package config

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
)

func TestValidateProxyProtocol(t *testing.T) {
	const p0 = "/frontends/0/binds/0/accept_proxy"
	ap := func(c *Config, trusted ...string) {
		c.Frontends[0].Binds[0].AcceptProxy = &AcceptProxy{Trusted: trusted}
	}
	tests := []struct {
		name   string
		mutate func(c *Config)
		want   []want
	}{
		{name: "prefixes and addresses of both families pass", mutate: func(c *Config) {
			ap(c, "10.0.0.0/8", "192.0.2.7", "fd00::/8", "::1", "::ffff:10.0.0.0/104")
			c.Frontends[1].Binds[0].AcceptProxy = &AcceptProxy{Trusted: []string{"0.0.0.0/0"}}
		}},
		{name: "trusted missing", mutate: func(c *Config) { ap(c) }, want: []want{{p0 + "/trusted", CodeRequired}}},
		{name: "host bits set", mutate: func(c *Config) { ap(c, "10.0.0.1/8") }, want: []want{{p0 + "/trusted/0", CodeFormat}}},
		{name: "not an address", mutate: func(c *Config) { ap(c, "10.0.0.0/8", "lb.example.com") }, want: []want{{p0 + "/trusted/1", CodeFormat}}},
		{name: "prefix too long", mutate: func(c *Config) { ap(c, "10.0.0.0/33") }, want: []want{{p0 + "/trusted/0", CodeFormat}}},
		{name: "zone", mutate: func(c *Config) { ap(c, "fe80::1%eth0") }, want: []want{{p0 + "/trusted/0", CodeFormat}}},
		{name: "too many", mutate: func(c *Config) { ap(c, slices.Repeat([]string{"10.0.0.0/8"}, 1025)...) }, want: []want{{p0 + "/trusted", CodeOutOfRange}}},
		{name: "send_proxy v1 and v2 pass", mutate: func(c *Config) {
			c.Backends[0].Servers[0].SendProxy = ProxyV1
			c.Backends[2].Servers[0].SendProxy = ProxyV2
		}},
		{name: "send_proxy v3", mutate: func(c *Config) { c.Backends[0].Servers[0].SendProxy = "v3" },
			want: []want{{"/backends/0/servers/0/send_proxy", CodeOneOf}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := goodConfig()
			tt.mutate(c)
			c.Normalize()
			err := Validate(c, fourCPUs)
			if got := fieldErrors(t, err); !slices.Equal(got, tt.want) {
				t.Fatalf("Validate() problems\n got: %v\nwant: %v\n err: %v", got, tt.want, err)
			}
		})
	}
}

func TestParseTrusted(t *testing.T) {
	for in, want := range map[string]string{
		"10.0.0.0/8":          "10.0.0.0/8",
		"192.0.2.7":           "192.0.2.7/32",
		"::1":                 "::1/128",
		"::ffff:10.0.0.0/104": "10.0.0.0/8",
		"::ffff:192.0.2.7":    "192.0.2.7/32",
	} {
		p, err := ParseTrusted(in)
		if err != nil || p != netip.MustParsePrefix(want) {
			t.Errorf("ParseTrusted(%q) = %v, %v; want %s", in, p, err, want)
		}
	}
	if _, err := ParseTrusted("10.0.0.1/8"); err == nil || !strings.Contains(err.Error(), "10.0.0.0/8 is meant") {
		t.Errorf("host bits: %v", err)
	}
}

// TestAcceptProxyDefaultsHandshake: a frontend with a bind that reads a
// PROXY header gets handshake_ms 5 000 (the header's deadline), as one
// with a tls bind; one without keeps 0.
func TestAcceptProxyDefaultsHandshake(t *testing.T) {
	c := Config{Frontends: []Frontend{
		{Name: "lb", Mode: ModeHTTP, Binds: []Bind{{Name: "b", AcceptProxy: &AcceptProxy{Trusted: []string{"10.0.0.0/8"}}}}},
		{Name: "raw", Mode: ModeTCP, Binds: []Bind{{Name: "b", AcceptProxy: &AcceptProxy{Trusted: []string{"10.0.0.0/8"}}}}},
		{Name: "plain", Mode: ModeHTTP, Binds: []Bind{{Name: "b"}}},
	}}
	c.Normalize()
	for i, want := range []int{DefaultHandshakeMs, DefaultHandshakeMs, 0} {
		if got := c.Frontends[i].Timeouts.HandshakeMs; got != want {
			t.Errorf("%s: handshake_ms %d, want %d", c.Frontends[i].Name, got, want)
		}
	}
}
