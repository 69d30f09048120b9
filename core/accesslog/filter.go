package accesslog

import (
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/spliced-proxy/spliced/core/config"
)

// Abnormal says whether r is an entry an operator looks for after an
// incident: the client got a status of 400 or more, or the request (tcp:
// the connection) did not end normally (a termination other than "--":
// aborts, timeouts, refusals, even those with a 2xx status).
func (r *Record) Abnormal() bool { return r.Status >= 400 || r.Termination != "--" }

// ServerSide says whether r is an abnormal entry of the server side — the
// server or the proxy failed, not the client: a 5xx, or an end blamed on
// the server ('S' abort or refusal, 's' timeout) or on the proxy ('P' an
// error it answered, 'R' a resource ran out, 'K' killed by a stop) in any
// phase but the request's ("PR" is the 400 of a malformed request: the
// client's). The other abnormal entries (a 4xx, a client's abort or
// timeout) are the client side's, kept in a ring of their own: cheap bad
// requests or a stream of 404s cannot push a 502 out.
func (r *Record) ServerSide() bool {
	if r.Status >= 500 {
		return true
	}
	t := r.Termination
	if len(t) != 2 {
		return false
	}
	switch t[0] {
	case 'S', 's':
		return true
	case 'P', 'R', 'K':
		return t[1] != 'R'
	}
	return false
}

// Filter selects records, every set field having to match; the zero
// Filter selects them all. ParseFilter reads one from a query string.
type Filter struct {
	// HasStatus selects on the status: StatusMin..StatusMax, inclusive
	// (500..599 for 5xx; 0..0 for none sent: tcp, or the client got
	// nothing).
	HasStatus            bool
	StatusMin, StatusMax int
	// Termination is a two-letter termination state ("SH").
	Termination string
	// Frontend, Backend and Server are names (Server: in any backend).
	Frontend, Backend, Server string
	// Client is the client's address (compared without its zone, an
	// IPv4-mapped IPv6 address as the IPv4 one); ClientPort its port, 0:
	// any.
	Client     netip.Addr
	ClientPort uint16
	clientStr  string // Client's text, set by ParseFilter
	// Since: records of requests (tcp: connections) that began at or
	// after it.
	Since time.Time
	// Abnormal: abnormal records only (Record.Abnormal).
	Abnormal bool
}

// Match says whether f selects r.
func (f *Filter) Match(r *Record) bool {
	if f.HasStatus && (r.Status < f.StatusMin || r.Status > f.StatusMax) {
		return false
	}
	if f.Abnormal && !r.Abnormal() {
		return false
	}
	if f.Termination != "" && r.Termination != f.Termination {
		return false
	}
	if f.Frontend != "" && r.Frontend != f.Frontend || f.Backend != "" && r.Backend != f.Backend ||
		f.Server != "" && r.Server != f.Server {
		return false
	}
	if !f.Since.IsZero() && r.Time.Before(f.Since) {
		return false
	}
	if f.Client.IsValid() && !f.matchClient(r.Client) {
		return false
	}
	return true
}

// matchClient says whether client (netip.AddrPort's text: "192.0.2.7:51234",
// "[2001:db8::1]:443", "[::ffff:192.0.2.7]:1", "[fe80::1%eth0]:80") is
// f's. Its pieces are compared as text, without parsing or allocating:
// Query runs it under the lock on every record kept.
func (f *Filter) matchClient(client string) bool {
	colon := strings.LastIndexByte(client, ':')
	if colon < 0 {
		return false
	}
	host, port := client[:colon], client[colon+1:]
	if len(host) >= 2 && host[0] == '[' && host[len(host)-1] == ']' {
		host = host[1 : len(host)-1]
	}
	if i := strings.IndexByte(host, '%'); i >= 0 {
		host = host[:i]
	}
	if f.ClientPort != 0 && !portIs(port, f.ClientPort) {
		return false
	}
	want := f.clientText()
	if host == want {
		return true
	}
	// An IPv4 client of a dual-stack listener: ::ffff:192.0.2.7.
	return f.Client.Is4() && len(host) == len(mappedPrefix)+len(want) &&
		host[:len(mappedPrefix)] == mappedPrefix && host[len(mappedPrefix):] == want
}

const mappedPrefix = "::ffff:"

// clientText is f.Client as netip writes it (kept by ParseFilter: a
// Filter built otherwise pays one allocation per record).
func (f *Filter) clientText() string {
	if f.clientStr != "" {
		return f.clientStr
	}
	return f.Client.String()
}

// portIs says whether the decimal text s is port.
func portIs(s string, port uint16) bool {
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' || n > 65535 {
			return false
		}
		n = n*10 + int(s[i]-'0')
	}
	return len(s) > 0 && n == int(port)
}

// Query returns the newest limit records that f selects among those
// kept — the last entries and the last abnormal ones of each side, walked
// together from the newest by the order they were kept, a record held by
// two rings seen once — oldest first. Without a filter (and limit at most
// the ring of the last entries) that is the last limit entries; with one
// that selects abnormal records only (a 5xx, a termination, Abnormal),
// the abnormal rings reach back further than the last entries do.
//
// It holds the Log's lock for one pass over the three rings (3 000
// records by default) and the copies of the records it answers: tens of µs, a few
// hundred for a thousand records (BenchmarkQuery). The writer goroutine
// may wait that long; the loops never do (they push to their own rings,
// which the writer drains every 50 ms).
func (l *Log) Query(f Filter, limit int) []Record {
	// Room for the answer is made before the lock is taken: what is
	// left under it is the walk and the copies.
	out := make([]Record, 0, max(0, min(limit, l.Kept())))
	l.mu.Lock()
	rings := [3]*ring{&l.recent, &l.server, &l.client}
	var at [3]int // how many of each ring's newest were walked
	for len(out) < limit {
		// The newest record not walked yet: the highest seq at the
		// rings' heads; a record in two rings is at the head of both.
		var k *kept
		for i, g := range rings {
			if at[i] < g.n {
				if c := g.newest(at[i]); k == nil || c.seq > k.seq {
					k = c
				}
			}
		}
		if k == nil {
			break
		}
		seq := k.seq
		for i, g := range rings {
			if at[i] < g.n && g.newest(at[i]).seq == seq {
				at[i]++
			}
		}
		if f.Match(&k.r) {
			out = append(out, k.r)
		}
	}
	l.mu.Unlock()
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// ParamError is a query parameter ParseFilter refused, with what it
// takes.
type ParamError struct {
	Param, Value, Want string
}

func (e *ParamError) Error() string {
	v := e.Value
	if len(v) > 40 {
		v = v[:40] + "..."
	}
	return fmt.Sprintf("%s must be %s, not %q", e.Param, e.Want, v)
}

// The two letters of a termination state (README, Logs): who ended it,
// in which phase.
const (
	termWho   = "-CSPRKcs"
	termPhase = "-RQCHDL"
)

// ParseFilter reads the filters of GET /api/v1/logs from q: status (a
// class 1xx..5xx, an exact code 100..599, or none), termination (two
// letters), frontend, backend, server (names), client (an address, with
// or without its port), since (RFC 3339), abnormal (0 or 1). An empty
// value is no filter. A value it cannot take is a *ParamError naming
// its parameter.
func ParseFilter(q url.Values) (Filter, error) {
	var f Filter
	if v := q.Get("status"); v != "" {
		bad := &ParamError{Param: "status", Value: v, Want: "a class (1xx to 5xx), a code (100 to 599) or none"}
		switch {
		case v == "none":
			f.HasStatus = true
		case len(v) == 3 && v[0] >= '1' && v[0] <= '5' && (v[1:] == "xx" || v[1:] == "XX"):
			c := int(v[0]-'0') * 100
			f.HasStatus, f.StatusMin, f.StatusMax = true, c, c+99
		default:
			c, err := strconv.Atoi(v)
			if err != nil || c < 100 || c > 599 || len(v) != 3 {
				return f, bad
			}
			f.HasStatus, f.StatusMin, f.StatusMax = true, c, c
		}
	}
	if v := q.Get("termination"); v != "" {
		if len(v) != 2 || !strings.ContainsRune(termWho, rune(v[0])) || !strings.ContainsRune(termPhase, rune(v[1])) {
			return f, &ParamError{Param: "termination", Value: v,
				Want: "two letters: who (" + termWho + ") then the phase (" + termPhase + "), e.g. SH"}
		}
		f.Termination = v
	}
	for _, p := range []struct {
		name string
		to   *string
	}{{"frontend", &f.Frontend}, {"backend", &f.Backend}, {"server", &f.Server}} {
		if v := q.Get(p.name); v != "" {
			if !config.ValidName(v) {
				return f, &ParamError{Param: p.name, Value: v, Want: "a name (1 to 63 of a-z, 0-9, - and _)"}
			}
			*p.to = v
		}
	}
	if v := q.Get("client"); v != "" {
		bad := &ParamError{Param: "client", Value: v, Want: "an IP address, with or without its port (192.0.2.7, 192.0.2.7:51234, [2001:db8::1]:443)"}
		if ap, err := netip.ParseAddrPort(v); err == nil {
			f.Client, f.ClientPort = ap.Addr(), ap.Port()
		} else if a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(v, "["), "]")); err == nil {
			f.Client = a
		} else {
			return f, bad
		}
		f.Client = f.Client.WithZone("").Unmap()
		f.clientStr = f.Client.String()
	}
	if v := q.Get("since"); v != "" {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return f, &ParamError{Param: "since", Value: v, Want: "a time in RFC 3339 (2026-12-01T20:53:44Z)"}
		}
		f.Since = t
	}
	switch v := q.Get("abnormal"); v {
	case "", "0":
	case "1":
		f.Abnormal = true
	default:
		return f, &ParamError{Param: "abnormal", Value: v, Want: "0 or 1"}
	}
	return f, nil
}
