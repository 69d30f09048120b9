package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// FuzzDecodeConfig feeds arbitrary bytes through what the API and the store
// do with a body: strict decode, Normalize, Validate, Diff in both
// directions, Clone. None of it may panic; a document that decodes must
// re-encode and decode again to the same value.
func FuzzDecodeConfig(f *testing.F) {
	good, _ := json.Marshal(goodConfig())
	f.Add(good)
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"backends":[{"name":"w","servers":[{"name":"a","address":"::1","port":1},null]}]}`))
	f.Add([]byte(`{"frontends":[{"name":"a","binds":[{"name":"b","address":"*","port":80}],"routes":[{"backend":"x"}]}]}`))
	f.Add([]byte(`{"cpu_map":{"mode":"manual","threads":[{"thread":0,"cpus":[0,4095]}]},"irq":{"pins":[{"irq":1,"cpus":[]}]}}`))
	f.Add([]byte(`{"backends":[{"name":"w","health_check":{"type":"http","status_min":500,"status_max":100}}]}`))
	tc, _ := json.Marshal(tlsConfig())
	f.Add(tc)
	f.Add([]byte(`{"certificates":[{"name":"s","chain_sha256":"` + strings.Repeat("0", 64) + `"}],"frontends":[{"name":"a","mode":"http","binds":[{"name":"b","address":"*","port":443,` +
		`"tls":{"certificates":["s","s","x"],"alpn":["h2",""],"min_version":"1.1","ciphers":["TLS_AES_128_GCM_SHA256","TLS_RSA_WITH_RC4_128_SHA"],` +
		`"client_ca":"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n","client_auth":"optional","client_cert_header_prefix":"X "}}]}],` +
		`"tuning":{"tls":{"max_handshakes":1,"ticket_rotation_ms":60000}}}`))
	f.Add([]byte(`{"frontends":[{"name":"t","routes":[{"sni":"a.b","backend":"x"}],"binds":[{"name":"b","address":"::","port":1,"tls":{"certificates":[]}}]}]}`))
	env := Env{CPUs: []int{0, 1, 2, 3}}
	base := goodConfig()
	f.Fuzz(func(t *testing.T, data []byte) {
		var c Config
		err := DecodeBytes(data, &c)
		if err != nil {
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("decode error %v is not a *DecodeError", err)
			}
			return
		}
		c.Normalize()
		verr := Validate(&c, env)
		if verr != nil {
			var ve *ValidationError
			if !errors.As(verr, &ve) || len(ve.Errors) == 0 {
				t.Fatalf("validate error %v is not a non-empty *ValidationError", verr)
			}
		}
		_ = Validate(&c, Env{})
		n, err := c.ForNode("edge-1", "192.0.2.1")
		if err != nil {
			t.Fatalf("ForNode with an address: %v", err)
		}
		_ = Validate(n, Env{NodeName: "edge-1", CPUs: env.CPUs})
		p1 := Diff(base, &c)
		p2 := Diff(&c, base)
		if p1.Items == nil || p2.Items == nil {
			t.Fatal("nil plan items")
		}
		_ = p1.Summary()
		cl := c.Clone()
		if p := Diff(&c, cl); !p.Empty() {
			t.Fatalf("a clone differs from its original: %v", p.Items)
		}
		enc, err := json.Marshal(&c)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		var again Config
		if err := DecodeBytes(enc, &again); err != nil {
			t.Fatalf("own encoding refused: %v\n%s", err, enc)
		}
		enc2, _ := json.Marshal(&again)
		if !bytes.Equal(enc, enc2) {
			t.Fatalf("round trip changed the document\n%s\n%s", enc, enc2)
		}
	})
}
