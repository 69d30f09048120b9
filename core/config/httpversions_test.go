package config

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestNormalizeHTTPVersionsAndH2: http.versions and each http.h2 member
// take their own default when missing (on a frontend whose http object
// says nothing else, and on one that sets another member); chosen values
// are kept, and an empty versions list is kept for Validate to refuse,
// not replaced.
func TestNormalizeHTTPVersionsAndH2(t *testing.T) {
	defH2 := FrontendH2{MaxConcurrentStreams: 100, InitialWindowSize: 65535, MaxFrameSize: 16384, MaxHeaderListSize: 16384}
	for _, tt := range []struct {
		http     string // the frontend's http member
		versions []string
		h2       FrontendH2
	}{
		{``, []string{"1.1", "2"}, defH2},
		{`,"http":{}`, []string{"1.1", "2"}, defH2},
		{`,"http":{"max_body_size":100}`, []string{"1.1", "2"}, defH2},
		{`,"http":{"versions":["1.1"]}`, []string{"1.1"}, defH2},
		{`,"http":{"versions":["2","1.1"]}`, []string{"2", "1.1"}, defH2},
		{`,"http":{"versions":[]}`, []string{}, defH2},
		{`,"http":{"versions":null}`, []string{"1.1", "2"}, defH2},
		{`,"http":{"h2":{"max_concurrent_streams":7}}`, []string{"1.1", "2"},
			FrontendH2{MaxConcurrentStreams: 7, InitialWindowSize: 65535, MaxFrameSize: 16384, MaxHeaderListSize: 16384}},
		{`,"http":{"h2":{"initial_window_size":1048576,"max_frame_size":32768,"max_header_list_size":8192}}`, []string{"1.1", "2"},
			FrontendH2{MaxConcurrentStreams: 100, InitialWindowSize: 1 << 20, MaxFrameSize: 32768, MaxHeaderListSize: 8192}},
		{`,"http":{"h2":{"max_concurrent_streams":0}}`, []string{"1.1", "2"}, defH2}, // 0 = default, as every _ms and size
	} {
		var f Frontend
		if err := DecodeBytes([]byte(`{"name":"fe","mode":"http"`+tt.http+`}`), &f); err != nil {
			t.Fatalf("%s: %v", tt.http, err)
		}
		f.Normalize()
		if !slices.Equal(f.HTTP.Versions, tt.versions) || (f.HTTP.Versions == nil) != (tt.versions == nil) {
			t.Errorf("http%s: versions %q, want %q", tt.http, f.HTTP.Versions, tt.versions)
		}
		if f.HTTP.H2 != tt.h2 {
			t.Errorf("http%s: h2 %+v, want %+v", tt.http, f.HTTP.H2, tt.h2)
		}
		// Idempotent.
		again := f.clone()
		again.Normalize()
		if !slices.Equal(again.HTTP.Versions, f.HTTP.Versions) || again.HTTP.H2 != f.HTTP.H2 {
			t.Errorf("http%s: a second Normalize changed %+v into %+v", tt.http, f.HTTP, again.HTTP)
		}
	}
	// A tcp frontend gets no http object.
	tcp := Frontend{Name: "t", Mode: ModeTCP}
	tcp.Normalize()
	if tcp.HTTP != nil {
		t.Errorf("tcp frontend got http %+v", tcp.HTTP)
	}
}

// TestValidateHTTPVersionsAndH2: each bad http.versions or http.h2 value
// is reported at its JSON pointer with its code; the bounds themselves
// pass.
func TestValidateHTTPVersionsAndH2(t *testing.T) {
	const hp = "/frontends/0/http"
	h := func(c *Config) *FrontendHTTPOpts { return c.Frontends[0].HTTP }
	tests := []struct {
		name   string
		mutate func(c *Config)
		want   []want
	}{
		{name: "defaults pass", mutate: func(c *Config) {}},
		{name: "1.1 only passes", mutate: func(c *Config) { h(c).Versions = []string{"1.1"} }},
		{name: "2 only passes", mutate: func(c *Config) { h(c).Versions = []string{"2"} }},
		{name: "2 before 1.1 passes", mutate: func(c *Config) { h(c).Versions = []string{"2", "1.1"} }},
		{name: "empty versions", mutate: func(c *Config) { h(c).Versions = []string{} },
			want: []want{{hp + "/versions", CodeRequired}}},
		{name: "unknown version", mutate: func(c *Config) { h(c).Versions = []string{"1.1", "3"} },
			want: []want{{hp + "/versions/1", CodeOneOf}}},
		{name: "version spelled as ALPN", mutate: func(c *Config) { h(c).Versions = []string{"h2"} },
			want: []want{{hp + "/versions/0", CodeOneOf}}},
		{name: "version 2.0", mutate: func(c *Config) { h(c).Versions = []string{"2.0"} },
			want: []want{{hp + "/versions/0", CodeOneOf}}},
		{name: "duplicate version", mutate: func(c *Config) { h(c).Versions = []string{"2", "1.1", "2"} },
			want: []want{{hp + "/versions/2", CodeDuplicate}}},
		{name: "h2 bounds pass", mutate: func(c *Config) {
			h(c).H2 = FrontendH2{MaxConcurrentStreams: 1, InitialWindowSize: 1024, MaxFrameSize: 16384, MaxHeaderListSize: 1024}
		}},
		{name: "h2 upper bounds pass", mutate: func(c *Config) {
			h(c).H2 = FrontendH2{MaxConcurrentStreams: 1000, InitialWindowSize: 1<<31 - 1, MaxFrameSize: 1<<24 - 1, MaxHeaderListSize: 1 << 20}
		}},
		{name: "max_concurrent_streams above 1000", mutate: func(c *Config) { h(c).H2.MaxConcurrentStreams = 1001 },
			want: []want{{hp + "/h2/max_concurrent_streams", CodeOutOfRange}}},
		{name: "max_concurrent_streams negative", mutate: func(c *Config) { h(c).H2.MaxConcurrentStreams = -1 },
			want: []want{{hp + "/h2/max_concurrent_streams", CodeOutOfRange}}},
		{name: "initial_window_size below 1024", mutate: func(c *Config) { h(c).H2.InitialWindowSize = 1023 },
			want: []want{{hp + "/h2/initial_window_size", CodeOutOfRange}}},
		{name: "initial_window_size above 2^31-1", mutate: func(c *Config) { h(c).H2.InitialWindowSize = 1 << 31 },
			want: []want{{hp + "/h2/initial_window_size", CodeOutOfRange}}},
		{name: "max_frame_size below 16384", mutate: func(c *Config) { h(c).H2.MaxFrameSize = 16383 },
			want: []want{{hp + "/h2/max_frame_size", CodeOutOfRange}}},
		{name: "max_frame_size above 2^24-1", mutate: func(c *Config) { h(c).H2.MaxFrameSize = 1 << 24 },
			want: []want{{hp + "/h2/max_frame_size", CodeOutOfRange}}},
		{name: "max_header_list_size below 1024", mutate: func(c *Config) { h(c).H2.MaxHeaderListSize = 1000 },
			want: []want{{hp + "/h2/max_header_list_size", CodeOutOfRange}}},
		{name: "max_header_list_size above 1 MiB", mutate: func(c *Config) { h(c).H2.MaxHeaderListSize = 1<<20 + 1 },
			want: []want{{hp + "/h2/max_header_list_size", CodeOutOfRange}}},
		{name: "every problem at once", mutate: func(c *Config) {
			h(c).Versions = []string{"1.0", "1.1", "1.1"}
			h(c).H2 = FrontendH2{MaxConcurrentStreams: 5000, InitialWindowSize: 10, MaxFrameSize: 100, MaxHeaderListSize: 1 << 30}
		}, want: []want{
			{hp + "/h2/initial_window_size", CodeOutOfRange},
			{hp + "/h2/max_concurrent_streams", CodeOutOfRange},
			{hp + "/h2/max_frame_size", CodeOutOfRange},
			{hp + "/h2/max_header_list_size", CodeOutOfRange},
			{hp + "/versions/0", CodeOneOf},
			{hp + "/versions/2", CodeDuplicate},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := goodConfig()
			tt.mutate(c)
			err := Validate(c, fourCPUs)
			if got := fieldErrors(t, err); !slices.Equal(got, tt.want) {
				t.Fatalf("Validate() problems\n got: %v\nwant: %v\n err: %v", got, tt.want, err)
			}
		})
	}
}

// TestOfferedALPN: the ALPN list a TLS bind offers, for each combination
// of http.versions, a set alpn and whether the data plane speaks HTTP/2
// (core/proxy.HTTP2Supported, forced both ways here).
func TestOfferedALPN(t *testing.T) {
	both, h1, h2only := []string{"1.1", "2"}, []string{"1.1"}, []string{"2"}
	for _, tt := range []struct {
		mode     string
		versions []string // nil: the http object is absent
		alpn     []string
		h2       bool
		want     []string
	}{
		// Derived, HTTP/2 spoken: h2 first.
		{ModeHTTP, both, nil, true, []string{"h2", "http/1.1"}},
		{ModeHTTP, []string{"2", "1.1"}, nil, true, []string{"h2", "http/1.1"}},
		{ModeHTTP, h1, nil, true, []string{"http/1.1"}},
		{ModeHTTP, h2only, nil, true, []string{"h2"}},
		{ModeHTTP, nil, nil, true, []string{"h2", "http/1.1"}},
		// Derived, HTTP/2 not spoken yet: never h2.
		{ModeHTTP, both, nil, false, []string{"http/1.1"}},
		{ModeHTTP, h1, nil, false, []string{"http/1.1"}},
		{ModeHTTP, h2only, nil, false, []string{"http/1.1"}},
		// Set: the bind's list wins, in its order.
		{ModeHTTP, both, []string{"http/1.1"}, true, []string{"http/1.1"}},
		{ModeHTTP, both, []string{"http/1.1", "h2"}, true, []string{"http/1.1", "h2"}},
		{ModeHTTP, h2only, []string{"h2"}, true, []string{"h2"}},
		{ModeHTTP, both, []string{"http/1.0"}, true, []string{"http/1.0"}},
		// Set, HTTP/2 not spoken yet: h2 is dropped from it.
		{ModeHTTP, both, []string{"h2", "http/1.1"}, false, []string{"http/1.1"}},
		{ModeHTTP, h2only, []string{"h2"}, false, []string{"http/1.1"}},
		// tcp: as set, none when unset, whatever h2.
		{ModeTCP, nil, nil, true, nil},
		{ModeTCP, nil, []string{"h2", "imap"}, false, []string{"h2", "imap"}},
		{ModeTCP, nil, []string{"http/1.1"}, true, []string{"http/1.1"}},
	} {
		f := &Frontend{Name: "fe", Mode: tt.mode}
		if tt.versions != nil {
			f.HTTP = &FrontendHTTPOpts{Versions: tt.versions}
		}
		bt := &BindTLS{ALPN: tt.alpn}
		got := OfferedALPN(f, bt, tt.h2)
		if !slices.Equal(got, tt.want) || (got == nil) != (tt.want == nil) {
			t.Errorf("%s versions %q alpn %q h2 %v: offered %q, want %q", tt.mode, tt.versions, tt.alpn, tt.h2, got, tt.want)
		}
		if len(got) > 0 && len(bt.ALPN) > 0 && &got[0] == &bt.ALPN[0] {
			t.Errorf("%s alpn %q: the result shares the config's array", tt.mode, tt.alpn)
		}
	}
}

// copyDir copies the files of src (one level of subdirectories) into a
// new temporary directory.
func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "state")
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		out := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(out, 0o700)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(out, b, 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// TestStoreMigratesSchema0ALPNDefault: testdata/schema0 is a state
// directory written by the version before schemas (its binary, through
// the API): Normalize stored alpn ["http/1.1"] on every TLS bind of an
// http frontend. Loaded now, such a list (exactly the old default) is
// gone, in the current document and in the revisions read back, so that
// the bind's list is derived from http.versions; any other list, and a
// tcp frontend's ["http/1.1"], stay. After the upgrade a list set again is
// the client's, and survives a restart.
func TestStoreMigratesSchema0ALPNDefault(t *testing.T) {
	dir := copyDir(t, "testdata/schema0")
	if !strings.Contains(readFile(t, filepath.Join(dir, ConfigFile)), `"alpn": [`) ||
		strings.Contains(readFile(t, filepath.Join(dir, ConfigFile)), `"schema"`) {
		t.Fatal("testdata/schema0 is not a schema 0 document with alpn")
	}
	check := func(what string, c *Config) {
		t.Helper()
		pub := &c.Frontends[c.FindFrontend("public")]
		if a := pub.Binds[1].TLS.ALPN; a != nil {
			t.Errorf("%s: public/tls alpn %q, want unset (the old default, migrated)", what, a)
		}
		if a := pub.Binds[2].TLS.ALPN; !slices.Equal(a, []string{"http/1.1", "http/1.0"}) {
			t.Errorf("%s: public/both alpn %q, want kept", what, a)
		}
		if i := c.FindFrontend("tunnel"); i >= 0 { // created by generation 5
			if a := c.Frontends[i].Binds[0].TLS.ALPN; !slices.Equal(a, []string{"http/1.1"}) {
				t.Errorf("%s: tunnel/tls (tcp) alpn %q, want kept", what, a)
			}
		} else if c.Generation == 5 {
			t.Errorf("%s: no tunnel frontend", what)
		}
		if c.Schema != SchemaVersion || !slices.Equal(pub.HTTP.Versions, []string{"1.1", "2"}) || pub.HTTP.H2.MaxFrameSize != DefaultH2MaxFrameSize {
			t.Errorf("%s: schema %d, http %+v: not normalized", what, c.Schema, pub.HTTP)
		}
		if got := OfferedALPN(pub, pub.Binds[1].TLS, true); !slices.Equal(got, []string{"h2", "http/1.1"}) {
			t.Errorf("%s: public/tls offers %q with HTTP/2, want h2, http/1.1", what, got)
		}
	}
	s := openStore(t, dir, "")
	if s.Current().Generation != 5 {
		t.Fatalf("generation %d, want 5", s.Current().Generation)
	}
	check("config.json", s.Current())
	rev, err := s.Revision(4)
	if err != nil {
		t.Fatal(err)
	}
	check("revision 4", rev)

	// The first write after the upgrade stores the migrated document, with
	// its schema; an alpn set then is kept over restarts.
	mustUpdate(t, s, func(c *Config) error {
		c.Frontends[0].Binds[1].TLS.ALPN = []string{"http/1.1"}
		return nil
	})
	if doc := readFile(t, filepath.Join(dir, ConfigFile)); !strings.Contains(doc, `"schema": 1`) {
		t.Fatalf("config.json after a write has no schema:\n%s", doc)
	}
	s2 := openStore(t, dir, "")
	if a := s2.Current().Frontends[0].Binds[1].TLS.ALPN; !slices.Equal(a, []string{"http/1.1"}) {
		t.Fatalf("alpn set after the upgrade read back as %q", a)
	}
	if rev, err := s2.Revision(5); err != nil || rev.Frontends[0].Binds[1].TLS.ALPN != nil {
		t.Fatalf("revision 5 (schema 0) read back with alpn %q (%v)", rev.Frontends[0].Binds[1].TLS.ALPN, err)
	}
}

// TestStoreRefusesNewerSchema: a config.json of a schema this version does
// not know (after a downgrade) stops the start, naming the file; it is not
// read as if its meaning were unchanged.
func TestStoreRefusesNewerSchema(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, "")
	mustUpdate(t, s, addBackend("a"))
	path := filepath.Join(dir, ConfigFile)
	writeTestFile(t, path, strings.Replace(readFile(t, path), `"schema": 1`, `"schema": 2`, 1))
	_, err := Open(dir, "", nil)
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "schema 2") || !strings.Contains(err.Error(), path) {
		t.Fatalf("Open() = %v, want ErrCorrupt naming schema 2 and %s", err, path)
	}
}

// TestMigrateOnlyStoredDocuments: a client's document (a PUT /config
// body, a bootstrap file) has no schema member and is in the current
// format: Normalize stamps it, nothing migrates its alpn. Migrate is what
// loaders of stored documents call, and it is idempotent.
func TestMigrateOnlyStoredDocuments(t *testing.T) {
	doc := func() *Config {
		c := &Config{Frontends: []Frontend{{Name: "fe", Mode: ModeHTTP, Binds: []Bind{
			{Name: "b", Address: "127.0.0.1", Port: 443, TLS: &BindTLS{Certificates: []string{"x"}, ALPN: []string{"http/1.1"}}}}}}}
		return c
	}
	client := doc()
	client.Normalize()
	if client.Schema != SchemaVersion || client.Frontends[0].Binds[0].TLS.ALPN == nil {
		t.Fatalf("client document: schema %d, alpn %q", client.Schema, client.Frontends[0].Binds[0].TLS.ALPN)
	}
	stored := doc()
	for range 2 {
		if err := stored.Migrate(); err != nil {
			t.Fatal(err)
		}
	}
	if stored.Frontends[0].Binds[0].TLS.ALPN != nil {
		t.Fatalf("stored schema 0 document kept alpn %q", stored.Frontends[0].Binds[0].TLS.ALPN)
	}
	current := doc()
	current.Schema = SchemaVersion
	if err := current.Migrate(); err != nil || current.Frontends[0].Binds[0].TLS.ALPN == nil {
		t.Fatalf("stored schema %d document migrated: alpn %q (%v)", SchemaVersion, current.Frontends[0].Binds[0].TLS.ALPN, err)
	}
	// The bootstrap file is a client's document too.
	dir := t.TempDir()
	boot := filepath.Join(t.TempDir(), "boot.json")
	writeTestFile(t, boot, `{"frontends":[{"name":"fe","mode":"http","binds":[{"name":"b","address":"127.0.0.1","port":8080}]}]}`)
	s := openStore(t, dir, boot)
	if s.Current().Schema != SchemaVersion {
		t.Fatalf("bootstrap document schema %d", s.Current().Schema)
	}
}
