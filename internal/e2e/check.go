package e2e

import (
	"strings"
	"testing"
)

// What in a child's output is a defect, whatever the test: the race
// detector's report, a panic and a fatal error of the Go runtime (each
// begins a line), and a handler panic that net/http or the admin API
// recovered and logged (the process lives on, the bug is there all the
// same).
var (
	lineStarts = []string{"WARNING: DATA RACE", "panic: ", "fatal error: "}
	anywhere   = []string{"http: panic serving", "admin handler panicked"}
)

// reportLines bounds one report's excerpt: a race report is about 40
// lines, a panic's first goroutines fit.
const reportLines = 80

// Reports returns the data race reports, panics and fatal errors in out,
// one excerpt each (a race report up to its closing "=================="
// line, a panic or fatal error with the stacks that follow, bounded), in
// the order they appear; none when out is clean.
func Reports(out string) []string {
	lines := strings.SplitAfter(out, "\n")
	var reports []string
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		start := false
		for _, p := range lineStarts {
			start = start || strings.HasPrefix(l, p)
		}
		if !start {
			for _, p := range anywhere {
				if strings.Contains(l, p) {
					reports = append(reports, l)
					break
				}
			}
			continue
		}
		end := min(i+reportLines, len(lines))
		if strings.HasPrefix(l, "WARNING: DATA RACE") {
			for j := i + 1; j < end; j++ {
				if strings.HasPrefix(lines[j], "==================") {
					end = j
					break
				}
			}
		}
		reports = append(reports, strings.Join(lines[i:end], ""))
		i = end - 1
	}
	return reports
}

// KnownDefect is a report a test may excuse while the defect is open: its
// Name says where it is tracked (an issue, a commit to come), Match is a
// piece of text only that report holds (a function of its stack).
type KnownDefect struct {
	Name, Match string
}

// Check fails t (Error) for every report in out, the output of processes
// the test ran some other way (a script that starts nodes and logs to
// files); who names them in the messages.
func Check(t testing.TB, who, out string) {
	t.Helper()
	check(t, who, out, nil)
}

// check fails t for every report in out that no known defect matches and
// logs the ones they excuse. who names the process in the messages.
func check(t testing.TB, who, out string, known []KnownDefect) {
	t.Helper()
	for _, r := range Reports(out) {
		excused := false
		for _, k := range known {
			if strings.Contains(r, k.Match) {
				t.Logf("%s: known defect %s (excused):\n%s", who, k.Name, r)
				excused = true
				break
			}
		}
		if !excused {
			t.Errorf("%s reported a defect:\n%s", who, r)
		}
	}
}

// Tail is the end of s, at most n bytes, cut at a line start.
func Tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[len(s)-n:]
	if i := strings.IndexByte(s, '\n'); i >= 0 && i < len(s)-1 {
		s = s[i+1:]
	}
	return "…\n" + s
}
