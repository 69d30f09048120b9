package config

import "strconv"

// The fd budget of the data plane. Pure arithmetic: the fd limit
// itself reaches config through Env.FdLimit (the process raised its soft
// RLIMIT_NOFILE to the hard one at start; cmd/spliced), so that this
// package makes no system call.

// FdReserve is the part of the fd limit that neither the data plane's
// connections nor its fixed fds (FdBudget.Fixed) take: the admin API
// (--admin-max-conns, at most 128, plus its listener), the state, audit
// and log files, the Go runtime's own. It is what keeps the
// admin API answering when a flood fills every slot.
const FdReserve = 256

// FdsPerLoop is what each loop thread holds whatever its connections: its
// epoll fd and eventfd, and one pipe (2 fds) for the rounding up of its
// share of maxpipes.
const FdsPerLoop = 4

// LowMaxconn is the derived global maxconn (tuning.maxconn 0) below which
// the fd limit is reported as too low (log and /readyz).
const LowMaxconn = 1000

// PipeShare is the share of maxconn the pipes are capped to, as HAProxy's
// default maxpipes = maxconn/4: at most one connection in 4 splices at a
// time, each pipe costing 2 fds.
const PipeShare = 4

// PipesFor is the number of pipes the process keeps at most with maxconn
// connections: maxpipes (tuning.maxpipes of a normalized config) capped to
// maxconn/PipeShare, and at least 1 (0 would mean "the default" to the
// pools).
func PipesFor(maxpipes, maxconn int) int {
	return max(min(maxpipes, maxconn/PipeShare), 1)
}

// IdleShare caps the idle server connections the http pools keep, all
// loops together, to maxconn/IdleShare (HAProxy's pool-high-fd-ratio of
// 25%): a pooled connection holds an fd that no live client connection
// accounts for (its client may be gone), so without a cap the pools could
// eat the reserve that keeps the admin API answering.
const IdleShare = 4

// IdleFor is the number of idle server connections the process pools at
// most with maxconn connections: maxconn/IdleShare, at least 1.
func IdleFor(maxconn int) int { return max(maxconn/IdleShare, 1) }

// FdBudget is the fd arithmetic of one config run by a number of loop
// threads. A value type.
type FdBudget struct {
	Fixed    int64 // FdReserve + FdsPerLoop per loop + one per listening socket and per checked server
	Maxpipes int   // tuning.maxpipes of a normalized config
}

// NewFdBudget is the budget of c (normalized) on nloops loop threads
// (draining ones included: they hold their fds until they stop).
func NewFdBudget(c *Config, nloops int) FdBudget {
	b := FdBudget{Fixed: FdReserve + FdsPerLoop*int64(max(nloops, 1)), Maxpipes: c.Tuning.Maxpipes}
	for i := range c.Frontends {
		for _, bd := range c.Frontends[i].Binds {
			b.Fixed += int64(max(bd.Shards, 1)) // one SO_REUSEPORT socket per shard
		}
	}
	for i := range c.Backends {
		if c.Backends[i].HealthCheck != nil {
			b.Fixed += int64(len(c.Backends[i].Servers)) // a check holds a socket while it runs
		}
	}
	return b
}

// Fds is the number of fds the process may hold with maxconn connections:
// 2 per connection (client and server sockets), 2 per pipe (PipesFor), 1
// per pooled idle server connection (IdleFor), plus Fixed.
func (b FdBudget) Fds(maxconn int) int64 {
	return b.Fixed + 2*int64(maxconn) + 2*int64(PipesFor(b.Maxpipes, maxconn)) + int64(IdleFor(maxconn))
}

// Maxconn is the largest maxconn whose Fds fit in fdLimit, 0 if not even
// one connection fits.
func (b FdBudget) Maxconn(fdLimit int64) int {
	// Fds grows with maxconn: binary search below what 2 fds per
	// connection alone would allow.
	lo, hi := int64(0), min(max((fdLimit-b.Fixed)/2, 0), 1<<40)
	for lo < hi {
		mid := lo + (hi-lo+1)/2
		if b.Fds(int(mid)) <= fdLimit {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return int(lo)
}

// Message explains why maxconn does not fit in fdLimit (the 422 of
// tuning.maxconn, the warning of a persisted config the engine clamps).
func (b FdBudget) Message(maxconn int, fdLimit int64) string {
	return "maxconn " + strconv.Itoa(maxconn) + " needs " + strconv.FormatInt(b.Fds(maxconn), 10) +
		" file descriptors (2 per connection, 2 per pipe, 1 per pooled idle server connection, " + strconv.FormatInt(b.Fixed, 10) +
		" for the loops, the listening sockets, the health checks and the admin API), the fd limit (RLIMIT_NOFILE) is " +
		strconv.FormatInt(fdLimit, 10) + ": at most " + strconv.Itoa(b.Maxconn(fdLimit))
}
