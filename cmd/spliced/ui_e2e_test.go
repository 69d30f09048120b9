package main

// The browser test of the admin page: Debian's chromium, headless, driven
// with chromedp against the built binary. It does what an operator does
// (create a backend and a frontend through the forms, watch traffic, drain
// a server, restore a revision, sign in as a viewer) and fails on any
// console error or uncaught exception of the page.

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/spliced-proxy/spliced/internal/testutil"
)

// chromiumPath finds Debian's chromium; the test fails (never skips)
// without it, and says how to get it.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"/usr/bin/chromium", "/usr/bin/chromium-browser"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	t.Fatal("chromium is not installed: `make test` installs it (scripts/test-deps.sh runs apt-get install chromium)")
	return ""
}

// pageErrors collects console errors and uncaught exceptions of the page.
type pageErrors struct {
	mu   sync.Mutex
	errs []string
}

func (p *pageErrors) add(s string) {
	p.mu.Lock()
	p.errs = append(p.errs, s)
	p.mu.Unlock()
}

// String lists the errors seen so far, for failure messages.
func (p *pageErrors) String() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.errs) == 0 {
		return ""
	}
	return "\nbrowser console errors:\n  " + strings.Join(p.errs, "\n  ")
}

func (p *pageErrors) check(t *testing.T, when string) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.errs) > 0 {
		t.Fatalf("browser console errors (%s):\n  %s", when, strings.Join(p.errs, "\n  "))
	}
}

// reset forgets the errors seen so far (after a step that causes one on
// purpose).
func (p *pageErrors) reset() {
	p.mu.Lock()
	p.errs = nil
	p.mu.Unlock()
}

// watch reads the console of a tab: console.error calls, uncaught
// exceptions and unhandled rejections, and browser log entries at level
// error, among them every Content-Security-Policy violation (Chromium logs
// each refused script, style, eval or frame as an error). API answers such as 401, 404 or 422 are data for the page, not
// errors of the page: the network log lines Chromium prints for them are
// ignored when the URL is under /api/v1/; everything else counts.
func (p *pageErrors) watch(ctx context.Context) {
	msgs := chromedp.Console(ctx)
	go func() {
		for m, err := range msgs {
			if err != nil {
				return
			}
			switch {
			case m.IsException():
				p.add(fmt.Sprintf("uncaught exception: %s (%s:%d)", m.Text, m.URL, m.Line+1))
			case m.Type == chromedp.ConsoleError:
				if m.Source == "network" && strings.Contains(m.URL, "/api/v1/") {
					continue
				}
				src := m.Source
				if src == "" {
					src = "console.error"
				}
				p.add(fmt.Sprintf("%s: %s (%s:%d)", src, m.Text, m.URL, m.Line+1))
			}
		}
	}()
}

// uiTest bundles the browser tab and the running spliced.
type uiTest struct {
	t     *testing.T
	ctx   context.Context
	in    *instance
	base  string
	shots string
	errs  *pageErrors
}

func (u *uiTest) run(what string, actions ...chromedp.Action[chromedp.Void]) {
	u.t.Helper()
	ctx, cancel := context.WithTimeout(u.ctx, 15*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		u.shot("failure")
		u.t.Fatalf("%s: %v%s", what, err, u.errs.String())
	}
}

// page navigates by the nav bar (as a user does) and waits for the page.
func (u *uiTest) page(name string) {
	u.t.Helper()
	u.run("open "+name,
		chromedp.Click(chromedp.CSS(`#nav a[data-route="`+name+`"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#page-`+name+`[data-ready="1"]`)))
}

// fill sets an input or select the way typing does: value, then input and
// change events.
func (u *uiTest) fill(sel, value string) {
	u.t.Helper()
	js := fmt.Sprintf(`(() => {
		const el = document.querySelector(%q);
		if (!el) return false;
		el.focus(); el.value = %q;
		el.dispatchEvent(new Event('input', {bubbles: true}));
		el.dispatchEvent(new Event('change', {bubbles: true}));
		return true;
	})()`, sel, value)
	if !evalJS[bool](u, js) {
		u.t.Fatalf("fill %s: no such element", sel)
	}
}

// evalJS evaluates a JavaScript expression in the page.
func evalJS[T any](u *uiTest, js string) T {
	u.t.Helper()
	ctx, cancel := context.WithTimeout(u.ctx, 15*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js))
	if err != nil {
		u.shot("failure")
		u.t.Fatalf("evaluate %s: %v%s", js, err, u.errs.String())
	}
	return v
}

func (u *uiTest) text(sel string) string {
	u.t.Helper()
	return evalJS[string](u, fmt.Sprintf(`(() => { const e = document.querySelector(%q); return e ? e.textContent : ''; })()`, sel))
}

// waitJS polls a JavaScript condition until it is true.
func (u *uiTest) waitJS(d time.Duration, what, js string) {
	u.t.Helper()
	testutil.Eventually(u.t, d, func() bool { return evalJS[bool](u, js) }, what)
}

func (u *uiTest) shot(name string) {
	u.t.Helper()
	ctx, cancel := context.WithTimeout(u.ctx, 10*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		u.t.Logf("screenshot %s: %v", name, err)
		return
	}
	p := filepath.Join(u.shots, name+".png")
	if err := os.WriteFile(p, png, 0o644); err != nil {
		u.t.Fatal(err)
	}
	u.t.Logf("screenshot %s", p)
}

func (u *uiTest) apiJSON(path string, v any, hdr ...string) {
	u.t.Helper()
	u.in.MustDo(200, "GET", path, nil, hdr...).JSON(u.t, v)
}

// newUITest starts chromium (stopped when t ends) for the admin page of in,
// its walk bounded (walkContext), its console watched.
func newUITest(t *testing.T, in *instance) *uiTest {
	t.Helper()
	bctx := startBrowser(t)
	ctx, cancelT := walkContext(t, bctx)
	t.Cleanup(cancelT)
	errs := &pageErrors{}
	errs.watch(ctx)
	return &uiTest{t: t, ctx: ctx, in: in, base: "http://" + in.Admin + "/ui/", shots: t.TempDir(), errs: errs}
}

// walkContext bounds a browser walk. Each step has its own bound (run,
// evalJS, shot: 10 to 15 s; waitJS its own): a step that hangs fails
// there. The walk as a whole, dozens of steps, is bounded by the test
// binary's deadline (-timeout), less a minute to report: a fixed budget
// for the whole (90 s for TestUIAdminPageInBrowser, 40 s of work on an
// idle machine) failed walks whose every step was in time on a loaded
// one.
func walkContext(t *testing.T, bctx context.Context) (context.Context, context.CancelFunc) {
	if d, ok := t.Deadline(); ok {
		return context.WithDeadline(bctx, d.Add(-time.Minute))
	}
	return context.WithCancel(bctx)
}

// browserProc is one test's chromium: its own profile and crash dumps
// under t.TempDir(), its output (chromium logs to stderr with
// --enable-logging=stderr --v=1) kept in a bounded buffer, and its
// *exec.Cmd, whose exit status is read once the allocator has reaped it.
// A start that fails, or a test that fails, prints all of it: a chromium
// that dies at start (as TestUINodesReseed's once did, with only dbus and
// crashpad lines) then says how it died.
type browserProc struct {
	t        *testing.T
	crashDir string
	out      *headTail
	mu       sync.Mutex
	cmd      *exec.Cmd
}

// headTail keeps the first and the last bytes written to it: the start of
// chromium's output and its end (where a crash or a fatal error is), never
// more than head+tail bytes however long the test runs.
type headTail struct {
	mu         sync.Mutex
	head, tail []byte
	max        int
	dropped    int64
}

func (b *headTail) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(p)
	if room := b.max - len(b.head); room > 0 {
		k := min(room, len(p))
		b.head = append(b.head, p[:k]...)
		p = p[k:]
	}
	if len(p) > 0 {
		b.tail = append(b.tail, p...)
		if over := len(b.tail) - b.max; over > 0 {
			b.dropped += int64(over)
			b.tail = append(b.tail[:0], b.tail[over:]...)
		}
	}
	return n, nil
}

func (b *headTail) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.dropped == 0 {
		return string(b.head) + string(b.tail)
	}
	return fmt.Sprintf("%s\n[... %d bytes left out ...]\n%s", b.head, b.dropped, b.tail)
}

// chromiumPresetEnv are the variables chromium sets itself as it starts,
// given to it beforehand. In a multithreaded browser process glibc's
// setenv of a variable that is not there grows the environment array:
// realloc moves it and frees the old one while other threads may be
// reading it in getenv. Chromium 148 does so with FC_FONTATIONS=1, from a
// thread-pool worker (the fonts' setup), after DBUS_SESSION_BUS_ADDRESS=
// disabled: on its main thread (headless): with some sizes of the
// environment the array moves, and a thread in getenv at that moment
// reads the freed array and the browser dies at start with SIGSEGV
// (TestUINodesReseed's "chrome failed to start": its crash dump had a
// thread in getenv("TMPDIR") walking a freed copy of environ). Set
// beforehand, with the values chromium would set, setenv only replaces a
// pointer in place: nothing is freed.
var chromiumPresetEnv = []string{"DBUS_SESSION_BUS_ADDRESS=disabled:", "FC_FONTATIONS=1"}

// startBrowser starts chromium for t, stopped when t ends, and returns the
// context of its first tab. The first action on a chromedp context starts
// the browser and must not carry a timeout (the timeout would end the
// browser); a start that fails fails t with chromium's exit status, its
// output and its crash dumps.
func startBrowser(t *testing.T) context.Context {
	t.Helper()
	return startBrowserEnv(t, chromiumPresetEnv)
}

// startBrowserEnv is startBrowser with env added to chromium's
// environment (TestUIBrowserStartStress varies it).
func startBrowserEnv(t *testing.T, env []string) context.Context {
	t.Helper()
	dir := t.TempDir()
	// Crashpad keeps its dumps under the default user data directory
	// ($XDG_CONFIG_HOME/chromium, whatever --user-data-dir says; this
	// chromium ignores --crash-dumps-dir): the test's own, so that a dump
	// is this browser's.
	config := filepath.Join(dir, "config")
	bp := &browserProc{t: t, crashDir: filepath.Join(config, "chromium", "Crash Reports"), out: &headTail{max: 64 << 10}}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true), // root in CI containers needs it
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("no-default-browser-check", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.UserDataDir(filepath.Join(dir, "profile")),
		chromedp.WindowSize(1280, 800),
		// For the report of a failure: chromium's own log on its
		// stderr.
		chromedp.Flag("enable-logging", "stderr"),
		chromedp.Flag("v", "1"),
		chromedp.Env(append(slices.Clone(env), "XDG_CONFIG_HOME="+config)...),
		chromedp.CombinedOutput(bp.out),
		chromedp.ModifyCmdFunc(bp.modifyCmd),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	// stop ends the browser and waits for the allocator, which has then
	// reaped chromium: its exit status is known.
	var once sync.Once
	stop := func() { once.Do(func() { cancelCtx(); cancelAlloc() }) }
	startFailed := false
	t.Cleanup(func() {
		stop()
		// SPLICED_UI_BROWSER_LOG=1 shows it for a test that passed too.
		if (t.Failed() && !startFailed) || os.Getenv("SPLICED_UI_BROWSER_LOG") != "" {
			t.Logf("chromium, stopped at the end of the test: %s\nchromium's output:\n%s", bp.report(), bp.out)
		}
	})
	if err := chromedp.Do(ctx); err != nil {
		stop()
		startFailed = true // err has chromium's output
		t.Fatalf("starting chromium: %v\n%s", err, bp.report())
	}
	return ctx
}

// modifyCmd does what chromedp does without a ModifyCmdFunc (chromium is
// killed when the thread that started it ends, i.e. with the test
// process) and keeps cmd for its exit status.
func (bp *browserProc) modifyCmd(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = new(syscall.SysProcAttr)
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	bp.mu.Lock()
	bp.cmd = cmd
	bp.mu.Unlock()
}

// report says how chromium ended and lists its crash dumps, each with the
// process type crashpad recorded in it. Call it after stop: the allocator
// has then waited for the process.
func (bp *browserProc) report() string {
	var b strings.Builder
	bp.mu.Lock()
	cmd := bp.cmd
	bp.mu.Unlock()
	switch {
	case cmd == nil:
		b.WriteString("chromium was not run")
	case cmd.ProcessState == nil:
		b.WriteString("chromium's exit status is unknown (not reaped)")
	default:
		fmt.Fprintf(&b, "chromium (pid %d) ended: %s", cmd.ProcessState.Pid(), cmd.ProcessState)
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.CoreDump() {
			b.WriteString(" (core dumped)")
		}
	}
	var dumps []string
	filepath.WalkDir(bp.crashDir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".dmp") {
			return nil
		}
		info, _ := d.Info()
		s := fmt.Sprintf("%s (%d bytes)", strings.TrimPrefix(p, bp.crashDir+"/"), info.Size())
		if data, err := os.ReadFile(p); err == nil {
			s += ": " + dumpAnnotations(data)
			// t.TempDir() goes with the test: keep a copy to read
			// further (other threads, memory).
			keep := filepath.Join(os.TempDir(), "spliced-ui-crash-"+strings.NewReplacer("/", "_", " ", "_").Replace(bp.t.Name())+"-"+d.Name())
			if os.WriteFile(keep, data, 0o644) == nil {
				s += "\n    kept as " + keep
			}
		}
		dumps = append(dumps, s)
		return nil
	})
	if len(dumps) == 0 {
		b.WriteString("; no crash dump")
	} else {
		fmt.Fprintf(&b, "; crash dumps in %s:\n  %s", bp.crashDir, strings.Join(dumps, "\n  "))
	}
	return b.String()
}

// dumpAnnotations says which process a crashpad minidump is of (its
// "ptype" annotation: browser, renderer, gpu-process…), the signal and the
// crashing instruction as module+offset (the exception stream, the
// thread's context and the module list of the minidump format): enough to
// look the crash up in the module with objdump.
func dumpAnnotations(data []byte) string {
	var b strings.Builder
	if i := bytes.Index(data, []byte("ptype\x00")); i >= 0 {
		v := bytes.TrimLeftFunc(data[i+6:], func(r rune) bool { return r < 0x20 || r > 0x7e })
		if j := bytes.IndexFunc(v, func(r rune) bool { return r < 0x20 || r > 0x7e }); j >= 0 {
			fmt.Fprintf(&b, "ptype=%s", v[:min(j, 40)])
		}
	}
	le := binary.LittleEndian
	u32 := func(off uint32) uint32 {
		if int(off)+4 > len(data) {
			return 0
		}
		return le.Uint32(data[off:])
	}
	u64 := func(off uint32) uint64 {
		if int(off)+8 > len(data) {
			return 0
		}
		return le.Uint64(data[off:])
	}
	if u32(0) != 0x504d444d { // "MDMP"
		return b.String()
	}
	var exc, mods uint32
	for i, n, dir := uint32(0), u32(8), u32(12); i < n && i < 64; i++ {
		switch u32(dir + 12*i) {
		case 6: // exception stream
			exc = u32(dir + 12*i + 8)
		case 4: // module list
			mods = u32(dir + 12*i + 8)
		}
	}
	if exc == 0 {
		return b.String()
	}
	rip := u64(u32(exc+164) + 248) // the context's Rip (x86-64)
	where := fmt.Sprintf("%#x", rip)
	for i, n := uint32(0), u32(mods); mods != 0 && i < n && i < 4096; i++ {
		m := mods + 4 + 108*i
		base, size := u64(m), uint64(u32(m+8))
		if rip >= base && rip < base+size {
			name := u32(m + 20)
			if l := u32(name); int(name+4+l) <= len(data) {
				u := make([]uint16, l/2)
				for k := range u {
					u[k] = le.Uint16(data[name+4+uint32(2*k):])
				}
				where = fmt.Sprintf("%s+%#x", filepath.Base(string(utf16.Decode(u))), rip-base)
			}
			break
		}
	}
	fmt.Fprintf(&b, " signal %d (code %#x) in thread %d at %s", u32(exc+8), u32(exc+12), u32(exc), where)
	return b.String()
}

// TestUIAdminPageInBrowser walks the admin page as an operator would.
func TestUIAdminPageInBrowser(t *testing.T) {
	t.Parallel()
	start := time.Now()
	chromiumPath(t)
	in := startSpliced(t, "")

	// The origin: a Go HTTP server; the frontend is a tcp tunnel to it.
	var served atomic.Int64
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		io.WriteString(w, strings.Repeat("spliced ", 64))
	}))
	t.Cleanup(origin.Close)
	oport := origin.URL[strings.LastIndex(origin.URL, ":")+1:]

	shots := t.TempDir()
	if d := os.Getenv("SPLICED_UI_SHOTS"); d != "" {
		shots = d
		os.MkdirAll(shots, 0o755)
	}
	bctx := startBrowser(t)
	ctx, cancelT := walkContext(t, bctx)
	defer cancelT()
	errs := &pageErrors{}
	errs.watch(ctx)
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(errs.String())
		}
	})
	u := &uiTest{t: t, ctx: ctx, in: in, base: "http://" + in.Admin + "/ui/", shots: shots, errs: errs}

	// 1. The overview loads (the browser starts here).
	u.run("load overview",
		chromedp.EmulateViewport(1280, 800),
		chromedp.Navigate(u.base),
		chromedp.WaitVisible(chromedp.CSS(`#page-overview[data-ready="1"]`)))
	errs.check(t, "overview")

	// The page runs under its Content-Security-Policy, and a violation is a
	// console error that fails this test: an inline script added now is
	// refused, does not run, and is reported.
	evalJS[bool](u, `(() => { const s = document.createElement('script'); s.textContent = 'window.inlineRan = true'; document.head.appendChild(s); return true; })()`)
	testutil.Eventually(t, 5*time.Second, func() bool {
		return strings.Contains(errs.String(), "Content Security Policy")
	}, "the CSP violation of an inline script to be reported")
	if evalJS[bool](u, `window.inlineRan === true`) {
		t.Fatal("an inline script ran in the admin page: no CSP")
	}
	errs.reset()

	// 2. A backend through its form: first with a port the API refuses, to
	// see the error next to the field, then corrected.
	u.page("backends")
	u.run("open new backend form",
		chromedp.Click(chromedp.CSS(`#new-backend`)),
		chromedp.WaitVisible(chromedp.CSS(`dialog[open] form`)),
		chromedp.SendKeys(chromedp.CSS(`dialog[open] [data-ptr="/name"] input`), "web"),
		chromedp.SendKeys(chromedp.CSS(`dialog[open] [data-ptr="/servers/0/address"] input`), "127.0.0.1"),
		chromedp.SendKeys(chromedp.CSS(`dialog[open] [data-ptr="/servers/0/port"] input`), "99999"),
		chromedp.Click(chromedp.CSS(`dialog[open] button[data-action="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`dialog[open] [data-ptr="/servers/0/port"].invalid .err`)))
	if msg := u.text(`dialog[open] [data-ptr="/servers/0/port"] .err`); !strings.Contains(msg, "65535") {
		t.Fatalf("error next to the port field = %q, want the API's message about 65535", msg)
	}
	if sum := u.text(`dialog[open] .summary`); !strings.Contains(sum, "/servers/0/port") {
		t.Fatalf("error summary = %q, want it to name /servers/0/port", sum)
	}
	u.shot("backend-form-error")
	u.fill(`dialog[open] [data-ptr="/servers/0/port"] input`, oport)
	u.run("create backend",
		chromedp.Click(chromedp.CSS(`dialog[open] button[data-action="submit"]`)),
		chromedp.WaitNotPresent(chromedp.CSS(`dialog[open]`)),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-server="web/s1"]`)))
	var be struct {
		Mode    string `json:"mode"`
		Servers []struct {
			Address string `json:"address"`
			Port    int    `json:"port"`
		} `json:"servers"`
	}
	u.apiJSON("/api/v1/backends/web", &be)
	if len(be.Servers) != 1 || be.Servers[0].Address != "127.0.0.1" || strconv.Itoa(be.Servers[0].Port) != oport || be.Mode != "tcp" {
		t.Fatalf("backend created through the form = %+v", be)
	}

	// 3. A tcp frontend through its form.
	port := testutil.FreePort(t)
	u.page("frontends")
	u.run("open new frontend form",
		chromedp.Click(chromedp.CSS(`#new-frontend`)),
		chromedp.WaitVisible(chromedp.CSS(`dialog[open] form`)),
		chromedp.SendKeys(chromedp.CSS(`dialog[open] [data-ptr="/name"] input`), "pub"))
	u.fill(`dialog[open] [data-ptr="/mode"] select`, "tcp")
	u.fill(`dialog[open] [data-ptr="/default_backend"] select`, "web")
	u.fill(`dialog[open] [data-ptr="/binds/0/address"] input`, "127.0.0.1")
	u.fill(`dialog[open] [data-ptr="/binds/0/port"] input`, strconv.Itoa(port))
	u.shot("frontend-form-1280")
	u.run("create frontend",
		chromedp.Click(chromedp.CSS(`dialog[open] button[data-action="submit"]`)),
		chromedp.WaitNotPresent(chromedp.CSS(`dialog[open]`)),
		chromedp.WaitVisible(chromedp.CSS(`section[data-frontend="pub"] tr[data-bind="pub/b1"]`)))
	var fe struct {
		Mode           string `json:"mode"`
		DefaultBackend string `json:"default_backend"`
		Binds          []struct {
			Port int `json:"port"`
		} `json:"binds"`
	}
	u.apiJSON("/api/v1/frontends/pub", &fe)
	if fe.Mode != "tcp" || fe.DefaultBackend != "web" || len(fe.Binds) != 1 || fe.Binds[0].Port != port {
		t.Fatalf("frontend created through the form = %+v", fe)
	}
	errs.check(t, "forms")

	// 4. Traffic through the frontend while the overview is open.
	stop := make(chan struct{})
	var clientWG sync.WaitGroup
	clientWG.Add(1)
	go func() {
		defer clientWG.Done()
		c := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
		deadline := time.Now().Add(40 * time.Second)
		for i := 0; i < 4000 && time.Now().Before(deadline); i++ {
			select {
			case <-stop:
				return
			case <-time.After(15 * time.Millisecond): // a steady client, not a flood
			}
			if resp, err := c.Get(fmt.Sprintf("http://127.0.0.1:%d/", port)); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}
	}()
	stopClient := func() { close(stop); clientWG.Wait() }
	testutil.Eventually(t, 10*time.Second, func() bool { return served.Load() > 0 }, "the origin to serve requests through the frontend")
	u.page("overview")
	if st := in.Do("GET", "/api/v1/stats", nil).Status; st != 200 {
		t.Fatalf("GET /api/v1/stats: status %d", st)
	}
	read := func() int64 {
		s := strings.ReplaceAll(u.text(`#fe-stats [data-stat="fe/pub/connTotal"]`), ",", "")
		n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil {
			return -1
		}
		return n
	}
	var first int64
	testutil.Eventually(t, 15*time.Second, func() bool { first = read(); return first > 0 }, "the overview's connection counter of pub to count traffic")
	testutil.Eventually(t, 15*time.Second, func() bool { return read() > first }, "the overview's connection counter of pub to move")
	u.waitJS(10*time.Second, "the traffic chart to draw", `!!document.querySelector('#chart-req .uplot')`)
	u.waitJS(5*time.Second, "the live indicator to say live", `document.getElementById('live').classList.contains('on')`)
	u.shot("overview-1280")
	errs.check(t, "overview with traffic")

	// 5. Drain a server with its button; the API state changes.
	u.page("backends")
	u.run("drain web/s1",
		chromedp.Click(chromedp.CSS(`button[data-action="drain"][data-server="web/s1"]`)),
		// web/s1 is web's last usable server: the page asks first.
		chromedp.Click(chromedp.CSS(`dialog[open] button[data-confirm="yes"]`)),
		chromedp.WaitVisible(chromedp.CSS(`button[data-action="drain"][data-server="web/s1"][aria-pressed="true"]`)))
	var srv struct {
		AdminState string `json:"admin_state"`
	}
	testutil.Eventually(t, 5*time.Second, func() bool {
		u.apiJSON("/api/v1/backends/web/servers/s1", &srv)
		return srv.AdminState == "drain"
	}, "web/s1 to be drained in the API")
	u.shot("backends-1280")
	stopClient()

	// 6. Tuning: a refused value shows the API's message next to the
	// fields it names, and nothing changes.
	u.page("tuning")
	u.shot("tuning-1280")
	u.fill(`#tuning-form [data-ptr="/sched/urgent"] input`, "90")
	u.run("apply refused tuning",
		chromedp.Click(chromedp.CSS(`#tuning-form button[data-action="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#tuning-form fieldset[data-ptr="/sched"].invalid > .err`)))
	if msg := u.text(`#tuning-form fieldset[data-ptr="/sched"] > .err`); !strings.Contains(msg, "100") {
		t.Fatalf("tuning error next to sched = %q", msg)
	}
	u.shot("tuning-error-1280")
	var tun struct {
		Sched struct{ Urgent int } `json:"sched"`
	}
	u.apiJSON("/api/v1/tuning", &tun)
	if tun.Sched.Urgent == 90 {
		t.Fatal("a refused tuning changed the API state")
	}

	// 7. Revisions: the diff between the last two, then restore #2 (before
	// the drain) with its confirmation.
	var revs []struct {
		Generation int64 `json:"generation"`
	}
	u.apiJSON("/api/v1/config/revisions", &revs)
	if len(revs) != 3 {
		t.Fatalf("revisions = %+v, want 3 (backend, frontend, drain)", revs)
	}
	u.page("revisions")
	u.waitJS(10*time.Second, "the diff of the last two revisions", `(document.querySelector('#diff-out table.diff')||{}).textContent?.includes('admin_state') || false`)
	u.shot("revisions-1280")
	u.run("restore #2",
		chromedp.Click(chromedp.CSS(`button[data-action="restore"][data-generation="2"]`)),
		chromedp.WaitVisible(chromedp.CSS(`dialog[open] button[data-confirm="yes"]`)))
	u.shot("restore-confirm-1280")
	u.run("confirm restore",
		chromedp.Click(chromedp.CSS(`dialog[open] button[data-confirm="yes"]`)),
		chromedp.WaitNotPresent(chromedp.CSS(`dialog[open]`)))
	testutil.Eventually(t, 5*time.Second, func() bool {
		u.apiJSON("/api/v1/backends/web/servers/s1", &srv)
		return srv.AdminState == "ready"
	}, "the restore of #2 in the API")
	var info struct {
		Generation int64 `json:"generation"`
	}
	u.apiJSON("/api/v1/info", &info)
	if info.Generation != 4 {
		t.Fatalf("generation after restore = %d, want 4", info.Generation)
	}
	u.waitJS(5*time.Second, "the revisions page to show #4 as current", `!!document.querySelector('#revisions tr[data-generation="4"] .badge.ok')`)

	// 8. Weight edit, and a bind added and removed through the page.
	u.page("backends")
	u.fill(`input[data-weight="web/s1"]`, "50")
	u.run("set weight", chromedp.Click(chromedp.CSS(`button[data-action="weight"][data-server="web/s1"]`)))
	var w struct {
		Weight int `json:"weight"`
	}
	testutil.Eventually(t, 5*time.Second, func() bool {
		u.apiJSON("/api/v1/backends/web/servers/s1", &w)
		return w.Weight == 50
	}, "web/s1 weight 50 in the API")
	port2 := testutil.FreePort(t)
	u.page("frontends")
	u.run("open add bind form",
		chromedp.Click(chromedp.CSS(`section[data-frontend="pub"] button[data-action="add-bind"]`)),
		chromedp.WaitVisible(chromedp.CSS(`dialog[open] form`)))
	u.fill(`dialog[open] [data-ptr="/address"] input`, "127.0.0.1")
	u.fill(`dialog[open] [data-ptr="/port"] input`, strconv.Itoa(port2))
	u.run("add bind b2",
		chromedp.Click(chromedp.CSS(`dialog[open] button[data-action="submit"]`)),
		chromedp.WaitNotPresent(chromedp.CSS(`dialog[open]`)),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-bind="pub/b2"]`)))
	testutil.Eventually(t, 5*time.Second, func() bool { return !refuses(port2) }, "bind b2 to listen")
	u.run("remove bind b2",
		chromedp.Click(chromedp.CSS(`button[data-action="remove-bind"][data-bind="pub/b2"]`)),
		chromedp.Click(chromedp.CSS(`dialog[open] button[data-confirm="yes"]`)),
		chromedp.WaitNotPresent(chromedp.CSS(`tr[data-bind="pub/b2"]`)))
	u.in.MustDo(404, "GET", "/api/v1/frontends/pub/binds/b2", nil)

	// An http frontend in front of the tcp backend: the API names both
	// fields (default backend and the route's backend), each shown in place.
	u.run("open new frontend form for http",
		chromedp.Click(chromedp.CSS(`#new-frontend`)),
		chromedp.WaitVisible(chromedp.CSS(`dialog[open] form`)))
	u.fill(`dialog[open] [data-ptr="/name"] input`, "site")
	u.fill(`dialog[open] [data-ptr="/mode"] select`, "http")
	u.fill(`dialog[open] [data-ptr="/binds/0/address"] input`, "127.0.0.1")
	u.fill(`dialog[open] [data-ptr="/binds/0/port"] input`, strconv.Itoa(testutil.FreePort(t)))
	u.run("add a route row",
		chromedp.Click(chromedp.CSS(`dialog[open] fieldset[data-ptr="/routes"] .actions button`)),
		chromedp.WaitVisible(chromedp.CSS(`dialog[open] [data-ptr="/routes/0/path_prefix"] input`)))
	u.fill(`dialog[open] [data-ptr="/routes/0/path_prefix"] input`, "/api")
	u.run("submit the http frontend",
		chromedp.Click(chromedp.CSS(`dialog[open] button[data-action="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`dialog[open] [data-ptr="/routes/0/backend"].invalid .err`)))
	for _, f := range []string{"/default_backend", "/routes/0/backend"} {
		if msg := u.text(`dialog[open] [data-ptr="` + f + `"] .err`); !strings.Contains(msg, "mode") {
			t.Fatalf("error next to %s = %q, want the API's mode mismatch", f, msg)
		}
	}
	u.shot("frontend-form-errors-1280")
	u.run("cancel the http frontend",
		chromedp.Click(chromedp.CSS(`dialog[open] button[data-action="cancel"]`)),
		chromedp.WaitNotPresent(chromedp.CSS(`dialog[open]`)))
	u.in.MustDo(404, "GET", "/api/v1/frontends/site", nil)

	// Keyboard: a nav link opens its page with Enter, Escape closes a form.
	u.run("keyboard navigation",
		chromedp.Focus(chromedp.CSS(`#nav a[data-route="backends"]`)),
		chromedp.KeyEvent(kb.Enter),
		chromedp.WaitVisible(chromedp.CSS(`#page-backends[data-ready="1"]`)),
		chromedp.Focus(chromedp.CSS(`#new-backend`)),
		chromedp.KeyEvent(kb.Enter),
		chromedp.WaitVisible(chromedp.CSS(`dialog[open] form`)),
		chromedp.KeyEvent(kb.Escape),
		chromedp.WaitNotPresent(chromedp.CSS(`dialog[open]`)))

	// 9. The other pages load without errors.
	u.page("cpu")
	u.shot("cpu-1280")
	u.page("audit")
	// Every write of this test is listed, newest first, with what it changed.
	u.waitJS(5*time.Second, "the audit page to list the writes", `document.querySelectorAll('#audit-table tbody tr').length >= 7`)
	rows := `[...document.querySelectorAll('#audit-table tbody tr')]`
	if !evalJS[bool](u, rows+`[0].textContent.includes('422')`) {
		t.Fatalf("newest audit entry (the refused http frontend) = %q", u.text(`#audit-table tbody tr`))
	}
	txt := evalJS[string](u, `(() => {
		const r = `+rows+`.find((r) => r.textContent.includes('DELETE') && r.textContent.includes('/binds/b2'));
		if (!r) return '';
		r.querySelector('details summary').click();
		return r.querySelector('details').textContent;
	})()`)
	if !strings.Contains(txt, "frontend/pub/bind/b2") || !strings.Contains(txt, `"port"`) {
		t.Fatalf("audit entry of the bind removal shows %q, want the removed bind", txt)
	}
	u.shot("audit-1280")
	u.page("frontends")
	u.shot("frontends-1280")

	// The API reference runs under the same policy without a violation.
	u.run("open the API reference",
		chromedp.Navigate("http://"+in.Admin+"/docs/"),
		chromedp.WaitVisible(chromedp.CSS(`.swagger-ui .info .title`)),
		chromedp.WaitVisible(chromedp.CSS(`.swagger-ui .opblock`)))
	u.shot("docs-1280")
	errs.check(t, "API reference")
	u.run("back to the admin page",
		chromedp.Navigate(u.base),
		chromedp.WaitVisible(chromedp.CSS(`#page-overview[data-ready="1"]`)))

	// 10. Phone width: no horizontal scrolling, nav reachable.
	u.run("phone viewport", chromedp.EmulateViewport(375, 812, chromedp.EmulateMobile))
	u.page("overview")
	u.shot("overview-375")
	u.page("backends")
	u.shot("backends-375")
	u.run("backend form on a phone",
		chromedp.Click(chromedp.CSS(`#new-backend`)),
		chromedp.WaitVisible(chromedp.CSS(`dialog[open] form`)))
	u.shot("backend-form-375")
	u.run("cancel the form",
		chromedp.Click(chromedp.CSS(`dialog[open] button[data-action="cancel"]`)),
		chromedp.WaitNotPresent(chromedp.CSS(`dialog[open]`)))
	if evalJS[bool](u, `document.documentElement.scrollWidth > window.innerWidth + 1`) {
		t.Fatal("the backends page scrolls sideways at 375 px")
	}
	u.run("desktop viewport", chromedp.EmulateViewport(1280, 800))
	errs.check(t, "all pages as admin")

	// Concurrent edits (issue 13): the backend form is loaded, then an
	// operator drains web/s1 through the API. Saving the form would put s1
	// back to ready: the write carries the ETag the form was built from,
	// the API answers 412, and the form shows what changed.
	editBackend := func(what string) {
		u.page("backends")
		u.run(what,
			chromedp.Click(chromedp.CSS(`section[data-backend="web"] button[data-action="edit-backend"]`)),
			chromedp.WaitVisible(chromedp.CSS(`dialog[open] [data-ptr="/retries"] input`)))
	}
	var web0 struct {
		Retries int `json:"retries"`
		Servers []struct {
			AdminState string `json:"admin_state"`
			Weight     int    `json:"weight"`
		} `json:"servers"`
	}
	u.apiJSON("/api/v1/backends/web", &web0)
	if web0.Servers[0].AdminState != "ready" {
		t.Fatalf("web/s1 before the concurrent edit = %+v, want ready", web0)
	}
	editBackend("open the backend form")
	in.MustDo(200, "PATCH", "/api/v1/backends/web/servers/s1", map[string]any{"admin_state": "drain"})
	u.fill(`dialog[open] [data-ptr="/retries"] input`, "7")
	u.run("save over a concurrent drain",
		chromedp.Click(chromedp.CSS(`dialog[open] button[data-action="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`dialog[open] [data-conflict] button[data-action="overwrite"]`)))
	if msg := u.text(`dialog[open] [data-conflict]`); !strings.Contains(msg, "412") || !strings.Contains(msg, "admin_state") || !strings.Contains(msg, "drain") {
		t.Fatalf("the conflict message = %q, want the 412 and the admin_state changed to drain", msg)
	}
	u.shot("backend-form-conflict-1280")
	u.apiJSON("/api/v1/backends/web", &web0)
	if web0.Servers[0].AdminState != "drain" || web0.Retries == 7 {
		t.Fatalf("the refused save changed the backend: %+v", web0)
	}
	// Reload: the form shows the current state, the edit is dropped.
	u.run("reload the form",
		chromedp.Click(chromedp.CSS(`dialog[open] [data-conflict] button[data-action="reload"]`)),
		chromedp.WaitNotPresent(chromedp.CSS(`dialog[open] [data-conflict]`)),
		chromedp.WaitVisible(chromedp.CSS(`dialog[open] [data-ptr="/retries"] input`)))
	if st := evalJS[string](u, `document.querySelector('dialog[open] [data-ptr="/servers/0/admin_state"] select').value`); st != "drain" {
		t.Fatalf("the reloaded form shows web/s1 %q, want drain", st)
	}
	if r := evalJS[string](u, `document.querySelector('dialog[open] [data-ptr="/retries"] input').value`); r == "7" {
		t.Fatal("the reloaded form kept the dropped edit")
	}
	// Overwrite: another change meanwhile (weight), the same edit, 412,
	// then overwrite sends this form's version over it.
	in.MustDo(200, "PATCH", "/api/v1/backends/web/servers/s1", map[string]any{"weight": 9})
	u.fill(`dialog[open] [data-ptr="/retries"] input`, "7")
	u.run("save over a concurrent weight change",
		chromedp.Click(chromedp.CSS(`dialog[open] button[data-action="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`dialog[open] [data-conflict] button[data-action="overwrite"]`)))
	if msg := u.text(`dialog[open] [data-conflict]`); !strings.Contains(msg, "weight") {
		t.Fatalf("the conflict message = %q, want the weight change", msg)
	}
	u.run("overwrite",
		chromedp.Click(chromedp.CSS(`dialog[open] [data-conflict] button[data-action="overwrite"]`)),
		chromedp.WaitNotPresent(chromedp.CSS(`dialog[open]`)))
	u.apiJSON("/api/v1/backends/web", &web0)
	if web0.Retries != 7 || web0.Servers[0].AdminState != "drain" || web0.Servers[0].Weight == 9 {
		t.Fatalf("after overwrite the backend = %+v, want retries 7, s1 drain (reloaded), weight of the form", web0)
	}
	// A restore confirmed on a page that shows an older generation is
	// refused (If-Match of the document shown), not applied over the
	// change made meanwhile.
	// (The page follows other writes by itself, except while a dialog is
	// open: the change is made while the confirmation is shown.)
	u.page("revisions")
	u.run("ask to restore #2",
		chromedp.Click(chromedp.CSS(`button[data-action="restore"][data-generation="2"]`)),
		chromedp.WaitVisible(chromedp.CSS(`dialog[open] button[data-confirm="yes"]`)))
	in.MustDo(200, "PATCH", "/api/v1/backends/web/servers/s1", map[string]any{"weight": 3})
	var before struct {
		Generation int64 `json:"generation"`
	}
	u.apiJSON("/api/v1/info", &before)
	u.run("confirm the restore after a change",
		chromedp.Click(chromedp.CSS(`dialog[open] button[data-confirm="yes"]`)),
		chromedp.WaitNotPresent(chromedp.CSS(`dialog[open]`)))
	u.waitJS(5*time.Second, "the stale restore to be refused", `[...document.querySelectorAll('#toasts .toast.bad')].some((t) => t.textContent.includes('nothing was restored'))`)
	var after struct {
		Generation int64 `json:"generation"`
	}
	u.apiJSON("/api/v1/info", &after)
	if after.Generation != before.Generation {
		t.Fatalf("a restore from a stale page was applied: generation %d -> %d", before.Generation, after.Generation)
	}
	// The same for a removal: the server changed while the question was
	// shown, so nothing is removed.
	u.page("backends")
	u.run("ask to remove web/s1",
		chromedp.Click(chromedp.CSS(`button[data-action="remove-server"][data-server="web/s1"]`)),
		chromedp.WaitVisible(chromedp.CSS(`dialog[open] button[data-confirm="yes"]`)))
	in.MustDo(200, "PATCH", "/api/v1/backends/web/servers/s1", map[string]any{"weight": 4})
	u.run("confirm the removal after a change",
		chromedp.Click(chromedp.CSS(`dialog[open] button[data-confirm="yes"]`)),
		chromedp.WaitNotPresent(chromedp.CSS(`dialog[open]`)))
	u.waitJS(5*time.Second, "the stale removal to be refused", `[...document.querySelectorAll('#toasts .toast.bad')].some((t) => t.textContent.includes('nothing was removed'))`)
	in.MustDo(200, "GET", "/api/v1/backends/web/servers/s1", nil)
	errs.check(t, "concurrent edit")

	// 11. The admin goes away: the live data is marked stale, and the
	// failing requests are no console error.
	u.page("overview")
	u.waitJS(5*time.Second, "live data before the stop", `document.getElementById('live').classList.contains('on') || document.getElementById('live').textContent.includes('not available')`)
	liveBefore := evalJS[bool](u, `document.getElementById('live').classList.contains('on')`)
	in.Stop(10 * time.Second)
	if liveBefore {
		u.waitJS(12*time.Second, "the overview to mark its data stale", `document.getElementById('live').classList.contains('stale') && document.getElementById('main').classList.contains('is-stale')`)
		u.shot("overview-stale-1280")
	}
	u.run("leave the page", chromedp.Navigate("about:blank"))
	errs.check(t, "admin stopped")

	// 12. A viewer signs in with a token and finds no write button.
	viewerToken := addToken(t, in, "viewer", "ui-viewer")
	if viewerToken == "" {
		return // addToken logged why (tokens not implemented yet)
	}
	in2 := startSpliced(t, in.StateDir)
	tab, cancelTab := chromedp.NewContext(bctx) // a new tab: its own sessionStorage
	defer cancelTab()
	tab, cancelTab2 := context.WithTimeout(tab, 40*time.Second)
	defer cancelTab2()
	errs2 := &pageErrors{}
	errs2.watch(tab)
	v := &uiTest{t: t, ctx: tab, in: in2, base: "http://" + in2.Admin + "/ui/", shots: shots, errs: errs2}
	v.run("viewer opens the page",
		chromedp.EmulateViewport(1280, 800),
		chromedp.Navigate(v.base),
		chromedp.WaitVisible(chromedp.CSS(`dialog#login[open] #login-token`)))
	v.shot("login-1280")
	v.run("viewer signs in",
		chromedp.SendKeys(chromedp.CSS(`#login-token`), viewerToken),
		chromedp.Click(chromedp.CSS(`#login-submit`)),
		chromedp.WaitNotPresent(chromedp.CSS(`dialog#login[open]`)),
		chromedp.WaitVisible(chromedp.CSS(`#page-overview[data-ready="1"]`)))
	v.waitJS(5*time.Second, "the header to name the viewer role", `document.getElementById('who').textContent.includes('viewer')`)
	stored := evalJS[string](v, `sessionStorage.getItem('spliced.token') + '|' + localStorage.length + '|' + document.cookie`)
	if stored != viewerToken+"|0|" {
		t.Fatalf("token storage = %q, want it in sessionStorage only", stored)
	}
	for _, p := range []string{"overview", "frontends", "backends", "tuning", "revisions", "cpu"} {
		v.page(p)
		n := evalJS[int](v, `document.querySelectorAll('[data-write], #new-backend, #new-frontend, button[data-action="drain"], button[data-action="restore"]').length`)
		if n != 0 {
			v.shot("viewer-" + p)
			t.Fatalf("viewer sees %d write buttons on %s", n, p)
		}
	}
	v.page("backends")
	v.shot("backends-viewer-1280")
	errs2.check(t, "viewer")

	// 13. An operator (tokens are re-read without a restart) may drain and
	// weigh servers, and nothing else.
	opToken := addToken(t, in2, "operator", "ui-operator")
	otab, cancelOp := chromedp.NewContext(bctx)
	defer cancelOp()
	otab, cancelOp2 := context.WithTimeout(otab, 30*time.Second)
	defer cancelOp2()
	errs3 := &pageErrors{}
	errs3.watch(otab)
	o := &uiTest{t: t, ctx: otab, in: in2, base: v.base, shots: shots, errs: errs3}
	o.run("operator signs in",
		chromedp.EmulateViewport(1280, 800),
		chromedp.Navigate(o.base+"#/backends"),
		chromedp.WaitVisible(chromedp.CSS(`dialog#login[open] #login-token`)),
		chromedp.SendKeys(chromedp.CSS(`#login-token`), opToken),
		chromedp.Click(chromedp.CSS(`#login-submit`)),
		chromedp.WaitVisible(chromedp.CSS(`#page-backends[data-ready="1"] button[data-action="maint"][data-server="web/s1"]`)))
	if n := evalJS[int](o, `document.querySelectorAll('#new-backend, button[data-action="edit-server"], button[data-action="remove-server"], button[data-action="delete-backend"]').length`); n != 0 {
		t.Fatalf("operator sees %d admin-only buttons on backends", n)
	}
	o.run("operator puts web/s1 in maintenance",
		chromedp.Click(chromedp.CSS(`button[data-action="maint"][data-server="web/s1"]`)),
		chromedp.WaitVisible(chromedp.CSS(`button[data-action="maint"][data-server="web/s1"][aria-pressed="true"]`)))
	o.page("frontends")
	if n := evalJS[int](o, `document.querySelectorAll('[data-write]').length`); n != 0 {
		t.Fatalf("operator sees %d write buttons on frontends", n)
	}
	errs3.check(t, "operator")
	t.Logf("browser test took %v", time.Since(start).Round(time.Millisecond))
}

// addToken creates a token with the spliced CLI (issue 7), which prints
// the secret alone on stdout. When this build has no token command yet it
// logs a CONDITIONAL STEP and returns "".
func addToken(t *testing.T, in *instance, role, name string) string {
	t.Helper()
	cmd := exec.Command(buildBinary(t), "token", "add", "--state-dir", in.StateDir, "--role", role, "--name", name)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	_, err := runCmd(t, cmd)
	out := stdout.String()
	if err != nil {
		if strings.Contains(stderr.String(), "unknown command") {
			t.Logf("CONDITIONAL STEP: `spliced token add` does not exist in this build (issue 7 not landed): the viewer sign-in step did not run:\n%s", stderr.String())
			return ""
		}
		t.Fatalf("spliced token add: %v\n%s%s", err, out, stderr.String())
	}
	tok := strings.TrimSpace(string(out))
	if tok == "" || strings.ContainsAny(tok, " \n") {
		t.Fatalf("spliced token add printed %q, want the secret alone", out)
	}
	return tok
}
