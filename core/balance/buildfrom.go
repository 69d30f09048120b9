package balance

import (
	"fmt"
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
// changed, at most maxAppended added after them (before the tail: see
// below), every address an IP address. Then nothing needs a name index
// built anew, an address parsed again or a setter called on a server
// whose values did not change: the index is derived from prev's (a few
// names changed, nameIndex), the slots prev's with holes for the removed
// and the added in them, and Retire gets the list of servers dropped. The
// result is the one Build's general path gives (TestBuildFromAsBuild);
// false, nothing touched, when the change is not of that shape.
//
// head and tail (BuildChange) say that the first head and the last tail
// servers of cfg are equal, in name and values, to those of the config
// prev was built from (config.ServerSpan): they are prev's servers at the
// same places and are not looked at; only what lies between is. 0, 0
// looks at every server.
func (b *Backend) buildFrom(cfg *config.Backend, prev *Backend, head, tail int) (bool, error) {
	if !prev.literal || len(prev.slots) == 0 {
		return false, nil
	}
	n, pn := len(cfg.Servers), len(prev.Servers)
	if head < 0 || tail < 0 || head+tail > min(n, pn) {
		head, tail = 0, 0
	}
	pend, end := pn-tail, n-tail // the windows are prev.Servers[head:pend], cfg.Servers[head:end]
	servers := make([]*Server, n)
	copy(servers[:head], prev.Servers[:head])
	copy(servers[end:], prev.Servers[pend:])
	carried := make([]bool, pend-head) // of prev's window
	j, k := head, head
	for ; j < end; j++ {
		name := cfg.Servers[j].Name
		for k < pend && prev.Servers[k].Name != name {
			k++
		}
		if k == pend {
			break
		}
		servers[j] = prev.Servers[k]
		carried[k-head] = true
		k++
	}
	if end-j > maxAppended {
		return false, nil
	}
	for i := j; i < end; i++ {
		if prev.byName.get(cfg.Servers[i].Name) != nil {
			return false, nil // moved, not added
		}
	}

	// Pass 1: check, decide reuse, make the new servers; nothing shared
	// is touched yet.
	set := map[string]*Server{} // the names whose server changes (nil: removed)
	var dropped, added []*Server
	fate := map[*Server]*Server{} // prev server -> what takes its slot (nil: none)
	for i := head; i < pend; i++ {
		if !carried[i-head] {
			old := prev.Servers[i]
			set[old.Name] = nil
			dropped = append(dropped, old)
			fate[old] = nil
		}
	}
	reused := make([]bool, end-head) // of the window
	var respelled []int              // reused under another spelling of their address
	for i := head; i < end; i++ {
		cs := cfg.Servers[i]
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
			reused[i-head] = true
			continue
		}
		addr, err := netip.ParseAddr(cs.Address)
		if err != nil {
			return false, nil // a host name: the general path resolves it
		}
		ap := netip.AddrPortFrom(addr.Unmap(), uint16(cs.Port))
		if old != nil && old.Addr == ap && !old.Retired() && sameTLS(old.TLSSpec, cs.TLS) &&
			old.SendProxy == SendProxyVersion(cs.SendProxy) && old.H2 == (cs.Proto == config.ProtoH2) {
			reused[i-head] = true // the same address written another way
			respelled = append(respelled, i)
			continue
		}
		if old == nil {
			if s, ok := set[cs.Name]; ok && s != nil || !ok && prev.byName.get(cs.Name) != nil {
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
		set[cs.Name] = s
		added = append(added, s)
	}

	// Pass 2: the reused servers' changed values, in place.
	for _, i := range respelled {
		servers[i].addrCfg = cfg.Servers[i].Address
	}
	for i := head; i < end; i++ {
		if !reused[i-head] {
			continue
		}
		s, cs := servers[i], cfg.Servers[i]
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
		if prev.Check != nil {
			for _, s := range servers {
				s.SetUp(true, now)
			}
		} else {
			for i := head; i < end; i++ {
				if !reused[i-head] {
					servers[i].SetUp(true, now)
				}
			}
		}
	}

	// Slots: prev's, each dropped server's slot to its replacement or a
	// hole, then the added servers into the holes in order (buildSlots).
	slots := make([]*Server, len(prev.slots), max(len(prev.slots), n))
	copy(slots, prev.slots)
	if len(fate) > 0 {
		small := len(dropped) <= 8 // then a scan beats a map look-up per slot
		for i, old := range slots {
			if old == nil {
				continue
			}
			if small {
				for _, d := range dropped {
					if d == old {
						slots[i] = fate[old]
						break
					}
				}
			} else if f, ok := fate[old]; ok {
				slots[i] = f
			}
		}
	}
	hole := 0
	for i := j; i < end; i++ {
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

	b.Servers, b.byName, b.slots = servers, prev.byName.derive(set), slots
	b.from, b.dropped, b.literal = prev.serial, dropped, true
	b.added, b.lo, b.hi = added, head, end
	b.changes.Add(1)
	return true, nil
}
