package tokens

import (
	"bytes"
	"testing"
)

// FuzzParse: any input is refused or parsed; what parses re-encodes to a
// document that parses to the same entries.
func FuzzParse(f *testing.F) {
	h := HashOf("spliced_x")
	f.Add([]byte(`{"version":1,"tokens":[]}`))
	f.Add([]byte(`{"version":1,"tokens":[{"name":"a","role":"viewer","hash":"` + h + `","created":"2026-01-01T00:00:00Z"}]}`))
	f.Add([]byte(`{"version":1,"tokens":[{"name":"a","role":"admin","hash":"sha256:zz"}]}`))
	f.Add([]byte(`{"version":1,"tokens":null}`))
	f.Add([]byte("\xff\xfe{}"))
	f.Add(bytes.Repeat([]byte("["), 10000))
	f.Fuzz(func(t *testing.T, data []byte) {
		es, err := Parse(data)
		if err != nil {
			return
		}
		again, err := Parse(Marshal(es))
		if err != nil {
			t.Fatalf("re-encoded document refused: %v", err)
		}
		if len(again) != len(es) {
			t.Fatalf("%d entries, then %d", len(es), len(again))
		}
		for i := range es {
			if es[i].Name != again[i].Name || es[i].Role != again[i].Role || es[i].Hash != again[i].Hash {
				t.Fatalf("entry %d changed: %+v -> %+v", i, es[i], again[i])
			}
		}
	})
}
