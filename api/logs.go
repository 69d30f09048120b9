package api

import (
	"net/http"

	"github.com/spliced-proxy/spliced/core/accesslog"
)

// logsMaxLimit bounds ?limit= of GET /api/v1/logs: what the access log
// keeps (accesslog.KeepDefault).
const logsMaxLimit = accesslog.KeepDefault

// logs godoc
//
//	@Summary		The last access-log entries, or their live stream
//	@Description	The last entries of the access log (frontends with "access_log": true: one per http request, one per tcp connection) as a JSON array, in the order they ended (newest last): HAProxy's timers (tq_ms, tw_ms, tc_ms, tr_ms, ta_ms; -1 for a phase not reached), status, bytes_in, bytes_out (heads included), retries, the two-letter termination state, the client and the request line with credentials redacted. Kept in memory only (the last 1000, lost at restart); the lines themselves go to the access-log sink (--access-log-file, --access-log-syslog, else stderr). With ?follow=1 the answer is a text/event-stream instead: one "event: access" per new entry (data: one accesslog.Record as JSON), ": heartbeat" every 15 s; a client that does not keep up loses entries (never waited for); streams count against --admin-max-event-streams(-per-token).
//	@Tags			observability
//	@Produce		json
//	@Produce		text/event-stream
//	@Param			limit	query		integer	false	"entries (1..1000, default 100)"
//	@Param			follow	query		integer	false	"1: stream new entries as server-sent events"
//	@Success		200		{array}		accesslog.Record
//	@Failure		400		{object}	Problem
//	@Failure		429		{object}	Problem	"this token's streams are at --admin-max-event-streams-per-token"
//	@Failure		503		{object}	Problem	"all streams are at --admin-max-event-streams"
//	@x-spliced-role	"admin"
//	@Router			/api/v1/logs [get]
func (s *server) logs(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	limit, err := intQuery(q.Get("limit"), 100, 1, logsMaxLimit, "limit")
	if err != nil {
		return err
	}
	follow, err := intQuery(q.Get("follow"), 0, 0, 1, "follow")
	if err != nil {
		return err
	}
	if follow == 0 {
		out := []accesslog.Record{}
		if s.alog != nil {
			out = s.alog.Recent(limit)
		}
		return writeValue(w, http.StatusOK, out)
	}
	who := actor(r.Context())
	if err := s.obs.events.acquire(who); err != nil {
		w.Header().Set("Retry-After", "5")
		return err
	}
	defer s.obs.events.release(who)
	ch := make(chan []byte, eventQueue)
	gone := make(chan struct{})
	if s.alog != nil {
		recs, stop := s.alog.Subscribe(eventQueue)
		defer stop()
		go func() { // records to events, until the stream ends
			for {
				select {
				case <-gone:
					return
				case rec := <-recs:
					if b := sseEvent("access", rec); b != nil {
						select {
						case ch <- b:
						case <-gone:
							return
						}
					}
				}
			}
		}()
	}
	serveStream(w, r, ch, nil)
	close(gone)
	return nil
}
