package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/spliced-proxy/spliced/core/config"
)

// Request bodies are decoded by config.DecodeBytes, the project's one strict
// decoder (also used by `spliced validate`): UTF-8, nesting at most
// config.MaxDepth, one document, members named exactly as the json tags,
// values of the right JSON type that fit the Go field. Its *config.DecodeError
// carries the JSON pointer of the offending member.

// bodyLimit is the body limit of each request: limit (--admin-max-body),
// except for PUT /api/v1/config, which replaces the whole document: it
// takes up to three times the document GET /api/v1/config gives now, if
// that is more, so that any document the API produces can be sent back,
// indented (2 spaces: 1.8x, 4 spaces: ~2.6x) and grown (a 3 000-backend configuration is ~1.7 MB, over the 1 MiB
// default).
func (s *server) bodyLimit(limit int64) func(r *http.Request) int64 {
	return func(r *http.Request) int64 {
		if r.Method != http.MethodPut || r.URL.Path != base+"/config" || s.store == nil {
			return limit
		}
		return max(limit, docLimitFactor*s.docSize.of(s.store.Current()))
	}
}

// docLimitFactor: PUT /api/v1/config takes this many times the current
// document.
const docLimitFactor = 3

// docSize caches the size of the current document as GET /api/v1/config
// encodes it (json.Marshal, as represent), computed once per generation.
type docSize struct {
	mu   sync.Mutex
	c    *config.Config
	size int64
}

func (d *docSize) of(c *config.Config) int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.c != c {
		b, err := json.Marshal(c)
		if err != nil {
			return 0 // unreachable: GET would fail the same way; the flag applies
		}
		d.c, d.size = c, int64(len(b))
	}
	return d.size
}

// decodeStrict decodes body into dst with config.DecodeBytes. Every body
// the API takes is an object: a top-level null (which encoding/json accepts
// as "leave dst alone") would turn a PUT into "reset to defaults".
func decodeStrict(body []byte, dst any) error {
	if err := config.DecodeBytes(body, dst); err != nil {
		return err
	}
	if err := noDuplicateKeys(body); err != nil {
		return err
	}
	if t := bytes.TrimLeft(body, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return &config.DecodeError{Code: config.DecodeType, Message: "expected a JSON object"}
	}
	return nil
}

// decodeAny checks body like decodeStrict and decodes it as generic JSON,
// numbers kept as json.Number so a merge patch never rounds one.
func decodeAny(body []byte) (any, error) {
	var raw json.RawMessage
	if err := config.DecodeBytes(body, &raw); err != nil {
		return nil, err
	}
	if err := noDuplicateKeys(raw); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, &config.DecodeError{Code: config.DecodeSyntax, Message: err.Error()}
	}
	return v, nil
}

// noDuplicateKeys refuses an object with the same member twice. encoding/json
// keeps the last one, other parsers the first: a document two parsers read
// differently (an audit tool and spliced, say) is refused rather than
// guessed at (RFC 8259 4: names SHOULD be unique). body is well-formed JSON
// within config.MaxDepth (DecodeBytes checked it). Code "duplicate_field",
// answered 400 like an unknown field.
func noDuplicateKeys(body []byte) error {
	return dupValue(json.NewDecoder(bytes.NewReader(body)), "")
}

// dupValue scans one value at ptr; recursion is bounded by config.MaxDepth.
func dupValue(dec *json.Decoder, ptr string) error {
	tok, err := dec.Token()
	if err != nil {
		return nil // unreachable after DecodeBytes; nothing more to check
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return nil
	}
	if d == '{' {
		seen := make(map[string]bool)
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil
			}
			k, _ := kt.(string)
			p := ptr + "/" + escapePointer(k)
			if seen[k] {
				return &config.DecodeError{Field: p, Code: CodeDuplicateField,
					Message: fmt.Sprintf("member %q appears more than once", truncate(k, 64))}
			}
			seen[k] = true
			if err := dupValue(dec, p); err != nil {
				return err
			}
		}
	} else {
		for i := 0; dec.More(); i++ {
			if err := dupValue(dec, ptr+"/"+strconv.Itoa(i)); err != nil {
				return err
			}
		}
	}
	_, _ = dec.Token() // the closing delimiter
	return nil
}

// CodeDuplicateField is the DecodeError code of a member given twice.
const CodeDuplicateField = "duplicate_field"

// escapePointer escapes one reference token of a JSON pointer (RFC 6901).
func escapePointer(s string) string {
	if !strings.ContainsAny(s, "~/") {
		return s
	}
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// mergePatch applies an RFC 7386 JSON merge patch to target (both generic
// JSON values) and returns the result. target may be modified.
func mergePatch(target, patch any) any {
	pm, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	tm, ok := target.(map[string]any)
	if !ok {
		tm = make(map[string]any, len(pm))
	}
	for k, v := range pm {
		if v == nil {
			delete(tm, k)
		} else {
			tm[k] = mergePatch(tm[k], v)
		}
	}
	return tm
}

// patchInto applies the merge patch to cur (a model value) and strictly
// decodes the result into dst. A member of the patch has the same JSON
// pointer in the merged document, so problems point into the patch.
func patchInto(cur any, patch any, dst any) error {
	b, err := json.Marshal(cur)
	if err != nil {
		return fmt.Errorf("api: marshal current object: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return fmt.Errorf("api: decode current object: %w", err)
	}
	merged, err := json.Marshal(mergePatch(doc, patch))
	if err != nil {
		return fmt.Errorf("api: marshal merged object: %w", err)
	}
	return decodeStrict(merged, dst)
}

// truncate shortens client-supplied text quoted in problems, on a rune
// boundary so the message stays valid UTF-8.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}
