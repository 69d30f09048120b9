package proxy

import (
	"golang.org/x/sys/unix"

	"github.com/spliced-proxy/spliced/core/http1"
	"github.com/spliced-proxy/spliced/core/loop"
)

// Splice (seed 003, HAProxy's raw_sock.c)
//
// Per frontend: off (always buffered), on (splice from the first byte),
// auto (a direction switches to splice after autoSpliceAfter consecutive
// reads that filled the buffer — a streamer — and back to buffers after
// autoSpliceSmall consecutive spliced reads shorter than a buffer). Socket
// to pipe uses SPLICE_F_MOVE|SPLICE_F_NONBLOCK. EAGAIN from socket->pipe
// is ambiguous (socket empty, or pipe full): a pipe holding data is taken
// as full — stop reading, flush — an empty one as a drained socket. A
// direction changes between buffer and pipe only when the one it leaves is
// empty, so bytes keep their order. No pipe available (pool at maxpipes,
// or the kernel refuses) means a buffered copy for that read. EINVAL or
// ENOSYS from splice turns splice off for that direction. A pipe that still
// holds data when released is closed, never pooled. Bytes spliced in are
// counted in loop.Activity.SpliceBytes, pipes in use in PipesUsed.

// runCap is how many bytes one direction may read per run of its tasklet.
// A direction that used it rewakes itself in the bulk class (seed 000) so a
// fat transfer yields to connection setup and short exchanges: at 256 KiB a
// run lasts some tens of microseconds, and the loop interleaves others.
const runCap = 256 << 10

// autoSpliceAfter is the number of consecutive reads that filled the buffer
// after which splice=auto moves a direction to splice (HAProxy marks such a
// channel a "streamer" after two); autoSpliceSmall consecutive spliced
// reads shorter than a buffer move it back to buffers.
const (
	autoSpliceAfter = 2
	autoSpliceSmall = 2
)

// mover is the one byte mover of the data plane: one direction of bytes
// from a source Side to a destination Side, through a buffer or a pipe.
// A tcp tunnel has two (dir), an http exchange one per body (body); the
// buffer is the caller's (run's in: the tunnel direction's own, or the
// http connection's input buffer, which also holds heads), the pipe the
// mover's. At most one of them holds data at any time, and a direction
// changes between them only when the one it leaves is empty, so bytes
// keep their order and memory is bounded by one buffer or one pipe.
// Loop thread only, like its sides.
type mover struct {
	pipe     *Pipe // nil unless bytes are pending in it (or during a run)
	mode     SpliceMode
	noSplice bool  // splice(2) refused this fd pair (EINVAL...): buffers only
	streak   uint8 // consecutive reads that filled the buffer (auto)
	small    uint8 // consecutive short spliced reads (auto)
	eof      bool  // the source reported end of stream
	// corked: bytes went to the destination with MSG_MORE (more), so its
	// socket may hold a partial segment back; run pushes it when the
	// source runs dry (see body.more).
	corked bool
	// shut: the destination got shutdown(SHUT_WR) after the last byte (a
	// tcp tunnel direction; an http body ends without it). In the mover's
	// padding rather than in dir: see
	// TestConnectionObjectsKeepTheirSizeClass.
	shut    bool
	bytes   int64 // bytes written to the destination
	spliced int64 // of which through a pipe (an http body: of this body)
}

// run results besides 0 (progress made, or nothing to do) and an http
// framing status (> 0, from body.frameIn).
const (
	relSrc = -1 // the source failed, or ended before the body did
	relDst = -2 // the destination failed
)

// fill results.
const (
	rNone  uint8 = iota // nothing attempted
	rMoved              // bytes read
	rEmpty              // source drained (its read readiness cleared)
	rFull               // no room: buffer full, or pipe full (EAGAIN with data)
	rEOF                // source reported end of stream
	rErr                // I/O error
)

// run moves bytes from src to dst through *in (taken from and given back
// to the worker's pool as needed) or the mover's pipe, until the source is
// drained (EAGAIN, or a short read: with edge-triggered epoll the next
// arrival raises a new edge), the destination blocks with no room left to
// read into (backpressure: the source is left unread, its kernel buffer
// fills and TCP flow control slows the peer), budget is spent (then src's
// tasklet is woken again in class Bulk, so that long transfers yield to
// short work), or the stream ends. Each read takes its length from
// *budget: a tunnel direction gives runCap per run, an http connection
// shares one budget between every read of the run (c.budget).
//
// fr, when not nil, frames an http body (no interface, no allocation per
// chunk): only the bytes it framed leave the buffer (fr.ok), a
// Content-Length body bounds what is spliced (fr.left) and starts to be
// spliced only from spliceMin bytes left (then to its end), the source is read only while the
// body is incomplete and the buffer empty (what follows the body, a
// pipelined request, stays unread), and end of stream completes only a
// body delimited by the close. Without fr, every byte read is sent, a
// splice=auto direction switches to splice once a streamer (see
// autoSpliceAfter), and end of stream is m.eof for the caller to pass on.
//
// Buffers and pipes are held only while bytes are pending in them. It
// returns 0, relSrc, relDst or a framing status; the caller ends the
// connection on an error.
func (m *mover) run(w *Worker, src, dst *Side, in **Buffer, budget *int, fr *body) int {
	res := 0
loop:
	for {
		r := rNone
		sent := m.bytes
		if m.wantRecv(*in, fr) && src.canRecv() {
			if *budget <= 0 || src.Task.QueuedIn(loop.Bulk) {
				// The cap is used, in this run or in an earlier one of
				// the round whose Bulk run is still to come (this run is
				// then the other side's, woken by its own fd): the source
				// is read by src's tasklet in class Bulk (Loop.Demote).
				w.L.Demote(&src.Task)
			} else {
				var n int
				n, r = m.fill(w, src, dst, in, fr)
				*budget -= src.cost(n)
				switch {
				case r == rErr:
					res = relSrc
					break loop
				case r == rEOF && fr != nil && fr.kind != http1.BodyUntilClose:
					res = relSrc // the body is cut short
					break loop
				}
			}
		}
		if b := *in; fr != nil && b != nil && b.Len() > fr.ok {
			if st := fr.frameIn(b, b.Len()); st != 0 {
				res = st
				break
			}
		}
		if m.pending(*in, fr) > 0 && dst.Connected && dst.canSend() {
			if !m.flush(dst, *in, fr) {
				res = relDst
				break
			}
		}
		if m.pending(*in, fr) == 0 {
			if r == rMoved || r == rFull || m.bytes != sent {
				continue // room again: read on
			}
		} else if r == rMoved && dst.Connected && dst.canSend() {
			continue // partially flushed and room may remain
		}
		break
	}
	if m.corked && res == 0 && !src.canRecv() && m.pending(*in, fr) == 0 {
		// The source ran dry with everything handed to dst: send the
		// segment MSG_MORE held back now rather than when the next bytes
		// come (a slow server must not delay what it sent). When dst
		// blocked instead, bytes are in flight and their ACK pushes it.
		dst.push()
		m.corked = false
	}
	if b := *in; b != nil && b.Len() == 0 {
		w.Bufs.Put(b)
		*in = nil
	}
	if m.pipe != nil && m.pipe.Data == 0 {
		w.Pipes.Put(m.pipe)
		m.pipe = nil
	}
	return res
}

// pending: bytes read and ready to leave (buffer or pipe). An http body's
// buffer holds only fr.ok of them: the rest is not framed yet, or belongs
// to what follows the body.
func (m *mover) pending(in *Buffer, fr *body) int {
	n := 0
	if m.pipe != nil {
		n = m.pipe.Data
	}
	if fr != nil {
		return n + fr.ok
	}
	if in != nil {
		n += in.Len()
	}
	return n
}

// wantRecv: the source may be read now (when ready and within budget).
func (m *mover) wantRecv(in *Buffer, fr *body) bool {
	if m.eof {
		return false
	}
	if fr == nil {
		return true
	}
	return (in == nil || in.Len() == 0) && (m.pipe == nil || m.pipe.Data == 0) && !fr.complete()
}

// wantSplice: the next read goes to the pipe.
func (m *mover) wantSplice(src, dst *Side, in *Buffer, fr *body) bool {
	// Buffer -> splice only with an empty buffer: bytes leave in order.
	// A destination not opened yet (a tunnel still connecting) takes the
	// source's word: the dial path opens it over the same transport.
	if m.noSplice || (in != nil && in.Len() > 0) || !src.xp.canSplice() || (dst.xp != nil && !dst.xp.canSplice()) {
		return false
	}
	if fr != nil {
		// A body that went through the pipe stays there to its end, as
		// HAProxy splices to the end of to_forward: two splices move its
		// last bytes where buffers took a read and a send per bufsize
		// and copied them twice (body.start clears spliced).
		return fr.kind == http1.BodyLength && m.mode != SpliceOff && (fr.left >= spliceMin || m.spliced > 0)
	}
	switch m.mode {
	case SpliceOn:
		return true
	case SpliceAuto:
		return m.streak >= autoSpliceAfter
	}
	return false
}

// fill reads once from src into the pipe or the buffer.
func (m *mover) fill(w *Worker, src, dst *Side, in **Buffer, fr *body) (int, uint8) {
	if m.wantSplice(src, dst, *in, fr) {
		if m.pipe == nil {
			m.pipe = w.Pipes.Get() // nil: none left, buffered copy below
		}
		if m.pipe != nil {
			n, r := m.fillPipe(w, src, fr)
			if r != rNone {
				return n, r
			}
		}
	}
	// Splice -> buffer only with an empty pipe.
	if m.pipe != nil && m.pipe.Data > 0 {
		return 0, rFull
	}
	return m.fillBuf(w, src, in, fr)
}

// fillPipe splices src -> pipe. It follows HAProxy's raw_sock_to_pipe:
// EAGAIN means either "socket empty" or "pipe full", and the kernel does
// not say which; a pipe that holds data is taken as full (stop reading,
// flush), an empty one as a drained socket. A short splice does not mean
// the socket is drained either: the pipe fills by slots (16 buffers), not
// bytes. rNone asks for a buffered read instead.
func (m *mover) fillPipe(w *Worker, src *Side, fr *body) (int, uint8) {
	p := m.pipe
	room := p.size - p.Data
	if fr != nil && int64(room) > fr.left {
		room = int(fr.left) // not beyond the body
	}
	if room <= 0 {
		return 0, rFull
	}
	n, e := src.xp.rcvPipe(src.FD.Fd, p, room)
	switch {
	case e == 0 && n > 0:
		p.Data += n
		src.moved = true
		w.act.SpliceBytes.Add(uint64(n))
		if fr != nil {
			fr.left -= int64(n)
		} else if m.mode == SpliceAuto {
			if n < w.Bufs.Size() {
				if m.small++; m.small >= autoSpliceSmall {
					m.streak, m.small = 0, 0 // no longer a streamer
				}
			} else {
				m.small = 0
			}
		}
		return n, rMoved
	case e == 0:
		m.eof = true
		return 0, rEOF
	case e == unix.EAGAIN:
		if p.Data > 0 {
			return 0, rFull
		}
		src.drained()
		return 0, rEmpty
	case e == unix.EINVAL || e == unix.ENOSYS || e == unix.EOPNOTSUPP:
		// This fd pair cannot splice (not a TCP socket...): buffers
		// from now on. Nothing was moved, so order is kept.
		m.noSplice = true
		return 0, rNone
	}
	// ECONNRESET (peer reset), ETIMEDOUT, EHOSTUNREACH (the kernel gave
	// up on the peer)...: a byte stream with a hole in it is worth
	// nothing to either end.
	return 0, rErr
}

// fillBuf reads src -> buffer.
func (m *mover) fillBuf(w *Worker, src *Side, in **Buffer, fr *body) (int, uint8) {
	if *in == nil {
		*in = w.Bufs.Get()
	}
	b := *in
	if fr != nil {
		compact(b) // an http buffer may hold heads before the body
	}
	room := b.Room()
	if room == 0 {
		return 0, rFull
	}
	n, e := src.recv(b.Free())
	switch {
	case e == 0 && n > 0:
		b.Produced(n)
		src.moved = true
		if n == room {
			if m.streak < 255 {
				m.streak++
			}
		} else if m.streak = 0; fr == nil && src.drainedToEOF() {
			m.eof = true // the FIN came behind these bytes: no read(2) for it
		} else {
			src.shortRead()
		}
		return n, rMoved
	case e == 0:
		m.eof = true
		return 0, rEOF
	case e == unix.EAGAIN:
		src.drained()
		return 0, rEmpty
	}
	return 0, rErr // as fillPipe
}

// flush writes pending bytes to dst until none is left or it would block;
// false on an I/O error (ECONNRESET, EPIPE...: the caller aborts).
func (m *mover) flush(dst *Side, in *Buffer, fr *body) bool {
	// A tunnel direction whose source ended sends its last bytes with
	// MSG_MORE: the FIN that follows (shutdown or close) leaves with them
	// in one segment, as HAProxy's CO_SFL_MSG_MORE before a shutw.
	more := fr.more() || (fr == nil && m.eof && isRaw(dst.xp))
	if p := m.pipe; p != nil {
		for p.Data > 0 {
			n, e := dst.xp.sndPipe(dst.FD.Fd, p, p.Data, more)
			if e == unix.EAGAIN || (e == 0 && n == 0) {
				dst.blocked()
				return true
			}
			if e != 0 {
				return false
			}
			p.Data -= n
			m.bytes += int64(n)
			m.spliced += int64(n)
			m.corked = more
			dst.moved = true
		}
	}
	if in == nil {
		return true
	}
	for {
		k := in.Len()
		if fr != nil {
			k = fr.ok
		}
		if k == 0 {
			return true
		}
		n, e := dst.send(in.Data()[:k], more)
		if e == unix.EAGAIN || (e == 0 && n == 0) {
			dst.blocked()
			return true
		}
		if e != 0 {
			return false
		}
		in.Consumed(n)
		if fr != nil {
			fr.ok -= n
		}
		m.bytes += int64(n)
		m.corked = more
		dst.moved = true
	}
}

// release gives the pipe back (closed, not pooled, if it still holds
// data).
func (m *mover) release(w *Worker) {
	if m.pipe != nil {
		w.Pipes.Put(m.pipe)
		m.pipe = nil
	}
}
