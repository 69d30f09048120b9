package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/spliced-proxy/spliced/core"
	"github.com/spliced-proxy/spliced/core/config"
	"github.com/spliced-proxy/spliced/core/stats"
)

// Server-sent events: the hub fans events out to subscribers, each with a
// bounded channel; a send that would block drops the subscriber (its
// stream ends, the client reconnects), so a slow reader never delays a
// write, the stats tick or another client.

const (
	eventQueue     = 64               // events buffered per client
	statsTick      = time.Second      // period of the stats event
	heartbeatEvery = 15 * time.Second // comment line keeping proxies from timing out
	eventWriteWait = 10 * time.Second // a client that takes longer for one write is dropped

	// tokenRecheckEvery: a stream rechecks its token this often, so a
	// revoked token's streams end within a second (a stat of the token
	// file, re-read only when it changed).
	tokenRecheckEvery = 250 * time.Millisecond
)

// Default caps on open /api/v1/events streams (Options): each holds an
// admin connection for as long as it lasts, and the admin listener cannot
// evict it, so they stay well below --admin-max-conns (128).
const (
	DefaultMaxEventStreams         = 32
	DefaultMaxEventStreamsPerToken = 4
)

type subscriber struct {
	ch   chan []byte
	gone chan struct{} // closed when the hub dropped it
}

type eventHub struct {
	core core.Control
	log  *slog.Logger
	// remote tells the generations this node adopted from a cluster
	// store (nil on a single node: every generation is a local write).
	remote *adoptions

	mu   sync.Mutex
	subs map[*subscriber]struct{}
	stop chan struct{} // closes the ticker goroutine; nil when none runs

	// Stream caps: open streams in all and per actor (token name, or
	// "local" on an open API).
	maxStreams, maxPerToken int
	streams                 int
	perToken                map[string]int
}

// setLimits sets the stream caps (0: the default).
func (h *eventHub) setLimits(total, perToken int) {
	if total <= 0 {
		total = DefaultMaxEventStreams
	}
	if perToken <= 0 {
		perToken = DefaultMaxEventStreamsPerToken
	}
	h.mu.Lock()
	h.maxStreams, h.maxPerToken = total, perToken
	h.mu.Unlock()
}

// acquire takes a stream slot for who; an *apiError when a cap is reached:
// 429 for the caller's own cap, 503 for the total.
func (h *eventHub) acquire(who string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.maxStreams == 0 {
		h.maxStreams, h.maxPerToken = DefaultMaxEventStreams, DefaultMaxEventStreamsPerToken
	}
	if h.perToken[who] >= h.maxPerToken {
		return &apiError{Status: http.StatusTooManyRequests, Code: "too-many-streams",
			Detail: fmt.Sprintf("this token already has %d event streams open (the most per token); close one", h.maxPerToken)}
	}
	if h.streams >= h.maxStreams {
		return &apiError{Status: http.StatusServiceUnavailable, Code: "too-many-streams",
			Detail: fmt.Sprintf("%d event streams are open, the most this server keeps; retry later", h.maxStreams)}
	}
	h.streams++
	h.perToken[who]++
	return nil
}

func (h *eventHub) release(who string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.streams--
	if h.perToken[who]--; h.perToken[who] <= 0 {
		delete(h.perToken, who)
	}
}

func newEventHub(c core.Control, log *slog.Logger) *eventHub {
	return &eventHub{core: c, log: log, subs: map[*subscriber]struct{}{}, perToken: map[string]int{}}
}

// subscribe adds a client; the stats ticker runs while there is one.
func (h *eventHub) subscribe() *subscriber {
	s := &subscriber{ch: make(chan []byte, eventQueue), gone: make(chan struct{})}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.subs[s] = struct{}{}
	if h.stop == nil {
		h.stop = make(chan struct{})
		h.remote.reset() // only what is adopted from now on
		go h.tick(h.stop)
	}
	return s
}

func (h *eventHub) unsubscribe(s *subscriber) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.dropLocked(s)
}

func (h *eventHub) dropLocked(s *subscriber) {
	if _, ok := h.subs[s]; !ok {
		return
	}
	delete(h.subs, s)
	close(s.gone)
	if len(h.subs) == 0 && h.stop != nil {
		close(h.stop)
		h.stop = nil
	}
}

// publish sends one event to every client without ever blocking.
func (h *eventHub) publish(ev []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs {
		select {
		case s.ch <- ev:
		default:
			h.log.Warn("event stream client too slow, dropped", "queued", len(s.ch))
			h.dropLocked(s)
		}
	}
}

// sseEvent formats one event: "event: name\ndata: json\n\n".
func sseEvent(name string, v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	var buf bytes.Buffer
	buf.Grow(len(b) + len(name) + 16)
	buf.WriteString("event: ")
	buf.WriteString(name)
	buf.WriteString("\ndata: ")
	buf.Write(b) // JSON from encoding/json has no raw newline
	buf.WriteString("\n\n")
	return buf.Bytes()
}

// ConfigEvent is the data of an "event: config": a write created a
// generation.
type ConfigEvent struct {
	Generation int64       `json:"generation" example:"8"`
	Plan       config.Plan `json:"plan"`
	// Actor and RequestID are those of the write; empty for a generation
	// another node's write created (cluster), which this node adopted.
	Actor     string `json:"actor" example:"local"`
	RequestID string `json:"request_id"`
	// Node is the node that took the write (absent for one adopted from
	// another node).
	Node string `json:"node,omitempty" example:"edge-1"`
}

// configChanged tells a generation this node's write made (c).
func (h *eventHub) configChanged(ev ConfigEvent, c *config.Config) {
	h.remote.told(c)
	if b := sseEvent("config", ev); b != nil {
		h.publish(b)
	}
}

// StatsEvent is the data of an "event: stats", sent every second: compact
// totals per object with the rates of the last second.
type StatsEvent struct {
	Time       time.Time        `json:"time"`
	Generation int64            `json:"generation"`
	Frontends  []StatsEventItem `json:"frontends"`
	Backends   []StatsEventItem `json:"backends"`
	Servers    []StatsEventItem `json:"servers"`
}

// StatsEventItem is one object in a stats event. Server names are
// "backend/server".
type StatsEventItem struct {
	Name     string  `json:"name" example:"web"`
	State    string  `json:"state,omitempty" example:"up"`
	ConnCur  int64   `json:"conn_cur"`
	Conns    int64   `json:"conn_total"`
	ConnRate float64 `json:"conn_rate"`
	Requests int64   `json:"requests"`
	ReqRate  float64 `json:"req_rate"`
	BytesIn  int64   `json:"bytes_in"`
	BytesOut int64   `json:"bytes_out"`
	Errors   int64   `json:"errors"` // connect errors + aborts + timeouts + malformed requests
	// Status, NoServer, ConnectErrors, ResponseErrors, Retries and Queue
	// are as in /api/v1/stats, so the web page shows errors as they
	// happen.
	Status         stats.StatusCounts `json:"status"`
	NoServer       int64              `json:"no_server"`
	ConnectErrors  int64              `json:"connect_errors"`
	ResponseErrors int64              `json:"response_errors"`
	Retries        int64              `json:"retries"`
	Queue          int64              `json:"queue"`
	// ServersUp is a backend's usable servers; Check a server's last
	// health check (absent without one), as in /api/v1/stats.
	ServersUp *int         `json:"servers_up,omitempty"`
	Check     *stats.Check `json:"check,omitempty"`
	// Up and AdminState are a server's two facts that State mixes (health
	// first: a down server's State is "down" whatever its admin state): its
	// health (true without a check) and its admin state, as in
	// /api/v1/stats. Absent on frontends and backends.
	Up         *bool  `json:"up,omitempty"`
	AdminState string `json:"admin_state,omitempty" example:"ready"`
	// Proxy is a frontend's PROXY protocol header counts, present when
	// it has a bind with accept_proxy, as in /api/v1/stats.
	Proxy *stats.ProxyCounts `json:"proxy,omitempty"`
	// TLS and H2 are a frontend's TLS handshake and HTTP/2 counts,
	// present as in /api/v1/stats.
	TLS *stats.TLSCounts `json:"tls,omitempty"`
	H2  *stats.H2Counts  `json:"h2,omitempty"`
	// Rules is a frontend's rule counts (totals and each rule's hits),
	// present when it has rules, as in /api/v1/stats.
	Rules *stats.RuleCounts `json:"rules,omitempty"`
	// Limits are a frontend's limits per client, as in /api/v1/stats.
	Limits []stats.LimitCounts `json:"limits,omitempty"`
}

func eventItem(name, state string, c *stats.Counts) StatsEventItem {
	return StatsEventItem{Name: name, State: state, ConnCur: c.ConnCur, Conns: c.ConnTotal, ConnRate: c.ConnRate,
		Requests: c.Requests, ReqRate: c.ReqRate, BytesIn: c.BytesIn, BytesOut: c.BytesOut,
		Errors: c.ConnectErrors + c.Aborts + c.Timeouts + c.Errors,
		Status: c.Status, NoServer: c.NoServer, ConnectErrors: c.ConnectErrors, ResponseErrors: c.ResponseErrors,
		Retries: c.Retries, Queue: c.Queue}
}

func statsEvent(s stats.Snapshot) StatsEvent {
	ev := StatsEvent{Time: s.Time, Generation: s.Generation,
		Frontends: []StatsEventItem{}, Backends: []StatsEventItem{}, Servers: []StatsEventItem{}}
	for i := range s.Frontends {
		f := &s.Frontends[i]
		it := eventItem(f.Name, "", &f.Counts)
		it.Proxy, it.TLS, it.H2, it.Rules = f.Proxy, f.TLS, f.H2, f.Rules
		it.Limits = f.Limits
		ev.Frontends = append(ev.Frontends, it)
	}
	for i := range s.Backends {
		b := &s.Backends[i]
		be := eventItem(b.Name, b.State, &b.Counts)
		be.ServersUp = &b.ServersUp
		ev.Backends = append(ev.Backends, be)
		for j := range b.Servers {
			sv := &b.Servers[j]
			it := eventItem(b.Name+"/"+sv.Name, sv.State, &sv.Counts)
			it.Check = sv.Check
			it.Up, it.AdminState = &sv.Up, sv.AdminState
			ev.Servers = append(ev.Servers, it)
		}
	}
	return ev
}

// tick publishes a stats event every second until stop closes.
func (h *eventHub) tick(stop chan struct{}) {
	t := time.NewTicker(statsTick)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			if ev, ok := h.remote.next(); ok {
				if b := sseEvent("config", ev); b != nil {
					h.publish(b)
				}
			}
			if b := sseEvent("stats", statsEvent(h.core.Stats())); b != nil {
				h.publish(b)
			}
		}
	}
}

// events godoc
//
//	@Summary		Live events (server-sent events)
//	@Description	A text/event-stream. "event: config" when a write creates a generation (data: ConfigEvent: generation, plan, actor, request_id, node), and in a cluster within a second of this node adopting a generation another node's write created (no actor, request_id or node); "event: stats" every second (data: StatsEvent: totals and last-second rates per frontend, backend and server); a ": heartbeat" comment every 15 s. A client that does not keep up (64 events queued) is disconnected, never waited for. Streams are capped per token (429) and in all (503): --admin-max-event-streams(-per-token). A stream ends within a second of its token's revocation.
//	@Tags			observability
//	@Produce		text/event-stream
//	@Success		200	{object}	ConfigEvent	"stream of config and stats events"
//	@Failure		429	{object}	Problem		"this token's streams are at --admin-max-event-streams-per-token"
//	@Failure		503	{object}	Problem		"all streams are at --admin-max-event-streams"
//	@x-spliced-role	"viewer"
//	@Router			/api/v1/events [get]
func (s *server) events(w http.ResponseWriter, r *http.Request) error {
	who := actor(r.Context())
	if err := s.obs.events.acquire(who); err != nil {
		w.Header().Set("Retry-After", "5")
		return err
	}
	defer s.obs.events.release(who)
	sub := s.obs.events.subscribe()
	defer s.obs.events.unsubscribe(sub)
	serveStream(w, r, sub.ch, sub.gone)
	return nil
}

// serveStream answers r with a text/event-stream of the events from ch
// (each a whole "event:/data:" block) until the client leaves, gone is
// closed, a write takes longer than eventWriteWait, or the request's token
// is revoked; with a heartbeat comment every heartbeatEvery. The caller
// holds a stream slot (events.acquire).
func serveStream(w http.ResponseWriter, r *http.Request, ch <-chan []byte, gone <-chan struct{}) {
	// A revoked token (or, on an open API, a token created since) ends
	// the stream at the next recheck.
	var recheck <-chan time.Time
	valid := stillValid(r.Context())
	if valid != nil {
		t := time.NewTicker(tokenRecheckEvery)
		defer t.Stop()
		recheck = t.C
	}
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	// From here the answer has started: however the stream ends, there is
	// no error left to answer.
	send := func(b []byte) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(eventWriteWait))
		if _, err := w.Write(b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	if !send([]byte(": connected\nretry: 2000\n\n")) {
		return
	}
	hb := time.NewTicker(heartbeatEvery)
	defer hb.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-gone:
			return
		case <-recheck:
			if !valid() {
				return
			}
		case b := <-ch:
			if !send(b) {
				return
			}
		case <-hb.C:
			if !send([]byte(": heartbeat\n\n")) {
				return
			}
		}
	}
}
