package proxy

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/tls"
	"encoding/hex"
	"hash"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/spliced-proxy/spliced/internal/testutil"
)

// tls13Records writes TLS 1.3 records as the client of a connection whose
// handshake crypto/tls made, from its client application traffic secret
// (KeyLogWriter): crypto/tls has no API to send a KeyUpdate.
type tls13Records struct {
	t      testing.TB
	hash   func() hash.Hash
	keyLen int
	secret []byte
	aead   cipher.AEAD
	iv     []byte
	seq    uint64
}

func newTLS13Records(t testing.TB, suite uint16, keyLog string) *tls13Records {
	r := &tls13Records{t: t}
	switch suite {
	case tls.TLS_AES_128_GCM_SHA256:
		r.hash, r.keyLen = sha256.New, 16
	case tls.TLS_AES_256_GCM_SHA384:
		r.hash, r.keyLen = sha512.New384, 32
	default:
		t.Skipf("cipher suite %s: the test writes AES-GCM records only", tls.CipherSuiteName(suite))
	}
	for _, l := range strings.Split(keyLog, "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "CLIENT_TRAFFIC_SECRET_0" {
			s, err := hex.DecodeString(f[2])
			if err != nil {
				t.Fatal(err)
			}
			r.setSecret(s)
			return r
		}
	}
	t.Fatalf("no client traffic secret in the key log %q", keyLog)
	return nil
}

// expand is TLS 1.3's HKDF-Expand-Label with an empty context.
func (r *tls13Records) expand(secret []byte, label string, n int) []byte {
	info := append([]byte{byte(n >> 8), byte(n), byte(6 + len(label))}, "tls13 "+label...)
	out, err := hkdf.Expand(r.hash, secret, string(append(info, 0)), n)
	if err != nil {
		r.t.Fatal(err)
	}
	return out
}

func (r *tls13Records) setSecret(s []byte) {
	r.secret, r.seq = s, 0
	block, err := aes.NewCipher(r.expand(s, "key", r.keyLen))
	if err != nil {
		r.t.Fatal(err)
	}
	if r.aead, err = cipher.NewGCM(block); err != nil {
		r.t.Fatal(err)
	}
	r.iv = r.expand(s, "iv", 12)
}

// record appends one protected record of content type typ to dst.
func (r *tls13Records) record(dst []byte, typ byte, body []byte) []byte {
	inner := append(append([]byte(nil), body...), typ)
	n := len(inner) + r.aead.Overhead()
	hdr := []byte{23, 3, 3, byte(n >> 8), byte(n)}
	nonce := bytes.Clone(r.iv)
	for i := 0; i < 8; i++ {
		nonce[11-i] ^= byte(r.seq >> (8 * i))
	}
	r.seq++
	return r.aead.Seal(append(dst, hdr...), nonce, inner, hdr)
}

// keyUpdate appends a KeyUpdate that asks the peer to update its keys too
// (so it must answer with one), then moves to the next secret.
func (r *tls13Records) keyUpdate(dst []byte) []byte {
	dst = r.record(dst, 22, []byte{24, 0, 0, 1, 1}) // key_update, update_requested
	r.setSecret(r.expand(r.secret, "traffic upd", len(r.secret)))
	return dst
}

// TestTLSKeyUpdateAnswersAreBounded: a TLS 1.3 client sends KeyUpdates
// that request an answer (15 at a time, below crypto/tls's limit of
// consecutive non-advancing records, then one byte of data) and does not
// read. Each answer is a record crypto/tls writes while the transport
// reads; the transport must stop reading while answers wait for the
// socket, as it stops a mover whose records wait, or the queue grows with
// what the client sends. Once the client reads, every byte still arrives.
func TestTLSKeyUpdateAnswersAreBounded(t *testing.T) {
	const rounds = 1000 // about 430 KB of answers
	e := newEnv(t, defaultTuning())
	h := newTLSHandshakes(e.l, 1)
	srv, cli := tlsPair(t, tls.VersionTLS13)
	var keyLog bytes.Buffer
	cli.KeyLogWriter = &keyLog
	r := &moverRig{w: e.w, done: make(chan struct{})}
	pa := tlsAccept(e, h, 10*time.Second, srv, &r.a, func(x *tlsSock, err error) {
		if err != nil {
			t.Errorf("handshake: %v", err)
			return
		}
		// A small send buffer: the answers wait for the client at once.
		if err := unix.SetsockoptInt(x.a.fd, unix.SOL_SOCKET, unix.SO_SNDBUF, 4096); err != nil {
			t.Error(err)
		}
		openTLSSide(t, e, r, &r.a, x)
	})
	pb := e.connect(func(fd int) {
		r.b.Task.Run, r.b.Task.Owner = runRig, r
		r.b.Connected = true
		if err := r.b.open(e.l, fd, rawSock{}); err != nil {
			t.Error(err)
		}
	})
	if err := pa.SetReadBuffer(4096); err != nil {
		t.Fatal(err)
	}
	ca := tls.Client(pa, cli)
	ca.SetDeadline(time.Now().Add(10 * time.Second))
	if err := ca.Handshake(); err != nil {
		t.Fatal(err)
	}
	rec := newTLS13Records(t, ca.ConnectionState().CipherSuite, keyLog.String())
	pa.SetDeadline(time.Now().Add(60 * time.Second))
	go io.Copy(io.Discard, pb)
	var written atomic.Int64 // rounds the client's socket took
	go func() {
		var b []byte
		for i := 0; i < rounds; i++ {
			b = b[:0]
			for k := 0; k < 15; k++ {
				b = rec.keyUpdate(b)
			}
			b = rec.record(b, 23, []byte{'x'})
			if _, err := pa.Write(b); err != nil {
				return
			}
			written.Add(1)
		}
	}()
	// The client reads nothing until the proxy stopped reading it, or
	// everything was sent.
	var sent int64
	testutil.Eventually(t, 20*time.Second, func() bool {
		n := written.Load()
		var stuck bool
		e.do(func() {
			x := r.a.xp.(*tlsSock)
			stuck = x.a.pending() && r.a.FD.Ready&evIn == 0
		})
		if n == rounds || stuck && n == sent {
			return true
		}
		sent = n
		return false
	}, "the client's KeyUpdates sent, or the proxy stopped reading them")
	var queuedCap int
	e.do(func() { queuedCap = cap(r.a.xp.(*tlsSock).a.out) })
	// Now the client reads (raw: crypto/tls's client would give up after
	// 16 answers in a row); every data byte must come through.
	go io.Copy(io.Discard, pa)
	testutil.Eventually(t, 30*time.Second, func() bool {
		var n int64
		e.do(func() { n = r.ab.m.bytes })
		return n == rounds
	}, "every data byte forwarded once the client reads")
	e.do(func() { queuedCap = max(queuedCap, cap(r.a.xp.(*tlsSock).a.out)) })
	// out keeps its capacity: the most it ever held.
	if limit := defaultTuning().Bufsize + 4096; queuedCap > limit {
		t.Errorf("the queued answers grew to %d bytes, want at most %d", queuedCap, limit)
	}
}
