package main

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"errors"
	"flag"
	"net"
	"strconv"
)

// cmdTLSFloor is the floor of the tls rows (issue 27): a TLS server in Go
// doing only what crypto/tls must do for the row's work — the handshake,
// and the records of the response — with no proxying, no event loop and
// no origin: it answers GET /64, /10k and /1m from memory (keep-alive,
// X-Bench-XFF: 127.0.0.1 so that run.sh's checks pass). run.sh runs it
// as "gotls" in tls mode, pinned and measured like the proxies, with
// GOMAXPROCS=1. What spliced spends above it on the same row is its own
// cost (reading the origin, copies, the loop); what the floor spends
// above HAProxy's or nginx's is Go's crypto against OpenSSL's (RSA-2048
// signatures above all).
func cmdTLSFloor(args []string) error {
	fs := flag.NewFlagSet("tlsfloor", flag.ContinueOnError)
	listen := fs.String("listen", "", "address to listen on")
	certFile := fs.String("cert", "", "certificate (PEM)")
	keyFile := fs.String("key", "", "private key (PEM)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *listen == "" || *certFile == "" || *keyFile == "" {
		return errors.New("need -listen, -cert and -key")
	}
	cert, err := tls.LoadX509KeyPair(*certFile, *keyFile)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	bodies := map[string][]byte{
		"/64":  bytes.Repeat([]byte("x"), 64),
		"/10k": bytes.Repeat([]byte("x"), 10240),
		"/1m":  bytes.Repeat([]byte("x"), 1<<20),
	}
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		go serveFloor(tls.Server(c, cfg), bodies)
	}
}

// serveFloor answers the requests of one connection until it closes.
func serveFloor(c *tls.Conn, bodies map[string][]byte) {
	defer c.Close()
	br := bufio.NewReaderSize(c, 4096)
	var out []byte
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return
		}
		path := ""
		if f := bytes.Fields(line); len(f) >= 2 {
			path = string(f[1])
		}
		closing := false
		for { // the rest of the head
			h, err := br.ReadSlice('\n')
			if err != nil {
				return
			}
			if len(bytes.TrimRight(h, "\r\n")) == 0 {
				break
			}
			if bytes.HasPrefix(bytes.ToLower(h), []byte("connection: close")) {
				closing = true
			}
		}
		body, ok := bodies[path]
		if !ok {
			c.Write([]byte("HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"))
			continue
		}
		out = append(out[:0], "HTTP/1.1 200 OK\r\nX-Bench-XFF: 127.0.0.1\r\nContent-Length: "...)
		out = strconv.AppendInt(out, int64(len(body)), 10)
		out = append(out, "\r\n\r\n"...)
		if len(body) <= 16<<10 {
			out = append(out, body...)
			body = nil
		}
		if _, err := c.Write(out); err != nil {
			return
		}
		if body != nil {
			if _, err := c.Write(body); err != nil {
				return
			}
		}
		if closing {
			return
		}
	}
}
