// Package e2e runs the spliced binary for the end-to-end tests of
// cmd/spliced and cmd/spliced/faults, as net/http/httptest runs servers:
//
//	func TestMain(m *testing.M) { os.Exit(e2e.Main(m)) }
//
//	n := e2e.Start(t, e2e.Options{Args: []string{"--log-format", "json"}})
//	… n.Admin, n.StateDir, n.Logs(), n.WaitLog(t, "…") …
//
// Binary builds cmd/spliced once per test process (so once per `go test`
// run of a package), with -race when the tests run with it. Start runs it
// on a free admin port with a temporary state directory and waits for
// /healthz. At the end of the test the node is stopped with SIGTERM
// (SIGKILL only after a bounded grace, StopGrace, and that fails the
// test), so that the race detector can print, and then the test FAILS
// when the node's output holds
// a data race report, a panic, a Go runtime fatal error or a handler panic
// recovered by net/http or the API (Reports), or when the node died
// without the test saying it expected that (Options.ExpectDeath,
// Node.ExpectDeath: a test that kills a node with SIGKILL or makes it
// crash says so; its output is checked all the same). Run does the same
// for a run of the binary that ends by itself (spliced validate, token,
// a start that must be refused).
//
// A known defect whose report must not fail one test (until it is fixed)
// is named with Node.KnownDefect, which points at where it is tracked;
// only reports that match its pattern are excused.
//
// It is imported by _test.go files only; nothing in it runs in spliced.
// Its functions may be called from any goroutine of a test, as testing.TB
// allows.
package e2e
