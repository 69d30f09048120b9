package main

import (
	"crypto/tls"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/internal/testutil"
)

var acmeSuccess = regexp.MustCompile(`spliced_certificate_acme_renewals_total\{result="success"\} (\d+)`)
var acmeFailure = regexp.MustCompile(`spliced_certificate_acme_renewals_total\{result="failure"\} (\d+)`)

func acmeCount(t *testing.T, in *instance, re *regexp.Regexp) int {
	t.Helper()
	m := re.FindStringSubmatch(string(in.MustDo(200, "GET", "/metrics", nil).Body))
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// TestACMEClusterOneOrderAnyNodeAnswers: three nodes share one managed
// certificate. Exactly one node orders it (the order lock in etcd); the
// CA's validation goes where DNS says, which need not be that node (the
// challenge answers are shared); the certificate reaches every node's TLS
// bind through the store. The node ordering is killed mid-order (its
// orders fail: DNS names an address where nothing answers) and another
// takes over once its lease expired.
func TestACMEClusterOneOrderAnyNodeAnswers(t *testing.T) {
	t.Parallel()
	httpPort, tlsPort := testutil.FreePort(t), testutil.FreePort(t)
	dns := startDNS(t, "127.0.0.9") // nothing listens there: orders fail
	ca := startPebble(t, pebbleOptions{HTTPPort: httpPort, TLSPort: testutil.FreePort(t), DNS: dns.Addr})
	c := newTestCluster(t, 1)
	for _, n := range []string{"a", "b", "c"} {
		c.nodes[n] = c.startNodeArgs(n, nodeAddrs[n], t.TempDir(), fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t)),
			[]string{"--store", c.storeURL(), "--node-name", n, "--node-address", nodeAddrs[n], "--log-format", "text", "--acme-retry", "1s"})
	}
	a := c.nodes["a"]
	t.Cleanup(func() {
		if t.Failed() {
			for _, n := range c.all() {
				t.Logf("node %s:\n%s", n.Name, grepLines(n.Logs(), "acme"))
			}
			t.Logf("pebble:\n%s", ca.out.String())
		}
	})
	a.MustDo(201, "POST", "/api/v1/frontends?"+clusterWait, `{"name":"public","mode":"http","binds":[`+
		`{"name":"clear","address":"${NODE_ADDRESS}","port":`+strconv.Itoa(httpPort)+`}]}`)
	body := managedBody("site", ca, "http-01", "acme.test")
	a.MustDo(201, "POST", "/api/v1/certificates?"+clusterWait, body)
	a.MustDo(201, "POST", "/api/v1/frontends/public/binds?"+clusterWait, `{"name":"tls","address":"${NODE_ADDRESS}","port":`+strconv.Itoa(tlsPort)+
		`,"tls":{"certificates":["site"]}}`)

	// One node orders, and fails; the others say which one.
	var holder *clusterNode
	testutil.Eventually(t, 60*time.Second, func() bool {
		holder = nil
		for _, n := range c.all() {
			if acmeCount(t, n.instance, acmeFailure) > 0 {
				if holder != nil {
					t.Fatalf("both %s and %s ordered", holder.Name, n.Name)
				}
				holder = n
			}
		}
		return holder != nil
	}, "one node's order fails")
	var others []*clusterNode
	for _, n := range c.all() {
		if n != holder {
			others = append(others, n)
		}
	}
	waitManaged(t, others[0].instance, "site", 20*time.Second, "ordered_by names the holder", func(m managedCert) bool {
		return strings.Contains(string(others[0].MustDo(200, "GET", "/api/v1/certificates/site", nil).Body), `"ordered_by":"`+holder.Name+`"`)
	})
	// The holder dies mid-order: once its lease expired, one of the others
	// takes the order over (and fails too: DNS still names nowhere).
	holder.ExpectDeath("killed mid-order: another node must take the order over after its lease")
	holder.Kill()
	killed := time.Now()
	var next, answerer *clusterNode
	testutil.Eventually(t, 60*time.Second, func() bool {
		for _, n := range others {
			if acmeCount(t, n.instance, acmeFailure) > 0 {
				next = n
			}
		}
		return next != nil
	}, "another node takes the order over")
	t.Logf("node %s took the order over %s after node %s was killed", next.Name, time.Since(killed).Round(time.Millisecond), holder.Name)
	for _, n := range others {
		if n != next {
			answerer = n
		}
	}
	// DNS now names the node that does not order: it answers the
	// challenge the other one published.
	dns.Set(answerer.Address)
	for _, n := range others {
		waitManaged(t, n.instance, "site", 60*time.Second, "issued on node "+n.Name, func(m managedCert) bool {
			return m.ChainSHA256 != "" && m.ACME.Status == "valid"
		})
	}
	if got := acmeCount(t, next.instance, acmeSuccess); got != 1 {
		t.Errorf("node %s (ordering) counts %d successful orders, want 1", next.Name, got)
	}
	if got := acmeCount(t, answerer.instance, acmeSuccess) + acmeCount(t, answerer.instance, acmeFailure); got != 0 {
		t.Errorf("node %s (answering only) ordered %d times", answerer.Name, got)
	}
	if !strings.Contains(pebbleLog(ca), "acme.test") {
		t.Error("pebble never validated acme.test")
	}
	issued := getManaged(t, others[0].instance, "site")
	for _, n := range others {
		testutil.Eventually(t, 10*time.Second, func() bool {
			cn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", net.JoinHostPort(n.Address, strconv.Itoa(tlsPort)),
				&tls.Config{ServerName: "acme.test", InsecureSkipVerify: true})
			if err != nil {
				return false
			}
			defer cn.Close()
			return fingerprint(cn.ConnectionState().PeerCertificates[0]) == issued.Fingerprint
		}, "node "+n.Name+" serves the certificate")
	}
}

func pebbleLog(p *pebble) string { return p.out.String() }
