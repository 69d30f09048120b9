package rules

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"

	"github.com/spliced-proxy/spliced/core/config"
	"github.com/spliced-proxy/spliced/core/http1"
)

// reqEnv parses a request head and fills an Env as the proxy does.
func reqEnv(t testing.TB, raw string) (*Env, *http1.Request, []byte) {
	t.Helper()
	buf := []byte(raw)
	r := &http1.Request{}
	r.Reset()
	n, err := r.Parse(buf)
	if err != nil || n == 0 {
		t.Fatalf("parse %q: %d %v", raw, n, err)
	}
	e := &Env{Buf: buf, Head: &r.Head, Method: r.Method.Bytes(buf), Src: netip.MustParseAddr("192.0.2.7")}
	if r.HasHost {
		h := r.Host.Bytes(buf)
		if i := bytes.LastIndexByte(h, ':'); i >= 0 && !bytes.HasSuffix(h, []byte("]")) {
			h = h[:i]
		}
		e.Host = h
	}
	p := r.Target.Bytes(buf)
	if i := bytes.IndexByte(p, '?'); i >= 0 {
		p, e.Query = p[:i], p[i+1:]
	}
	var scratch []byte
	e.Path = http1.NormPath(p, &scratch)
	return e, r, buf
}

func compile(t testing.TB, phase, js string) *Set {
	t.Helper()
	var f config.Frontend
	if err := config.DecodeBytes([]byte(`{"name":"f","mode":"http","rules":{"`+phase+`":`+js+`}}`), &f); err != nil {
		t.Fatalf("decode %s: %v", js, err)
	}
	list := f.Rules.Request
	if phase == config.PhaseResponse {
		list = f.Rules.Response
	}
	s, err := Compile(phase, list, 2)
	if err != nil {
		t.Fatalf("compile %s: %v", js, err)
	}
	return s
}

func eval(s *Set, e *Env) Result {
	res := Result{Hits: make([]uint64, s.Words())}
	s.Eval(e, &res, 0)
	return res
}

const getReq = "GET /api/v1/users?id=42&debug HTTP/1.1\r\nHost: www.Example.com:8080\r\nX-Api-Key: secret-123\r\nAccept: */*\r\n\r\n"

func TestConditions(t *testing.T) {
	for _, tc := range []struct {
		when string
		want bool
	}{
		{`{}`, true},
		{`{"host":"www.example.com"}`, true},
		{`{"host":"example.com"}`, false},
		{`{"host":"*.example.com"}`, true},
		{`{"host":"*.www.example.com"}`, false},
		{`{"path":"/api/v1/users"}`, true},
		{`{"path":"/api/v1"}`, false},
		{`{"path_prefix":"/api/"}`, true},
		{`{"path_prefix":"/%61pi/"}`, true}, // normalised as routes
		{`{"path_prefix":"/admin"}`, false},
		{`{"method":"GET"}`, true},
		{`{"method":"get"}`, false},
		{`{"header":{"name":"x-api-key","equals":"secret-123"}}`, true},
		{`{"header":{"name":"X-Api-Key","equals":"secret"}}`, false},
		{`{"header":{"name":"X-Api-Key","prefix":"secret"}}`, true},
		{`{"header":{"name":"X-Api-Key","prefix":"Secret"}}`, false},
		{`{"header":{"name":"accept","present":true}}`, true},
		{`{"header":{"name":"cookie","present":true}}`, false},
		{`{"query":{"name":"id","equals":"42"}}`, true},
		{`{"query":{"name":"id","equals":"4"}}`, false},
		{`{"query":{"name":"debug"}}`, true},
		{`{"query":{"name":"debug","equals":""}}`, true},
		{`{"query":{"name":"i"}}`, false},
		{`{"src":["192.0.2.0/24"]}`, true},
		{`{"src":["10.0.0.0/8","192.0.2.7"]}`, true},
		{`{"src":["10.0.0.0/8"]}`, false},
		{`{"src":["::ffff:192.0.2.0/120"]}`, true},
		{`{"tls":false}`, true},
		{`{"tls":true}`, false},
		{`{"sni":"www.example.com"}`, false},
		{`{"not":{"method":"POST"}}`, true},
		{`{"not":{"method":"GET"}}`, false},
		{`{"method":"GET","not":{"src":["192.0.2.0/24"]}}`, false},
		{`{"not":{"not":{"host":"www.example.com"}}}`, true},
		{`{"method":"GET","path_prefix":"/api/","host":"*.example.com"}`, true},
		{`{"method":"GET","path_prefix":"/web/"}`, false},
	} {
		s := compile(t, "request", `[{"when":`+tc.when+`,"do":{"use_backend":"b"}}]`)
		e, _, _ := reqEnv(t, getReq)
		if got := eval(s, e).Backend == 0; got != tc.want {
			t.Errorf("when %s: match %v, want %v", tc.when, got, tc.want)
		}
	}
}

func TestTLSAndSNI(t *testing.T) {
	s := compile(t, "request", `[{"when":{"tls":true,"sni":"*.example.com"},"do":{"deny":{}}}]`)
	e, _, _ := reqEnv(t, getReq)
	e.TLS, e.SNI = true, []byte("API.example.com")
	if eval(s, e).Stop != 0 {
		t.Fatal("tls+sni did not match")
	}
	e.SNI = []byte("example.com")
	if eval(s, e).Stop != -1 {
		t.Fatal("*.example.com matched example.com")
	}
}

func TestOrderFirstDenyOrRedirectEnds(t *testing.T) {
	s := compile(t, "request", `[
		{"do":{"set_header":{"name":"X-A","value":"1"}}},
		{"when":{"method":"POST"},"do":{"deny":{}}},
		{"do":{"use_backend":"one"}},
		{"do":{"use_backend":"two"}},
		{"when":{"path_prefix":"/api/"},"do":{"redirect":{"scheme":"https"}}},
		{"do":{"set_header":{"name":"X-B","value":"2"}}}
	]`)
	e, _, _ := reqEnv(t, getReq)
	res := eval(s, e)
	if res.Stop != 4 || res.Backend != 2 || !res.Rewrites {
		t.Fatalf("stop %d backend %d rewrites %v, want 4 2 true", res.Stop, res.Backend, res.Rewrites)
	}
	if hit(res.Hits, 5) {
		t.Fatal("a rule after the redirect acted")
	}
	if got := s.Hits(); got[0] != 1 || got[1] != 0 || got[2] != 1 || got[3] != 0 || got[4] != 1 || got[5] != 0 {
		t.Fatalf("hits %v", got)
	}
}

func TestHeaderActions(t *testing.T) {
	s := compile(t, "request", `[
		{"do":{"add_header":{"name":"X-Added","value":"a"}}},
		{"do":{"set_header":{"name":"accept","value":"text/html"}}},
		{"do":{"del_header":"X-Api-Key"}},
		{"do":{"add_header":{"name":"X-Twice","value":"1"}}},
		{"do":{"add_header":{"name":"X-Twice","value":"2"}}},
		{"do":{"add_header":{"name":"X-Gone","value":"1"}}},
		{"do":{"del_header":"x-gone"}},
		{"when":{"method":"PUT"},"do":{"del_header":"Host-Name"}}
	]`)
	e, r, buf := reqEnv(t, getReq)
	res := eval(s, e)
	f := s.Filter(res.Hits)
	d := r.AppendEndToEndFilter(nil, buf, 0, nil, &f)
	d = s.AppendFields(d, res.Hits)
	want := "Host: www.Example.com:8080\r\nX-Added: a\r\naccept: text/html\r\nX-Twice: 1\r\nX-Twice: 2\r\n"
	if string(d) != want {
		t.Fatalf("head\n%q\nwant\n%q", d, want)
	}
	if n := s.FieldsLen(res.Hits); n < len(d)-len("Host: www.Example.com:8080\r\n") {
		t.Fatalf("FieldsLen %d below what was appended", n)
	}
}

func TestPathActions(t *testing.T) {
	for _, tc := range []struct{ rules, path, want string }{
		{`[{"do":{"strip_prefix":"/api"}}]`, "/api/v1/x", "/v1/x"},
		{`[{"do":{"strip_prefix":"/api/"}}]`, "/api/v1/x", "/v1/x"},
		{`[{"do":{"strip_prefix":"/api"}}]`, "/api", "/"},
		{`[{"do":{"strip_prefix":"/api"}}]`, "/apix/y", "/apix/y"},
		{`[{"do":{"set_path":"/index.html"}}]`, "/anything", "/index.html"},
		{`[{"do":{"set_path":"/v2/x"}},{"do":{"strip_prefix":"/v2"}}]`, "/v1", "/x"},
		{`[{"when":{"path":"/old"},"do":{"set_path":"/new"}}]`, "/other", "/other"},
	} {
		s := compile(t, "request", tc.rules)
		e, _, _ := reqEnv(t, "GET "+tc.path+"?q=1 HTTP/1.1\r\nHost: a\r\n\r\n")
		res := eval(s, e)
		if got := string(s.Path(e.Path, res.Hits)); got != tc.want {
			t.Errorf("%s on %s: %q, want %q", tc.rules, tc.path, got, tc.want)
		}
	}
}

func TestAnswers(t *testing.T) {
	s := compile(t, "request", `[
		{"when":{"path":"/a"},"do":{"deny":{"status":429,"body":"slow down"}}},
		{"when":{"path":"/b"},"do":{"deny":{}}},
		{"when":{"path":"/c"},"do":{"redirect":{"scheme":"https"}}},
		{"when":{"path":"/d"},"do":{"redirect":{"scheme":"https","port":8443,"code":308}}},
		{"when":{"path":"/e"},"do":{"redirect":{"location":"https://example.net/x","code":301}}}
	]`)
	for _, tc := range []struct {
		path, want string
	}{
		{"/a", "HTTP/1.1 429 Too Many Requests\r\nContent-Type: text/plain\r\nContent-Length: 9\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\nslow down"},
		{"/b", "HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nContent-Length: 14\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\n403 Forbidden\n"},
		{"/c", "HTTP/1.1 302 Found\r\nLocation: https://www.example.com/c?q=1" + redirectEnd},
		{"/d", "HTTP/1.1 308 Permanent Redirect\r\nLocation: https://www.example.com:8443/d?q=1" + redirectEnd},
		{"/e", "HTTP/1.1 301 Moved Permanently\r\nLocation: https://example.net/x" + redirectEnd},
	} {
		e, r, buf := reqEnv(t, "GET "+tc.path+"?q=1 HTTP/1.1\r\nHost: www.example.com:80\r\n\r\n")
		res := eval(s, e)
		if res.Stop < 0 {
			t.Fatalf("%s: no answer", tc.path)
		}
		d, ok := s.AppendAnswer(make([]byte, 0, 1024), res.Stop, e.Host, r.Target.Bytes(buf))
		if !ok || string(d) != tc.want {
			t.Errorf("%s: %v\n%q\nwant\n%q", tc.path, ok, d, tc.want)
		}
		if _, ok := s.AppendAnswer(make([]byte, 0, 20), res.Stop, e.Host, r.Target.Bytes(buf)); ok {
			t.Errorf("%s: an answer larger than the buffer was written", tc.path)
		}
	}
}

func TestResponseRulesSeeTheRequest(t *testing.T) {
	s := compile(t, "response", `[
		{"when":{"path_prefix":"/static/","status":200},"do":{"set_header":{"name":"Cache-Control","value":"max-age=3600"}}},
		{"when":{"not":{"method":"GET"}},"do":{"del_header":"Server"}},
		{"when":{"header":{"name":"Server","prefix":"Apache"}},"do":{"deny":{"status":502}}}
	]`)
	if !s.Precomputes() {
		t.Fatal("response rules with request members do not precompute")
	}
	e, _, _ := reqEnv(t, "GET /static/a.css HTTP/1.1\r\nHost: a\r\n\r\n")
	pre := make([]uint64, s.Words())
	s.Precompute(e, pre)

	rbuf := []byte("HTTP/1.1 200 OK\r\nServer: nginx\r\nContent-Length: 0\r\n\r\n")
	resp := &http1.Response{}
	resp.Reset()
	if n, err := resp.Parse(rbuf, http1.MethodGET); n == 0 || err != nil {
		t.Fatal(n, err)
	}
	re := &Env{Buf: rbuf, Head: &resp.Head, Status: resp.Status, Pre: pre}
	res := eval(s, re)
	if res.Stop != -1 || !hit(res.Hits, 0) || hit(res.Hits, 1) {
		t.Fatalf("stop %d hits %b", res.Stop, res.Hits)
	}
	rbuf2 := []byte("HTTP/1.1 200 OK\r\nServer: Apache/2\r\nContent-Length: 0\r\n\r\n")
	resp.Reset()
	resp.Parse(rbuf2, http1.MethodGET)
	re = &Env{Buf: rbuf2, Head: &resp.Head, Status: resp.Status, Pre: pre}
	if res := eval(s, re); res.Stop != 2 {
		t.Fatalf("deny by response header: stop %d", res.Stop)
	}
}

func TestCompileRefusesWhatValidationRefuses(t *testing.T) {
	for _, js := range []string{
		`[{"do":{"set_header":{"name":"X-A\r\nX-Evil","value":"1"}}}]`,
		`[{"do":{"set_header":{"name":"X-A","value":"1\r\nX-Evil: 2"}}}]`,
		`[{"do":{"add_header":{"name":"X-A","value":"a\u0000b"}}}]`,
		`[{"do":{"del_header":"bad name"}}]`,
		`[{"do":{}}]`,
		`[{"do":{"deny":{},"use_backend":"x"}}]`,
	} {
		var f config.Frontend
		if err := config.DecodeBytes([]byte(`{"name":"f","rules":{"request":`+js+`}}`), &f); err != nil {
			t.Fatal(err)
		}
		if _, err := Compile("request", f.Rules.Request, 1); err == nil {
			t.Errorf("%s compiled", js)
		}
	}
	big := make([]config.Rule, config.MaxRulesPerPhase+1)
	if _, err := Compile("request", big, 1); err == nil {
		t.Error("more than MaxRulesPerPhase rules compiled")
	}
}

func TestValidationPointers(t *testing.T) {
	for _, tc := range []struct{ rules, ptr string }{
		{`{"request":[{"do":{"set_header":{"name":"Content-Length","value":"0"}}}]}`, "/frontends/0/rules/request/0/do/set_header/name"},
		{`{"request":[{"do":{"set_header":{"name":"transfer-encoding","value":"chunked"}}}]}`, "/frontends/0/rules/request/0/do/set_header/name"},
		{`{"response":[{"do":{"del_header":"Connection"}}]}`, "/frontends/0/rules/response/0/do/del_header"},
		{`{"request":[{"do":{"add_header":{"name":"Host","value":"evil"}}}]}`, "/frontends/0/rules/request/0/do/add_header/name"},
		{`{"request":[{"do":{"add_header":{"name":"X-A","value":"v\r\nX-Evil: 1"}}}]}`, "/frontends/0/rules/request/0/do/add_header/value"},
		{`{"request":[{"do":{"add_header":{"name":"X:A","value":"v"}}}]}`, "/frontends/0/rules/request/0/do/add_header/name"},
		{`{"request":[{"do":{"deny":{"status":200}}}]}`, "/frontends/0/rules/request/0/do/deny/status"},
		{`{"request":[{"do":{"redirect":{"scheme":"ftp"}}}]}`, "/frontends/0/rules/request/0/do/redirect/scheme"},
		{`{"request":[{"do":{"redirect":{"scheme":"https","code":303}}}]}`, "/frontends/0/rules/request/0/do/redirect/code"},
		{`{"request":[{"do":{"use_backend":"nope"}}]}`, "/frontends/0/rules/request/0/do/use_backend"},
		{`{"request":[{"when":{"src":["10.0.0.1/8"]},"do":{"deny":{}}}]}`, "/frontends/0/rules/request/0/when/src/0"},
		{`{"request":[{"when":{"status":404},"do":{"deny":{}}}]}`, "/frontends/0/rules/request/0/when/status"},
		{`{"request":[{"when":{"header":{"name":"a","equals":"1","present":true}},"do":{"deny":{}}}]}`, "/frontends/0/rules/request/0/when/header"},
		{`{"request":[{"when":{"not":{"not":{"not":{"not":{"not":{"method":"GET"}}}}}},"do":{"deny":{}}}]}`, "/frontends/0/rules/request/0/when/not/not/not/not/not"},
		{`{"response":[{"do":{"redirect":{"scheme":"https"}}}]}`, "/frontends/0/rules/response/0/do/redirect"},
		{`{"request":[{"do":{"set_path":"relative"}}]}`, "/frontends/0/rules/request/0/do/set_path"},
		{`{"request":[{"do":{"set_header":{"name":"X-A","value":"` + strings.Repeat("v", config.MaxRuleValue+1) + `"}}}]}`, "/frontends/0/rules/request/0/do/set_header/value"},
		{`{"request":[` + strings.Repeat(`{"do":{"del_header":"X-A"}},`, config.MaxRulesPerPhase) + `{"do":{"del_header":"X-A"}}]}`, "/frontends/0/rules/request"},
	} {
		doc := `{"backends":[{"name":"web","mode":"http"}],"frontends":[{"name":"f","mode":"http","default_backend":"web","binds":[],"rules":` + tc.rules + `}]}`
		var c config.Config
		if err := config.DecodeBytes([]byte(doc), &c); err != nil {
			t.Fatalf("%s: %v", tc.rules[:min(len(tc.rules), 100)], err)
		}
		c.Normalize()
		err := config.Validate(&c, config.Env{})
		ve, _ := err.(*config.ValidationError)
		found := false
		if ve != nil {
			for _, fe := range ve.Errors {
				found = found || fe.Field == tc.ptr
			}
		}
		if !found {
			t.Errorf("%s: want an error at %s, got %v", tc.rules[:min(len(tc.rules), 100)], tc.ptr, err)
		}
	}
}

func TestTCPFrontendRules(t *testing.T) {
	doc := `{"backends":[{"name":"t","mode":"tcp"}],"frontends":[{"name":"f","mode":"tcp","default_backend":"t","binds":[],"rules":` +
		`{"request":[{"when":{"src":["10.0.0.0/8"],"sni":"a.example"},"do":{"deny":{}}},{"when":{"path":"/x"},"do":{"deny":{}}},{"do":{"set_header":{"name":"X","value":"1"}}}],` +
		`"response":[{"do":{"deny":{}}}]}}]}`
	var c config.Config
	if err := config.DecodeBytes([]byte(doc), &c); err != nil {
		t.Fatal(err)
	}
	c.Normalize()
	ve, _ := config.Validate(&c, config.Env{}).(*config.ValidationError)
	if ve == nil {
		t.Fatal("tcp rules with http members validated")
	}
	want := map[string]bool{
		"/frontends/0/rules/request/1/when/path":     true,
		"/frontends/0/rules/request/2/do/set_header": true,
		"/frontends/0/rules/response":                true,
	}
	for _, fe := range ve.Errors {
		if !want[fe.Field] {
			t.Errorf("unexpected error %s: %s", fe.Field, fe.Message)
		}
		delete(want, fe.Field)
	}
	if len(want) > 0 {
		t.Errorf("missing errors at %v", want)
	}
}

func TestValidationLimitReference(t *testing.T) {
	for _, tc := range []struct {
		limits, action, ptr string
	}{
		{`[{"name":"per_ip","req_rate":{"count":10,"period_ms":1000},"track":"rules"}]`, `"per_ip"`, ""},
		{`[{"name":"per_ip","req_rate":{"count":10,"period_ms":1000}}]`, `"per_ip"`, "/frontends/0/rules/request/0/do/limit"},
		{`[]`, `"nope"`, "/frontends/0/rules/request/0/do/limit"},
	} {
		doc := `{"backends":[{"name":"web","mode":"http"}],"frontends":[{"name":"f","mode":"http","default_backend":"web","binds":[],` +
			`"limits":` + tc.limits + `,"rules":{"request":[{"do":{"limit":` + tc.action + `}}]}}]}`
		var c config.Config
		if err := config.DecodeBytes([]byte(doc), &c); err != nil {
			t.Fatal(err)
		}
		c.Normalize()
		err := config.Validate(&c, config.Env{})
		if tc.ptr == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.limits, err)
			}
			continue
		}
		ve, _ := err.(*config.ValidationError)
		if ve == nil || len(ve.Errors) != 1 || ve.Errors[0].Field != tc.ptr {
			t.Errorf("%s %s: %v, want one error at %s", tc.limits, tc.action, err, tc.ptr)
		}
	}
}
