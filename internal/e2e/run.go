package e2e

import (
	"context"
	"io"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/internal/testutil"
)

// Run runs the spliced binary with args until it exits by itself (a
// subcommand, a start that must be refused) and returns its stdout and
// stderr together and its exit error. A run still going after timeout is
// stopped as a node is (SIGTERM, SIGKILL after StopGrace) and returns
// the context's error. The test fails (Error) on a report in the output
// (Reports), as for a node.
func Run(t testing.TB, timeout time.Duration, args ...string) (string, error) {
	t.Helper()
	return RunCmd(t, timeout, exec.Command(Binary(t), args...))
}

// RunCmd is Run for a command the test made itself (its own environment,
// directory or standard input, or another program that runs spliced, as
// a shell script). The output returned is stdout and stderr together;
// a Stdout or Stderr the test set gets its own part as well.
func RunCmd(t testing.TB, timeout time.Duration, cmd *exec.Cmd) (string, error) {
	t.Helper()
	var out testutil.SyncBuffer
	cmd.Stdout, cmd.Stderr = tee(&out, cmd.Stdout), tee(&out, cmd.Stderr)
	if cmd.WaitDelay == 0 {
		// A child of a script that keeps the output pipe open must not
		// hold Wait once the script has exited.
		cmd.WaitDelay = StopGrace
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := cmd.Start(); err != nil {
		return "", err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(StopGrace):
			_ = cmd.Process.Kill()
			<-done
		}
		err = ctx.Err()
	}
	check(t, cmd.Path, out.String(), nil)
	return out.String(), err
}

// tee is w, and also own when the test set one.
func tee(w, own io.Writer) io.Writer {
	if own == nil {
		return w
	}
	return io.MultiWriter(w, own)
}
