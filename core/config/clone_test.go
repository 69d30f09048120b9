package config

import (
	"reflect"
	"strings"
	"testing"
)

// fill sets every field reachable from v to a non-zero value, with one
// element in every slice, so tests notice fields added to the model.
// A recursive type (a rule condition's not) is filled one level deep.
func fill(v reflect.Value, n int) { fillIn(v, n, map[reflect.Type]bool{}) }

func fillIn(v reflect.Value, n int, open map[reflect.Type]bool) {
	fill := func(v reflect.Value, n int) { fillIn(v, n, open) }
	switch v.Kind() {
	case reflect.Pointer:
		if open[v.Type()] {
			return // already being filled: stop the recursion here
		}
		open[v.Type()] = true
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem(), n)
		delete(open, v.Type())
	case reflect.Struct:
		for i := range v.NumField() {
			fill(v.Field(i), n)
		}
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(v.Index(0), n)
	case reflect.Map:
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(k, n)
		fill(e, n)
		v.Set(reflect.MakeMap(v.Type()))
		v.SetMapIndex(k, e)
	case reflect.String:
		v.SetString(strings.Repeat("x", n))
	case reflect.Int, reflect.Int64:
		v.SetInt(int64(n))
	case reflect.Bool:
		v.SetBool(true)
	default:
		panic("fill: unhandled kind " + v.Kind().String())
	}
}

// assertNoSharing fails if a and b share any pointer or slice backing array.
func assertNoSharing(t *testing.T, path string, a, b reflect.Value) {
	t.Helper()
	switch a.Kind() {
	case reflect.Pointer:
		if a.IsNil() {
			return
		}
		if a.Pointer() == b.Pointer() {
			t.Errorf("%s: pointer shared", path)
		}
		assertNoSharing(t, path, a.Elem(), b.Elem())
	case reflect.Struct:
		for i := range a.NumField() {
			assertNoSharing(t, path+"."+a.Type().Field(i).Name, a.Field(i), b.Field(i))
		}
	case reflect.Slice:
		if a.Len() > 0 && a.Pointer() == b.Pointer() {
			t.Errorf("%s: slice shared", path)
		}
		for i := range a.Len() {
			assertNoSharing(t, path+"[]", a.Index(i), b.Index(i))
		}
	case reflect.Map:
		if a.Len() > 0 && a.Pointer() == b.Pointer() {
			t.Errorf("%s: map shared", path)
		}
		for _, k := range a.MapKeys() {
			assertNoSharing(t, path+"[k]", a.MapIndex(k), b.MapIndex(k))
		}
	}
}

func TestCloneIsDeepAndComplete(t *testing.T) {
	var c Config
	fill(reflect.ValueOf(&c).Elem(), 1)
	cl := c.Clone()
	if !reflect.DeepEqual(&c, cl) {
		t.Fatalf("clone differs:\n%+v\n%+v", c, *cl)
	}
	assertNoSharing(t, "Config", reflect.ValueOf(c), reflect.ValueOf(*cl))

	// nil stays nil, empty stays empty.
	e := &Config{Frontends: []Frontend{{Binds: []Bind{}}}}
	ce := e.Clone()
	if ce.Backends != nil || ce.Frontends[0].Binds == nil || ce.Frontends[0].Routes != nil {
		t.Fatalf("nil/empty not preserved: %+v", ce)
	}
}

func TestServerEqualSeesEveryField(t *testing.T) {
	var base Server
	fill(reflect.ValueOf(&base).Elem(), 1)
	same := cloneServer(&base)
	if !base.equal(&same) {
		t.Fatal("a copy is not equal")
	}
	for i := range reflect.TypeFor[Server]().NumField() {
		var other Server
		fill(reflect.ValueOf(&other).Elem(), 1)
		f := reflect.ValueOf(&other).Elem().Field(i)
		fill(f, 2)
		if f.Kind() == reflect.String {
			f.SetString("y")
		}
		if base.equal(&other) {
			t.Errorf("equal ignores field %s", reflect.TypeFor[Server]().Field(i).Name)
		}
	}
	var nilWeight Server
	fill(reflect.ValueOf(&nilWeight).Elem(), 1)
	nilWeight.Weight = nil
	if base.equal(&nilWeight) || nilWeight.equal(&base) {
		t.Error("equal ignores a nil weight")
	}
}

func cloneServer(s *Server) Server {
	b := Backend{Servers: []*Server{s}}
	return *b.clone().Servers[0]
}

// cloneSharingServers (UpdateOptions.ShareServers) is Clone but for the
// backends' lists of servers: those are the same slices, clipped so that
// an append copies, and OwnServers gives one back as a copy.
func TestCloneSharingServersSharesOnlyTheServers(t *testing.T) {
	var c Config
	fill(reflect.ValueOf(&c).Elem(), 1)
	cl := c.cloneSharingServers()
	if !reflect.DeepEqual(&c, cl) {
		t.Fatalf("clone differs:\n%+v\n%+v", c, *cl)
	}
	sv, csv := c.Backends[0].Servers, cl.Backends[0].Servers
	if &sv[0] != &csv[0] || cap(csv) != len(csv) {
		t.Fatalf("servers not shared, or not clipped (cap %d, len %d)", cap(csv), len(csv))
	}
	c.Backends[0].Servers, cl.Backends[0].Servers = nil, nil
	assertNoSharing(t, "Config", reflect.ValueOf(c), reflect.ValueOf(*cl))
	cl.Backends[0].Servers = csv
	own := cl.OwnServers(0)
	(*own)[0] = &Server{Name: "changed"}
	if sv[0].Name == "changed" || !reflect.DeepEqual(*own, cl.Backends[0].Servers) {
		t.Fatal("OwnServers did not copy the list into the config")
	}
	// OwnServer: a copy of the server in a list of the config's own, the
	// server of c untouched, nothing shared with it
	c.Backends[0].Servers = sv
	cl = c.cloneSharingServers()
	s := cl.OwnServer(0, 0)
	if s == sv[0] || &cl.Backends[0].Servers[0] == &sv[0] || cl.Backends[0].Servers[0] != s || !reflect.DeepEqual(s, sv[0]) {
		t.Fatal("OwnServer did not put a copy of the server in a list of the config's own")
	}
	assertNoSharing(t, "Server", reflect.ValueOf(*s), reflect.ValueOf(*sv[0]))
	*s.Weight, s.TLS.Verify = 77, "changed"
	if *sv[0].Weight == 77 || sv[0].TLS.Verify == "changed" {
		t.Fatal("OwnServer's copy shares the weight or the tls of the server")
	}
}
