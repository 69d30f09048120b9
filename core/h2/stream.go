package h2

import "time"

// stream is one request/response exchange's state in the Conn (RFC 9113
// §5.1): open, half-closed (remote) once the client sent END_STREAM,
// half-closed (local) once we did, and removed from the table when
// closed. Idle and closed streams are not in the table: idle is any id
// above lastID, closed any id at or below it.
type stream struct {
	id           uint32
	remoteClosed bool // END_STREAM received
	localClosed  bool // END_STREAM sent
	gotHeaders   bool // request head delivered to the Handler
	respHead     bool // final response head sent
	blocked      bool // SendData took less than offered
	stalledSince time.Time

	recvWindow int64 // what the client may still send on it
	recvCredit int64 // given back by Consumed, not yet by WINDOW_UPDATE
	unconsumed int64 // delivered by Data, not yet Consumed
	sendWindow int64 // what we may still send on it

	contentLength int64 // -1 when the request has none
	received      int64
}

type closedHow uint8

const (
	closedNormally    closedHow = iota + 1 // END_STREAM both ways
	closedByPeerReset                      // the client's RST_STREAM
	closedByUs                             // our RST_STREAM: late frames ignored
)

type closedStream struct {
	id  uint32
	how closedHow
}

// stream finds id among the open streams. The table is at most
// MaxConcurrentStreams long and the newest stream is the likeliest, so
// it is searched from the end.
func (c *Conn) stream(id uint32) *stream {
	for i := len(c.streams) - 1; i >= 0; i-- {
		if c.streams[i].id == id {
			return c.streams[i]
		}
	}
	return nil
}

func (c *Conn) newStream(id uint32) *stream {
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

// remove takes st out of the table: what the Handler had not consumed
// goes back to the connection window, and the id is remembered as closed.
func (c *Conn) remove(st *stream, how closedHow) {
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

func (c *Conn) remember(id uint32, how closedHow) {
	c.closed[c.closedN%closedRingLen] = closedStream{id: id, how: how}
	c.closedN++
}

func (c *Conn) closedHow(id uint32) (closedHow, bool) {
	for i := range c.closed {
		if c.closed[i].id == id {
			return c.closed[i].how, true
		}
	}
	return 0, false
}

// maybeClose removes stream id once END_STREAM went both ways.
func (c *Conn) maybeClose(id uint32) {
	if st := c.stream(id); st != nil && st.remoteClosed && st.localClosed {
		c.remove(st, closedNormally)
	}
}

// SendStalledSince is when stream id last wanted to send (SendData took
// less than offered) with no window, zero when it is not stalled: a
// client that never opens its window must not hold a server connection
// forever, so the caller times the stream out from this. A window update
// ends the stall: a client that opens its window a byte at a time is
// a slow reader, for a send-rate timeout of the caller's.
func (c *Conn) SendStalledSince(id uint32) time.Time {
	if st := c.stream(id); st != nil {
		return st.stalledSince
	}
	return time.Time{}
}

// ConnStalledSince is when the connection send window reached zero with a
// stream wanting to send, zero when it is not stalled.
func (c *Conn) ConnStalledSince() time.Time { return c.connStalledSince }

// Streams is the number of open streams.
func (c *Conn) Streams() int { return len(c.streams) }

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
