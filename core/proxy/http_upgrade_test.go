package proxy

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/spliced-proxy/spliced/internal/testutil"
)

// TestHTTPUpgradeHandsEveryByteToTheTunnel: a 101 turns the http
// connection into a tcp Tunnel (toTunnel): both fds, and the bytes each
// side sent right after its head — the client's in the same write as its
// upgrade request, the server's in the same write as its 101 — leave the
// http side without a close and go first through the tunnel; then 4 MiB
// each way (an echo) arrive intact in every splice mode, a FIN from the
// client reaches the server and the server's close ends the tunnel, with
// every buffer and pipe back in the pools.
func TestHTTPUpgradeHandsEveryByteToTheTunnel(t *testing.T) {
	const size = 4 << 20
	e := newEnv(t, defaultTuning())
	addr := testutil.ServeOrigin(t, func(c *net.TCPConn) {
		defer c.Close()
		br := bufio.NewReader(c)
		head, err := readHead(br)
		if err != nil || !strings.Contains(head, "Upgrade: websocket\r\n") {
			return
		}
		io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\nserver-early|")
		io.Copy(c, br) // echo, the client's early bytes first, until its FIN
	}).Addr
	payload := make([]byte, size)
	rand.NewChaCha8([32]byte{1}).Read(payload)
	for _, mode := range []SpliceMode{SpliceOff, SpliceAuto, SpliceOn} {
		t.Run(modeName(mode), func(t *testing.T) {
			fe := httpFrontend(t, nil, addr)
			fe.Splice = mode
			c := e.dialHTTP(fe)
			io.WriteString(c, "GET /ws HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\nclient-early|")
			br := bufio.NewReader(c)
			resp, err := http.ReadResponse(br, &http.Request{Method: "GET"})
			if err != nil || resp.StatusCode != 101 {
				t.Fatalf("upgrade answer: %v %v", resp, err)
			}
			first := make([]byte, len("server-early|client-early|"))
			if _, err := io.ReadFull(br, first); err != nil || string(first) != "server-early|client-early|" {
				t.Fatalf("first tunnel bytes %q, %v; want the server's early bytes then the echo of the client's", first, err)
			}
			sent := make(chan error, 1)
			go func() {
				_, err := c.Write(payload)
				if err == nil {
					err = c.CloseWrite() // the server's echo ends on this FIN
				}
				sent <- err
			}()
			h := sha256.New()
			n, err := io.Copy(h, br) // to the end: the server closes after the FIN
			if err != nil || n != size || !bytes.Equal(h.Sum(nil), sha(payload)) {
				t.Fatalf("echo: %d of %d bytes, intact %v, %v", n, size, bytes.Equal(h.Sum(nil), sha(payload)), err)
			}
			if err := <-sent; err != nil {
				t.Fatal(err)
			}
			e.waitIdle()
		})
	}
}

func sha(b []byte) []byte { s := sha256.Sum256(b); return s[:] }
