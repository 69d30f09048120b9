package stick

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"net/netip"
	"strings"
	"unicode/utf8"
)

// Kind says what a key's bytes are.
type Kind uint8

const (
	KindNone  Kind = iota // the zero Key: nothing to track
	KindAddr              // an IP address, 16 bytes (IPv4 mapped)
	KindBytes             // a header value of at most MaxKeyBytes bytes, verbatim
	KindHash              // the SHA-256 of a longer header value
	KindCert              // the SHA-256 of a client certificate (DER)
)

// MaxKeyBytes is the longest header value kept verbatim; a longer one is
// keyed by its SHA-256 (shown "sha256:<hex>").
const MaxKeyBytes = 64

// keyWords: one word of kind and length, then the bytes.
const keyWords = 1 + MaxKeyBytes/8

// Key identifies a client in a table. It is a comparable value type (a
// fixed array of words: no pointer, no allocation to build one) and
// immutable once built.
type Key struct {
	w [keyWords]uint64
}

// Kind is what the key's bytes are.
func (k *Key) Kind() Kind { return Kind(k.w[0]) }

func (k *Key) n() int { return int(k.w[0] >> 8) }

// words is how many words of w the key uses.
func (k *Key) words() int { return 1 + (k.n()+7)/8 }

func (k *Key) set(kind Kind, b []byte) {
	*k = Key{}
	k.w[0] = uint64(kind) | uint64(len(b))<<8
	var buf [MaxKeyBytes]byte
	copy(buf[:], b)
	for i := 0; i < (len(b)+7)/8; i++ {
		k.w[1+i] = binary.LittleEndian.Uint64(buf[i*8:])
	}
}

// bytes appends the key's bytes to dst.
func (k *Key) bytes(dst []byte) []byte {
	var buf [MaxKeyBytes]byte
	for i := 0; i < (k.n()+7)/8; i++ {
		binary.LittleEndian.PutUint64(buf[i*8:], k.w[1+i])
	}
	return append(dst, buf[:k.n()]...)
}

// AddrKey is the key of a client address (an IPv4 address and its
// IPv4-mapped IPv6 form are one key).
func AddrKey(a netip.Addr) Key {
	var k Key
	if !a.IsValid() {
		return k
	}
	b := a.Unmap().As16()
	k.set(KindAddr, b[:])
	return k
}

// BytesKey is the key of a header value: verbatim up to MaxKeyBytes
// bytes, its SHA-256 beyond. An empty value is the zero Key (untracked).
func BytesKey(v []byte) Key {
	var k Key
	switch {
	case len(v) == 0:
	case len(v) <= MaxKeyBytes:
		k.set(KindBytes, v)
	default:
		sum := sha256.Sum256(v)
		k.set(KindHash, sum[:])
	}
	return k
}

// CertKey is the key of a client certificate's SHA-256.
func CertKey(sum *[32]byte) Key {
	var k Key
	k.set(KindCert, sum[:])
	return k
}

// IsZero: nothing to track.
func (k *Key) IsZero() bool { return k.w[0] == 0 }

// String is how the API shows the key (and parses it back: ParseKey):
// an address for KindAddr, the value for KindBytes, "sha256:<hex>" for
// KindHash and KindCert.
func (k *Key) String() string {
	var buf [MaxKeyBytes]byte
	b := k.bytes(buf[:0])
	switch k.Kind() {
	case KindAddr:
		return netip.AddrFrom16([16]byte(b)).Unmap().String()
	case KindBytes:
		return string(b)
	case KindHash, KindCert:
		return "sha256:" + hex.EncodeToString(b)
	}
	return ""
}

// ErrBadKey: a key that cannot be one of the kind asked for.
var ErrBadKey = errors.New("not a key of this table")

// ParseKey is String's inverse for a table whose keys are of kind kind
// (KindAddr, KindBytes or KindCert; a bytes table also holds KindHash).
func ParseKey(kind Kind, s string) (Key, error) {
	switch kind {
	case KindAddr:
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			return Key{}, ErrBadKey
		}
		return AddrKey(a), nil
	case KindCert:
		sum, ok := parseSum(s)
		if !ok {
			return Key{}, ErrBadKey
		}
		return CertKey(&sum), nil
	case KindBytes:
		// "sha256:" and 64 hex digits is 71 bytes: no verbatim value
		// looks like that, since one that long is hashed.
		if sum, ok := parseSum(s); ok {
			var k Key
			k.set(KindHash, sum[:])
			return k, nil
		}
		if s == "" || len(s) > MaxKeyBytes || !utf8.ValidString(s) {
			return Key{}, ErrBadKey
		}
		return BytesKey([]byte(s)), nil
	}
	return Key{}, ErrBadKey
}

func parseSum(s string) ([32]byte, bool) {
	var sum [32]byte
	h, ok := strings.CutPrefix(s, "sha256:")
	if !ok || len(h) != 64 {
		return sum, false
	}
	if _, err := hex.Decode(sum[:], []byte(h)); err != nil {
		return sum, false
	}
	return sum, true
}
