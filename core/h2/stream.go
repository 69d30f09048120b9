package h2

import "time"

// stream is one request/response exchange's state (RFC 9113 §5.1), on
// either side: open, half-closed (remote) once the peer sent END_STREAM,
// half-closed (local) once we did, and removed from the table when
// closed. Idle and closed streams are not in the table (see
// connCore.idle).
type stream struct {
	id           uint32
	remoteClosed bool // END_STREAM received
	localClosed  bool // END_STREAM sent
	gotHead      bool // the peer's head came: a request's (Conn), a final response's (ClientConn)
	sentHead     bool // Conn: final response head sent
	noBody       bool // ClientConn: a HEAD request, content-length says nothing of DATA
	blocked      bool // SendData took less than offered
	heard        bool // ClientConn: the server sent HEADERS on it (Heard)
	stalledSince time.Time

	recvWindow int64 // what the peer may still send on it
	recvCredit int64 // given back by Consumed, not yet by WINDOW_UPDATE
	unconsumed int64 // delivered by Data, not yet Consumed
	sendWindow int64 // what we may still send on it

	contentLength int64 // -1 when the head has none
	received      int64
}

type closedHow uint8

const (
	closedNormally    closedHow = iota + 1 // END_STREAM both ways
	closedByPeerReset                      // the peer's RST_STREAM
	closedByUs                             // our RST_STREAM: late frames ignored
)

type closedStream struct {
	id  uint32
	how closedHow
}

// stream finds id among the open streams. The table is at most
// MaxConcurrentStreams long and the newest stream is the likeliest, so
// it is searched from the end.
func (c *connCore) stream(id uint32) *stream {
	for i := len(c.streams) - 1; i >= 0; i-- {
		if c.streams[i].id == id {
			return c.streams[i]
		}
	}
	return nil
}

// newStream puts stream id in the table, with the windows in effect.
func (c *connCore) newStream(id uint32) *stream {
	var st *stream
	if n := len(c.free); n > 0 {
		st = c.free[n-1]
		c.free[n-1] = nil
		c.free = c.free[:n-1]
		*st = stream{}
	} else {
		st = &stream{}
	}
	st.id = id
	st.recvWindow = int64(c.recvInitial)
	st.sendWindow = int64(c.peerInitialWindow)
	st.contentLength = -1
	c.streams = append(c.streams, st)
	return st
}

// remove takes st out of the table: what the handler had not consumed
// goes back to the connection window, and the id is remembered as closed.
func (c *connCore) remove(st *stream, how closedHow) {
	c.counts.StreamsClosed++
	if st.unconsumed > 0 {
		c.credit(st.unconsumed)
		st.unconsumed = 0
	}
	for i, s := range c.streams {
		if s == st {
			last := len(c.streams) - 1
			copy(c.streams[i:], c.streams[i+1:])
			c.streams[last] = nil
			c.streams = c.streams[:last]
			break
		}
	}
	c.remember(st.id, how)
	st.id = 0
	c.free = append(c.free, st)
}

func (c *connCore) remember(id uint32, how closedHow) {
	c.closed[c.closedN%closedRingLen] = closedStream{id: id, how: how}
	c.closedN++
}

func (c *connCore) closedHow(id uint32) (closedHow, bool) {
	for i := range c.closed {
		if c.closed[i].id == id {
			return c.closed[i].how, true
		}
	}
	return 0, false
}

// maybeClose removes stream id once END_STREAM went both ways.
func (c *connCore) maybeClose(id uint32) {
	if st := c.stream(id); st != nil && st.remoteClosed && st.localClosed {
		c.remove(st, closedNormally)
	}
}

// LastStreamID is the highest stream id the client opened.
func (c *Conn) LastStreamID() uint32 { return c.lastID }

// Counts are a connection's stream events since it began, for the
// frontend's counters: streams_cur is StreamsOpened - StreamsClosed.
type Counts struct {
	StreamsOpened  uint64 // requests delivered to Handler.Headers
	StreamsClosed  uint64 // of those, ended (both END_STREAMs or a reset)
	StreamsRefused uint64 // REFUSED_STREAM (concurrency) or 431 (head too large)
	ResetsSent     uint64 // RST_STREAM frames sent
	ResetsReceived uint64 // RST_STREAM frames received on open or closed streams
}

// Counts returns the connection's counts; a loop adds the difference
// since its last read to the frontend's counters.
func (c *Conn) Counts() Counts { return c.counts }
