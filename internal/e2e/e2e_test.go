package e2e

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The stand-in: the test binary run again with E2E_STANDIN=mode plays a
// node. It serves /healthz on its --admin-addr and, on SIGTERM, does what
// mode says: "ok" exits 0, "race" races (a real report when the tests run
// with -race) then exits 0, "panic" panics, "hang" ignores SIGTERM;
// "exit3" exits 3 on GET /exit. "panic-now" panics at once (for Run).
func TestMain(m *testing.M) {
	if mode := os.Getenv("E2E_STANDIN"); mode != "" {
		standIn(mode)
		return
	}
	os.Exit(Main(m))
}

func standIn(mode string) {
	if mode == "panic-now" {
		panic("stand-in panics at once")
	}
	var admin string
	for i, a := range os.Args {
		if a == "--admin-addr" && i+1 < len(os.Args) {
			admin = os.Args[i+1]
		}
	}
	sigc := make(chan os.Signal, 2)
	signal.Notify(sigc, syscall.SIGTERM)
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(http.ResponseWriter, *http.Request) {})
	mux.HandleFunc("/exit", func(http.ResponseWriter, *http.Request) { os.Exit(3) })
	go func() { fmt.Println(http.ListenAndServe(admin, mux)); os.Exit(1) }()
	<-sigc
	switch mode {
	case "race":
		race()
	case "panic":
		panic("stand-in panics on SIGTERM")
	case "hang":
		select {}
	}
	os.Exit(0)
}

// race writes x from two goroutines with nothing ordering the writes.
func race() {
	if !Race {
		fmt.Print("==================\nWARNING: DATA RACE\nWrite at 0x00c by goroutine 7:\n  main.race()\n==================\n")
		return
	}
	var x int
	done := make(chan bool)
	go func() { x = 1; done <- true }()
	x = 2
	<-done
	_ = x
}

// fakeTB records what a node's cleanup says of the test instead of
// failing the real one, and runs the cleanups when told.
type fakeTB struct {
	testing.TB
	mu       sync.Mutex
	errs     []string
	cleanups []func()
}

func (f *fakeTB) Errorf(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.errs = append(f.errs, fmt.Sprintf(format, args...))
}

func (f *fakeTB) Failed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.errs) > 0
}

func (f *fakeTB) Logf(string, ...any) {}

func (f *fakeTB) Cleanup(fn func()) { f.cleanups = append(f.cleanups, fn) }

// end runs the cleanups, last first, and returns the errors recorded.
func (f *fakeTB) end() []string {
	for i := len(f.cleanups) - 1; i >= 0; i-- {
		f.cleanups[i]()
	}
	return f.errs
}

func standInOptions(mode string) Options {
	return Options{Name: "stand-in", Binary: os.Args[0], Env: []string{"E2E_STANDIN=" + mode},
		Grace: 20 * time.Second}
}

// TestCleanupFailsTheTestOnWhatTheNodeReports: the stop at the end of a
// test is SIGTERM, and the test fails on a race, a panic, a death it did
// not expect or a stop that hangs; a clean stop, and a death the test
// expected, pass.
func TestCleanupFailsTheTestOnWhatTheNodeReports(t *testing.T) {
	for _, c := range []struct {
		name, mode string
		grace      time.Duration // of the stop, when not the usual
		during     func(t *testing.T, n *Node)
		want       []string // in the errors, in order; none: the test passes
	}{
		{name: "a clean stop passes", mode: "ok"},
		{name: "a data race fails", mode: "race", want: []string{"WARNING: DATA RACE"}},
		{name: "a panic fails", mode: "panic", want: []string{"panic: stand-in panics on SIGTERM"}},
		{name: "a stop that hangs fails", mode: "hang", grace: time.Second, want: []string{"still ran 1s after SIGTERM: killed"}},
		{name: "an unexpected death fails", mode: "exit3",
			during: func(t *testing.T, n *Node) { http.Get("http://" + n.Admin + "/exit"); <-n.Exited() },
			want:   []string{"died during the test (exit status 3) and the test did not expect it"}},
		{name: "an expected death passes", mode: "exit3",
			during: func(t *testing.T, n *Node) {
				n.ExpectDeath("the test asks it to exit")
				http.Get("http://" + n.Admin + "/exit")
				<-n.Exited()
			}},
		{name: "a kill the test declared passes", mode: "ok",
			during: func(t *testing.T, n *Node) { n.ExpectDeath("a crash"); n.Kill() }},
		{name: "a kill the test did not declare fails", mode: "ok",
			during: func(t *testing.T, n *Node) { n.Kill() },
			want:   []string{"killed without ExpectDeath"}},
		{name: "a known defect is excused", mode: "race",
			during: func(t *testing.T, n *Node) { n.KnownDefect(KnownDefect{Name: "the test's own", Match: "race()"}) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := &fakeTB{TB: t}
			o := standInOptions(c.mode)
			if c.grace != 0 {
				o.Grace = c.grace
			}
			n := Start(f, o)
			if c.during != nil {
				c.during(t, n)
			}
			errs := f.end()
			if len(errs) != len(c.want) {
				t.Fatalf("errors %q, want %d holding %q", errs, len(c.want), c.want)
			}
			for i, w := range c.want {
				if !strings.Contains(errs[i], w) {
					t.Errorf("error %d is %q, want it to hold %q", i, errs[i], w)
				}
			}
		})
	}
}

// TestRunFailsOnAPanic: a run that ends by itself is checked as a node is.
func TestRunFailsOnAPanic(t *testing.T) {
	f := &fakeTB{TB: t}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "E2E_STANDIN=panic-now")
	out, err := RunCmd(f, 10*time.Second, cmd)
	if err == nil || !strings.Contains(out, "panic: stand-in panics at once") {
		t.Fatalf("run: %v\n%s", err, out)
	}
	if len(f.errs) != 1 || !strings.Contains(f.errs[0], "panic: stand-in panics at once") {
		t.Fatalf("errors %q, want the panic", f.errs)
	}
}

// TestSplicedStopsCleanly: the real binary, started and stopped at the end
// of a test, exits 0 on SIGTERM with nothing to report.
func TestSplicedStopsCleanly(t *testing.T) {
	f := &fakeTB{TB: t}
	n := Start(f, Options{})
	if errs := f.end(); len(errs) != 0 {
		t.Fatalf("errors %q\n%s", errs, n.Logs())
	}
	if n.ExitErr() != nil || !strings.Contains(n.Logs(), "stopped") {
		t.Fatalf("exit %v, want status 0 after a logged stop:\n%s", n.ExitErr(), n.Logs())
	}
}

func TestReports(t *testing.T) {
	race := "==================\nWARNING: DATA RACE\nWrite at 0x1 by goroutine 7:\n  main.f()\n==================\n"
	for _, c := range []struct {
		name, out string
		want      []string
	}{
		{"clean", `{"level":"INFO","msg":"stopped"}` + "\n", nil},
		{"a race report up to its closing line", "a\n" + race + "b\n",
			[]string{"WARNING: DATA RACE\nWrite at 0x1 by goroutine 7:\n  main.f()\n"}},
		{"two races", race + race, []string{"WARNING: DATA RACE\nWrite at 0x1 by goroutine 7:\n  main.f()\n",
			"WARNING: DATA RACE\nWrite at 0x1 by goroutine 7:\n  main.f()\n"}},
		{"a panic with its stack", "x\npanic: boom\n\ngoroutine 1 [running]:\nmain.main()\n",
			[]string{"panic: boom\n\ngoroutine 1 [running]:\nmain.main()\n"}},
		{"a runtime fatal error", "fatal error: concurrent map writes\n", []string{"fatal error: concurrent map writes\n"}},
		{"panic: quoted in a log line is not one", `{"msg":"request","path":"/panic: x"}` + "\n", nil},
		{"a handler panic net/http recovered", "time=… level=WARN msg=\"http: panic serving 127.0.0.1:1: boom\"\n",
			[]string{"time=… level=WARN msg=\"http: panic serving 127.0.0.1:1: boom\"\n"}},
		{"a handler panic the API recovered", `{"msg":"admin handler panicked","panic":"boom"}` + "\n",
			[]string{`{"msg":"admin handler panicked","panic":"boom"}` + "\n"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := Reports(c.out)
			if len(got) != len(c.want) {
				t.Fatalf("Reports = %q, want %q", got, c.want)
			}
			for i := range got {
				if got[i] != c.want[i] {
					t.Errorf("report %d = %q, want %q", i, got[i], c.want[i])
				}
			}
		})
	}
}
