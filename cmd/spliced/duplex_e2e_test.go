package main

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/internal/testutil"
)

// TestHTTPFullDuplexThroughStreams: an HTTP/2 client's request body keeps
// reaching the server after the response head came back (each line
// echoed before the next is sent), to an HTTP/1.1 server and to an
// HTTP/2 one (proto h2). Before, the first answer stopped the request's
// forwarding as an early 413 would, and the exchange stalled.
func TestHTTPFullDuplexThroughStreams(t *testing.T) {
	t.Parallel()
	in := startSpliced(t, "")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.NewResponseController(w).EnableFullDuplex()
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		br := bufio.NewReader(r.Body)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return
			}
			io.WriteString(w, line)
			w.(http.Flusher).Flush()
		}
	}), Protocols: new(http.Protocols), ReadHeaderTimeout: 5 * time.Second}
	srv.Protocols.SetHTTP1(true)
	srv.Protocols.SetUnencryptedHTTP2(true)
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	origin := ln.Addr().(*net.TCPAddr).Port
	var p http.Protocols
	p.SetUnencryptedHTTP2(true) // h2c with prior knowledge
	tr := &http.Transport{Protocols: &p}
	t.Cleanup(tr.CloseIdleConnections)
	for _, proto := range []string{"h1", "h2"} {
		t.Run(proto, func(t *testing.T) {
			in.MustDo(201, "POST", "/api/v1/backends", map[string]any{"name": "duplex-" + proto, "mode": "http",
				"servers": []map[string]any{{"name": "s1", "address": "127.0.0.1", "port": origin, "proto": proto}}})
			port := testutil.FreePort(t)
			in.MustDo(201, "POST", "/api/v1/frontends", map[string]any{"name": "duplex-" + proto, "mode": "http",
				"default_backend": "duplex-" + proto, "binds": []map[string]any{{"name": "b1", "address": "127.0.0.1", "port": port}}})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			pr, pw := io.Pipe()
			defer pw.Close()
			req, _ := http.NewRequestWithContext(ctx, "POST", "http://127.0.0.1:"+strconv.Itoa(port)+"/", pr)
			go io.WriteString(pw, "line 0\n")
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			br := bufio.NewReader(resp.Body)
			for i := range 5 {
				want := "line " + strconv.Itoa(i) + "\n"
				if i > 0 {
					go io.WriteString(pw, want)
				}
				if got, err := br.ReadString('\n'); got != want {
					t.Fatalf("echo %d: %q %v, want %q", i, got, err, want)
				}
			}
			pw.Close()
			if rest, err := io.ReadAll(br); err != nil || len(rest) != 0 {
				t.Fatalf("after the request's end: %q %v", rest, err)
			}
		})
	}
}
