package balance

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/spliced-proxy/spliced/core/config"
)

// ResolveTimeout bounds the default resolver's lookup of one host name.
const ResolveTimeout = 2 * time.Second

// Backend is the runtime form of one config.Backend. It is immutable once
// Build returned it; its Servers are shared with the previous and next
// generations when they did not change (see Build).
type Backend struct {
	Name, Mode, Algo string
	// Servers in configuration order.
	Servers []*Server
	Retries int
	// ConnectTimeout, ServerTimeout, QueueTimeout, TunnelTimeout come from
	// the backend's timeouts, all > 0 (Build refuses others).
	ConnectTimeout, ServerTimeout, QueueTimeout, TunnelTimeout time.Duration
	// Check is a copy of the health check configuration, nil when the
	// backend has none.
	Check *config.HealthCheck

	// changes is bumped whenever a server's state word changes or a Build
	// derived from this backend touched its servers. Shared by every
	// generation of a backend lineage (Build passes prev's counter on), so a
	// reused Server bumps the counter that current pickers watch.
	changes *atomic.Uint64
	// queue is the wait queue of the lineage, shared like changes.
	queue *Queue
	// slots is the stable server list the source hash runs over: a server
	// keeps its slot across generations (by name), a removed server leaves a
	// hole (nil) that the next added server fills. See Picker.pickSource.
	slots  []*Server
	byName *nameIndex
	// serial identifies this backend (a process-wide count); from is the
	// serial of the backend this one was built on by buildFrom (0: none),
	// dropped the servers of that one it does not carry over (Retire's
	// list); literal that every server's configured address is an IP
	// address (Literal). from is a number, not a pointer: a pointer would
	// keep every generation of the lineage alive (the whole chain of server
	// lists and slots, ~170 KB per change at 10 000 servers), which the
	// garbage collector then scans on each cycle.
	serial  uint64
	from    uint64
	dropped []*Server
	literal bool
	// added are the servers buildFrom made (not prev's), lo and hi the
	// window of Servers it looked at: outside it, Servers are prev's.
	added  []*Server
	lo, hi int
}

// serials numbers the backends built (Backend.serial).
var serials atomic.Uint64

// Literal reports that every server is given by IP address: a Build on
// this backend resolves nothing (no host name to look up again).
func (b *Backend) Literal() bool { return b.literal }

// Server returns the named server or nil.
func (b *Backend) Server(name string) *Server { return b.byName.get(name) }

// Queue returns the wait queue of the backend lineage (shared by all its
// generations and loops).
func (b *Backend) Queue() *Queue { return b.queue }

// Changes returns the change counter (for tests and stats).
func (b *Backend) Changes() uint64 { return b.changes.Load() }

// Retire marks the servers of b that next does not carry over as retired:
// pickers of b that still run (a loop that has not switched to next yet) stop
// choosing them at once, and their live connections finish. Call it after
// next was committed; a next of nil retires every server of b.
//
// The queue of the lineage then takes its servers from next (none when
// next is nil: the waiters are refused).
func (b *Backend) Retire(next *Backend) {
	if next != nil && next.from == b.serial {
		for _, s := range next.dropped {
			s.retire()
		}
		// next's list is b's without dropped, with added: the queue
		// changes the flags of those only (not 10 000 of each list)
		next.queue.publishChange(b.Servers, next.Servers, next.dropped, next.added)
		return
	}
	for _, s := range b.Servers {
		if next == nil || next.byName.get(s.Name) != s {
			s.retire()
		}
	}
	if next != nil {
		next.queue.publish(next.Servers)
	} else {
		b.queue.publish(nil)
	}
}

// Build makes the runtime backend for cfg. Servers of prev with the same name,
// the same resolved address:port and the same tls are reused, so their live
// connection counts, counters and health carry over; their weight, maxconn
// and admin state are updated in place atomically. A server whose address or
// tls changed is a new Server (the old one keeps its live connections and is
// retired by prev.Retire, which drops its pooled ones). resolve turns a host name into an address; nil uses the
// system resolver with a ResolveTimeout deadline, preferring the first IPv4
// address.
//
// Health: every new server starts up, whether or not the backend has a
// health check. This is HAProxy's choice: a server is assumed up and the
// checks take it down (a first failed check is enough, see NewHealth), so
// a freshly configured backend serves at once instead of waiting rise
// intervals. When the backend has no health check, every server is set up
// (a check that was removed must not leave servers down for ever).
//
// Build takes cfg as config.Normalize left it and fills no default of its
// own (see the config package doc, "Defaults"): mode, balance, retries, every
// timeout, and each server's weight and admin state are set. A value the
// data plane cannot run with (a zero timeout, an unset retries or weight: a
// config that skipped Normalize) is refused with ErrInvalid rather than
// silently defaulted.
//
// Build changes nothing when it returns an error: resolution and checks come
// first, updates of reused servers last.
func Build(cfg *config.Backend, prev *Backend, resolve func(host string) (netip.Addr, error)) (*Backend, error) {
	return build(cfg, prev, resolve, true, 0, 0)
}

// BuildChange is Build when the caller knows where cfg's servers differ
// from those of the config prev was built from: the first head and the
// last tail servers of both are equal, names and values
// (config.ServerSpan of the two lists). A change of one server among
// 10 000 then looks at that server only, not at the 10 000.
func BuildChange(cfg *config.Backend, prev *Backend, head, tail int, resolve func(host string) (netip.Addr, error)) (*Backend, error) {
	return build(cfg, prev, resolve, true, head, tail)
}

// build is Build; fast false skips buildFrom (tests compare the two).
func build(cfg *config.Backend, prev *Backend, resolve func(host string) (netip.Addr, error), fast bool, head, tail int) (*Backend, error) {
	if cfg == nil {
		return nil, fmt.Errorf("build backend: nil config: %w", config.ErrInvalid)
	}
	if resolve == nil {
		resolve = defaultResolve
	}
	switch cfg.Balance {
	case config.BalanceRoundRobin, config.BalanceLeastConn, config.BalanceSource, config.BalanceRandom:
	default:
		return nil, fmt.Errorf("backend %q: balance %q: %w", cfg.Name, cfg.Balance, config.ErrInvalid)
	}
	switch cfg.Mode {
	case config.ModeTCP, config.ModeHTTP:
	default:
		return nil, fmt.Errorf("backend %q: mode %q: %w", cfg.Name, cfg.Mode, config.ErrInvalid)
	}
	if cfg.Retries == nil || *cfg.Retries < 0 {
		return nil, fmt.Errorf("backend %q: retries unset or negative (config.Normalize sets it): %w", cfg.Name, config.ErrInvalid)
	}
	if t := cfg.Timeouts; t.ConnectMs <= 0 || t.ServerMs <= 0 || t.QueueMs <= 0 || t.TunnelMs <= 0 {
		// 0 would mean "expire at once" to the proxy: an unset timeout.
		return nil, fmt.Errorf("backend %q: timeouts %+v: each must be > 0 (config.Normalize sets them): %w", cfg.Name, t, config.ErrInvalid)
	}
	b := &Backend{
		Name:           cfg.Name,
		Mode:           cfg.Mode,
		Algo:           cfg.Balance,
		Retries:        *cfg.Retries,
		ConnectTimeout: ms(cfg.Timeouts.ConnectMs),
		ServerTimeout:  ms(cfg.Timeouts.ServerMs),
		QueueTimeout:   ms(cfg.Timeouts.QueueMs),
		TunnelTimeout:  ms(cfg.Timeouts.TunnelMs),
		serial:         serials.Add(1),
	}
	if cfg.HealthCheck != nil {
		if err := runnableCheck(cfg.HealthCheck); err != nil {
			return nil, fmt.Errorf("backend %q: %w", cfg.Name, err)
		}
		hc := *cfg.HealthCheck
		b.Check = &hc
	}
	if prev != nil && prev.changes != nil {
		b.changes, b.queue = prev.changes, prev.queue
	} else {
		b.changes, b.queue = new(atomic.Uint64), new(Queue)
	}

	if prev != nil && fast {
		if ok, err := b.buildFrom(cfg, prev, head, tail); ok || err != nil {
			if err != nil {
				return nil, err
			}
			return b, nil
		}
	}

	b.Servers, b.byName = make([]*Server, len(cfg.Servers)), newNameIndex(len(cfg.Servers))

	// Pass 1: resolve and decide reuse; nothing shared is touched yet. A
	// host name shared by several servers (one host, many ports) is looked
	// up once per Build.
	reused := make([]bool, len(cfg.Servers))
	var resolved map[string]netip.Addr
	cached := func(host string) (netip.Addr, error) {
		if a, ok := resolved[host]; ok {
			return a, nil
		}
		a, err := resolve(host)
		if err == nil {
			if resolved == nil {
				resolved = make(map[string]netip.Addr)
			}
			resolved[host] = a
		}
		return a, err
	}
	literal := true // every address an IP address (b.literal)
	for i := range cfg.Servers {
		cs := cfg.Servers[i]
		if b.byName.get(cs.Name) != nil {
			return nil, fmt.Errorf("backend %q server %q: duplicate name: %w", cfg.Name, cs.Name, config.ErrInvalid)
		}
		if cs.Port < 1 || cs.Port > 65535 {
			return nil, fmt.Errorf("backend %q server %q: port %d: %w", cfg.Name, cs.Name, cs.Port, config.ErrInvalid)
		}
		if cs.Weight == nil {
			return nil, fmt.Errorf("backend %q server %q: weight unset (config.Normalize sets it): %w", cfg.Name, cs.Name, config.ErrInvalid)
		}
		addr, lit, err := resolveAddr(cs.Address, cached)
		if err != nil {
			return nil, fmt.Errorf("backend %q server %q: resolve %q: %w", cfg.Name, cs.Name, cs.Address, err)
		}
		literal = literal && lit
		ap := netip.AddrPortFrom(addr, uint16(cs.Port))
		var s *Server
		if prev != nil {
			if old := prev.byName.get(cs.Name); old != nil && old.Addr == ap && !old.Retired() && sameTLS(old.TLSSpec, cs.TLS) &&
				old.SendProxy == SendProxyVersion(cs.SendProxy) && old.H2 == (cs.Proto == config.ProtoH2) {
				s = old
				reused[i] = true
			}
		}
		if s == nil {
			if s, err = b.newServerOf(cs, ap); err != nil {
				return nil, err
			}
		} else if err := validAdmin(cs.AdminState); err != nil {
			return nil, fmt.Errorf("backend %q server %q: %w", cfg.Name, cs.Name, err)
		}
		s.addrCfg, s.addrLit = cs.Address, lit
		b.Servers[i] = s
		b.byName.add(cs.Name, s)
	}

	// Pass 2: update the reused servers in place.
	for i, s := range b.Servers {
		if !reused[i] {
			continue
		}
		cs := cfg.Servers[i]
		s.SetWeight(*cs.Weight)
		s.SetMaxconn(cs.Maxconn)
		_ = s.SetAdminState(cs.AdminState) // validated in pass 1
	}
	b.literal = literal
	if b.Check == nil {
		now := time.Now()
		for _, s := range b.Servers {
			s.SetUp(true, now)
		}
	}
	if prev == nil {
		// A new lineage has no waiter yet: its servers take waiters from
		// now on. A later generation's servers do when it is committed
		// (Retire), after the engine gave them their counters.
		b.queue.publish(b.Servers)
	}
	b.slots = buildSlots(b, prev)
	// Membership changed for the pickers of prev even if no state word did.
	b.changes.Add(1)
	return b, nil
}

// buildSlots keeps every server of prev's slot list in its slot when a server
// of the same name exists in b, leaves holes for removed ones, fills holes
// with new names in configuration order, then appends. When holes make up
// more than half of the list it is compacted (a one-off larger reshuffle of
// source-hash keys, in exchange for a bounded number of rejected probes).
func buildSlots(b *Backend, prev *Backend) []*Server {
	if prev == nil || len(prev.slots) == 0 {
		return append([]*Server(nil), b.Servers...)
	}
	slots := make([]*Server, len(prev.slots), max(len(prev.slots), len(b.Servers)))
	placed := make(map[string]bool, len(b.Servers))
	for i, old := range prev.slots {
		if old == nil {
			continue
		}
		if s := b.byName.get(old.Name); s != nil {
			slots[i] = s
			placed[old.Name] = true
		}
	}
	hole := 0
	for _, s := range b.Servers {
		if placed[s.Name] {
			continue
		}
		for hole < len(slots) && slots[hole] != nil {
			hole++
		}
		if hole < len(slots) {
			slots[hole] = s
		} else {
			slots = append(slots, s)
		}
	}
	// Trailing holes cost nothing to drop: jump hash over n slots maps the
	// same keys to slots below n as over n+1 slots, except those moved to n.
	for len(slots) > 0 && slots[len(slots)-1] == nil {
		slots = slots[:len(slots)-1]
	}
	if holes := len(slots) - len(b.Servers); holes > 0 && holes*2 > len(slots) {
		return append([]*Server(nil), b.Servers...)
	}
	return slots
}

func validAdmin(s string) error {
	switch s {
	case config.AdminReady, config.AdminDrain, config.AdminMaint:
		return nil
	}
	return fmt.Errorf("admin state %q: %w", s, config.ErrInvalid)
}

// runnableCheck refuses a health check that Normalize did not fill: an
// interval of 0 would probe without pause, a timeout of 0 fail every probe,
// a rise or fall of 0 make one answer mean nothing; an http check needs its
// request line and the status range it accepts.
func runnableCheck(hc *config.HealthCheck) error {
	ok := hc.IntervalMs > 0 && hc.TimeoutMs > 0 && hc.Rise > 0 && hc.Fall > 0
	switch hc.Type {
	case config.CheckTCP:
	case config.CheckHTTP:
		ok = ok && hc.Method != "" && hc.Path != "" && hc.StatusMin > 0 && hc.StatusMax > 0
	default:
		ok = false
	}
	if !ok {
		return fmt.Errorf("health check %+v: type, interval, timeout, rise and fall, and for http the method, path and status range, must be set (config.Normalize sets them): %w", *hc, config.ErrInvalid)
	}
	return nil
}

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

// resolveAddr parses an IP literal (with an optional zone) or resolves a
// host name. IPv4-mapped IPv6 addresses are unmapped so that connect uses
// AF_INET.
func resolveAddr(host string, resolve func(string) (netip.Addr, error)) (a netip.Addr, literal bool, err error) {
	if a, err := netip.ParseAddr(host); err == nil {
		return a.Unmap(), true, nil
	}
	if host == "" {
		return netip.Addr{}, false, errors.New("empty address")
	}
	a, err = resolve(host)
	if err != nil {
		return netip.Addr{}, false, err
	}
	if !a.IsValid() {
		return netip.Addr{}, false, errors.New("resolver returned no address")
	}
	return a.Unmap(), false, nil
}

// defaultResolve asks the system resolver, bounded by ResolveTimeout, and
// prefers the first IPv4 address (servers are far more often reachable over
// IPv4 than over a global IPv6 address the host name also has).
func defaultResolve(host string) (netip.Addr, error) {
	ctx, cancel := context.WithTimeout(context.Background(), ResolveTimeout)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return netip.Addr{}, err
	}
	return pickAddr(addrs)
}

func pickAddr(addrs []netip.Addr) (netip.Addr, error) {
	for _, a := range addrs {
		if a.Unmap().Is4() {
			return a.Unmap(), nil
		}
	}
	if len(addrs) == 0 {
		return netip.Addr{}, errors.New("no address")
	}
	return addrs[0], nil
}

// sockaddrOf builds the connect(2) address once, at Build time.
func sockaddrOf(ap netip.AddrPort) (unix.Sockaddr, error) {
	a := ap.Addr()
	if a.Is4() {
		return &unix.SockaddrInet4{Port: int(ap.Port()), Addr: a.As4()}, nil
	}
	sa := &unix.SockaddrInet6{Port: int(ap.Port()), Addr: a.As16()}
	if z := a.Zone(); z != "" {
		if n, err := strconv.ParseUint(z, 10, 32); err == nil {
			sa.ZoneId = uint32(n)
		} else {
			ifi, err := net.InterfaceByName(z)
			if err != nil {
				return nil, fmt.Errorf("zone %q: %w", z, err)
			}
			sa.ZoneId = uint32(ifi.Index)
		}
	}
	return sa, nil
}

// sameTLS: a server's tls section is unchanged (both plain, or equal).
func sameTLS(a, b *config.ServerTLS) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// DerivedFrom reports that b was built on prev by the path that carries
// prev's servers, slots and name index over (buildFrom), for tests.
func (b *Backend) DerivedFrom(prev *Backend) bool { return prev != nil && b.from == prev.serial }

// Window returns, for a backend built by buildFrom on prev (DerivedFrom),
// the part of Servers that was looked at: the servers outside Servers[lo:hi]
// are prev's, at the same places (ok false: not derived, any may be new).
func (b *Backend) Window(prev *Backend) (lo, hi int, ok bool) {
	if !b.DerivedFrom(prev) {
		return 0, len(b.Servers), false
	}
	return b.lo, b.hi, true
}
