package main

// The admin listener's security: where it may listen (loopback or a unix
// socket unless tokens exist), optional TLS, and a cap on concurrent
// connections. The request-level checks (Host, Origin, tokens, roles,
// limits) are api's (api/auth.go).

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spliced-proxy/spliced/api/tokens"
)

// adminOptions are the admin listener's flags.
type adminOptions struct {
	addr     string
	stateDir string
	hosts    []string // --admin-host
	tlsCert  string
	tlsKey   string
	maxBody  int64
	maxConns int

	maxStreams, maxStreamsPerToken int // /api/v1/events

	auditKeep int       // --audit-keep
	auditCopy io.Writer // --audit-syslog
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
// address needs at least one token (checked again on every request, so
// revoking the last one closes the API rather than opening it).
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
	var ln net.Listener
	if path, ok := strings.CutPrefix(o.addr, "unix:"); ok {
		ln, err = listenUnix(path)
		if err != nil {
			return nil, err
		}
		al.open = true
	} else {
		host, _, err := net.SplitHostPort(o.addr)
		if err != nil {
			return nil, fmt.Errorf("--admin-addr %q: %w (want host:port or unix:/path)", o.addr, err)
		}
		al.open = isLoopback(host)
		if !al.open && empty {
			return nil, fmt.Errorf("--admin-addr %q is not a loopback address and no admin token exists in %s: "+
				"create one first with `spliced token add --role admin --name NAME --state-dir %s`, "+
				"or keep the admin API on 127.0.0.1 or a unix socket", o.addr, chk.Path(), o.stateDir)
		}
		ln, err = net.Listen("tcp", o.addr)
		if err != nil {
			return nil, fmt.Errorf("admin listener: %w", err)
		}
		al.bound = ln.Addr().String()
	}
	if o.maxConns > 0 {
		ln = newLimitListener(ln, o.maxConns)
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

// limitListener accepts at most n connections at once; further ones wait
// in the kernel's backlog until one closes (golang.org/x/net/netutil's
// LimitListener, written out to keep the dependency list short).
type limitListener struct {
	net.Listener
	sem       chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

func newLimitListener(ln net.Listener, n int) *limitListener {
	return &limitListener{Listener: ln, sem: make(chan struct{}, n), done: make(chan struct{})}
}

func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.sem <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	return &limitConn{Conn: c, release: func() { <-l.sem }}, nil
}

func (l *limitListener) Close() error {
	err := l.Listener.Close()
	l.closeOnce.Do(func() { close(l.done) })
	return err
}

type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// adminBoundHosts: with --admin-addr host:0 the kernel picks the port; the
// Host check must know the one it picked.
func adminBoundHosts(al *adminListener) []string {
	if al.bound == "" {
		return nil
	}
	return []string{al.bound}
}
