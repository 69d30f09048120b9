package config

import "strconv"

// The fd budget of the data plane (issue 12). Pure arithmetic: the fd limit
// itself reaches config through Env.FdLimit (the process raised its soft
// RLIMIT_NOFILE to the hard one at start; cmd/spliced), so that this
// package makes no system call.

// FdReserve is the part of the fd limit the data plane's connections never
// take: the admin API (--admin-max-conns, 128 by default, plus its
// listener), the listening sockets of the binds, each loop's epoll fd and
// eventfd, health checks, the state and audit files and the logs. It is
// what keeps the admin API answering when a flood fills every slot.
const FdReserve = 256

// LowMaxconn is the derived global maxconn (tuning.maxconn 0) below which
// the fd limit is reported as too low (log and /readyz).
const LowMaxconn = 1000

// PipeShare is the share of maxconn the pipes are capped to, as HAProxy's
// default maxpipes = maxconn/4: at most one connection in 4 splices at a
// time, each pipe costing 2 fds.
const PipeShare = 4

// PipesFor is the number of pipes the process keeps at most with maxconn
// connections: maxpipes (0 = DefaultMaxpipes) capped to maxconn/PipeShare,
// and at least 1 (0 would mean "the default" to the pools).
func PipesFor(maxpipes, maxconn int) int {
	if maxpipes <= 0 {
		maxpipes = DefaultMaxpipes
	}
	return max(min(maxpipes, maxconn/PipeShare), 1)
}

// FdsFor is the number of fds maxconn connections may hold at once: 2 per
// connection (client and server sockets), 2 per pipe (PipesFor), plus
// FdReserve.
func FdsFor(maxconn, maxpipes int) int64 {
	return 2*int64(maxconn) + 2*int64(PipesFor(maxpipes, maxconn)) + FdReserve
}

// MaxconnFor is the largest maxconn whose FdsFor fits in fdLimit, 0 if not
// even one connection fits.
func MaxconnFor(fdLimit int64, maxpipes int) int {
	// FdsFor grows with maxconn: binary search over what 2 fds per
	// connection alone would allow.
	lo, hi := int64(0), max((fdLimit-FdReserve)/2, 0)
	hi = min(hi, 1<<40)
	for lo < hi {
		mid := lo + (hi-lo+1)/2
		if FdsFor(int(mid), maxpipes) <= fdLimit {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return int(lo)
}

// FdLimitMessage explains why maxconn does not fit in fdLimit (the 422 of
// tuning.maxconn, the warning of a persisted config the engine clamps).
func FdLimitMessage(maxconn, maxpipes int, fdLimit int64) string {
	return "maxconn " + strconv.Itoa(maxconn) + " needs " + strconv.FormatInt(FdsFor(maxconn, maxpipes), 10) +
		" file descriptors (2 per connection, 2 per pipe, " + strconv.Itoa(FdReserve) +
		" kept for the admin API and the rest), the fd limit (RLIMIT_NOFILE) is " +
		strconv.FormatInt(fdLimit, 10) + ": at most " + strconv.Itoa(MaxconnFor(fdLimit, maxpipes))
}
