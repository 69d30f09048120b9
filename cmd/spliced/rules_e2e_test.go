package main

// End-to-end tests of request and response rules (issue 28): the real
// binary configured through its API, real origins, curl over HTTP/1.1 and
// HTTP/2 (prior knowledge), and the hostile cases of rule documents.

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/internal/e2e"
	"github.com/spliced-proxy/spliced/internal/testutil"
)

// echoHead answers each request with its head as the body, so that a test
// sees what the origin received, and a Server field to rewrite.
func echoHead(_ net.Conn, r *rawReq) string {
	return "HTTP/1.1 200 OK\r\nServer: origin/1.0\r\nContent-Type: text/plain\r\nContent-Length: " + strconv.Itoa(len(r.Head)) + "\r\n\r\n" + r.Head
}

// curlOut runs curl with args and returns its standard output.
func curlOut(t *testing.T, args ...string) string {
	t.Helper()
	args = append([]string{"-s", "--max-time", "10"}, args...)
	out, err := e2e.RunCmd(t, 15*time.Second, exec.Command("curl", args...))
	if err != nil {
		t.Logf("curl %v: %v", args, err)
	}
	return out
}

var e2eRules = map[string]any{
	"request": []any{
		map[string]any{"when": map[string]any{"src": []string{"127.0.0.2/32"}}, "do": map[string]any{"deny": map[string]any{"status": 403, "body": "go away\n"}}},
		map[string]any{"when": map[string]any{"path_prefix": "/private/"}, "do": map[string]any{"deny": map[string]any{}}},
		map[string]any{"when": map[string]any{"path_prefix": "/secure/", "tls": false}, "do": map[string]any{"redirect": map[string]any{"scheme": "https", "code": 301}}},
		map[string]any{"when": map[string]any{"header": map[string]any{"name": "X-Api-Version", "equals": "2"}}, "do": map[string]any{"use_backend": "api"}},
		map[string]any{"do": map[string]any{"set_header": map[string]any{"name": "X-Frontend", "value": "pub"}}},
		map[string]any{"do": map[string]any{"del_header": "X-Internal"}},
		map[string]any{"when": map[string]any{"path_prefix": "/app/"}, "do": map[string]any{"strip_prefix": "/app"}},
	},
	"response": []any{
		map[string]any{"do": map[string]any{"set_header": map[string]any{"name": "Server", "value": "spliced"}}},
		map[string]any{"when": map[string]any{"status": 200, "path_prefix": "/app/"}, "do": map[string]any{"add_header": map[string]any{"name": "Cache-Control", "value": "max-age=60"}}},
	},
}

// TestRulesEndToEnd: an http frontend's request and response rules,
// configured through the API, act on HTTP/1.1 and HTTP/2 requests alike:
// deny by src and by path (PR in the access log), redirect to https,
// use_backend over the default, header set and removed on the way in and
// out, a path prefix stripped; the stats, the metrics and the access log
// count them.
func TestRulesEndToEnd(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("curl is needed (make test installs it)")
	}
	logPath := filepath.Join(t.TempDir(), "access.log")
	in := startSpliced(t, "", "--access-log-file", logPath)
	web := newHTTPOrigin(t, "web", echoHead)
	api := newHTTPOrigin(t, "api", nil)
	port := setupHTTP(t, in, httpSetup{
		backends: []map[string]any{httpBackend("web", "roundrobin", web.server("s1")), httpBackend("api", "roundrobin", api.server("s1"))},
		frontend: map[string]any{"default_backend": "web", "access_log": true},
	})
	in.MustDo(200, "PATCH", "/api/v1/frontends/pub", map[string]any{"rules": e2eRules})
	base := "http://127.0.0.1:" + strconv.Itoa(port)

	for _, proto := range []string{"--http1.1", "--http2-prior-knowledge"} {
		// Rewritten both ways: the origin sees the request the rules made.
		out := curlOut(t, proto, "-i", "-H", "X-Internal: secret", "-H", "X-Frontend: forged", base+"/app/page?x=1")
		if !strings.Contains(out, "GET /page?x=1 HTTP/1.1\r\n") || !strings.Contains(out, "X-Frontend: pub\r\n") ||
			strings.Contains(out, "forged") || strings.Contains(out, "secret") {
			t.Errorf("%s: the origin received %q", proto, out)
		}
		lo := strings.ToLower(out)
		if !strings.Contains(lo, "server: spliced") || strings.Contains(lo, "origin/1.0") || !strings.Contains(lo, "cache-control: max-age=60") {
			t.Errorf("%s: response not rewritten: %q", proto, out)
		}
		// use_backend wins over the default backend.
		if out := curlOut(t, proto, "-H", "X-Api-Version: 2", base+"/x"); out != "api" {
			t.Errorf("%s: use_backend: %q", proto, out)
		}
		// Deny by path, and redirect to https with the path and query kept.
		if out := curlOut(t, proto, "-o", "/dev/null", "-w", "%{http_code}", base+"/private/x"); out != "403" {
			t.Errorf("%s: deny: %q", proto, out)
		}
		if out := curlOut(t, proto, "-o", "/dev/null", "-w", "%{http_code} %{redirect_url}", "-H", "Host: www.example.com:8080", base+"/secure/a?b=c"); out != "301 https://www.example.com/secure/a?b=c" {
			t.Errorf("%s: redirect: %q", proto, out)
		}
	}

	// Deny by source address: a client from 127.0.0.2 gets the rule's answer.
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}, Timeout: 2 * time.Second}
	c, err := d.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	resp, body := readResp(t, bufio.NewReader(c), "GET")
	if resp.StatusCode != 403 || string(body) != "go away\n" {
		t.Fatalf("deny by src: %d %q", resp.StatusCode, body)
	}

	// Stats: per frontend and per rule; metrics; the access log says PR.
	var st struct {
		Frontends []struct {
			Name  string `json:"name"`
			Rules *struct {
				Denied, Redirected, Rewritten int64
				Request                       []struct {
					Index  int    `json:"index"`
					Action string `json:"action"`
					Hits   int64  `json:"hits"`
				} `json:"request"`
			} `json:"rules"`
		} `json:"frontends"`
	}
	in.MustDo(200, "GET", "/api/v1/stats", nil).JSON(t, &st)
	var found bool
	for _, f := range st.Frontends {
		if f.Name != "pub" || f.Rules == nil {
			continue
		}
		found = true
		r := f.Rules
		// 2 protocols x (403 path) + 1 by src; 2 redirects; requests and
		// responses rewritten: 2 x (page req+resp, api req+resp).
		if r.Denied != 3 || r.Redirected != 2 || r.Rewritten != 8 {
			t.Errorf("rule totals: %+v", *r)
		}
		if len(r.Request) != 7 || r.Request[0].Hits != 1 || r.Request[1].Hits != 2 || r.Request[2].Hits != 2 ||
			r.Request[3].Hits != 2 || r.Request[3].Action != "use_backend" || r.Request[6].Hits != 2 {
			t.Errorf("rule hits: %+v", r.Request)
		}
	}
	if !found {
		t.Fatal("no rules in the frontend's stats")
	}
	m := string(in.MustDo(200, "GET", "/metrics", nil).Body)
	for _, want := range []string{
		`spliced_frontend_rule_actions_total{action="denied",frontend="pub"} 3`,
		`spliced_frontend_rule_actions_total{action="redirected",frontend="pub"} 2`,
		`spliced_frontend_rule_hits_total{action="use_backend",frontend="pub",phase="request",rule="3"} 2`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	testutil.Eventually(t, 10*time.Second, func() bool {
		b, _ := os.ReadFile(logPath)
		pr := 0
		for _, l := range strings.Split(string(b), "\n") {
			var e map[string]any
			if json.Unmarshal([]byte(l), &e) == nil && e["termination"] == "PR" {
				pr++
			}
		}
		return pr == 5 // 3 denied, 2 redirected
	}, "5 access-log lines with termination PR")
}

// TestRulesHostileDocuments: rule documents that would inject fields,
// break the framing, or exhaust the proxy are refused with a problem that
// points at the member; 1000 rules (the bound) are accepted and served.
func TestRulesHostileDocuments(t *testing.T) {
	t.Parallel()
	in := startSpliced(t, "")
	web := newHTTPOrigin(t, "web", echoHead)
	port := setupHTTP(t, in, httpSetup{
		backends: []map[string]any{httpBackend("web", "roundrobin", web.server("s1"))},
		frontend: map[string]any{"default_backend": "web"},
	})
	for _, tc := range []struct {
		rule map[string]any
		ptr  string
	}{
		{map[string]any{"do": map[string]any{"set_header": map[string]any{"name": "X-A", "value": "1\r\nX-Injected: 1"}}}, "/rules/request/0/do/set_header/value"},
		{map[string]any{"do": map[string]any{"add_header": map[string]any{"name": "X-A\r\nX-Injected", "value": "1"}}}, "/rules/request/0/do/add_header/name"},
		{map[string]any{"do": map[string]any{"set_header": map[string]any{"name": "Content-Length", "value": "0"}}}, "/rules/request/0/do/set_header/name"},
		{map[string]any{"do": map[string]any{"set_header": map[string]any{"name": "Transfer-Encoding", "value": "chunked"}}}, "/rules/request/0/do/set_header/name"},
		{map[string]any{"do": map[string]any{"del_header": "Host"}}, "/rules/request/0/do/del_header"},
		{map[string]any{"do": map[string]any{"add_header": map[string]any{"name": "X-A", "value": "a\x00b"}}}, "/rules/request/0/do/add_header/value"},
		{map[string]any{"do": map[string]any{"redirect": map[string]any{"location": "https://a/\r\nSet-Cookie: x=1"}}}, "/rules/request/0/do/redirect/location"},
		{map[string]any{"do": map[string]any{"set_path": "/a b"}}, "/rules/request/0/do/set_path"},
		{map[string]any{"when": map[string]any{"src": []string{"not-an-ip"}}, "do": map[string]any{"deny": map[string]any{}}}, "/rules/request/0/when/src/0"},
		{map[string]any{"do": map[string]any{"use_backend": "missing"}}, "/rules/request/0/do/use_backend"},
	} {
		r := in.Do("PATCH", "/api/v1/frontends/pub", map[string]any{"rules": map[string]any{"request": []any{tc.rule}}})
		if r.Status != 422 || !strings.Contains(string(r.Body), `"`+tc.ptr+`"`) {
			t.Errorf("%v: %d %s, want 422 at %s", tc.rule, r.Status, r.Body, tc.ptr)
		}
	}
	// Past the bound: refused.
	many := make([]any, 1001)
	for i := range many {
		many[i] = map[string]any{"when": map[string]any{"path": "/r" + strconv.Itoa(i)}, "do": map[string]any{"deny": map[string]any{}}}
	}
	r := in.Do("PATCH", "/api/v1/frontends/pub", map[string]any{"rules": map[string]any{"request": many}})
	if r.Status != 422 || !strings.Contains(string(r.Body), `"/rules/request"`) {
		t.Fatalf("1001 rules: %d %s", r.Status, r.Body)
	}
	// At the bound: applied, and a request that none matches is served;
	// the last rule still acts.
	in.MustDo(200, "PATCH", "/api/v1/frontends/pub", map[string]any{"rules": map[string]any{"request": many[:1000]}})
	if resp, _ := roundTrip(t, port, "GET /x HTTP/1.1\r\nHost: a\r\n\r\n"); resp.StatusCode != 200 {
		t.Fatalf("1000 non-matching rules: %d", resp.StatusCode)
	}
	if resp, _ := roundTrip(t, port, "GET /r999 HTTP/1.1\r\nHost: a\r\n\r\n"); resp.StatusCode != 403 {
		t.Fatalf("rule 999: %d", resp.StatusCode)
	}
	if strings.Contains(web.received(), "X-Injected") {
		t.Fatal("a field was injected")
	}
}

// TestRulesTCPDenyBySrc: a tcp frontend's rule denies clients from a
// source prefix (the connection is closed, counted, logged PR) and lets
// the others through.
func TestRulesTCPDenyBySrc(t *testing.T) {
	t.Parallel()
	in := startSpliced(t, "")
	origin := testutil.ServeOrigin(t, func(c *net.TCPConn) {
		defer c.Close()
		io.WriteString(c, "hello\n")
	})
	in.MustDo(201, "POST", "/api/v1/backends", map[string]any{"name": "t", "mode": "tcp",
		"servers": []map[string]any{{"name": "s1", "address": "127.0.0.1", "port": origin.Port()}}})
	port := testutil.FreePort(t)
	in.MustDo(201, "POST", "/api/v1/frontends", map[string]any{"name": "t", "mode": "tcp", "default_backend": "t",
		"binds": []map[string]any{{"name": "b1", "address": "127.0.0.1", "port": port}},
		"rules": map[string]any{"request": []any{map[string]any{"when": map[string]any{"src": []string{"127.0.0.3"}}, "do": map[string]any{"deny": map[string]any{}}}}}})
	read := func(local string) string {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}, Timeout: 2 * time.Second}
		c, err := d.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		b, _ := io.ReadAll(c)
		return string(b)
	}
	if got := read("127.0.0.3"); got != "" {
		t.Fatalf("denied client read %q", got)
	}
	if got := read("127.0.0.1"); got != "hello\n" {
		t.Fatalf("allowed client read %q", got)
	}
	var st struct {
		Frontends []struct {
			Name  string `json:"name"`
			Rules *struct {
				Denied int64 `json:"denied"`
			} `json:"rules"`
		} `json:"frontends"`
	}
	in.MustDo(200, "GET", "/api/v1/stats", nil).JSON(t, &st)
	if len(st.Frontends) != 1 || st.Frontends[0].Rules == nil || st.Frontends[0].Rules.Denied != 1 {
		t.Fatalf("stats: %+v", st.Frontends)
	}
}

// TestRulesLimitAction: a rule's limit action counts the requests it
// matches in a limit with track "rules" (over HTTP/1.1 and HTTP/2): past
// its rate they get 429; other requests are not counted.
func TestRulesLimitAction(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("curl is needed (make test installs it)")
	}
	in := startSpliced(t, "")
	web := newHTTPOrigin(t, "web", nil)
	port := setupHTTP(t, in, httpSetup{
		backends: []map[string]any{httpBackend("web", "roundrobin", web.server("s1"))},
		frontend: map[string]any{"default_backend": "web",
			"limits": []any{map[string]any{"name": "login", "req_rate": map[string]any{"count": 3, "period_ms": 60000}, "track": "rules"}},
			"rules":  map[string]any{"request": []any{map[string]any{"when": map[string]any{"path": "/login", "header": map[string]any{"name": "X-Login", "present": true}}, "do": map[string]any{"limit": "login"}}}}},
	})
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	code := func(args ...string) string {
		return curlOut(t, append([]string{"-o", "/dev/null", "-w", "%{http_code}"}, args...)...)
	}
	for i := 0; i < 5; i++ {
		if got := code(base + "/login"); got != "200" { // no X-Login: the rule does not match
			t.Fatalf("GET /login %d: %s", i, got)
		}
	}
	// GETs: curl 7.88 reports an HTTP/2 upload answered early and ended
	// with RST_STREAM NO_ERROR (RFC 9113 §8.1) as an error (exit 92).
	h := "X-Login: 1"
	got := []string{code("-H", h, base+"/login"), code("--http2-prior-knowledge", "-H", h, base+"/login"), code("-H", h, base+"/login"),
		code("--http2-prior-knowledge", "-H", h, base+"/login")}
	if strings.Join(got, " ") != "200 200 200 429" {
		t.Fatalf("GET /login with X-Login: %v, want 200 200 200 429", got)
	}
}
