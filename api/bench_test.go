package api

import (
	"fmt"
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
