package acme

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mholt/acmez/v3"
	acmeproto "github.com/mholt/acmez/v3/acme"

	"github.com/spliced-proxy/spliced/core/config"
)

// Status of a managed certificate (State.Status).
const (
	StatusPending  = "pending"  // never issued; an order is under way or due
	StatusValid    = "valid"    // issued; next renewal at NextRenewalAt
	StatusRenewing = "renewing" // issued; an order for its successor is under way
	StatusFailed   = "failed"   // the last order failed; retried at RetryAt
)

// Problem is what the CA (or the way to it) answered a failed order with:
// the CA's problem document (RFC 8555 §6.7) when it sent one.
type Problem struct {
	Type   string `json:"type" example:"urn:ietf:params:acme:error:rejectedIdentifier"`
	Detail string `json:"detail" example:"Order included an identifier for which issuance is forbidden by policy"`
	Status int    `json:"status,omitempty" example:"400"`
}

// State is the run-time state of a managed certificate on this node.
// Times are RFC 3339, UTC; empty when not known.
type State struct {
	Status        string   `json:"status" example:"valid" enums:"pending,valid,renewing,failed"`
	Error         *Problem `json:"error,omitempty"`
	RenewedAt     string   `json:"renewed_at,omitempty" example:"2026-12-06T08:00:00Z"`
	NextRenewalAt string   `json:"next_renewal_at,omitempty" example:"2027-01-05T08:00:00Z"`
	RetryAt       string   `json:"retry_at,omitempty"`
	// ARIWindow is the renewal window the CA suggested for the current
	// certificate (ACME Renewal Information, RFC 9773), when it offers
	// one: the renewal happens inside it if that is before two thirds
	// of the lifetime.
	ARIWindow *Window `json:"ari_window,omitempty"`
	// OrderedBy names the node that holds the certificate's order lock
	// when it is another one (cluster: one node orders).
	OrderedBy string `json:"ordered_by,omitempty"`
}

// Window is a time range (RFC 3339, UTC).
type Window struct {
	Start string `json:"start" example:"2027-01-04T08:00:00Z"`
	End   string `json:"end" example:"2027-01-06T08:00:00Z"`
}

// Coordinator shares orders and challenges between the nodes of a
// cluster (core/cluster's ACMECoordinator): one node orders a
// certificate, every node answers its challenges.
type Coordinator interface {
	// Lock takes the order lock of the certificate name; ok false:
	// holder has it. The lock outlives a node that dies by a lease.
	Lock(ctx context.Context, name string) (release func(), holder string, ok bool, err error)
	// Publish and Withdraw a challenge's key authorization (kind
	// "http-01": key is the token; "tls-alpn-01": the name).
	Publish(ctx context.Context, kind, key, value string) error
	Withdraw(ctx context.Context, kind, key string) error
	// Watch calls fn with every published answer, by kind then key, at
	// start and after each change, until ctx ends.
	Watch(ctx context.Context, fn func(map[string]map[string]string))
}

// CommitFunc stores a certificate obtained for the managed certificate
// name (chain PEM, leaf first; key PEM) as a new generation.
type CommitFunc func(ctx context.Context, name, certPEM, keyPEM string) error

// Options of a Manager.
type Options struct {
	Logger *slog.Logger
	// Store is the configuration store: managed certificates are read
	// from its Current, account files from its Storage.
	Store *config.Store
	// Backoff is the first retry delay after a failed order (0: 10 s),
	// doubled at each failure up to MaxBackoff (0: 6 h: a CA that
	// refuses stays asked four times a day, within Let's Encrypt's
	// failed-validation limits).
	Backoff, MaxBackoff time.Duration
	// Poll is how often the configuration is read for managed
	// certificates added, changed or removed (0: 1 s).
	Poll time.Duration
	// Coordinator, in a cluster, makes one node order each certificate
	// and every node answer its challenges; nil: a single node.
	Coordinator Coordinator
}

// Manager runs the managed certificates (see the package doc).
type Manager struct {
	log        *slog.Logger
	store      *config.Store
	backoff    time.Duration
	maxBackoff time.Duration
	poll       time.Duration
	coord      Coordinator

	commitMu sync.Mutex
	commit   CommitFunc

	mu     sync.Mutex
	states map[string]State // by certificate name

	tokens atomic.Pointer[map[string]string] // http-01: token → key authorization
	tokMu  sync.Mutex                        // serialises writers of tokens

	alpnMu sync.Mutex
	alpn   map[string]*tls.Certificate // tls-alpn-01: lower-case name → certificate

	// With a Coordinator: the answers this node published (answered at
	// once, before the watch brings them back) and the cluster's, by kind
	// then key; the maps above are their union.
	shareMu     sync.Mutex
	own, shared map[string]map[string]string
	alpnCache   map[string]*tls.Certificate // by name + "\x00" + key authorization

	renewOK, renewFail atomic.Uint64
}

// New returns a Manager; Run starts it.
func New(o Options) *Manager {
	m := &Manager{log: o.Logger, store: o.Store, backoff: o.Backoff, maxBackoff: o.MaxBackoff, poll: o.Poll,
		coord: o.Coordinator, states: map[string]State{}, alpn: map[string]*tls.Certificate{},
		own: map[string]map[string]string{}, shared: map[string]map[string]string{}, alpnCache: map[string]*tls.Certificate{}}
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	if m.backoff <= 0 {
		m.backoff = 10 * time.Second
	}
	if m.maxBackoff <= 0 {
		m.maxBackoff = 6 * time.Hour
	}
	if m.poll <= 0 {
		m.poll = time.Second
	}
	empty := map[string]string{}
	m.tokens.Store(&empty)
	return m
}

// SetCommit sets how obtained certificates are stored (the API's write);
// orders wait for it.
func (m *Manager) SetCommit(fn CommitFunc) {
	m.commitMu.Lock()
	m.commit = fn
	m.commitMu.Unlock()
}

// State returns the run-time state of the managed certificate name.
func (m *Manager) State(name string) (State, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	st, ok := m.states[name]
	return st, ok
}

// Renewals counts the orders that ended, by result ("success",
// "failure"): spliced_certificate_acme_renewals_total.
func (m *Manager) Renewals() (success, failure uint64) {
	return m.renewOK.Load(), m.renewFail.Load()
}

// KeyAuthorization answers an http-01 token (proxy.HTTPChallenges).
func (m *Manager) KeyAuthorization(token string) (string, bool) {
	ka, ok := (*m.tokens.Load())[token]
	return ka, ok
}

// ChallengeCertificate answers a tls-alpn-01 hello for serverName
// (tlsconf.Challenges).
func (m *Manager) ChallengeCertificate(serverName string) (*tls.Certificate, bool) {
	m.alpnMu.Lock()
	defer m.alpnMu.Unlock()
	c, ok := m.alpn[strings.ToLower(strings.TrimSuffix(serverName, "."))]
	return c, ok
}

func (m *Manager) setState(name string, st State) {
	m.mu.Lock()
	m.states[name] = st
	m.mu.Unlock()
}

// worker is the goroutine of one managed certificate.
type worker struct {
	spec   string // the acme member, as JSON: a change restarts the worker
	cancel context.CancelFunc
	done   chan struct{}
}

// Run reconciles the workers with the configuration every Poll until ctx
// ends, then stops them and returns.
func (m *Manager) Run(ctx context.Context) {
	workers := map[string]*worker{}
	defer func() {
		for _, w := range workers {
			w.cancel()
			<-w.done
		}
	}()
	if m.coord != nil {
		watched := make(chan struct{})
		defer func() { <-watched }()
		go func() { defer close(watched); m.coord.Watch(ctx, m.onShared) }()
	}
	tick := time.NewTicker(m.poll)
	defer tick.Stop()
	for {
		m.reconcile(ctx, workers)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (m *Manager) reconcile(ctx context.Context, workers map[string]*worker) {
	c := m.store.Current()
	want := map[string]string{}
	if c != nil {
		for i := range c.Certificates {
			ct := &c.Certificates[i]
			if ct.ACME == nil {
				continue
			}
			b, _ := json.Marshal(ct.ACME)
			want[ct.Name] = string(b)
		}
	}
	for name, w := range workers {
		if spec, ok := want[name]; !ok || spec != w.spec {
			w.cancel()
			<-w.done
			delete(workers, name)
			if !ok {
				m.mu.Lock()
				delete(m.states, name)
				m.mu.Unlock()
			}
		}
	}
	for name, spec := range want {
		if workers[name] != nil {
			continue
		}
		wctx, cancel := context.WithCancel(ctx)
		w := &worker{spec: spec, cancel: cancel, done: make(chan struct{})}
		workers[name] = w
		go func() {
			defer close(w.done)
			m.work(wctx, name)
		}()
	}
}

// current returns the managed certificate name of the current config.
func (m *Manager) current(name string) (config.Certificate, bool) {
	c := m.store.Current()
	if c == nil {
		return config.Certificate{}, false
	}
	i := c.FindCertificate(name)
	if i < 0 || c.Certificates[i].ACME == nil {
		return config.Certificate{}, false
	}
	return c.Certificates[i], true
}

// renewalAt is when cert needs an order: now when it is not issued or
// no longer matches its domains or key type, else at two thirds of its
// lifetime (Let's Encrypt's 90 days: renewed 30 days ahead).
func renewalAt(cert *config.Certificate, now time.Time) time.Time {
	if !cert.Issued() || cert.KeyType != cert.ACME.KeyType || !sameNames(cert.SANs, cert.ACME.Domains) {
		return now
	}
	nb, err1 := time.Parse(time.RFC3339, cert.NotBefore)
	na, err2 := time.Parse(time.RFC3339, cert.NotAfter)
	if err1 != nil || err2 != nil || !na.After(nb) {
		return now
	}
	return nb.Add(na.Sub(nb) * 2 / 3)
}

func sameNames(sans, domains []string) bool {
	a := make([]string, 0, len(sans))
	for _, s := range sans {
		a = append(a, strings.ToLower(s))
	}
	b := make([]string, 0, len(domains))
	for _, d := range domains {
		b = append(b, strings.ToLower(d))
	}
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// work runs the managed certificate name until ctx ends.
func (m *Manager) work(ctx context.Context, name string) {
	backoff := m.backoff
	var retryAt time.Time
	var ari renewalInfo // the CA's renewal info of the current certificate
	var last State
	// held releases the cluster's order lock: kept from the order's start
	// through its retries, so the cluster's retries follow one backoff.
	var held func()
	defer func() {
		if held != nil {
			held()
		}
	}()
	for {
		cert, ok := m.current(name)
		if !ok {
			return
		}
		now := time.Now()
		due := renewalAt(&cert, now)
		var ariNext time.Time
		if due.After(now) { // issued and not due: the CA's renewal info may say sooner
			if ari.chain != cert.ChainSHA256 {
				ari = renewalInfo{chain: cert.ChainSHA256, backoff: m.backoff}
			}
			if !now.Before(ari.next) {
				m.fetchRenewalInfo(ctx, &cert, &ari)
				if ctx.Err() != nil {
					return
				}
				now = time.Now()
			}
			if !ari.at.IsZero() && ari.at.Before(due) {
				due = ari.at // a window in the past: now
			}
			ariNext = ari.next
		}
		if retryAt.IsZero() {
			st := State{Status: StatusPending, RenewedAt: last.RenewedAt}
			if cert.Issued() {
				st.Status = StatusValid
				st.NextRenewalAt = stamp(due)
				if ari.chain == cert.ChainSHA256 {
					st.ARIWindow = ari.window
				}
			}
			m.setState(name, st)
		} else if retryAt.After(due) {
			due = retryAt
		}
		// Wake up when due, or sooner to read the renewal info again.
		wake := due
		if due.After(now) && ariNext.After(now) && ariNext.Before(due) {
			wake = ariNext
		}
		if d := wake.Sub(now); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			continue // read the certificate again: it may have changed meanwhile
		}
		if m.coord != nil && held == nil {
			rel, holder, ok, err := m.coord.Lock(ctx, name)
			if err != nil || !ok {
				// Another node orders it (or the store does not answer):
				// its result reaches this node through the store.
				if st, found := m.State(name); found && holder != "" {
					st.OrderedBy = holder
					m.setState(name, st)
				}
				if !sleep(ctx, lockRetry) {
					return
				}
				continue
			}
			held = rel
			// The node that held the lock before may have stored the
			// certificate already, and this node not applied it yet.
			// (The same certificate stored: due here, maybe by the CA's
			// renewal info, which renewalAt does not know.)
			if fresh, ok := m.stored(ctx, name); ok && fresh.ChainSHA256 != cert.ChainSHA256 && renewalAt(&fresh, time.Now()).After(time.Now()) {
				held()
				held = nil
				if !sleep(ctx, time.Second) {
					return
				}
				continue
			}
		}
		st := State{Status: StatusPending, RenewedAt: last.RenewedAt}
		if cert.Issued() {
			st.Status = StatusRenewing
		}
		if cur, _ := m.State(name); cur.Status == StatusFailed {
			st.Error, st.RetryAt = cur.Error, "" // the last failure stays visible while retrying
		}
		m.setState(name, st)
		start := time.Now()
		err := m.order(ctx, &cert)
		if ctx.Err() != nil {
			return // stopping, or the spec changed: not a failure
		}
		if err == nil {
			if held != nil {
				held()
				held = nil
			}
			m.renewOK.Add(1)
			backoff, retryAt = m.backoff, time.Time{}
			last = State{Status: StatusValid, RenewedAt: stamp(time.Now())}
			m.log.Info("acme: certificate obtained", "certificate", name, "domains", cert.ACME.Domains, "took", time.Since(start).Round(time.Millisecond))
			continue
		}
		m.renewFail.Add(1)
		retryAt = time.Now().Add(backoff)
		m.setState(name, State{Status: StatusFailed, Error: problemOf(err), RenewedAt: last.RenewedAt, RetryAt: stamp(retryAt)})
		m.log.Warn("acme: order failed", "certificate", name, "retry_in", backoff, "err", err)
		backoff = min(2*backoff, m.maxBackoff)
	}
}

// renewalInfo is what the CA's renewal info (RFC 9773) said of the
// certificate whose chain is chain.
type renewalInfo struct {
	chain   string
	at      time.Time // when to renew inside the suggested window; zero: not known
	window  *Window
	next    time.Time     // when to ask again
	backoff time.Duration // after a failure: the next delay
}

// Bounds of the interval between two reads of a certificate's renewal
// info: the CA's Retry-After (ariDefault when absent), clamped as RFC 9773
// §4.3.3 suggests; ariTimeout bounds one read (acmez tries three times).
const (
	ariDefault = 6 * time.Hour
	ariMin     = time.Minute
	ariMax     = 24 * time.Hour
	ariTimeout = 30 * time.Second
)

// fetchRenewalInfo reads the CA's renewal info of cert into ari: its
// renewal time inside the suggested window (acmez's SelectedTime, a
// random time of the window as §4.2 says) and when to read it again.
// A CA without renewal info is asked again a day later, silently; a
// failure is retried after the order backoff, doubled at each failure.
func (m *Manager) fetchRenewalInfo(ctx context.Context, cert *config.Certificate, ari *renewalInfo) {
	now := time.Now()
	fail := func(err error) {
		ari.next = now.Add(ari.backoff)
		m.log.Warn("acme: renewal info", "certificate", cert.Name, "retry_in", ari.backoff, "err", err)
		ari.backoff = min(2*ari.backoff, m.maxBackoff)
	}
	b, err := m.store.CertificateBundle(*cert)
	if err != nil {
		fail(err)
		return
	}
	var leaf *x509.Certificate
	for blk, rest := pem.Decode(b); blk != nil; blk, rest = pem.Decode(rest) {
		if blk.Type == "CERTIFICATE" {
			leaf, err = x509.ParseCertificate(blk.Bytes)
			break
		}
	}
	if leaf == nil {
		fail(fmt.Errorf("no leaf certificate in the stored bundle (%v)", err))
		return
	}
	hc, err := httpClient(cert.ACME.DirectoryCAPEM)
	if err != nil {
		fail(err)
		return
	}
	cctx, cancel := context.WithTimeout(ctx, ariTimeout)
	defer cancel()
	client := &acmeproto.Client{Directory: cert.ACME.Directory, HTTPClient: hc, UserAgent: "spliced",
		Logger: m.log.With("certificate", cert.Name)}
	info, err := client.GetRenewalInfo(cctx, leaf)
	if ctx.Err() != nil {
		return
	}
	if errors.Is(err, acmeproto.ErrUnsupported) {
		ari.next, ari.at, ari.window = now.Add(ariMax), time.Time{}, nil
		return
	}
	if err != nil {
		fail(err)
		return
	}
	ari.backoff = m.backoff
	ari.window = &Window{Start: stamp(info.SuggestedWindow.Start), End: stamp(info.SuggestedWindow.End)}
	ari.at = info.SelectedTime
	if start, end := info.SuggestedWindow.Start, info.SuggestedWindow.End; ari.at.IsZero() || ari.at.Before(start) || ari.at.After(end) {
		ari.at = start
		if d := end.Sub(start); d > 0 {
			ari.at = start.Add(time.Duration(mrand.Int64N(int64(d))))
		}
	}
	wait := ariDefault
	if info.RetryAfter != nil {
		wait = info.RetryAfter.Sub(now)
	}
	ari.next = now.Add(min(max(wait, ariMin), ariMax))
}

// lockRetry is how often a node that does not hold a due certificate's
// order lock tries it again (the holder may die: its lease then expires
// within cluster.ACMELockTTL).
const lockRetry = 5 * time.Second

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// stored reads the managed certificate name from the storage itself (the
// committed generation, which this node may not run yet).
func (m *Manager) stored(ctx context.Context, name string) (config.Certificate, bool) {
	c, _, err := m.store.Storage().Load(ctx)
	if err != nil || c == nil {
		return config.Certificate{}, false
	}
	i := c.FindCertificate(name)
	if i < 0 || c.Certificates[i].ACME == nil {
		return config.Certificate{}, false
	}
	return c.Certificates[i], true
}

// problemOf is the CA's problem document in err, else err's text.
func problemOf(err error) *Problem {
	var p acmeproto.Problem
	if errors.As(err, &p) {
		out := &Problem{Type: p.Type, Detail: p.Detail, Status: p.Status}
		for _, sp := range p.Subproblems {
			out.Detail += "; " + sp.Detail
		}
		return out
	}
	return &Problem{Type: "about:blank", Detail: err.Error()}
}

// orderTimeout bounds one order, from the account to the chain (the CA
// polls the challenge; Let's Encrypt takes seconds).
const orderTimeout = 3 * time.Minute

// order obtains a certificate for cert and commits it.
func (m *Manager) order(ctx context.Context, cert *config.Certificate) error {
	ctx, cancel := context.WithTimeout(ctx, orderTimeout)
	defer cancel()
	spec := cert.ACME
	m.commitMu.Lock()
	commit := m.commit
	m.commitMu.Unlock()
	if commit == nil {
		return errors.New("acme: no way to store a certificate yet (the API is not started)")
	}
	acct, err := m.store.Storage().CertificateBundle(ctx, spec.AccountSHA256)
	if err != nil {
		return fmt.Errorf("acme: the account file %s: %w", spec.AccountSHA256, err)
	}
	keyDER, hmacKey := config.SplitACMEAccount(acct)
	k, err := x509.ParsePKCS8PrivateKey(keyDER)
	if err != nil {
		return fmt.Errorf("acme: the account key: %w", err)
	}
	accountKey, ok := k.(crypto.Signer)
	if !ok {
		return fmt.Errorf("acme: the account key is a %T", k)
	}
	hc, err := httpClient(spec.DirectoryCAPEM)
	if err != nil {
		return err
	}
	client := &acmez.Client{
		Client: &acmeproto.Client{Directory: spec.Directory, HTTPClient: hc, UserAgent: "spliced",
			PollTimeout: orderTimeout, Logger: m.log.With("certificate", cert.Name)},
		ChallengeSolvers: map[string]acmez.Solver{},
	}
	if spec.Challenge == config.ChallengeTLSALPN01 {
		client.ChallengeSolvers[acmeproto.ChallengeTypeTLSALPN01] = alpnSolver{m}
	} else {
		client.ChallengeSolvers[acmeproto.ChallengeTypeHTTP01] = httpSolver{m}
	}
	account := acmeproto.Account{TermsOfServiceAgreed: true, PrivateKey: accountKey}
	if spec.Email != "" {
		account.Contact = []string{"mailto:" + spec.Email}
	}
	if spec.EAB != nil {
		if err := account.SetExternalAccountBinding(ctx, client.Client, acmeproto.EAB{KeyID: spec.EAB.KID, MACKey: hmacKey}); err != nil {
			return fmt.Errorf("acme: external account binding: %w", err)
		}
	}
	// An account that exists for this key is returned as it is (RFC 8555
	// §7.3.1): the key is the account.
	account, err = client.NewAccount(ctx, account)
	if err != nil {
		return fmt.Errorf("acme: account: %w", err)
	}
	var certKey crypto.Signer
	if spec.KeyType == config.ACMEKeyRSA2048 {
		certKey, err = rsa.GenerateKey(rand.Reader, 2048)
	} else {
		certKey, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	}
	if err != nil {
		return err
	}
	chains, err := client.ObtainCertificateForSANs(ctx, account, certKey, spec.Domains)
	if err != nil {
		return err
	}
	if len(chains) == 0 {
		return errors.New("acme: the CA returned no certificate")
	}
	der, err := x509.MarshalPKCS8PrivateKey(certKey)
	if err != nil {
		return err
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	return commit(ctx, cert.Name, string(chains[0].ChainPEM), string(keyPEM))
}

// httpClient talks to the directory, trusting caPEM when set.
func httpClient(caPEM string) (*http.Client, error) {
	tr := &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		DialContext:         (&net.Dialer{Timeout: 15 * time.Second}).DialContext,
		TLSHandshakeTimeout: 15 * time.Second,
		MaxIdleConnsPerHost: 2,
		IdleConnTimeout:     30 * time.Second,
	}
	if caPEM != "" {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM([]byte(caPEM)) {
			return nil, errors.New("acme: directory_ca_pem holds no certificate")
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return &http.Client{Transport: tr, Timeout: time.Minute}, nil
}

// httpSolver publishes http-01 key authorizations for KeyAuthorization.
type httpSolver struct{ m *Manager }

func (s httpSolver) Present(ctx context.Context, ch acmeproto.Challenge) error {
	if s.m.coord != nil {
		return s.m.publish(ctx, acmeproto.ChallengeTypeHTTP01, ch.Token, ch.KeyAuthorization)
	}
	s.m.editTokens(func(t map[string]string) { t[ch.Token] = ch.KeyAuthorization })
	return nil
}

func (s httpSolver) CleanUp(ctx context.Context, ch acmeproto.Challenge) error {
	if s.m.coord != nil {
		return s.m.withdraw(ctx, acmeproto.ChallengeTypeHTTP01, ch.Token)
	}
	s.m.editTokens(func(t map[string]string) { delete(t, ch.Token) })
	return nil
}

// editTokens swaps in an edited copy of the token map: KeyAuthorization,
// on loop threads, only loads a pointer.
func (m *Manager) editTokens(edit func(map[string]string)) {
	m.tokMu.Lock()
	defer m.tokMu.Unlock()
	next := make(map[string]string, len(*m.tokens.Load())+1)
	for k, v := range *m.tokens.Load() {
		next[k] = v
	}
	edit(next)
	m.tokens.Store(&next)
}

// alpnSolver publishes tls-alpn-01 certificates for ChallengeCertificate.
type alpnSolver struct{ m *Manager }

func (s alpnSolver) Present(ctx context.Context, ch acmeproto.Challenge) error {
	if s.m.coord != nil {
		return s.m.publish(ctx, acmeproto.ChallengeTypeTLSALPN01, strings.ToLower(ch.Identifier.Value), ch.KeyAuthorization)
	}
	cert, err := acmez.TLSALPN01ChallengeCert(ch)
	if err != nil {
		return err
	}
	s.m.alpnMu.Lock()
	s.m.alpn[strings.ToLower(ch.Identifier.Value)] = cert
	s.m.alpnMu.Unlock()
	return nil
}

func (s alpnSolver) CleanUp(ctx context.Context, ch acmeproto.Challenge) error {
	if s.m.coord != nil {
		return s.m.withdraw(ctx, acmeproto.ChallengeTypeTLSALPN01, strings.ToLower(ch.Identifier.Value))
	}
	s.m.alpnMu.Lock()
	delete(s.m.alpn, strings.ToLower(ch.Identifier.Value))
	s.m.alpnMu.Unlock()
	return nil
}

// publish answers a challenge here at once and on every node through the
// coordinator.
func (m *Manager) publish(ctx context.Context, kind, key, value string) error {
	m.shareMu.Lock()
	if m.own[kind] == nil {
		m.own[kind] = map[string]string{}
	}
	m.own[kind][key] = value
	m.shareMu.Unlock()
	m.rebuild()
	return m.coord.Publish(ctx, kind, key, value)
}

func (m *Manager) withdraw(ctx context.Context, kind, key string) error {
	m.shareMu.Lock()
	delete(m.own[kind], key)
	m.shareMu.Unlock()
	m.rebuild()
	return m.coord.Withdraw(ctx, kind, key)
}

// onShared takes the cluster's answers (Coordinator.Watch).
func (m *Manager) onShared(set map[string]map[string]string) {
	m.shareMu.Lock()
	m.shared = set
	m.shareMu.Unlock()
	m.rebuild()
}

// rebuild makes the answered maps the union of own and shared; a
// tls-alpn-01 certificate is made once per name and key authorization.
func (m *Manager) rebuild() {
	m.shareMu.Lock()
	tokens := map[string]string{}
	alpnKA := map[string]string{}
	for _, src := range []map[string]map[string]string{m.shared, m.own} {
		for k, v := range src[acmeproto.ChallengeTypeHTTP01] {
			tokens[k] = v
		}
		for k, v := range src[acmeproto.ChallengeTypeTLSALPN01] {
			alpnKA[k] = v
		}
	}
	alpn := map[string]*tls.Certificate{}
	cache := map[string]*tls.Certificate{}
	for name, ka := range alpnKA {
		ck := name + "\x00" + ka
		c := m.alpnCache[ck]
		if c == nil {
			var err error
			c, err = acmez.TLSALPN01ChallengeCert(acmeproto.Challenge{
				Identifier: acmeproto.Identifier{Type: "dns", Value: name}, KeyAuthorization: ka})
			if err != nil {
				m.log.Warn("acme: a tls-alpn-01 challenge certificate", "name", name, "err", err)
				continue
			}
		}
		cache[ck] = c
		alpn[name] = c
	}
	m.alpnCache = cache
	m.shareMu.Unlock()
	m.tokMu.Lock()
	m.tokens.Store(&tokens)
	m.tokMu.Unlock()
	m.alpnMu.Lock()
	m.alpn = alpn
	m.alpnMu.Unlock()
}
