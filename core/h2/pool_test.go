package h2

import (
	"bytes"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// TestPoolLendsReleasedMemory: connections of one loop sharing a Pool go
// from idle (ReleaseBuffers: nothing held) to busy (a request, its
// response) and back without allocating, once the pool holds their sets;
// without a Pool each busy period grows its memory again. A second
// ReleaseBuffers of an idle connection keeps nothing more.
func TestPoolLendsReleasedMemory(t *testing.T) {
	cycle := func(pool *Pool) (float64, *Conn) {
		cfg := Config{Now: func() time.Time { return time.Time{} }, Pool: pool}
		var conns [2]*Conn
		var frames [2][]byte
		for i := range conns {
			h := &nopHandler{respond: true, body: make([]byte, 64), fields: nginxFields}
			conns[i] = handshake(t, h, cfg)
			conns[i].ReleaseBuffers()
		}
		var buf, eb bytes.Buffer
		fr := http2.NewFramer(&buf, nil)
		encs := [2]*hpack.Encoder{hpack.NewEncoder(&eb), hpack.NewEncoder(&eb)} // a table each
		ids := [2]uint32{1, 1}
		one := func() {
			for i, c := range conns {
				buf.Reset()
				eb.Reset()
				for _, kv := range [][2]string{{":method", "GET"}, {":scheme", "http"}, {":path", "/"}, {":authority", "a"}} {
					encs[i].WriteField(hpack.HeaderField{Name: kv[0], Value: kv[1]})
				}
				fr.WriteHeaders(http2.HeadersFrameParam{StreamID: ids[i], BlockFragment: eb.Bytes(), EndStream: true, EndHeaders: true})
				fr.WriteWindowUpdate(0, 64)
				ids[i] += 2
				frames[i] = append(frames[i][:0], buf.Bytes()...)
				if _, err := c.Feed(frames[i]); err != nil {
					t.Fatal(err)
				}
				c.Drained(len(c.Output()))
				c.ReleaseBuffers()
				c.ReleaseBuffers() // a second time: nothing more to keep
			}
		}
		for range 10 {
			one()
		}
		return ownAllocs(200, one), conns[0]
	}
	var pool Pool
	if a, c := cycle(&pool); a != 0 {
		t.Fatalf("%.1f allocations per two busy periods with a Pool, want 0", a)
	} else if c.out != nil || c.streams != nil || c.free != nil || c.eblock != nil || c.req.Fields != nil {
		t.Fatal("an idle connection still holds memory lent by its Pool")
	}
	if n := len(pool.sets); n != 2 {
		t.Fatalf("the pool keeps %d sets after two connections went idle, want 2", n)
	}
	if a, _ := cycle(nil); a == 0 {
		t.Fatal("no allocation per busy period without a Pool: the test does not measure the pool")
	}
}

// TestPoolBounds: a Pool keeps at most poolSets sets and poolOutBytes of
// output buffers, none above poolMaxOut, and no empty set.
func TestPoolBounds(t *testing.T) {
	var p Pool
	p.put(busyMem{})
	p.put(busyMem{out: make([]byte, 0, poolMaxOut+1)})
	if len(p.sets) != 0 {
		t.Fatalf("%d sets kept, want none (empty, too large)", len(p.sets))
	}
	for range poolOutBytes / poolMaxOut {
		p.put(busyMem{out: make([]byte, 10, poolMaxOut)})
	}
	p.put(busyMem{out: make([]byte, 0, 1)})
	if len(p.sets) != poolOutBytes/poolMaxOut || p.outBytes != poolOutBytes {
		t.Fatalf("%d sets, %d output bytes kept, want %d, %d", len(p.sets), p.outBytes, poolOutBytes/poolMaxOut, poolOutBytes)
	}
	m, ok := p.take()
	if !ok || len(m.out) != 0 || cap(m.out) != poolMaxOut || p.outBytes != poolOutBytes-poolMaxOut {
		t.Fatalf("take: ok %v, len %d cap %d, %d bytes left", ok, len(m.out), cap(m.out), p.outBytes)
	}
	p = Pool{}
	for range poolSets + 1 {
		p.put(busyMem{streams: make([]*stream, 0, 1)})
	}
	if len(p.sets) != poolSets {
		t.Fatalf("%d sets kept, want %d", len(p.sets), poolSets)
	}
}
