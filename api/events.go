package api

import (
	"bytes"
	"encoding/json"
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
)

type subscriber struct {
	ch   chan []byte
	gone chan struct{} // closed when the hub dropped it
}

type eventHub struct {
	core core.Control
	log  *slog.Logger

	mu   sync.Mutex
	subs map[*subscriber]struct{}
	stop chan struct{} // closes the ticker goroutine; nil when none runs
}

func newEventHub(c core.Control, log *slog.Logger) *eventHub {
	return &eventHub{core: c, log: log, subs: map[*subscriber]struct{}{}}
}

// subscribe adds a client; the stats ticker runs while there is one.
func (h *eventHub) subscribe() *subscriber {
	s := &subscriber{ch: make(chan []byte, eventQueue), gone: make(chan struct{})}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.subs[s] = struct{}{}
	if h.stop == nil {
		h.stop = make(chan struct{})
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
	Actor      string      `json:"actor" example:"local"`
	RequestID  string      `json:"request_id"`
}

func (h *eventHub) configChanged(ev ConfigEvent) {
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
}

func eventItem(name, state string, c *stats.Counts) StatsEventItem {
	return StatsEventItem{Name: name, State: state, ConnCur: c.ConnCur, Conns: c.ConnTotal, ConnRate: c.ConnRate,
		Requests: c.Requests, ReqRate: c.ReqRate, BytesIn: c.BytesIn, BytesOut: c.BytesOut,
		Errors: c.ConnectErrors + c.Aborts + c.Timeouts + c.Errors}
}

func statsEvent(s stats.Snapshot) StatsEvent {
	ev := StatsEvent{Time: s.Time, Generation: s.Generation,
		Frontends: []StatsEventItem{}, Backends: []StatsEventItem{}, Servers: []StatsEventItem{}}
	for i := range s.Frontends {
		f := &s.Frontends[i]
		ev.Frontends = append(ev.Frontends, eventItem(f.Name, "", &f.Counts))
	}
	for i := range s.Backends {
		b := &s.Backends[i]
		ev.Backends = append(ev.Backends, eventItem(b.Name, b.State, &b.Counts))
		for j := range b.Servers {
			sv := &b.Servers[j]
			ev.Servers = append(ev.Servers, eventItem(b.Name+"/"+sv.Name, sv.State, &sv.Counts))
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
			if b := sseEvent("stats", statsEvent(h.core.Stats())); b != nil {
				h.publish(b)
			}
		}
	}
}

// events godoc
//
//	@Summary		Live events (server-sent events)
//	@Description	A text/event-stream. "event: config" when a write creates a generation (data: ConfigEvent: generation, plan, actor, request_id); "event: stats" every second (data: StatsEvent: totals and last-second rates per frontend, backend and server); a ": heartbeat" comment every 15 s. A client that does not keep up (64 events queued) is disconnected, never waited for.
//	@Tags			observability
//	@Produce		text/event-stream
//	@Success		200	{object}	ConfigEvent	"stream of config and stats events"
//	@x-spliced-role	"viewer"
//	@Router			/api/v1/events [get]
func (s *server) events(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	sub := s.obs.events.subscribe()
	defer s.obs.events.unsubscribe(sub)
	w.WriteHeader(http.StatusOK)
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
		case <-sub.gone:
			return
		case b := <-sub.ch:
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
