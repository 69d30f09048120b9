package main

import (
	"flag"
	"io"
	"log"
	"net"
	"time"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to accept clients on")
	server := flag.String("server", "", "address of the origin server (host:port)")
	flag.Parse()
	if *server == "" {
		log.Fatal("baseline: -server is required")
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatalf("baseline: listen: %v", err)
	}
	log.Printf("baseline: listening on %s, forwarding to %s", ln.Addr(), *server)
	for {
		c, err := ln.Accept()
		if err != nil {
			// EMFILE and friends: back off briefly instead of spinning.
			log.Printf("baseline: accept: %v", err)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		go tunnel(c.(*net.TCPConn), *server)
	}
}

// tunnel forwards both directions until each has seen EOF, passing
// half-closes on, then closes both sockets.
func tunnel(client *net.TCPConn, addr string) {
	defer client.Close()
	s, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return
	}
	server := s.(*net.TCPConn)
	defer server.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = io.Copy(server, client) // splice client -> server
		_ = server.CloseWrite()
	}()
	_, _ = io.Copy(client, server) // splice server -> client
	_ = client.CloseWrite()
	<-done
}
