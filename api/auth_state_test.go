package api

import (
	"fmt"
	"testing"

	"github.com/spliced-proxy/spliced/core/config"
)

// onlyServerState is serverStateOnly without encoding the documents: it
// must say "only weights and states changed" for an operator's writes,
// and never when the whole comparison (documentDiff) finds more.
func TestOnlyServerStateAgreesWithTheDocuments(t *testing.T) {
	base := func() *config.Config {
		c := &config.Config{Frontends: []config.Frontend{{Name: "fe", DefaultBackend: "web",
			Binds: []config.Bind{{Name: "b1", Address: "127.0.0.1", Port: 8080}}}}}
		for _, be := range []string{"web", "api"} {
			b := config.Backend{Name: be}
			for i := range 50 {
				b.Servers = append(b.Servers, &config.Server{Name: fmt.Sprintf("s%d", i), Address: "127.0.0.1", Port: 1000 + i})
			}
			c.Backends = append(c.Backends, b)
		}
		c.Normalize()
		return c
	}
	seven := 7
	tests := []struct {
		name   string
		change func(c *config.Config)
		fast   bool // onlyServerState must say true
	}{
		{"nothing", func(c *config.Config) {}, true},
		{"a weight", func(c *config.Config) { c.OwnServer(0, 20).Weight = &seven }, true},
		{"a state and a weight in two backends", func(c *config.Config) {
			c.OwnServer(0, 0).AdminState = config.AdminDrain
			c.OwnServer(1, 49).Weight = &seven
		}, true},
		{"a weight given as unset", func(c *config.Config) { c.OwnServer(0, 3).Weight = nil }, true},
		{"a port", func(c *config.Config) { c.OwnServer(0, 20).Port = 1 }, false},
		{"a state and a maxconn", func(c *config.Config) {
			s := c.OwnServer(0, 20)
			s.AdminState = config.AdminMaint
			s.Maxconn = 3
		}, false},
		{"tls", func(c *config.Config) {
			c.OwnServer(1, 5).TLS = &config.ServerTLS{Verify: config.VerifyNone}
		}, false},
		{"a server added", func(c *config.Config) {
			*c.OwnServers(0) = append(c.Backends[0].Servers, &config.Server{Name: "new", Address: "127.0.0.1", Port: 9})
		}, false},
		{"a server removed", func(c *config.Config) { s := c.OwnServers(0); *s = (*s)[1:] }, false},
		{"a backend's balance", func(c *config.Config) { c.Backends[1].Balance = config.BalanceLeastConn }, false},
		{"a frontend's maxconn with a weight", func(c *config.Config) {
			c.OwnServer(0, 1).Weight = &seven
			c.Frontends[0].Maxconn = 5
		}, false},
		{"the tuning", func(c *config.Config) { c.Tuning.Bufsize = 4096 }, false},
		{"a backend removed", func(c *config.Config) { c.Backends = c.Backends[:1] }, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := base()
			after := before.Clone()
			tc.change(after)
			fast, whole := onlyServerState(before, after), documentDiff(before, after)
			if fast != tc.fast {
				t.Errorf("onlyServerState = %v, want %v", fast, tc.fast)
			}
			if fast && whole != nil {
				t.Errorf("onlyServerState = true but the documents differ at %v", whole)
			}
			if !fast && whole == nil {
				t.Errorf("onlyServerState = false and the documents differ in weights and states only")
			}
		})
	}
}
