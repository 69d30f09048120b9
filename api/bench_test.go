package api

import (
	"fmt"
	"github.com/spliced-proxy/spliced/core/config"
	"strings"
	"testing"
)

// BenchmarkPatchServerWith10kServers measures one admin write (drain a
// server) through the whole API path — decode, If-Match-free merge patch,
// store clone, validate, diff, persist with fsync, apply on coretest.Nop — with
// 10 000 servers configured (DESIGN.md: a server change applies in < 50 ms).
func BenchmarkPatchServerWith10kServers(b *testing.B) {
	f := newFixture(b)
	var sb strings.Builder
	sb.WriteString(`{"backends":[{"name":"big","servers":[`)
	for i := range 10000 {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `{"name":"s%d","address":"10.%d.%d.%d","port":80}`, i, i>>16&255, i>>8&255, i&255)
	}
	sb.WriteString(`]}]}`)
	f.must(b, 200, "PUT", "/api/v1/config", sb.String())
	states := []string{"drain", "ready"}
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		f.must(b, 200, "PATCH", "/api/v1/backends/big/servers/s5000", `{"admin_state":"`+states[i%2]+`"}`)
	}
}

// BenchmarkOperatorCheckWith10kServers: what checkRole adds to an
// operator's weight change at 10 000 servers (onlyServerState), against
// comparing the whole documents (documentDiff, what it did before).
func BenchmarkOperatorCheckWith10kServers(b *testing.B) {
	before := &config.Config{Backends: []config.Backend{{Name: "big"}}}
	for i := range 10000 {
		before.Backends[0].Servers = append(before.Backends[0].Servers,
			&config.Server{Name: fmt.Sprintf("s%d", i), Address: fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255), Port: 80})
	}
	before.Normalize()
	after := before.Clone()
	w := 7
	after.Backends[0].Servers[5000].Weight = &w
	for _, bc := range []struct {
		name string
		fn   func(b, a *config.Config) []string
	}{{"serverStateOnly", serverStateOnly}, {"documentDiff", documentDiff}} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				if d := bc.fn(before, after); d != nil {
					b.Fatal(d)
				}
			}
		})
	}
}
