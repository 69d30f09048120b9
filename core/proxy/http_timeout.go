package proxy

import "math"

// Exchange timeouts, per side, as HAProxy's timeout client and timeout
// server: a side is given its timeout only while the exchange waits for it,
// and the wait restarts with every byte it moves.
//
//   - the client holds the exchange up when bytes for it are pending that
//     it does not take (a client that stopped reading), or while request
//     body bytes are still to come from it: client_ms (http frontend);
//   - the server holds it up when request bytes for it are pending that it
//     does not take, while the response head is awaited, or while response
//     body bytes are still to come from it: server_ms (backend).
//
// When both wait (a request body and an early response moving at once),
// either timeout ends the exchange. Expiry: the client's is a 408 when
// nothing was answered yet, the server's a 504 before the response head;
// afterwards either cuts both connections: the server's with an RST, as an
// abort (closeCut: the response it left unfinished must not look whole),
// the client's with a FIN (the kernel still delivers what it queued).
//
// exchangeTimers runs after every run of the exchange: it notes for each
// side whether it holds the exchange up and since when (cliSince, srvSince:
// the start of the current wait or the last byte it moved), and arms the
// timer only when a wait starting now ends before the armed deadline. The
// timer is not re-armed per chunk: when it fires early (bytes moved since)
// exchangeTimeout re-arms it at the deadline in force.

const noDeadline = math.MaxInt64

// cliHolds: the exchange waits for the client.
func (c *stream) cliHolds() bool {
	if c.rout != nil && c.rout.Len() > 0 {
		return true // a head (or interim response) it does not take
	}
	if b := &c.respBody; b.ok > 0 || (b.pipe != nil && b.pipe.Data > 0) {
		return true // response body bytes it does not take
	}
	b := &c.reqBody
	return c.reqHeadSent && !c.reqAborted && !b.broken && !b.complete() &&
		b.ok == 0 && (b.pipe == nil || b.pipe.Data == 0) // body still to come
}

// srvHolds: the exchange waits for the server.
func (c *stream) srvHolds() bool {
	if !c.reqAborted {
		if !c.reqHeadSent {
			return true // the request head it does not take
		}
		if b := &c.reqBody; !b.broken && (b.ok > 0 || (b.pipe != nil && b.pipe.Data > 0)) {
			return true // request body bytes it does not take
		}
	}
	if !c.respHead {
		return true // the response head is awaited
	}
	if c.rout != nil && c.rout.Len() > 0 {
		return false // the client's turn: the server is not read meanwhile
	}
	b := &c.respBody
	return !b.complete() && b.ok == 0 && (b.pipe == nil || b.pipe.Data == 0)
}

// startExchangeTimers: the request head is about to go to the server, which
// holds the exchange from now on (server_ms).
func (c *stream) startExchangeTimers() {
	now := c.w.L.Now()
	c.cliSince, c.srvSince = now, now
	c.cliWait, c.srvWait = false, true
	c.cli.moved, c.sc.side.moved = false, false
	c.deadline = 0
	if at := c.exchangeDeadline(); at != noDeadline {
		c.arm(at)
	} else {
		c.w.L.Disarm(&c.timer)
	}
}

// exchangeTimers updates the waits after a run of the exchange (see above).
func (c *stream) exchangeTimers() {
	now := c.w.L.Now()
	sc := c.sc
	cw, sw := c.cliHolds(), c.srvHolds()
	if !cw || !c.cliWait || c.cli.moved {
		c.cliSince = now
	}
	if !sw || !c.srvWait || sc.side.moved {
		c.srvSince = now
	}
	c.cliWait, c.srvWait = cw, sw
	c.cli.moved, sc.side.moved = false, false
	if at := c.exchangeDeadline(); at != noDeadline && (c.deadline == 0 || at < c.deadline) {
		c.arm(at)
	}
}

// exchangeDeadline is when the first side that holds the exchange up times
// out, or noDeadline.
func (c *stream) exchangeDeadline() int64 {
	at := int64(noDeadline)
	if t := int64(c.hf.ClientTimeout); t > 0 && c.cliWait {
		at = min(at, c.cliSince+t)
	}
	if t := int64(c.be.B.ServerTimeout); t > 0 && c.srvWait {
		at = min(at, c.srvSince+t)
	}
	return at
}

// exchangeTimeout: the exchange timer fired at now.
func (c *stream) exchangeTimeout(now int64) {
	c.deadline = 0
	if t := int64(c.hf.ClientTimeout); t > 0 && c.cliWait && now >= c.cliSince+t {
		c.fs.Timeouts.Add(1)
		if !c.respSent && (c.rout == nil || c.rout.Len() == 0) {
			c.blame('c', 'D')
			c.fail(408) // the request body stalled
		} else {
			c.close(closeTimeout) // the client stopped reading
		}
		return
	}
	if t := int64(c.be.B.ServerTimeout); t > 0 && c.srvWait && now >= c.srvSince+t {
		c.fs.Timeouts.Add(1)
		c.bs.Timeouts.Add(1)
		c.ss.Timeouts.Add(1)
		c.responseError() // no response, or not all of it, within server_ms
		if !c.respHead {
			c.fail(504)
		} else {
			c.close(closeCut)
		}
		return
	}
	if at := c.exchangeDeadline(); at != noDeadline {
		c.arm(at)
	}
}
