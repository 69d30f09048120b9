package proxy

import (
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/core/balance"
	"github.com/spliced-proxy/spliced/core/config"
	"github.com/spliced-proxy/spliced/internal/testutil"
)

// The server attempt (attempt.go) is one for every mux: each case below
// runs through a tcp tunnel and through an http request and must behave
// the same in both.

type srvSpec struct {
	addr   *net.TCPAddr
	weight int
}

// attemptFrontend is a frontend (http mode, or tcp) whose backend
// balances with alg over servers, each with maxconn 1, with queue_ms
// queue and one retry.
func attemptFrontend(t *testing.T, http bool, alg string, queue time.Duration, servers ...srvSpec) *Frontend {
	t.Helper()
	one := 1
	cfg := config.Backend{Name: "be", Balance: alg, Retries: &one}
	if http {
		cfg.Mode = config.ModeHTTP
	}
	for i, s := range servers {
		w := s.weight
		cfg.Servers = append(cfg.Servers, &config.Server{Name: "s" + strconv.Itoa(i),
			Address: s.addr.IP.String(), Port: s.addr.Port, Maxconn: 1, Weight: &w})
	}
	cfg.Normalize()
	b, err := balance.Build(&cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	b.QueueTimeout = queue
	be := NewBackend(b, 1, new(Counters))
	fe := &Frontend{Name: "fe", Backend: be, Stats: new(Counters), TunnelTimeout: time.Hour}
	if http {
		fe.HTTP = &HTTPFront{Default: be,
			RequestTimeout: 5 * time.Second, KeepAliveTimeout: 5 * time.Second, ClientTimeout: 5 * time.Second}
	}
	return fe
}

// dialMode connects a client through fe in its mode.
func (e *env) dialMode(fe *Frontend) *net.TCPConn {
	if fe.HTTP != nil {
		return e.dialHTTP(fe)
	}
	c := e.dial(fe)
	c.SetDeadline(time.Now().Add(10 * time.Second))
	return c
}

var attemptModes = []struct {
	name string
	http bool
}{{"tcp", false}, {"http", true}}

// TestServerAttemptSourceWaitsForItsServer: with balance=source the
// client's hashed server at its maxconn makes the next stream of that
// client wait in the queue for that server, not go to the idle one
// (affinity kept); it gets the server once the first ends.
func TestServerAttemptSourceWaitsForItsServer(t *testing.T) {
	for _, m := range attemptModes {
		t.Run(m.name, func(t *testing.T) {
			e := newEnv(t, defaultTuning())
			release := make(chan struct{})
			answer := func(string) string { <-release; return "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok" }
			a, b := newRawOrigin(t, answer), newRawOrigin(t, answer)
			fe := attemptFrontend(t, m.http, "source", time.Minute, srvSpec{a.addr, 1}, srvSpec{b.addr, 1})
			first := e.dialMode(fe)
			sendGET(t, first, "/first")
			testutil.Eventually(t, 5*time.Second, func() bool { return a.conns.Load()+b.conns.Load() == 1 },
				"the first stream at a server")
			hashed, other := a, b
			if b.conns.Load() == 1 {
				hashed, other = b, a
			}
			second := e.dialMode(fe)
			sendGET(t, second, "/second")
			q := fe.Backend.B.Queue()
			testutil.Eventually(t, 5*time.Second, func() bool { return q.Len() == 1 }, "the second stream queued")
			if n := other.conns.Load(); n != 0 {
				t.Fatalf("the other server got %d connections: affinity lost", n)
			}
			close(release)
			if st := readStatus(t, first); st != 200 {
				t.Fatalf("first: %d", st)
			}
			first.Close() // a tunnel holds its slot until it ends
			if st := readStatus(t, second); st != 200 {
				t.Fatalf("second: %d", st)
			}
			if n := other.conns.Load(); n != 0 {
				t.Fatalf("the other server got %d connections", n)
			}
			if n := hashed.conns.Load(); n < 1 {
				t.Fatalf("the hashed server got %d connections", n)
			}
		})
	}
}

// TestServerAttemptSkipsAFullServer: without affinity, a server at its
// maxconn is skipped for another with a free slot, even when the picker
// keeps choosing it (weight 256 against 1): the stream does not queue.
func TestServerAttemptSkipsAFullServer(t *testing.T) {
	for _, m := range attemptModes {
		t.Run(m.name, func(t *testing.T) {
			e := newEnv(t, defaultTuning())
			release := make(chan struct{})
			answer := func(string) string { <-release; return "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok" }
			heavy, light := newRawOrigin(t, answer), newRawOrigin(t, answer)
			fe := attemptFrontend(t, m.http, "roundrobin", time.Minute, srvSpec{heavy.addr, 256}, srvSpec{light.addr, 1})
			first := e.dialMode(fe)
			sendGET(t, first, "/first")
			testutil.Eventually(t, 5*time.Second, func() bool { return heavy.conns.Load() == 1 }, "the first stream at the heavy server")
			second := e.dialMode(fe)
			sendGET(t, second, "/second")
			testutil.Eventually(t, 5*time.Second, func() bool { return light.conns.Load() == 1 },
				"the second stream at the light server (the heavy one is full)")
			if n := fe.Backend.B.Queue().Len(); n != 0 {
				t.Fatalf("%d streams queued", n)
			}
			close(release)
			for _, c := range []*net.TCPConn{first, second} {
				if st := readStatus(t, c); st != 200 {
					t.Fatalf("status %d", st)
				}
			}
		})
	}
}

// TestServerAttemptRetriesAnotherServerWithSource: a connect refused by
// the server a client's address hashes to is retried on another server,
// with balance=source too; in both server orders (the hash picks the
// refusing one in one of them).
func TestServerAttemptRetriesAnotherServerWithSource(t *testing.T) {
	for _, m := range attemptModes {
		t.Run(m.name, func(t *testing.T) {
			e := newEnv(t, defaultTuning())
			ok := newRawOrigin(t, func(string) string { return "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok" })
			refused := testutil.RefusedAddr(t)
			for _, order := range [][2]srvSpec{{{refused, 1}, {ok.addr, 1}}, {{ok.addr, 1}, {refused, 1}}} {
				fe := attemptFrontend(t, m.http, "source", time.Minute, order[0], order[1])
				c := e.dialMode(fe)
				sendGET(t, c, "/")
				if st := readStatus(t, c); st != 200 {
					t.Fatalf("status %d", st)
				}
				c.Close()
			}
		})
	}
}
