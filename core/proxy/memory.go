package proxy

import (
	"unsafe"

	"github.com/spliced-proxy/spliced/core/http1"
	"github.com/spliced-proxy/spliced/core/loop"
	"github.com/spliced-proxy/spliced/core/stats"
)

// Memory counts what this worker's loop holds, for GET /api/v1/memory:
// each kind of connection object in use and kept in its free list, the
// buffers, and the loop's tables (loop thread; O(connections)). classes
// are the runtime's size classes (stats.SizeClasses). Streams and parsers
// are counted as they are taken and given back (getStream, getReq,
// getResp), connections by walking their lists.
func (w *Worker) Memory(classes []int) []stats.Pool {
	h := &w.h
	var h1, h2c, tun int
	for t := w.live.Front(); t != nil; t = t.link.Next() {
		tun++
	}
	for c := h.live.Front(); c != nil; c = c.link.Next() {
		h1++
	}
	for c := h.live2.Front(); c != nil; c = c.link.Next() {
		h2c++
	}
	f := w.L.Footprint()
	buf := stats.PoolOf(classes, "buffer", uintptr(w.Bufs.Size()), w.Bufs.InUse(), w.Bufs.Idle())
	hdr := int64(stats.ClassOf(classes, int(unsafe.Sizeof(Buffer{}))))
	buf.ClassBytes += int(hdr)
	buf.Bytes += hdr * int64(buf.Live+buf.Free)
	return []stats.Pool{
		stats.PoolOf(classes, "h1_conn", unsafe.Sizeof(h1Conn{}), h1, len(h.freeConn)),
		stats.PoolOf(classes, "stream", unsafe.Sizeof(stream{}), h.nstream, len(h.freeStream)),
		stats.PoolOf(classes, "request_parser", unsafe.Sizeof(http1.Request{}), h.nreq, len(h.freeReq)),
		stats.PoolOf(classes, "response_parser", unsafe.Sizeof(http1.Response{}), h.nresp, len(h.freeResp)),
		stats.PoolOf(classes, "srv_conn_idle", unsafe.Sizeof(srvConn{}), h.nidle, len(h.freeSrv)),
		stats.PoolOf(classes, "h2_conn", unsafe.Sizeof(h2Conn{}), h2c, 0),
		stats.PoolOf(classes, "tunnel", unsafe.Sizeof(Tunnel{}), tun, 0),
		buf,
		stats.TableOf(classes, "fd_table", loop.FDSlotBytes, f.FDs, f.FDCap),
		stats.TableOf(classes, "timer_heap", loop.TimerSlotBytes, f.Timers, f.TimerCap),
		stats.TableOf(classes, "epoll_events", loop.EventBytes, 0, f.EventCap),
	}
}

// IdleHTTPConn is what one idle kept-alive HTTP/1.1 client connection
// holds (stats.Memory.IdleHTTPConn): its h1Conn, in its size class — the
// Side (fd, tasklet, transport), the client, the keep-alive timer are
// fields of it — and one slot in its loop's fd table and timer heap. Its
// stream, parser and input buffer went back to the loop's pools when its
// last response ended (releaseIn, putStream).
func IdleHTTPConn(classes []int) []stats.Part {
	return []stats.Part{
		{Name: "h1_conn", Bytes: int64(stats.ClassOf(classes, int(unsafe.Sizeof(h1Conn{}))))},
		{Name: "fd_table_slot", Bytes: int64(loop.FDSlotBytes)},
		{Name: "timer_heap_slot", Bytes: int64(loop.TimerSlotBytes)},
	}
}
