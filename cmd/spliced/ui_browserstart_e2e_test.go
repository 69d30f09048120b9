package main

import (
	"context"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestUIBrowserStartStress starts browsers as the ui tests do, many at
// once, to find why one may die at start: SPLICED_UI_STRESS=NxR runs R
// rounds of N browsers started together (go test -parallel N), each
// loading a page that runs a script, then closed. Run it under load, e.g.
//
//	timeout 300 yes >/dev/null & timeout 300 yes >/dev/null &
//	SPLICED_UI_STRESS=8x20 go test -race -count=1 -parallel 8 -run TestUIBrowserStartStress ./cmd/spliced/
//
// It is skipped without SPLICED_UI_STRESS (it only repeats what the ui
// tests do, and takes the machine for a while).
func TestUIBrowserStartStress(t *testing.T) {
	spec := os.Getenv("SPLICED_UI_STRESS")
	if spec == "" {
		t.Skip("set SPLICED_UI_STRESS=NxR (N browsers at once, R rounds) to run it")
	}
	var n, rounds int
	if _, err := fmt.Sscanf(spec, "%dx%d", &n, &rounds); err != nil || n < 1 || rounds < 1 || n*rounds > 2000 {
		t.Fatalf("SPLICED_UI_STRESS=%q: want NxR, at most 2000 starts", spec)
	}
	// SPLICED_UI_STRESS_PAD=LO-HI adds LO to HI variables to chromium's
	// environment, one count per browser in turn: whether its array moves
	// when chromium grows it depends on its size. SPLICED_UI_STRESS_UNSET=1
	// leaves out chromiumPresetEnv (to see the crash it prevents).
	lo, hi := 0, 0
	if s := os.Getenv("SPLICED_UI_STRESS_PAD"); s != "" {
		if _, err := fmt.Sscanf(s, "%d-%d", &lo, &hi); err != nil || lo < 0 || hi < lo || hi > 500 {
			t.Fatalf("SPLICED_UI_STRESS_PAD=%q: want LO-HI", s)
		}
	}
	preset := chromiumPresetEnv
	if os.Getenv("SPLICED_UI_STRESS_UNSET") != "" {
		preset = nil
	}
	for r := range rounds {
		t.Run(fmt.Sprint("round", r), func(t *testing.T) {
			for i := range n {
				t.Run(fmt.Sprint("browser", i), func(t *testing.T) {
					t.Parallel()
					start := time.Now()
					pad := lo + (r*n+i)%(hi-lo+1)
					env := slices.Clone(preset)
					for k := range pad {
						env = append(env, fmt.Sprintf("SPLICED_UI_PAD_%d=x", k))
					}
					bctx := startBrowserEnv(t, env)
					started := time.Since(start)
					ctx, cancel := context.WithTimeout(bctx, 60*time.Second)
					defer cancel()
					if err := chromedp.Do(ctx, chromedp.Navigate(`data:text/html,<p id="x">x</p><script>document.getElementById("x").textContent = "ran"</script>`)); err != nil {
						t.Fatalf("loading the page: %v", err)
					}
					v, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("x").textContent`))
					if err != nil || v != "ran" {
						t.Fatalf("the page: %q, %v", v, err)
					}
					t.Logf("%d extra variables: started in %v, page in %v", pad, started.Round(time.Millisecond), (time.Since(start) - started).Round(time.Millisecond))
				})
			}
		})
	}
}

// TestUIChromiumKeepsItsEnvironment: chromium never grows its environment
// array once started (chromiumPresetEnv), so no thread of it can read a
// copy that a setenv on another thread freed; such a read killed
// TestUINodesReseed's browser at start once (SIGSEGV in getenv, on a
// freed copy of environ). Read from the running browser process: libc's
// environ still points at the array the kernel laid on its stack at exec,
// after a page has loaded (chromium sets FC_FONTATIONS before it starts
// its first renderer). Without the preset variables it points into the
// heap: chromium added a variable. A chromium that adds another one fails
// the first case: add it to chromiumPresetEnv with the value it sets.
func TestUIChromiumKeepsItsEnvironment(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		env    []string
		onHeap bool
	}{
		{"as the ui tests start it", chromiumPresetEnv, false},
		{"without the preset variables", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bctx := startBrowserEnv(t, tc.env)
			ctx, cancel := context.WithTimeout(bctx, 60*time.Second)
			defer cancel()
			if err := chromedp.Do(ctx, chromedp.Navigate(`data:text/html,<p style="font: 20px serif">text</p>`)); err != nil {
				t.Fatalf("loading a page: %v", err)
			}
			if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.fonts.ready.then(() => true)`, chromedp.EvalAwaitPromise)); err != nil {
				t.Fatalf("waiting for the fonts: %v", err)
			}
			pid := chromedp.FromContext(bctx).Browser.Process().Pid
			environ, stack := chromiumEnviron(t, pid)
			onStack := environ >= stack[0] && environ < stack[1]
			t.Logf("chromium (pid %d): environ = %#x, its stack %#x-%#x", pid, environ, stack[0], stack[1])
			if onStack == tc.onHeap {
				t.Fatalf("environ on the stack = %v, want %v: chromium (pid %d) grew its environment (a variable to add to chromiumPresetEnv?)", onStack, !tc.onHeap, pid)
			}
		})
	}
}

// chromiumEnviron reads libc's environ in process pid (/proc/pid/mem; root
// or the same user may) and returns it with the range of the process's
// [stack] mapping.
func chromiumEnviron(t *testing.T, pid int) (uint64, [2]uint64) {
	t.Helper()
	maps, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		t.Fatal(err)
	}
	var libcBase uint64
	var libcPath string
	var stack [2]uint64
	for line := range strings.Lines(string(maps)) {
		f := strings.Fields(line)
		if len(f) < 6 {
			continue
		}
		var lo, hi, off uint64
		if _, err := fmt.Sscanf(f[0]+" "+f[2], "%x-%x %x", &lo, &hi, &off); err != nil {
			continue
		}
		switch {
		case f[5] == "[stack]":
			stack = [2]uint64{lo, hi}
		case strings.HasSuffix(f[5], "/libc.so.6") && off == 0 && libcBase == 0:
			libcBase, libcPath = lo, f[5]
		}
	}
	if libcBase == 0 || stack[1] == 0 {
		t.Fatalf("no libc or no [stack] in /proc/%d/maps:\n%s", pid, maps)
	}
	lib, err := elf.Open(libcPath)
	if err != nil {
		t.Fatal(err)
	}
	defer lib.Close()
	syms, err := lib.DynamicSymbols()
	if err != nil {
		t.Fatal(err)
	}
	var addr uint64
	for _, s := range syms {
		if s.Name == "__environ" {
			addr = libcBase + s.Value
		}
	}
	if addr == 0 {
		t.Fatalf("%s has no __environ", libcPath)
	}
	mem, err := os.Open(fmt.Sprintf("/proc/%d/mem", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	var b [8]byte
	if _, err := mem.ReadAt(b[:], int64(addr)); err != nil {
		t.Fatalf("reading environ at %#x in pid %d: %v", addr, pid, err)
	}
	return binary.LittleEndian.Uint64(b[:]), stack
}
