package main

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

// --audit-keep must keep at least one rotated file; the refusal happens
// before anything is opened.
func TestAuditKeepFlagIsChecked(t *testing.T) {
	var stderr bytes.Buffer
	if rc := run([]string{"--audit-keep", "0", "--state-dir", t.TempDir()}, io.Discard, &stderr); rc != 2 || !strings.Contains(stderr.String(), "--audit-keep") {
		t.Fatalf("--audit-keep 0: exit %d, stderr %q", rc, stderr.String())
	}
}
