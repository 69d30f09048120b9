package api

import (
	"net/http"

	"github.com/spliced-proxy/spliced/core/accesslog"
)

// logs godoc
//
//	@Summary		The last access-log entries, filtered, or their live stream
//	@Description	The access log's entries (frontends with "access_log": true: one per http request, one per tcp connection) as a JSON array, in the order they ended (newest last): HAProxy's timers (tq_ms, tw_ms, tc_ms, tr_ms, ta_ms; -1 for a phase not reached), status, bytes_in, bytes_out (heads included), retries, the two-letter termination state, the client and the request line with credentials redacted. Kept in memory only (lost at restart): the last 1000 entries, and beside them the last --access-log-keep-abnormal (default 1000) abnormal ones (status >= 400, or a termination other than "--") of each side, the server side's (5xx; ended by the server or the proxy) apart from the client side's (4xx; ended by the client, or the proxy's 400 for a malformed request), so that an incident's entries stay after thousands of normal requests. The filters (each given one must match) select among all that is kept, and the answer is the newest limit of the selected, oldest first: a filter that selects abnormal entries only (status=5xx, termination=SH, abnormal=1) reaches back as far as the abnormal ones kept. The lines themselves go to the access-log sink (--access-log-file, --access-log-syslog, else stderr). With ?follow=1 the answer is a text/event-stream instead: one "event: access" per new entry the filters select (data: one accesslog.Record as JSON), ": heartbeat" every 15 s; a client that does not keep up loses entries (never waited for); streams count against --admin-max-event-streams(-per-token). A value a parameter does not take is a 400 whose detail names the parameter.
//	@Tags			observability
//	@Produce		json
//	@Produce		text/event-stream
//	@Param			limit		query		integer	false	"entries (1 to what is kept: 1000 + 2 × --access-log-keep-abnormal; default 100)"
//	@Param			status		query		string	false	"a class (1xx..5xx), an exact code (502), or none (no status sent: tcp, or the client got nothing)"
//	@Param			termination	query		string	false	"a two-letter termination state, e.g. SH"
//	@Param			frontend	query		string	false	"a frontend's name"
//	@Param			backend		query		string	false	"a backend's name"
//	@Param			server		query		string	false	"a server's name (in any backend; with backend=, in that one)"
//	@Param			client		query		string	false	"the client's address, with or without its port: 192.0.2.7, 192.0.2.7:51234, [2001:db8::1]:443"
//	@Param			since		query		string	false	"entries of requests (tcp: connections) that began at or after this time, RFC 3339"	format(date-time)
//	@Param			abnormal	query		integer	false	"1: abnormal entries only (status >= 400, or a termination other than --)"	Enums(0, 1)
//	@Param			follow		query		integer	false	"1: stream new entries as server-sent events"	Enums(0, 1)
//	@Success		200			{array}		accesslog.Record
//	@Failure		400			{object}	Problem	"a bad parameter (named in detail)"
//	@Failure		429			{object}	Problem	"this token's streams are at --admin-max-event-streams-per-token"
//	@Failure		503			{object}	Problem	"all streams are at --admin-max-event-streams"
//	@x-spliced-role	"admin"
//	@Router			/api/v1/logs [get]
func (s *server) logs(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	maxLimit := accesslog.KeepDefault + 2*accesslog.KeepAbnormalDefault
	if s.alog != nil {
		maxLimit = s.alog.Kept()
	}
	limit, err := intQuery(q.Get("limit"), 100, 1, maxLimit, "limit")
	if err != nil {
		return err
	}
	follow, err := intQuery(q.Get("follow"), 0, 0, 1, "follow")
	if err != nil {
		return err
	}
	filter, err := accesslog.ParseFilter(q)
	if err != nil {
		return &apiError{Status: http.StatusBadRequest, Code: "bad-query", Detail: err.Error()}
	}
	if follow == 0 {
		out := []accesslog.Record{}
		if s.alog != nil {
			out = s.alog.Query(filter, limit)
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
					if !filter.Match(&rec) {
						continue
					}
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
