package proxy

import (
	"bytes"
	"net/netip"

	"github.com/spliced-proxy/spliced/core/stats"
)

// Access log and byte counts of http requests
//
// Each request is counted and, for a frontend with access_log on, logged
// when it ends (endRequest): its response complete (finishExchange), its
// proxy answer built (fail), its upgrade done (h1Conn.upgrade), or the
// connection closed under it (close). Bytes in are the request's head as
// received plus the body bytes relayed; bytes out the response heads sent
// (interim ones included) or the proxy's answer, plus the body bytes
// relayed; they go to the frontend's, the backend's and the server's
// counters at that point, so a kept-alive connection's traffic shows
// while it lasts.
//
// The entry (stats.LogEntry) is taken from the worker's free list when
// the first byte of a request head arrives, stamped with loop.Now at each
// phase (head complete, slot granted, connect started and done, response
// head), pushed to the loop's ring and given back: no allocation. A
// connection that closes with no byte of a request (an idle keep-alive
// one, a probe that connects and leaves) logs nothing, as HAProxy's
// dontlognull. The termination state is set where its cause is known
// (blame) and otherwise derived from the phase the request ends in
// (termination, failWho).

// beginLog takes the entry of a request whose first head byte arrived,
// when its frontend logs.
func (c *stream) beginLog() {
	w := c.w
	if c.lg != nil || !c.fe.AccessLog || w.AccessLog == nil {
		return
	}
	lg := w.getLog()
	lg.HTTP = true
	lg.Frontend = c.fe.Name
	lg.Client = netip.AddrPortFrom(c.cl.peer.Unmap(), c.cl.port)
	w.logCarried(lg, c.cl.pp)
	lg.Start = c.cl.t0
	if c.cl.cert != nil {
		lg.ClientCert = c.cl.cert.subject
	}
	c.lg = lg
}

// logBadLine copies the first line of a head the parser refused (up to
// its LF, or what came of it) into the entry: the operator sees what was
// sent, as HAProxy's <BADREQ> capture.
func (c *stream) logBadLine() {
	if c.lg == nil {
		return
	}
	line := (*c.pin).Data()
	if i := bytes.IndexByte(line, '\n'); i >= 0 {
		line = line[:i]
	}
	c.lg.SetLine(bytes.TrimSuffix(line, []byte{'\r'}))
}

// blame sets the termination state of the request: who ended it, in
// which phase (the first call before the end wins over the derivation).
func (c *stream) blame(who, phase byte) { c.term = stats.Termination{who, phase} }

// phaseByte is the termination phase of the connection's phase.
func (c *stream) phaseByte() byte {
	switch c.phase {
	case phHead:
		return 'R'
	case phQueue:
		return 'Q'
	case phConnect:
		return 'C'
	case phExchange:
		if c.respHead {
			return 'D'
		}
		return 'H'
	}
	return '-'
}

// failWho is who a proxy answer of status blames when its caller did not
// say: the proxy for a request it refuses, the client for its timeout, the
// server for a failed connect (503), a bad or missing response (502) or
// its timeout (504).
func failWho(status int) byte {
	switch status {
	case 408:
		return 'c'
	case 502, 503:
		return 'S'
	case 504:
		return 's'
	}
	return 'P'
}

// termination is the state of a request cut by close(why) when its cause
// was not set.
func (c *stream) termination(why uint8) stats.Termination {
	phase := c.phaseByte()
	switch why {
	case closeNormal:
		if c.phase == phHead {
			return stats.Termination{'C', 'R'} // the client left within a head
		}
		return stats.TermNormal
	case closeTimeout:
		return stats.Termination{'c', phase}
	case closeCut:
		return stats.Termination{'s', 'D'}
	}
	return stats.Termination{'C', phase}
}

// endRequest counts the bytes of the request that ends (or of what it
// moved so far) into the frontend, backend and server counters, and pushes
// its access-log entry. Calling it again counts nothing more.
func (c *stream) endRequest() {
	in := c.bytesIn + c.reqBody.bytes
	out := c.bytesOut + c.respBody.bytes
	c.bytesIn, c.bytesOut = 0, 0
	c.reqBody.bytes, c.respBody.bytes = 0, 0
	if in|out != 0 {
		c.fs.BytesIn.Add(in)
		c.fs.BytesOut.Add(out)
		if c.bs != nil {
			c.bs.BytesIn.Add(in)
			c.bs.BytesOut.Add(out)
		}
		if c.ss != nil {
			c.ss.BytesIn.Add(in)
			c.ss.BytesOut.Add(out)
		}
	}
	lg := c.lg
	if lg == nil {
		return
	}
	c.lg = nil
	w := c.w
	lg.End = w.L.Now()
	lg.BytesIn, lg.BytesOut = in, out
	lg.Term = c.term
	if lg.Term[0] == 0 {
		lg.Term = stats.TermNormal
	}
	if c.attempts > 1 {
		lg.Retries = int32(c.attempts - 1)
	}
	w.AccessLog.Push(lg)
	w.putLog(lg)
}
