package config

import (
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"testing"
)

// Backend.Servers holds pointers: a null server is refused where a
// document is decoded (the API's body, the store's document, a cluster
// node's document and change), and a nil one put there by Go code is
// refused by Validate, never dereferenced.
func TestNullServerRefused(t *testing.T) {
	var c Config
	err := DecodeBytes([]byte(`{"backends":[{"name":"b","servers":[{"name":"a","address":"::1","port":1},null]}]}`), &c)
	var de *DecodeError
	if !errors.As(err, &de) || de.Field != "/backends/0/servers/1" || de.Code != DecodeType {
		t.Fatalf("decode of a null server: %v", err)
	}
	var s *Server
	if err := DecodeBytes([]byte(` null`), &s); !errors.As(err, &de) || de.Code != DecodeType || s != nil {
		t.Fatalf("decode of a null server alone: %v", err)
	}
	// a stored change that adds or changes a server as null
	cur := &Config{Backends: []Backend{{Name: "b", Servers: spanServers(3)}}}
	cur.Normalize()
	for _, l := range []ListDelta{{Add: []json.RawMessage{json.RawMessage(`null`)}}, {Change: []json.RawMessage{json.RawMessage(`null`)}}} {
		d := &Delta{Servers: map[string]*ListDelta{"b": &l}}
		if err := d.Apply(cur.CloneSharingServers()); err == nil {
			t.Fatalf("a change of a null server applied: %+v", l)
		}
	}
	// Go code that puts a nil server there: Validate says where
	c = *goodConfig()
	c.Backends[0].Servers = append(c.Backends[0].Servers, nil)
	c.Normalize()
	err = Validate(&c, Env{})
	var ve *ValidationError
	want := "/backends/0/servers/" + strconv.Itoa(len(c.Backends[0].Servers)-1)
	if !errors.As(err, &ve) || !slices.ContainsFunc(ve.Errors, func(e FieldError) bool { return e.Field == want }) {
		t.Fatalf("validate of a nil server: %v, want a problem at %s", err, want)
	}
	if cl := c.Clone(); cl.Backends[0].Servers[len(cl.Backends[0].Servers)-1] != nil {
		t.Fatal("Clone made a server of nil")
	}
	// the same through a write: refused, the store unchanged
	st := openStore(t, t.TempDir(), "")
	mustUpdate(t, st, func(c *Config) error { *c = *goodConfig(); return nil })
	gen := st.Current().Generation
	_, err = st.Update(t.Context(), func(c *Config) error {
		l := c.OwnServers(0)
		*l = append(*l, nil)
		return nil
	}, UpdateOptions{ShareServers: true})
	if !errors.As(err, &ve) || st.Current().Generation != gen {
		t.Fatalf("a write of a nil server: %v", err)
	}
}
