package api

import (
	"fmt"
	"net/http"
	"net/url"

	"github.com/spliced-proxy/spliced/core/config"
)

// collection implements the five verbs of a named-object list in the config
// document (frontends, binds of a frontend, backends, servers of a backend),
// so every list behaves the same way: same status codes, same If-Match,
// same error pointers.
type collection[T any] struct {
	kind   string // "frontend", "bind", "backend", "server"
	parent string // path parameter naming the parent object, "" at top level
	param  string // path parameter naming the object
	// slice locates the list in c (under the parent named parentName) and
	// returns its JSON pointer in the document.
	slice func(c *config.Config, parentName string) (*[]T, string, error)
	// mutable, when set, is slice for a write: the list it returns is
	// the config's own to change (the servers: config.OwnServers, as
	// the write shares the others with the current config).
	mutable func(c *config.Config, parentName string) (*[]T, string, error)
	nameOf  func(v *T) *string
	// index, when set, is find without a call of nameOf per item (the
	// servers: 10 000 in a backend, looked up several times per change).
	index func(items []T, name string) int
	// inUse, when set, refuses a delete while something refers to the object.
	inUse func(c *config.Config, name string) error
	// url is the URL path of the collection.
	url func(parentName string) string
}

// writable is slice for a mutate (see mutable).
func (k *collection[T]) writable(c *config.Config, parentName string) (*[]T, string, error) {
	if k.mutable != nil {
		return k.mutable(c, parentName)
	}
	return k.slice(c, parentName)
}

func (k *collection[T]) find(items []T, name string) int {
	// the last first: a create's answer looks up what it appended (names
	// are unique in a config: the last that matches is the one)
	if n := len(items); n > 1 && *k.nameOf(&items[n-1]) == name {
		return n - 1
	}
	if k.index != nil {
		return k.index(items, name)
	}
	for i := range items {
		if *k.nameOf(&items[i]) == name {
			return i
		}
	}
	return -1
}

func (k *collection[T]) notFound(name string) error {
	return fmt.Errorf("%s %q: %w", k.kind, name, config.ErrNotFound)
}

func (k *collection[T]) parentName(r *http.Request) string {
	if k.parent == "" {
		return ""
	}
	return param(r, k.parent)
}

// listView returns the list as GET answers it (never null).
func (k *collection[T]) listView(parent string) func(c *config.Config) (any, error) {
	return func(c *config.Config) (any, error) {
		p, _, err := k.slice(c, parent)
		if err != nil {
			return nil, err
		}
		if *p == nil {
			return []T{}, nil
		}
		return *p, nil
	}
}

// itemView returns the named object as GET answers it.
func (k *collection[T]) itemView(parent, name string) func(c *config.Config) (any, error) {
	return func(c *config.Config) (any, error) {
		p, _, err := k.slice(c, parent)
		if err != nil {
			return nil, err
		}
		i := k.find(*p, name)
		if i < 0 {
			return nil, k.notFound(name)
		}
		return (*p)[i], nil
	}
}

func (k *collection[T]) resultOf(parent, name string) func(c *config.Config) any {
	view := k.itemView(parent, name)
	return func(c *config.Config) any {
		v, err := view(c)
		if err != nil {
			return nil
		}
		return v
	}
}

func (k *collection[T]) list(s *server, w http.ResponseWriter, r *http.Request) error {
	return s.get(w, r, k.listView(k.parentName(r)))
}

func (k *collection[T]) get(s *server, w http.ResponseWriter, r *http.Request) error {
	return s.get(w, r, k.itemView(k.parentName(r), param(r, k.param)))
}

// create adds the object in the body: 201 with Location, 409 if the name is
// taken, 404 if the parent is unknown. If-Match is about the collection.
func (k *collection[T]) create(s *server, w http.ResponseWriter, r *http.Request) error {
	var v T
	if err := decodeBody(r, &v); err != nil {
		return err
	}
	return s.write(w, r, k.createOp(k.parentName(r), v))
}

// createOp adds v under parent (see create).
func (k *collection[T]) createOp(parent string, v T) writeOp {
	name := *k.nameOf(&v)
	return writeOp{
		target: k.listView(parent),
		mutate: func(c *config.Config) (string, error) {
			p, ptr, err := k.slice(c, parent)
			if err != nil {
				return "", err
			}
			if name != "" && k.find(*p, name) >= 0 {
				return "", &apiError{Status: http.StatusConflict, Code: "conflict", Err: config.ErrConflict,
					Detail: fmt.Sprintf("%s %q already exists", k.kind, name),
					Errors: []config.FieldError{{Field: "/name", Code: config.CodeDuplicate, Message: "the name is already taken"}}}
			}
			if p, _, err = k.writable(c, parent); err != nil {
				return "", err
			}
			*p = append(*p, v)
			return fmt.Sprintf("%s/%d", ptr, len(*p)-1), nil
		},
		result:   k.resultOf(parent, name),
		status:   http.StatusCreated,
		location: k.url(parent) + "/" + url.PathEscape(name),
	}
}

// put replaces the named object with the body. The name in the path wins; a
// different name in the body is refused (renaming is delete + create).
func (k *collection[T]) put(s *server, w http.ResponseWriter, r *http.Request) error {
	var v T
	if err := decodeBody(r, &v); err != nil {
		return err
	}
	parent, name := k.parentName(r), param(r, k.param)
	if err := k.checkName(&v, name); err != nil {
		return err
	}
	return s.write(w, r, replaceOp(k, parent, name, func(*T) (T, error) { return v, nil }))
}

// patch applies an RFC 7386 merge patch to the named object.
func (k *collection[T]) patch(s *server, w http.ResponseWriter, r *http.Request) error {
	mp, err := readPatch(r)
	if err != nil {
		return err
	}
	parent, name := k.parentName(r), param(r, k.param)
	return s.write(w, r, replaceOp(k, parent, name, func(cur *T) (T, error) {
		var v T
		if err := patchInto(*cur, mp, &v); err != nil {
			return v, err
		}
		return v, k.checkName(&v, name)
	}))
}

func (k *collection[T]) checkName(v *T, name string) error {
	n := k.nameOf(v)
	if *n == "" {
		*n = name
		return nil
	}
	if *n != name {
		return &apiError{Status: http.StatusUnprocessableEntity, Code: "validation",
			Detail: fmt.Sprintf("the body names %s %q but the path names %q; renaming is not supported", k.kind, truncate(*n, 64), name),
			Errors: []config.FieldError{{Field: "/name", Code: "name_mismatch", Message: "must be empty or equal the name in the path"}}}
	}
	return nil
}

// replaceOp is the common part of PUT and PATCH: build computes the new
// object from the current one, inside the store's lock.
func replaceOp[T any](k *collection[T], parent, name string, build func(cur *T) (T, error)) writeOp {
	return writeOp{
		target: k.itemView(parent, name),
		mutate: func(c *config.Config) (string, error) {
			p, ptr, err := k.slice(c, parent)
			if err != nil {
				return "", err
			}
			i := k.find(*p, name)
			if i < 0 {
				return "", k.notFound(name)
			}
			v, err := build(&(*p)[i])
			if err != nil {
				return "", err
			}
			if p, _, err = k.writable(c, parent); err != nil {
				return "", err
			}
			(*p)[i] = v
			return fmt.Sprintf("%s/%d", ptr, i), nil
		},
		result: k.resultOf(parent, name),
		status: http.StatusOK,
	}
}

// del removes the named object: 204, 404 unknown, 409 still referenced.
func (k *collection[T]) del(s *server, w http.ResponseWriter, r *http.Request) error {
	parent, name := k.parentName(r), param(r, k.param)
	return s.write(w, r, writeOp{
		target: k.itemView(parent, name),
		mutate: func(c *config.Config) (string, error) {
			p, _, err := k.slice(c, parent)
			if err != nil {
				return "", err
			}
			i := k.find(*p, name)
			if i < 0 {
				return "", k.notFound(name)
			}
			if k.inUse != nil {
				if err := k.inUse(c, name); err != nil {
					return "", err
				}
			}
			if p, _, err = k.writable(c, parent); err != nil {
				return "", err
			}
			*p = append((*p)[:i], (*p)[i+1:]...)
			return "", nil
		},
	})
}
