package cluster

import (
	"bytes"
	"encoding/json"
	"sync"

	"github.com/spliced-proxy/spliced/core/config"
)

// docEncoder encodes a document byte for byte as json.Marshal does, but
// reuses the encoding of the servers the previous document it encoded
// holds unchanged: a write changes one server among 10 000, and
// json.Marshal of the whole document was the largest part of a writer's
// CPU (a third, with its gzip another fifth). Each backend's servers are
// kept as their JSON array and where each server's encoding starts and
// ends in it; a list is compared with the one kept by config.ServerSpan
// (the lists a write does not change are the same slices: at once), and
// only what lies between the unchanged head and tail is encoded again.
// Safe from any goroutine (one encoding at a time).
type docEncoder struct {
	mu       sync.Mutex
	backends map[string]*encodedServers // by backend name
}

// encodedServers is the JSON of one list of servers: json is "[s0,s1,…]",
// server i is json[at[i]:at[i+1]-1] (at has len(list)+1 entries; the byte
// before each next start is the comma, or the closing bracket).
type encodedServers struct {
	list []*config.Server
	json []byte
	at   []int
}

var (
	emptyBackends = []byte(`"backends":[]`)
	emptyServers  = []byte(`"servers":[]`)
)

// encode is json.Marshal(c).
func (e *docEncoder) encode(c *config.Config) ([]byte, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	top := *c
	top.Backends = []config.Backend{}
	head, err := json.Marshal(&top)
	if err != nil {
		return nil, err
	}
	cut := bytes.Index(head, emptyBackends)
	if cut < 0 || bytes.Count(head, emptyBackends) != 1 {
		return json.Marshal(c) // a layout this encoder does not know
	}
	cut += len(emptyBackends) - 1 // at the closing bracket
	if e.backends == nil {
		e.backends = map[string]*encodedServers{}
	}
	seen := make(map[string]bool, len(c.Backends))
	out := make([]byte, 0, len(head)+e.size(c))
	out = append(out, head[:cut]...)
	for i := range c.Backends {
		b := &c.Backends[i]
		h := *b
		h.Servers = []*config.Server{}
		bh, err := json.Marshal(&h)
		if err != nil {
			return nil, err
		}
		at := bytes.Index(bh, emptyServers)
		if at < 0 || bytes.Count(bh, emptyServers) != 1 || seen[b.Name] {
			return json.Marshal(c)
		}
		seen[b.Name] = true
		at += len(emptyServers) - 2 // at the opening bracket
		es, err := e.servers(b.Name, b.Servers)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, bh[:at]...)
		out = append(out, es.json...)
		out = append(out, bh[at+2:]...)
	}
	out = append(out, head[cut:]...)
	for name := range e.backends {
		if !seen[name] {
			delete(e.backends, name)
		}
	}
	return out, nil
}

// size is about the size of c's servers' JSON, as last encoded.
func (e *docEncoder) size(c *config.Config) int {
	n := 0
	for i := range c.Backends {
		if es := e.backends[c.Backends[i].Name]; es != nil {
			n += len(es.json) + 256
		}
	}
	return n
}

// servers is the encoding of list, the servers of backend name, made from
// the one kept for that backend where they are the same servers.
func (e *docEncoder) servers(name string, list []*config.Server) (*encodedServers, error) {
	old := e.backends[name]
	var head, tail int
	if old != nil {
		head, tail = config.ServerSpan(old.list, list)
		if head == len(list) && len(list) == len(old.list) {
			old.list = list
			return old, nil
		}
	} else {
		old = &encodedServers{}
	}
	es := &encodedServers{list: list, at: make([]int, 0, len(list)+1)}
	es.json = make([]byte, 0, len(old.json)+256*(len(list)-head-tail)+2)
	es.json = append(es.json, '[')
	// The head as it was: the same bytes at the same offsets.
	if head > 0 {
		es.json = append(es.json, old.json[1:old.at[head]-1]...) // not the comma or bracket after
		es.json = append(es.json, ',')
		es.at = append(es.at, old.at[:head]...)
	}
	for i := head; i < len(list)-tail; i++ {
		es.at = append(es.at, len(es.json))
		b, err := json.Marshal(&list[i])
		if err != nil {
			return nil, err
		}
		es.json = append(append(es.json, b...), ',')
	}
	if tail > 0 {
		from := old.at[len(old.list)-tail]
		shift := len(es.json) - from
		for _, a := range old.at[len(old.list)-tail : len(old.list)] {
			es.at = append(es.at, a+shift)
		}
		es.json = append(es.json, old.json[from:len(old.json)-1]...) // its servers and their commas, not the bracket
		es.json = append(es.json, ',')
	}
	if len(list) > 0 {
		es.json = es.json[:len(es.json)-1] // the last comma
	}
	es.json = append(es.json, ']')
	es.at = append(es.at, len(es.json))
	e.backends[name] = es
	return es, nil
}
