package main

import (
	"context"
	"fmt"
	"os"
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
	for r := range rounds {
		t.Run(fmt.Sprint("round", r), func(t *testing.T) {
			for i := range n {
				t.Run(fmt.Sprint("browser", i), func(t *testing.T) {
					t.Parallel()
					start := time.Now()
					bctx := startBrowser(t)
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
					t.Logf("started in %v, page in %v", started.Round(time.Millisecond), (time.Since(start) - started).Round(time.Millisecond))
				})
			}
		})
	}
}
