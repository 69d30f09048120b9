package config

import (
	"strconv"
	"strings"
)

// Limits per client (stick tables, HAProxy's track-sc and sc_*_rate): the
// model, its defaults and its rules. The data plane side is core/stick
// (the tables) and core/proxy/limits.go (where connections and requests
// are counted and refused). This file has nothing to do with limits.go,
// which is the fd budget.

// Keys of a limit: what identifies a client.
const (
	LimitKeySrc  = "src"             // the client's address (the PROXY header's when the bind reads one)
	LimitKeyCert = "tls_client_cert" // the SHA-256 of the client's certificate (TLS binds that verify client certificates)
	// LimitKeyHeaderPrefix + a field name: the value of that request
	// header field ("header:X-Api-Key"); requests without it are not
	// tracked by the limit.
	LimitKeyHeaderPrefix = "header:"
)

// Actions of a limit on a client over it.
const (
	LimitDeny   = "deny"   // 429 with Retry-After at once (tcp: the connection is closed)
	LimitTarpit = "tarpit" // the request is held tarpit_ms, then 429 (HAProxy's tarpit)
)

// Tracking modes of a limit.
const (
	LimitTrackAlways = "always" // every connection and request of the frontend counts
	LimitTrackRules  = "rules"  // only the requests a rule's limit action sends to it
)

// Scopes of a limit.
const (
	LimitScopeNode    = "node"    // each node counts its own clients against the whole limit
	LimitScopeCluster = "cluster" // each node enforces limit / live nodes
)

// Defaults and bounds of limits; each says what it buys.
const (
	// DefaultLimitMaxEntries: 100 000 clients tracked at most per limit,
	// about 13 MB (128 bytes an entry) when every one is used; entries are
	// allocated 8 at a time as keys come, so a quiet limit costs little.
	DefaultLimitMaxEntries = 100000
	// MaxLimitMaxEntries bounds a table to ~512 MB.
	MaxLimitMaxEntries = 4000000
	// MinLimitMaxEntries: a table is made of sets of 8 entries.
	MinLimitMaxEntries = 8
	// DefaultLimitExpireMs: an entry nobody touched for a minute (and
	// twice its longest period) is forgotten first; it holds nothing a
	// rate would still count.
	DefaultLimitExpireMs = 60000
	// DefaultLimitTarpitMs: a tarpitted request waits 5 s (the usual
	// HAProxy timeout tarpit), long enough to slow a scripted client to a
	// crawl, short enough for a person behind a shared address.
	DefaultLimitTarpitMs = 5000
	// MaxLimitsPerFrontend bounds the limits a request may be counted in
	// (a stream keeps a reference to each entry it counted).
	MaxLimitsPerFrontend = 8
	// MaxLimitRateCount bounds a rate's count: the counters saturate at
	// 2^20-1 per period (they are packed with their period in one word).
	MaxLimitRateCount = 1000000
	MinLimitPeriodMs  = 100
	MaxLimitPeriodMs  = 86400000
	MaxLimitExpireMs  = 86400000
	MaxLimitTarpitMs  = 60000
	MaxLimitConnCur   = 1000000
)

// Limit is one per-client limit of a frontend (a stick table and the
// thresholds checked against it). At least one of conn_cur, conn_rate,
// req_rate and err_rate is set. A client over any threshold gets the
// action: at accept for conn_cur and conn_rate (the connection is closed,
// in both modes, before TLS), on each request for req_rate and err_rate.
type Limit struct {
	// Name identifies the limit in its frontend (a rule's limit action,
	// the entries endpoint, the stats).
	Name string `json:"name" validate:"required" example:"per_ip"`
	// Key is what identifies a client: "src" (default), "header:<name>"
	// or "tls_client_cert".
	Key string `json:"key" example:"src"`
	// ConnCur is the connections a client may hold at once (0 = no such
	// limit); key src only.
	ConnCur int `json:"conn_cur" validate:"gte=0,lte=1000000" example:"0"`
	// ConnRate is the new connections a client may open per period
	// (null = no such limit); key src only.
	ConnRate *LimitRate `json:"conn_rate,omitempty"`
	// ReqRate is the requests a client may send per period (http).
	ReqRate *LimitRate `json:"req_rate,omitempty"`
	// ErrRate is the error responses (status >= 400 but the limits' own
	// 429) a client may get per period (http); over it, its requests are
	// refused (HAProxy's http_err_rate: a scanner).
	ErrRate *LimitRate `json:"err_rate,omitempty"`
	// Action is "deny" (default: 429 with Retry-After; tcp: close) or
	// "tarpit" (hold the request tarpit_ms, then 429).
	Action string `json:"action" validate:"oneof=deny tarpit" enums:"deny,tarpit" example:"deny"`
	// TarpitMs is how long action tarpit holds a request (default 5000
	// with tarpit, 1-60000).
	TarpitMs int `json:"tarpit_ms" validate:"gte=0,lte=60000" example:"0"`
	// MaxEntries bounds the clients tracked (default 100000, 8-4000000,
	// rounded down to a multiple of 8); past it the least recently seen
	// client of the key's set of 8 is forgotten first.
	MaxEntries int `json:"max_entries" validate:"gte=8,lte=4000000" example:"100000"`
	// ExpireMs forgets a client not seen for that long (default the
	// larger of 60000 and twice the longest period; at least the longest
	// period). A client holding connections is never forgotten.
	ExpireMs int `json:"expire_ms" validate:"gte=1000,lte=86400000" example:"60000"`
	// Track is "always" (default: every connection and request of the
	// frontend) or "rules" (only requests a rule's limit action sends).
	Track string `json:"track" validate:"oneof=always rules" enums:"always,rules" example:"always"`
	// Scope is "node" (default: each node counts its own clients against
	// the whole limit) or "cluster" (each node enforces the limit divided
	// by the number of live nodes, at least 1).
	Scope string `json:"scope" validate:"oneof=node cluster" enums:"node,cluster" example:"node"`
}

// LimitRate is a rate threshold: count events per period_ms, counted over
// a sliding window (HAProxy's freq_ctr: the current period and the
// previous one, weighted by the part of it still in the window).
type LimitRate struct {
	Count    int `json:"count" validate:"gte=1,lte=1000000" example:"100"`
	PeriodMs int `json:"period_ms" validate:"gte=100,lte=86400000" example:"10000"`
}

// longestPeriod is the longest period_ms of l's rates (0 when none).
func (l *Limit) longestPeriod() int {
	m := 0
	for _, r := range []*LimitRate{l.ConnRate, l.ReqRate, l.ErrRate} {
		if r != nil && r.PeriodMs > m {
			m = r.PeriodMs
		}
	}
	return m
}

// HeaderName is the field name of a "header:<name>" key, "" for others.
func (l *Limit) HeaderName() string {
	name, ok := strings.CutPrefix(l.Key, LimitKeyHeaderPrefix)
	if !ok {
		return ""
	}
	return name
}

// normalize fills a limit's defaults.
func (l *Limit) normalize() {
	if l.Key == "" {
		l.Key = LimitKeySrc
	}
	if l.Action == "" {
		l.Action = LimitDeny
	}
	if l.Action == LimitTarpit {
		def(&l.TarpitMs, DefaultLimitTarpitMs)
	}
	def(&l.MaxEntries, DefaultLimitMaxEntries)
	def(&l.ExpireMs, max(DefaultLimitExpireMs, min(2*l.longestPeriod(), MaxLimitExpireMs)))
	if l.Track == "" {
		l.Track = LimitTrackAlways
	}
	if l.Scope == "" {
		l.Scope = LimitScopeNode
	}
}

func (l *Limit) clone() Limit {
	out := *l
	for _, p := range []**LimitRate{&out.ConnRate, &out.ReqRate, &out.ErrRate} {
		if *p != nil {
			r := **p
			*p = &r
		}
	}
	return out
}

func cloneLimits(ls []Limit) []Limit {
	if ls == nil {
		return nil
	}
	out := make([]Limit, len(ls))
	for i := range ls {
		out[i] = ls[i].clone()
	}
	return out
}

// FindLimit returns the index of the limit named name in f, -1 if none.
func (f *Frontend) FindLimit(name string) int {
	for i := range f.Limits {
		if f.Limits[i].Name == name {
			return i
		}
	}
	return -1
}

// limits checks the limits of frontend f (at fp) beyond the field rules.
func (v *validation) limits(fp string, f *Frontend) {
	if len(f.Limits) > MaxLimitsPerFrontend {
		v.p.addf(fp+"/limits", CodeOutOfRange, "a frontend has at most %d limits", MaxLimitsPerFrontend)
	}
	names := uniqueNames{}
	for i := range f.Limits {
		l := &f.Limits[i]
		lp := fp + "/limits/" + strconv.Itoa(i)
		v.name(lp+"/name", "limit", l.Name)
		names.check(v.p, lp+"/name", "limit", l.Name)
		switch {
		case l.Key == LimitKeySrc:
		case l.Key == LimitKeyCert:
			if !frontendVerifiesClients(f) {
				v.p.add(lp+"/key", CodeModeMismatch, "key tls_client_cert needs a bind whose tls verifies client certificates (client_ca)")
			}
		case strings.HasPrefix(l.Key, LimitKeyHeaderPrefix):
			name := l.HeaderName()
			if name == "" || !validFieldName(name) {
				v.p.addf(lp+"/key", CodeFormat, "%q: a header key is \"header:\" and a field name (letters, digits and !#$%%&'*+-.^_`|~)", truncateString(l.Key, 80))
			} else if f.Mode != ModeHTTP {
				v.p.add(lp+"/key", CodeModeMismatch, "a header key needs an http frontend")
			}
		default:
			v.p.addf(lp+"/key", CodeOneOf, `%q: key must be "src", "tls_client_cert" or "header:<field name>"`, truncateString(l.Key, 80))
		}
		conn := l.ConnCur > 0 || l.ConnRate != nil
		if conn && l.Key != LimitKeySrc {
			ptr := lp + "/conn_cur"
			if l.ConnCur == 0 {
				ptr = lp + "/conn_rate"
			}
			v.p.add(ptr, CodeModeMismatch, "conn_cur and conn_rate count connections at accept, where only the key src is known")
		}
		if conn && l.Track == LimitTrackRules {
			ptr := lp + "/conn_cur"
			if l.ConnCur == 0 {
				ptr = lp + "/conn_rate"
			}
			v.p.add(ptr, CodeModeMismatch, `conn_cur and conn_rate are counted at accept: track "rules" (requests) cannot count them`)
		}
		if f.Mode != ModeHTTP {
			if l.ReqRate != nil {
				v.p.add(lp+"/req_rate", CodeModeMismatch, "req_rate counts http requests: a tcp frontend has none")
			}
			if l.ErrRate != nil {
				v.p.add(lp+"/err_rate", CodeModeMismatch, "err_rate counts http error responses: a tcp frontend has none")
			}
			if l.Track == LimitTrackRules {
				v.p.add(lp+"/track", CodeModeMismatch, `track "rules" needs an http frontend (rules send requests to a limit)`)
			}
			if l.Action == LimitTarpit {
				v.p.add(lp+"/action", CodeModeMismatch, "tarpit holds http requests: a tcp frontend's connections over a limit are closed (deny)")
			}
		}
		if !conn && l.ReqRate == nil && l.ErrRate == nil {
			v.p.add(lp, CodeRequired, "a limit sets at least one of conn_cur, conn_rate, req_rate and err_rate")
		}
		if p := l.longestPeriod(); p > 0 && l.ExpireMs < p && l.ExpireMs >= 1000 {
			v.p.addf(lp+"/expire_ms", CodeOutOfRange, "must be at least the longest period_ms (%d): an entry must outlive what its rates count", p)
		}
	}
}

// frontendVerifiesClients: some bind of f asks clients for a certificate.
func frontendVerifiesClients(f *Frontend) bool {
	for i := range f.Binds {
		if t := f.Binds[i].TLS; t != nil && t.ClientCA != "" {
			return true
		}
	}
	return false
}

// validFieldName: an HTTP field name (RFC 9110 token).
func validFieldName(s string) bool {
	if len(s) == 0 || len(s) > 256 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isTchar(s[i]) {
			return false
		}
	}
	return true
}
