package balance

import (
	"fmt"
	"maps"
	"net/netip"
	"time"

	"github.com/spliced-proxy/spliced/core/config"
)

// maxAppended bounds the servers buildFrom takes as added at the end of
// the list: each is looked up in the name index (a POST adds one).
const maxAppended = 8

// newServerOf makes the Server of cs at ap (not published yet: the
// setters initialise it, their counter bumps are harmless).
func (b *Backend) newServerOf(cs *config.Server, ap netip.AddrPort) (*Server, error) {
	sa, err := sockaddrOf(ap)
	if err != nil {
		return nil, fmt.Errorf("backend %q server %q: address %s: %w", b.Name, cs.Name, ap, err)
	}
	s := newServer(cs.Name, cs.Address, ap, sa, b.changes, b.queue)
	if cs.TLS != nil {
		t := *cs.TLS
		s.TLSSpec = &t
	}
	s.SendProxy = SendProxyVersion(cs.SendProxy)
	s.H2 = cs.Proto == config.ProtoH2
	s.SetWeight(*cs.Weight)
	s.SetMaxconn(cs.Maxconn)
	if err := s.SetAdminState(cs.AdminState); err != nil {
		return nil, fmt.Errorf("backend %q: %w", b.Name, err)
	}
	return s, nil
}

// buildFrom is Build on prev for the common change of a large backend:
// the servers are prev's, by name and in order, some of them removed or
// changed, at most maxAppended added at the end, every address an IP
// address. Then nothing needs a name index built anew, an address parsed
// again or a setter called on a server whose values did not change: the
// index is a copy of prev's, the slots prev's with holes for the removed
// and the added in them, and Retire gets the list of servers dropped. The
// result is the one Build's general path gives (TestBuildFromAsBuild);
// false, nothing touched, when the change is not of that shape.
func (b *Backend) buildFrom(cfg *config.Backend, prev *Backend) (bool, error) {
	if !prev.literal || len(prev.slots) == 0 {
		return false, nil
	}
	n := len(cfg.Servers)
	servers := make([]*Server, n)
	carried := make([]bool, len(prev.Servers))
	j, k := 0, 0
	for ; j < n; j++ {
		name := cfg.Servers[j].Name
		for k < len(prev.Servers) && prev.Servers[k].Name != name {
			k++
		}
		if k == len(prev.Servers) {
			break
		}
		servers[j] = prev.Servers[k]
		carried[k] = true
		k++
	}
	if n-j > maxAppended {
		return false, nil
	}
	for i := j; i < n; i++ {
		if prev.byName[cfg.Servers[i].Name] != nil {
			return false, nil // moved, not added
		}
	}

	// Pass 1: check, decide reuse, make the new servers; nothing shared
	// is touched yet.
	byName := maps.Clone(prev.byName)
	var dropped []*Server
	fate := map[*Server]*Server{} // prev server -> what takes its slot (nil: none)
	for i, old := range prev.Servers {
		if !carried[i] {
			delete(byName, old.Name)
			dropped = append(dropped, old)
			fate[old] = nil
		}
	}
	reused := make([]bool, n)
	var respelled []int // reused under another spelling of their address
	for i := range cfg.Servers {
		cs := &cfg.Servers[i]
		if cs.Port < 1 || cs.Port > 65535 {
			return false, fmt.Errorf("backend %q server %q: port %d: %w", cfg.Name, cs.Name, cs.Port, config.ErrInvalid)
		}
		if cs.Weight == nil {
			return false, fmt.Errorf("backend %q server %q: weight unset (config.Normalize sets it): %w", cfg.Name, cs.Name, config.ErrInvalid)
		}
		if err := validAdmin(cs.AdminState); err != nil {
			return false, fmt.Errorf("backend %q server %q: %w", cfg.Name, cs.Name, err)
		}
		old := servers[i]
		if old != nil && old.addrLit && old.addrCfg == cs.Address && old.Addr.Port() == uint16(cs.Port) && !old.Retired() &&
			sameTLS(old.TLSSpec, cs.TLS) && old.SendProxy == SendProxyVersion(cs.SendProxy) && old.H2 == (cs.Proto == config.ProtoH2) {
			reused[i] = true
			continue
		}
		addr, err := netip.ParseAddr(cs.Address)
		if err != nil {
			return false, nil // a host name: the general path resolves it
		}
		ap := netip.AddrPortFrom(addr.Unmap(), uint16(cs.Port))
		if old != nil && old.Addr == ap && !old.Retired() && sameTLS(old.TLSSpec, cs.TLS) &&
			old.SendProxy == SendProxyVersion(cs.SendProxy) && old.H2 == (cs.Proto == config.ProtoH2) {
			reused[i] = true // the same address written another way
			respelled = append(respelled, i)
			continue
		}
		if old == nil {
			if byName[cs.Name] != nil {
				return false, fmt.Errorf("backend %q server %q: duplicate name: %w", cfg.Name, cs.Name, config.ErrInvalid)
			}
		}
		s, err := b.newServerOf(cs, ap)
		if err != nil {
			return false, err
		}
		s.addrCfg, s.addrLit = cs.Address, true
		if old != nil {
			dropped = append(dropped, old)
			fate[old] = s
		}
		servers[i] = s
		byName[cs.Name] = s
	}

	// Pass 2: the reused servers' changed values, in place.
	for _, i := range respelled {
		servers[i].addrCfg = cfg.Servers[i].Address
	}
	for i, s := range servers {
		if !reused[i] {
			continue
		}
		cs := &cfg.Servers[i]
		if s.Weight() != min(max(*cs.Weight, 0), MaxWeight) {
			s.SetWeight(*cs.Weight)
		}
		if s.Maxconn() != max(cs.Maxconn, 0) {
			s.SetMaxconn(cs.Maxconn)
		}
		if s.AdminState() != cs.AdminState {
			_ = s.SetAdminState(cs.AdminState) // checked in pass 1
		}
	}
	if b.Check == nil {
		now := time.Now()
		for i, s := range servers {
			if !reused[i] || prev.Check != nil {
				s.SetUp(true, now)
			}
		}
	}

	// Slots: prev's, each dropped server's slot to its replacement or a
	// hole, then the added servers into the holes in order (buildSlots).
	slots := make([]*Server, len(prev.slots), max(len(prev.slots), n))
	for i, old := range prev.slots {
		if old == nil {
			continue
		}
		if f, ok := fate[old]; ok {
			slots[i] = f
		} else {
			slots[i] = old
		}
	}
	hole := 0
	for i := j; i < n; i++ {
		s := servers[i]
		for hole < len(slots) && slots[hole] != nil {
			hole++
		}
		if hole < len(slots) {
			slots[hole] = s
		} else {
			slots = append(slots, s)
		}
	}
	for len(slots) > 0 && slots[len(slots)-1] == nil {
		slots = slots[:len(slots)-1]
	}
	if holes := len(slots) - n; holes > 0 && holes*2 > len(slots) {
		slots = append([]*Server(nil), servers...)
	}

	b.Servers, b.byName, b.slots = servers, byName, slots
	b.from, b.dropped, b.literal = prev, dropped, true
	b.changes.Add(1)
	return true, nil
}
