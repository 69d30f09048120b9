package main

// The admin listener's security: where it may listen (loopback or a unix
// socket unless tokens exist), optional TLS, and a cap on concurrent
// connections that evicts anonymous ones first (connTable). The
// request-level checks (Host, Origin, tokens, roles, limits) are api's
// (api/auth.go).

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spliced-proxy/spliced/api"
	"github.com/spliced-proxy/spliced/api/tokens"
)

// adminOptions are the admin listener's flags.
type adminOptions struct {
	addr     string
	stateDir string
	store    string   // --store ("" on a single node): where tokens are added
	hosts    []string // --admin-host
	tlsCert  string
	tlsKey   string
	maxBody  int64
	maxConns int

	maxStreams, maxStreamsPerToken int // /api/v1/events

	auditKeep int       // --audit-keep
	auditCopy io.Writer // --audit-syslog

	anonIdle  time.Duration // idle anonymous connections are closed after it
	acmeRetry time.Duration // --acme-retry: core/acme Options.Backoff

	accessLog *accessLogSink // --access-log-*
}

// adminListener is the opened admin listener and what api needs to know
// about it.
type adminListener struct {
	ln     net.Listener
	tokens *tokens.Checker
	open   bool   // no token needed while none exists (loopback or unix)
	bound  string // actual host:port ("" for unix)
	tls    bool
}

// hostList is a repeatable flag that also takes comma-separated lists.
type hostList []string

func (h *hostList) String() string { return strings.Join(*h, ",") }

func (h *hostList) Set(v string) error {
	for _, n := range strings.Split(v, ",") {
		if n = strings.TrimSpace(n); n != "" {
			if strings.ContainsAny(n, "/ \t\r\n@") {
				return fmt.Errorf("invalid host name %q", n)
			}
			*h = append(*h, n)
		}
	}
	return nil
}

// openAdmin opens the admin listener. The admin API can reconfigure every
// listener on the box: without a token it listens only where nobody else
// can reach it, loopback or a unix socket (mode 0600); a non-loopback
// address, or any --admin-host (a proxy in front), needs at least one token
// (checked again on every request, so revoking the last one closes the API
// rather than opening it).
func openAdmin(o adminOptions) (*adminListener, error) {
	chk, err := tokens.NewChecker(o.stateDir)
	if err != nil {
		return nil, fmt.Errorf("admin tokens: %w", err)
	}
	empty, err := chk.Empty()
	if err != nil {
		return nil, fmt.Errorf("admin tokens: %w", err)
	}
	if (o.tlsCert == "") != (o.tlsKey == "") {
		return nil, errors.New("--admin-tls-cert and --admin-tls-key go together")
	}
	al := &adminListener{tokens: chk, tls: o.tlsCert != ""}
	// Where `spliced token add` puts a token this node reads: a cluster
	// node's tokens.json mirrors the store's (edits there are refused).
	where := "--state-dir " + o.stateDir
	if o.store != "" {
		where = "--store " + o.store
	}
	// --admin-host says that clients reach the API under another name: through
	// a proxy in front, whose own clients then share the loopback or unix
	// address. Open (no token) would be open to all of them.
	if len(o.hosts) > 0 && empty {
		return nil, fmt.Errorf("--admin-host %s is given and no admin token exists in %s: the admin API would be "+
			"open to every client of the proxy in front; create one first with "+
			"`spliced token add --role admin --name NAME %s`, or drop --admin-host",
			strings.Join(o.hosts, ","), chk.Path(), where)
	}
	var ln net.Listener
	if path, ok := strings.CutPrefix(o.addr, "unix:"); ok {
		ln, err = listenUnix(path)
		if err != nil {
			return nil, err
		}
		al.open = len(o.hosts) == 0
	} else {
		host, _, err := net.SplitHostPort(o.addr)
		if err != nil {
			return nil, fmt.Errorf("--admin-addr %q: %w (want host:port or unix:/path)", o.addr, err)
		}
		al.open = isLoopback(host) && len(o.hosts) == 0
		if !al.open && empty {
			return nil, fmt.Errorf("--admin-addr %q is not a loopback address and no admin token exists in %s: "+
				"create one first with `spliced token add --role admin --name NAME %s`, "+
				"or keep the admin API on 127.0.0.1 or a unix socket", o.addr, chk.Path(), where)
		}
		ln, err = net.Listen("tcp", o.addr)
		if err != nil {
			return nil, fmt.Errorf("admin listener: %w", err)
		}
		al.bound = ln.Addr().String()
	}
	if o.maxConns > 0 {
		ln = newConnTable(ln, o.maxConns, o.anonIdle)
	}
	if al.tls {
		cert, err := tls.LoadX509KeyPair(o.tlsCert, o.tlsKey)
		if err != nil {
			ln.Close()
			return nil, fmt.Errorf("admin TLS: %w", err)
		}
		ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	}
	al.ln = ln
	return al, nil
}

func listenUnix(path string) (net.Listener, error) {
	if path == "" {
		return nil, errors.New("--admin-addr unix: needs a path")
	}
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSocket != 0 {
		if err := removeStaleSocket(path); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("admin listener: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("admin listener: %w", err)
	}
	return ln, nil
}

// removeStaleSocket removes the socket left at path by a previous run, but
// only when nobody accepts on it any more: a connect refused (ECONNREFUSED)
// is a dead socket; a connect that succeeds is another spliced (or anything
// else) still serving there, whose socket must not be taken away.
func removeStaleSocket(path string) error {
	c, err := net.DialTimeout("unix", path, time.Second)
	if err == nil {
		c.Close()
		return fmt.Errorf("admin listener: %s is served by another process: stop it, or give this one another --admin-addr", path)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("admin listener: %s exists and cannot be probed: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("admin listener: remove stale %s: %w", path, err)
	}
	return nil
}

// connTable is the admin listener's cap on connections (128 idle or slow
// anonymous connections used to make the admin API unreachable). It accepts at most max connections at once; when a new one
// arrives at the cap, it evicts one to admit it, in this order:
//
//  1. the oldest idle anonymous keep-alive: a connection that was served
//     at least one request, none of them admitted;
//  2. the oldest other anonymous connection: one that has sent nothing
//     yet, or is still sending its request (slow headers), or is on a
//     public route (an admin's new connection is the newest of these, so
//     it is the last to go);
//  3. the oldest other connection of a known caller: idle (closing an
//     idle keep-alive is always allowed: HTTP clients retry on a new
//     one), reading its next request, or drained of a body its handler
//     did not read (a viewer trickling unread bodies used to hold every
//     slot for ReadTimeout).
//
// A connection serving an admitted request (a valid token, or the open
// API; from its admission until its handler returns) is never evicted; only when every slot holds one (the event stream
// caps keep that from happening) does a new connection wait. Anonymous
// connections idle for anonIdle are closed. "Admitted" comes from the
// API's guard through api.WithAdmitHook.
type connTable struct {
	net.Listener
	max      int
	anonIdle time.Duration

	mu     sync.Mutex
	cond   *sync.Cond
	conns  map[*adminConn]struct{}
	seq    uint64
	closed bool
}

// adminConn is one admin connection, and its state for eviction.
type adminConn struct {
	net.Conn
	t    *connTable
	seq  uint64 // accept order: lower is older
	once sync.Once

	// under t.mu:
	idle     bool      // nothing read yet, or between requests
	fresh    bool      // nothing read yet
	known    bool      // a request on it was admitted
	busy     bool      // an admitted request's handler runs
	deadline time.Time // anonymous and idle: closed at this time
	timer    *time.Timer
}

func newConnTable(ln net.Listener, max int, anonIdle time.Duration) *connTable {
	t := &connTable{Listener: ln, max: max, anonIdle: anonIdle, conns: map[*adminConn]struct{}{}}
	t.cond = sync.NewCond(&t.mu)
	return t
}

func (t *connTable) Accept() (net.Conn, error) {
	c, err := t.Listener.Accept()
	if err != nil {
		return nil, err
	}
	ac := &adminConn{Conn: c, t: t, idle: true, fresh: true}
	t.mu.Lock()
	for len(t.conns) >= t.max && !t.closed {
		v := t.victimLocked()
		if v == nil {
			t.cond.Wait() // every slot serves an admitted request
			continue
		}
		t.mu.Unlock()
		v.Close()
		t.mu.Lock()
	}
	if t.closed {
		t.mu.Unlock()
		c.Close()
		return nil, net.ErrClosed
	}
	t.seq++
	ac.seq = t.seq
	t.conns[ac] = struct{}{}
	ac.armLocked(time.Now())
	t.mu.Unlock()
	return ac, nil
}

// victimLocked picks the connection to evict (see connTable), nil if none
// may be.
func (t *connTable) victimLocked() *adminConn {
	var best [3]*adminConn
	for c := range t.conns {
		rank := -1
		switch {
		case c.busy:
		case !c.known && c.idle && !c.fresh:
			rank = 0
		case !c.known:
			rank = 1
		default: // known, not serving
			rank = 2
		}
		if rank >= 0 && (best[rank] == nil || c.seq < best[rank].seq) {
			best[rank] = c
		}
	}
	for _, c := range best {
		if c != nil {
			return c
		}
	}
	return nil
}

func (t *connTable) Close() error {
	err := t.Listener.Close()
	t.mu.Lock()
	t.closed = true
	t.cond.Broadcast()
	t.mu.Unlock()
	return err
}

// armLocked starts the anonymous idle timeout of c if it applies.
func (c *adminConn) armLocked(now time.Time) {
	if !c.idle || c.known || c.t.anonIdle <= 0 {
		return
	}
	c.deadline = now.Add(c.t.anonIdle)
	if c.timer == nil {
		c.timer = time.AfterFunc(c.t.anonIdle, c.expire)
	} else {
		c.timer.Reset(c.t.anonIdle)
	}
}

// expire closes c if it is still anonymous and has been idle until its
// deadline (a timer may fire late, after c became active and idle again).
func (c *adminConn) expire() {
	c.t.mu.Lock()
	if !c.idle || c.known {
		c.t.mu.Unlock()
		return
	}
	if left := time.Until(c.deadline); left > 0 {
		c.timer.Reset(left)
		c.t.mu.Unlock()
		return
	}
	c.t.mu.Unlock()
	c.Close()
}

func (c *adminConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.t.mu.Lock()
		delete(c.t.conns, c)
		if c.timer != nil {
			c.timer.Stop()
		}
		c.t.cond.Broadcast()
		c.t.mu.Unlock()
	})
	return err
}

// admitted is the API's hook: a request on c was admitted; it calls
// served when that request's handler has returned.
func (c *adminConn) admitted() (served func()) {
	c.t.mu.Lock()
	c.known, c.busy, c.idle, c.fresh = true, true, false, false
	c.t.mu.Unlock()
	return c.served
}

func (c *adminConn) served() {
	c.t.mu.Lock()
	c.busy = false
	c.t.cond.Broadcast() // an evictable connection for a waiting Accept
	c.t.mu.Unlock()
}

// unwrapConn finds the adminConn under what http.Server hands its hooks
// (a *tls.Conn with --admin-tls-cert).
func unwrapConn(c net.Conn) *adminConn {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	ac, _ := c.(*adminConn)
	return ac
}

// connState is the admin http.Server's ConnState hook.
func connState(c net.Conn, st http.ConnState) {
	ac := unwrapConn(c)
	if ac == nil {
		return
	}
	t := ac.t
	t.mu.Lock()
	defer t.mu.Unlock()
	switch st {
	case http.StateActive:
		ac.idle, ac.fresh = false, false
	case http.StateIdle:
		ac.idle, ac.busy = true, false
		ac.armLocked(time.Now())
		t.cond.Broadcast() // an evictable connection for a waiting Accept
	}
}

// connContext is the admin http.Server's ConnContext hook: it tells the
// API how to report an admitted request on this connection.
func connContext(ctx context.Context, c net.Conn) context.Context {
	if ac := unwrapConn(c); ac != nil {
		return api.WithAdmitHook(ctx, ac.admitted)
	}
	return ctx
}

// adminBoundHosts: with --admin-addr host:0 the kernel picks the port; the
// Host check must know the one it picked.
func adminBoundHosts(al *adminListener) []string {
	if al.bound == "" {
		return nil
	}
	return []string{al.bound}
}
