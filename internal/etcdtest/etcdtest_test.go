package etcdtest_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/spliced-proxy/spliced/internal/etcdtest"
	"github.com/spliced-proxy/spliced/internal/testutil"
)

func client(t *testing.T, endpoints []string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

func put(cli *clientv3.Client, k, v string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, err := cli.Put(ctx, k, v)
	return err
}

func get(t *testing.T, cli *clientv3.Client, k string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := cli.Get(ctx, k)
	if err != nil {
		t.Fatalf("get %s: %v", k, err)
	}
	if len(r.Kvs) == 0 {
		return ""
	}
	return string(r.Kvs[0].Value)
}

func TestOneMemberStopRestartKeepsData(t *testing.T) {
	c := etcdtest.Start(t, 1)
	cli := client(t, c.Endpoints())
	if err := put(cli, "/k", "v1"); err != nil {
		t.Fatal(err)
	}
	c.Stop(0)
	if err := put(cli, "/k", "v2"); err == nil {
		t.Fatal("a put to a stopped member succeeded")
	}
	c.Restart(0)
	if got := get(t, cli, "/k"); got != "v1" {
		t.Fatalf("after restart /k = %q, want v1", got)
	}
	if err := put(cli, "/k", "v3"); err != nil {
		t.Fatalf("put after restart: %v", err)
	}
}

func TestThreeMembersKeepQuorumWithOneStopped(t *testing.T) {
	c := etcdtest.Start(t, 3)
	if n := len(c.Endpoints()); n != 3 {
		t.Fatalf("%d endpoints", n)
	}
	cli := client(t, c.Endpoints())
	if err := put(cli, "/k", "v1"); err != nil {
		t.Fatal(err)
	}
	c.Stop(1)
	// The client fails over to a running member; a put in flight on the
	// stopped one fails (a crash), and a leader change may take an
	// election timeout.
	var err error
	testutil.Eventually(t, 10*time.Second, func() bool { err = put(cli, "/k", "v2"); return err == nil },
		func() string { return fmt.Sprintf("a put with one of three members stopped: %v", err) })
	c.Restart(1)
	one := client(t, c.Endpoints()[1:2])
	if got := get(t, one, "/k"); got != "v2" {
		t.Fatalf("restarted member reads /k = %q, want v2", got)
	}
}
