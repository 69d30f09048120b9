// Command etcd-dev runs an embedded etcd (the server of internal/etcdtest)
// for trying a cluster of spliced nodes on one machine and for the bench:
//
//	go run ./internal/etcdtest/etcd-dev --data-dir /tmp/etcd --listen-client 127.0.0.1:2379
//
// One member by default; --members 3 runs three members of one cluster on
// consecutive ports (clients on port, port+2, port+4; peers on port+1,
// port+3, port+5), so that one can be stopped (--members 3 then Ctrl-C is
// all or nothing: use a real etcd to stop a single member). It prints the
// --store URL to give spliced and runs until SIGINT or SIGTERM. For
// development only: no TLS, no authentication.
package main

import (
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spliced-proxy/spliced/internal/etcdtest"
)

func main() {
	dataDir := flag.String("data-dir", "", "directory of the members' data (created; kept across runs)")
	listen := flag.String("listen-client", "127.0.0.1:2379", "client address of the first member (host:port)")
	members := flag.Int("members", 1, "number of members (1 or 3), on consecutive ports")
	fsync := flag.Bool("fsync", true, "fsync etcd's writes (false: faster, loses data on a crash)")
	prefix := flag.String("prefix", "/spliced", "key prefix printed in the --store URL")
	flag.Parse()
	if err := run(*dataDir, *listen, *members, *fsync, *prefix); err != nil {
		fmt.Fprintln(os.Stderr, "etcd-dev:", err)
		os.Exit(1)
	}
}

func run(dataDir, listen string, members int, fsync bool, prefix string) error {
	if dataDir == "" {
		return fmt.Errorf("--data-dir is required")
	}
	if members != 1 && members != 3 {
		return fmt.Errorf("--members %d: 1 or 3", members)
	}
	host, p, err := net.SplitHostPort(listen)
	if err != nil {
		return fmt.Errorf("--listen-client %q: %w", listen, err)
	}
	port, err := strconv.Atoi(p)
	if err != nil || port <= 0 || port+2*members > 65535 {
		return fmt.Errorf("--listen-client %q: bad port", listen)
	}
	var clients, peers []string
	for i := range members {
		clients = append(clients, net.JoinHostPort(host, strconv.Itoa(port+2*i)))
		peers = append(peers, net.JoinHostPort(host, strconv.Itoa(port+2*i+1)))
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return err
	}
	start := time.Now()
	c, err := etcdtest.Launch(etcdtest.Options{Members: members, Dir: dataDir, ClientAddrs: clients, PeerAddrs: peers, Fsync: fsync})
	if err != nil {
		return err
	}
	defer c.Close()
	fmt.Printf("etcd ready in %v: %d member(s), data in %s\n", time.Since(start).Round(time.Millisecond), members, dataDir)
	fmt.Printf("  --store etcd://%s%s\n", strings.Join(clients, ","), prefix)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	fmt.Println("etcd-dev: stopping")
	return nil
}
