package main

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestTicketKeysSurviveARestart: keys set through the API are written to
// the state directory (0600) and used again after a restart, so that
// sessions resumed before it resume after.
func TestTicketKeysSurviveARestart(t *testing.T) {
	t.Parallel()
	in := startSpliced(t, "")
	type view struct {
		Keys []struct{ ID, Source string } `json:"keys"`
	}
	var gen view
	in.MustDo(200, "GET", "/api/v1/tls/ticket-keys", nil).JSON(t, &gen)
	if len(gen.Keys) != 1 || gen.Keys[0].Source != "generated" {
		t.Fatalf("generated keys: %+v", gen)
	}
	k1 := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("1", 32)))
	k2 := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("2", 32)))
	var set view
	in.MustDo(200, "PUT", "/api/v1/tls/ticket-keys", `{"keys":["`+k1+`","`+k2+`"]}`).JSON(t, &set)
	if err := in.Stop(15 * time.Second); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(in.StateDir, "tls-ticket-keys.json"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", fi, err)
	}
	if strings.Contains(in.Logs(), k1) {
		t.Fatal("a key in the log")
	}
	again := startSpliced(t, in.StateDir)
	var got view
	again.MustDo(200, "GET", "/api/v1/tls/ticket-keys", nil).JSON(t, &got)
	if len(got.Keys) != 2 || got.Keys[0] != set.Keys[0] || got.Keys[1] != set.Keys[1] || got.Keys[0].Source != "api" {
		t.Fatalf("after restart %+v, want %+v", got, set)
	}
}
