package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDeltaRevisionsSurviveKill9: changes stored as deltas (config.json
// left at the last snapshot) are all there after a kill -9 and a restart,
// across a snapshot, and every revision, delta or whole, reads through
// the API.
func TestDeltaRevisionsSurviveKill9(t *testing.T) {
	t.Parallel()
	in := startSpliced(t, "")
	var servers []string
	for i := range 200 {
		servers = append(servers, fmt.Sprintf(`{"name":"s%03d","address":"127.0.0.1","port":%d,"admin_state":"maint"}`, i, 20000+i))
	}
	in.MustDo(201, "POST", "/api/v1/backends", `{"name":"big","mode":"tcp","servers":[`+strings.Join(servers, ",")+`]}`)
	for i := range 40 { // across a snapshot (every 32 generations)
		switch i % 4 {
		case 0:
			in.MustDo(200, "PATCH", fmt.Sprintf("/api/v1/backends/big/servers/s%03d", i), fmt.Sprintf(`{"weight":%d}`, 2+i))
		case 1:
			in.MustDo(200, "PATCH", fmt.Sprintf("/api/v1/backends/big/servers/s%03d", i), `{"admin_state":"drain"}`)
		case 2:
			in.MustDo(201, "POST", "/api/v1/backends/big/servers", fmt.Sprintf(`{"name":"n%03d","address":"127.0.0.1","port":%d}`, i, 30000+i))
		case 3:
			in.MustDo(204, "DELETE", fmt.Sprintf("/api/v1/backends/big/servers/s%03d", 100+i), nil)
		}
	}
	var cfg struct {
		Generation int64 `json:"generation"`
	}
	before := in.MustDo(200, "GET", "/api/v1/config", nil)
	before.JSON(t, &cfg)
	onDisk, err := os.ReadFile(filepath.Join(in.StateDir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(onDisk, []byte(fmt.Sprintf(`"generation": %d,`, cfg.Generation))) {
		t.Fatalf("config.json is at the last generation %d: the last changes were not deltas", cfg.Generation)
	}
	in.ExpectDeath("killed to prove the deltas survive a crash")
	in.Kill()
	again := startSpliced(t, in.StateDir)
	if after := again.MustDo(200, "GET", "/api/v1/config", nil).Body; !bytes.Equal(before.Body, after) {
		t.Fatalf("config changed across a kill -9 and a restart:\nbefore %.400s\nafter  %.400s", before.Body, after)
	}
	for g := cfg.Generation; g > cfg.Generation-38; g-- {
		again.MustDo(200, "GET", fmt.Sprintf("/api/v1/config/revisions/%d", g), nil)
	}
}
