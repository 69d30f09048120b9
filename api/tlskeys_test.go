package api

import (
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/api/tokens"
	"github.com/spliced-proxy/spliced/core/tlsconf"
)

func keysBody(keys ...[]byte) string {
	var in TicketKeysUpload
	for _, k := range keys {
		in.Keys = append(in.Keys, base64.StdEncoding.EncodeToString(k))
	}
	b, _ := json.Marshal(in)
	return string(b)
}

func key32(b byte) []byte { return []byte(strings.Repeat(string(rune(b)), 32)) }

func TestTicketKeysEndpoint(t *testing.T) {
	kdir := t.TempDir()
	tk, err := tlsconf.NewTicketKeys(kdir, time.Hour, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer tk.Close()
	f := newSecFixture(t, true, Options{TicketKeys: tk})
	admin := f.secrets[tokens.Admin]

	// Admin only, reads included: ids tell which nodes share keys.
	for _, r := range []tokens.Role{tokens.Viewer, tokens.Operator} {
		for _, m := range []string{"GET", "PUT"} {
			if w := f.do(req{method: m, path: "/api/v1/tls/ticket-keys", body: keysBody(key32('a')), token: f.secrets[r]}); w.Code != 403 {
				t.Fatalf("%s %s: %d", r, m, w.Code)
			}
		}
	}
	w := f.do(req{method: "GET", path: "/api/v1/tls/ticket-keys", token: admin})
	v := decodeJSON[TicketKeysView](t, w)
	if w.Code != 200 || len(v.Keys) != 1 || v.Keys[0].Source != "generated" || len(v.Keys[0].ID) != 8 || v.Keys[0].Created.IsZero() {
		t.Fatalf("GET: %d %s", w.Code, w.Body)
	}

	// Refusals, each with its pointer; nothing changes.
	long := base64.StdEncoding.EncodeToString(make([]byte, 33))
	for _, tt := range []struct {
		body  string
		field string
	}{
		{`{"keys":[]}`, "/keys"},
		{keysBody(key32('a'), key32('b'), key32('c'), key32('d'), key32('e'), key32('f'), key32('g'), key32('h'), key32('i')), "/keys"},
		{`{"keys":["` + base64.StdEncoding.EncodeToString(key32('a')) + `","not base64!"]}`, "/keys/1"},
		{`{"keys":["` + long + `"]}`, "/keys/0"},
		{`{"keys":["AAAA"]}`, "/keys/0"},
	} {
		w := f.do(req{method: "PUT", path: "/api/v1/tls/ticket-keys", body: tt.body, token: admin})
		if w.Code != 422 {
			t.Fatalf("%s: %d %s", tt.body, w.Code, w.Body)
		}
		if p := problemOf(t, w); p.Errors[0].Field != tt.field {
			t.Fatalf("%s: %+v", tt.body, p.Errors)
		}
	}
	if f.do(req{method: "PUT", path: "/api/v1/tls/ticket-keys", body: `{"keys":["x"],"other":1}`, token: admin}).Code != 400 {
		t.Fatal("unknown member accepted")
	}
	if w := f.do(req{method: "PUT", path: "/api/v1/tls/ticket-keys?dry_run=true", body: keysBody(key32('a')), token: admin}); w.Code != 200 ||
		decodeJSON[TicketKeysView](t, w).Keys[0].ID != v.Keys[0].ID {
		t.Fatalf("dry run changed the keys: %s", w.Body)
	}

	// Set: the answer names the new keys by id, in order.
	w = f.do(req{method: "PUT", path: "/api/v1/tls/ticket-keys", body: keysBody(key32('n'), key32('o')), token: admin})
	set := decodeJSON[TicketKeysView](t, w)
	if w.Code != 200 || len(set.Keys) != 2 || set.Keys[0].Source != "api" || set.Keys[0].ID == v.Keys[0].ID {
		t.Fatalf("PUT: %d %s", w.Code, w.Body)
	}
	if got := tk.Info(); got[0].ID != set.Keys[0].ID || got[1].ID != set.Keys[1].ID {
		t.Fatalf("TicketKeys holds %+v", got)
	}
	if fi, err := os.Stat(filepath.Join(kdir, tlsconf.TicketKeysFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", fi, err)
	}

	// No key in answers, logs or the audit trail.
	audit := f.do(req{method: "GET", path: "/api/v1/audit", token: admin}).Body.String()
	if !strings.Contains(audit, `"path":"/api/v1/tls/ticket-keys"`) {
		t.Fatalf("no audit entry for the PUT:\n%s", audit)
	}
	for where, text := range map[string]string{"audit": audit, "log": f.logs.String(), "answer": w.Body.String()} {
		for _, k := range [][]byte{key32('n'), key32('o'), key32('a')} {
			if strings.Contains(text, base64.StdEncoding.EncodeToString(k)) {
				t.Fatalf("the %s holds a key", where)
			}
		}
	}
}

func TestTicketKeysWithoutKeysAnswer404(t *testing.T) {
	f := newFixture(t)
	p := problemOf(t, f.must(t, 404, "GET", "/api/v1/tls/ticket-keys", ""))
	if !strings.Contains(p.Detail, "not managed") {
		t.Fatal(p.Detail)
	}
}
