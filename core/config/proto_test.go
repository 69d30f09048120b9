package config

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// TestValidateServerProto pins the rules of a server's proto: h1 or h2
// (absent is h1), h2 only on an http backend, beside tls and send_proxy.
func TestValidateServerProto(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(c *Config)
		want   []want
	}{
		{name: "absent passes", mutate: func(c *Config) {}},
		{name: "h1 and h2 pass on http backends", mutate: func(c *Config) {
			c.Backends[0].Servers[0].Proto = ProtoH2
			c.Backends[0].Servers[1].Proto = ProtoH1
			c.Backends[1].Servers[0].Proto = ProtoH2
		}},
		{name: "h2 with tls and send_proxy passes", mutate: func(c *Config) {
			s := c.Backends[0].Servers[0]
			s.Proto, s.SendProxy = ProtoH2, ProxyV2
			s.TLS = &ServerTLS{Verify: VerifyNone}
		}},
		{name: "h1 passes on a tcp backend", mutate: func(c *Config) { c.Backends[2].Servers[0].Proto = ProtoH1 }},
		{name: "h2 refused on a tcp backend", mutate: func(c *Config) { c.Backends[2].Servers[0].Proto = ProtoH2 },
			want: []want{{"/backends/2/servers/0/proto", CodeModeMismatch}}},
		{name: "h2 refused on a backend without mode (tcp)", mutate: func(c *Config) {
			c.Backends = append(c.Backends, Backend{Name: "bare", Servers: []*Server{{Name: "a", Address: "10.0.0.1", Port: 80, Proto: ProtoH2}}})
		}, want: []want{{"/backends/3/servers/0/proto", CodeModeMismatch}}},
		{name: "unknown proto refused", mutate: func(c *Config) { c.Backends[0].Servers[1].Proto = "h3" },
			want: []want{{"/backends/0/servers/1/proto", CodeOneOf}}},
		{name: "upper case refused", mutate: func(c *Config) { c.Backends[0].Servers[0].Proto = "H2" },
			want: []want{{"/backends/0/servers/0/proto", CodeOneOf}}},
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

// TestServerProtoChangeIsValidated: a server whose only change is its
// proto is not skipped as unchanged by the incremental validation (which
// skips the field rules of servers equal to the previous document's).
func TestServerProtoChangeIsValidated(t *testing.T) {
	prev := goodConfig()
	c := prev.Clone()
	c.Backends[0].Servers[0].Proto = "h3"
	err := validate(c, fourCPUs, prev, nil)
	if got := fieldErrors(t, err); !slices.Equal(got, []want{{"/backends/0/servers/0/proto", CodeOneOf}}) {
		t.Fatalf("validate against the previous document: %v", err)
	}
}

// TestServerProtoAbsentStaysAbsent: Normalize does not fill proto (absent
// means h1), so a stored document without it is unchanged and GET shows
// what was sent; an explicit h1 round-trips as sent.
func TestServerProtoAbsentStaysAbsent(t *testing.T) {
	c := goodConfig()
	c.Backends[0].Servers[1].Proto = ProtoH1
	c.Normalize()
	b, err := json.Marshal(c.Backends[0].Servers)
	if err != nil {
		t.Fatal(err)
	}
	if s := string(b); strings.Count(s, `"proto"`) != 1 || !strings.Contains(s, `"proto":"h1"`) {
		t.Fatalf("servers after Normalize: %s", s)
	}
}
