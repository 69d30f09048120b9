package testssl

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// testdata/nginx-1.22-debian.json is the scan (Args, testssl.sh 3.0.8)
// of nginx 1.22.1 on Debian 12 with the ssl settings of Debian's
// nginx.conf (ssl_protocols TLSv1 to TLSv1.3, ssl_prefer_server_ciphers
// on) and a self-signed ECDSA P-256 certificate for localhost and
// 127.0.0.1 valid 90 days, made with the openssl command: the two LOW
// findings issue 15 quotes for nginx's defaults, CBC suites offered.
func TestUnexpectedFindsNginxDefaultsTwoLowFindings(t *testing.T) {
	b, err := os.ReadFile("testdata/nginx-1.22-debian.json")
	if err != nil {
		t.Fatal(err)
	}
	fs, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	if m := Missing(fs); len(m) > 0 {
		t.Fatalf("a complete scan lacks %v", m)
	}
	got := Unexpected(fs, Merge(Scanner, TestCertificate))
	var ids []string
	for _, f := range got {
		ids = append(ids, f.Severity+" "+f.ID)
	}
	want := []string{"LOW cipherlist_AVERAGE", "LOW LUCKY13"}
	if !slices.Equal(ids, want) {
		t.Fatalf("unexpected findings %v, want %v:\n%s", ids, want, Report(got))
	}
	// Without the expectations, the certificate's and the scanner's own
	// findings fail too.
	all := Unexpected(fs, nil)
	for _, id := range []string{"engine_problem", "cert_chain_of_trust", "cert_revocation"} {
		if !slices.ContainsFunc(all, func(f Finding) bool { return f.ID == id }) {
			t.Errorf("%s not reported without expectations", id)
		}
	}
}

func TestCleanSeverities(t *testing.T) {
	for sev, clean := range map[string]bool{
		"OK": true, "INFO": true, "DEBUG": true,
		"LOW": false, "MEDIUM": false, "HIGH": false, "CRITICAL": false,
		"WARN": false, "FATAL": false, "": false,
	} {
		if Clean(sev) != clean {
			t.Errorf("Clean(%q) = %v, want %v", sev, !clean, clean)
		}
	}
}

func TestParseRefusesWhatIsNotAScan(t *testing.T) {
	for _, in := range []string{``, `{}`, `[{"id":"x"}]`, `[{"severity":"OK"}]`, `[1]`} {
		if _, err := Parse([]byte(in)); err == nil {
			t.Errorf("Parse(%q) accepted", in)
		}
	}
	fs, err := Parse([]byte(`[{"id":"heartbleed","ip":"127.0.0.1/127.0.0.1","port":"443","severity":"OK","cve":"CVE-2014-0160","finding":"not vulnerable"}]`))
	if err != nil || len(fs) != 1 || fs[0].CVE != "CVE-2014-0160" {
		t.Fatalf("Parse = %+v, %v", fs, err)
	}
	if m := Missing(fs); slices.Contains(m, "heartbleed") || !slices.Contains(m, "TLS1_3") {
		t.Fatalf("Missing = %v", m)
	}
}

func TestArgsStayOffline(t *testing.T) {
	a := strings.Join(Args("/tmp/x.json", "127.0.0.1:443"), " ")
	for _, want := range []string{"-n none", "--connect-timeout", "--openssl-timeout", "--warnings off", "--jsonfile /tmp/x.json"} {
		if !strings.Contains(a, want) {
			t.Errorf("Args lack %q: %s", want, a)
		}
	}
	if strings.Contains(a, "--phone-out") {
		t.Errorf("Args would fetch CRL/OCSP: %s", a)
	}
	if !strings.HasSuffix(a, " 127.0.0.1:443") {
		t.Errorf("the target must be last: %s", a)
	}
}

// fakeScanner writes an executable shell script standing for testssl.sh.
func fakeScanner(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "testssl")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRunReadsTheJSONFileItAskedFor(t *testing.T) {
	// The script writes one finding to the file named after --jsonfile.
	bin := fakeScanner(t, `while [ "$1" != --jsonfile ]; do shift; done
printf '[{"id":"TLS1_3","ip":"127.0.0.1/127.0.0.1","port":"443","severity":"OK","finding":"offered"}]' > "$2"
echo scanned`)
	fs, out, err := Run(context.Background(), bin, t.TempDir(), "127.0.0.1:443", 10*time.Second, 10*time.Second)
	if err != nil || len(fs) != 1 || fs[0].ID != "TLS1_3" || !strings.Contains(out, "scanned") {
		t.Fatalf("Run = %+v, %q, %v", fs, out, err)
	}
}

func TestRunStopsAScanThatOutlivesItsTimeout(t *testing.T) {
	// A child of the scanner holds the output open: the whole process
	// group must go, not only the script.
	bin := fakeScanner(t, `while :; do echo checking; sleep 0.05; done & sleep 60`)
	start := time.Now()
	_, _, err := Run(context.Background(), bin, t.TempDir(), "127.0.0.1:443", 10*time.Second, 300*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "did not finish within") {
		t.Fatalf("Run = %v, want a timeout", err)
	}
	if d := time.Since(start); d > 3*time.Second { // WaitDelay is 5 s
		t.Fatalf("Run returned after %v", d)
	}
}

func TestRunStopsAScanThatStopsPrinting(t *testing.T) {
	// Slow but printing: it runs past stall, to its end.
	bin := fakeScanner(t, `while [ "$1" != --jsonfile ]; do shift; done
for i in 1 2 3 4 5 6; do echo check $i; sleep 0.1; done
printf '[{"id":"TLS1_3","ip":"127.0.0.1/127.0.0.1","port":"443","severity":"OK","finding":"offered"}]' > "$2"`)
	if fs, out, err := Run(context.Background(), bin, t.TempDir(), "127.0.0.1:443", 400*time.Millisecond, 10*time.Second); err != nil || len(fs) != 1 {
		t.Fatalf("a scan printing every 100 ms, stall 400 ms: %+v, %v\n%s", fs, err, out)
	}
	// Printing, then silent (a child holding the output open): stuck.
	bin = fakeScanner(t, `echo first check; sleep 60 & sleep 60`)
	start := time.Now()
	_, out, err := Run(context.Background(), bin, t.TempDir(), "127.0.0.1:443", 300*time.Millisecond, 10*time.Second)
	if err == nil || !strings.Contains(err.Error(), "printed nothing for 300ms") || !strings.Contains(out, "first check") {
		t.Fatalf("Run = %v (%q), want stuck", err, out)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("Run returned after %v", d)
	}
}

func TestRunFailsWhenTheScannerFails(t *testing.T) {
	bin := fakeScanner(t, `echo "Fatal error: cannot connect" >&2; exit 246`)
	_, out, err := Run(context.Background(), bin, t.TempDir(), "127.0.0.1:443", 10*time.Second, 10*time.Second)
	if err == nil || !strings.Contains(out, "cannot connect") {
		t.Fatalf("Run = %q, %v; want the failure and its output", out, err)
	}
}
