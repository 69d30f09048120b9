package main

import (
	"golang.org/x/sys/unix"

	"github.com/spliced-proxy/spliced/core/config"
)

// maxAdminConns bounds --admin-max-conns: the admin API's connections come
// out of config.FdReserve, the fds the data plane's maxconn leaves, so that
// it answers while a flood holds every data-plane slot; the other half is
// for listening sockets, loops, health checks and files.
const maxAdminConns = config.FdReserve / 2

// raiseFdLimit raises the soft RLIMIT_NOFILE to the hard limit, as HAProxy
// does at start (the Go runtime does it too since Go 1.19; doing it here
// keeps the behaviour whatever the toolchain), and returns the limit the
// process runs with: the data plane derives its global maxconn from it and
// the admin API refuses a tuning.maxconn it cannot hold (config.Env
// FdLimit). 0 when it cannot be read (then nothing is checked against it).
func raiseFdLimit() int64 {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		return 0
	}
	if rl.Cur < rl.Max {
		up := rl
		up.Cur = up.Max
		// EPERM/EINVAL (a hard limit above fs.nr_open): keep the soft one.
		if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &up); err == nil {
			rl = up
		}
	}
	return int64(min(rl.Cur, 1<<62))
}

// hardFdLimit is the limit a started spliced would run with (spliced
// validate checks a document against it).
func hardFdLimit() int64 {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		return 0
	}
	return int64(min(rl.Max, 1<<62))
}
