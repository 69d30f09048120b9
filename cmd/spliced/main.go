// Command spliced is the reverse-proxy appliance: it loads its state
// directory, starts the data plane, and serves the admin API until SIGTERM.
//
// Usage:
//
//	spliced [--admin-addr ADDR] [--state-dir DIR] [--config FILE] [--log-format text|json]
//	        [--store etcd://HOST:PORT[,HOST:PORT…]/PREFIX] [--node-name NAME] [--node-address IP]
//	spliced version
//	spliced validate FILE
//	spliced token add|list|revoke ...
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"log/syslog"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/spliced-proxy/spliced/api"
	"github.com/spliced-proxy/spliced/cmd/spliced/internal/version"
	"github.com/spliced-proxy/spliced/core"
	"github.com/spliced-proxy/spliced/core/acme"
	"github.com/spliced-proxy/spliced/core/cluster"
	"github.com/spliced-proxy/spliced/core/config"
	"github.com/spliced-proxy/spliced/core/tlsconf"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		switch args[0] {
		case "version":
			fmt.Fprintln(stdout, "spliced", version.Version)
			return 0
		case "validate":
			return cmdValidate(args[1:], stdout, stderr)
		case "token":
			return cmdToken(args[1:], stdout, stderr)
		case "help":
			usage(stderr, nil)
			return 0
		default:
			fmt.Fprintf(stderr, "spliced: unknown command %q (commands: version, validate, token)\n", args[0])
			return 2
		}
	}
	fs := flag.NewFlagSet("spliced", flag.ContinueOnError)
	fs.SetOutput(stderr)
	adminAddr := fs.String("admin-addr", "127.0.0.1:9900", "admin API address: host:port or unix:/path")
	stateDir := fs.String("state-dir", "/var/lib/spliced", "state directory (config.json, revisions/, audit.log, tokens.json)")
	bootstrap := fs.String("config", "", "bootstrap config document, used only when the state directory holds none")
	logFormat := fs.String("log-format", "auto", "log format: text, json, or auto (text on a terminal, json otherwise)")
	var adminHosts hostList
	fs.Var(&adminHosts, "admin-host", "another name (or name:port) clients use for the admin address; repeatable or comma-separated")
	tlsCert := fs.String("admin-tls-cert", "", "PEM certificate file: serve the admin API over HTTPS (with --admin-tls-key)")
	tlsKey := fs.String("admin-tls-key", "", "PEM private key file of --admin-tls-cert")
	maxBody := fs.Int64("admin-max-body", api.MaxBodyBytes, "largest admin request body in bytes (413 beyond); PUT /api/v1/config also takes up to 3x the current document")
	maxConns := fs.Int("admin-max-conns", 128, "most admin connections open at once (at the cap a new one evicts an idle or anonymous one)")
	anonIdle := fs.Duration("admin-anon-idle-timeout", 5*time.Second, "close an idle admin connection no request with a valid token came on after this")
	maxStreams := fs.Int("admin-max-event-streams", api.DefaultMaxEventStreams, "most /api/v1/events streams open at once (503 beyond)")
	maxStreamsTok := fs.Int("admin-max-event-streams-per-token", api.DefaultMaxEventStreamsPerToken, "most /api/v1/events streams open at once per token (429 beyond)")
	auditKeep := fs.Int("audit-keep", api.AuditKeepDefault, "rotated audit files kept (audit.log.1 .. audit.log.N, 16 MiB each)")
	acmeRetry := fs.Duration("acme-retry", 10*time.Second, "first retry delay of a managed certificate's failed ACME order (doubled at each failure, up to 6h)")
	auditSyslog := fs.Bool("audit-syslog", false, "also send every audit entry to the local syslog (journald), facility authpriv, tag spliced-audit")
	alf := addAccessLogFlags(fs)
	var cf clusterFlags
	cf.addNodeFlags(fs)
	var sf storeFlags
	sf.add(fs)
	fs.Usage = func() { usage(stderr, fs) }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "spliced: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	log, err := newLogger(*logFormat, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "spliced:", err)
		return 2
	}
	if err := sf.check(); err != nil {
		fmt.Fprintln(stderr, "spliced:", err)
		return 2
	}
	node, err := cf.nodeIdentity(sf.clustered())
	if err != nil {
		fmt.Fprintln(stderr, "spliced:", err)
		return 2
	}
	if *maxBody <= 0 || *maxConns <= 0 || *anonIdle <= 0 {
		fmt.Fprintln(stderr, "spliced: --admin-max-body, --admin-max-conns and --admin-anon-idle-timeout must be positive")
		return 2
	}
	if *maxConns > maxAdminConns {
		// The admin API lives on the fds the data plane leaves
		// (config.FdReserve); more connections could take them all.
		fmt.Fprintf(stderr, "spliced: --admin-max-conns is at most %d (half the %d fds kept out of the data plane's reach)\n",
			maxAdminConns, config.FdReserve)
		return 2
	}
	// Streams hold connections the listener cannot evict: fewer than
	// --admin-max-conns, so that an admin always finds a slot.
	streamsSet := false
	fs.Visit(func(f *flag.Flag) { streamsSet = streamsSet || f.Name == "admin-max-event-streams" })
	if !streamsSet {
		*maxStreams = min(*maxStreams, max(1, *maxConns/2))
	}
	if *maxStreams <= 0 || *maxStreamsTok <= 0 || (streamsSet && *maxStreams >= *maxConns) {
		fmt.Fprintln(stderr, "spliced: --admin-max-event-streams(-per-token) must be positive, and below --admin-max-conns")
		return 2
	}
	if *auditKeep < 1 {
		fmt.Fprintln(stderr, "spliced: --audit-keep must be at least 1")
		return 2
	}
	var auditCopy io.Writer
	if *auditSyslog {
		w, err := syslog.New(syslog.LOG_AUTHPRIV|syslog.LOG_INFO, "spliced-audit")
		if err != nil {
			fmt.Fprintln(stderr, "spliced: --audit-syslog:", err)
			return 2
		}
		defer w.Close()
		auditCopy = w
	}
	alog, err := openAccessLog(alf, *logFormat, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "spliced:", err)
		return 2
	}
	defer alog.close()
	adm := adminOptions{addr: *adminAddr, accessLog: alog, stateDir: *stateDir, hosts: adminHosts,
		auditKeep: *auditKeep, auditCopy: auditCopy,
		tlsCert: *tlsCert, tlsKey: *tlsKey, maxBody: *maxBody, maxConns: *maxConns,
		maxStreams: *maxStreams, maxStreamsPerToken: *maxStreamsTok, anonIdle: *anonIdle, acmeRetry: *acmeRetry}
	if err := serve(log, adm, *bootstrap, node, &sf); err != nil {
		log.Error("spliced stopped", "err", err)
		return 1
	}
	return 0
}

func usage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprintf(w, `spliced %s — TCP/HTTP reverse-proxy appliance managed through a REST API.

Usage:
  spliced [flags]            run the appliance
  spliced version            print the version
  spliced validate FILE      check a config document (exit 0 when valid)
  spliced token add --role viewer|operator|admin --name NAME [--state-dir DIR | --store URL [--etcd-* …]]
                             create an admin API token (printed once)
  spliced token list [--state-dir DIR | --store URL [--etcd-* …]]
  spliced token revoke NAME [--state-dir DIR | --store URL [--etcd-* …]]

Flags:
`, version.Version)
	if fs == nil {
		fs = flag.NewFlagSet("spliced", flag.ContinueOnError)
		fs.String("admin-addr", "127.0.0.1:9900", "admin API address: host:port or unix:/path")
		fs.String("state-dir", "/var/lib/spliced", "state directory")
		fs.String("config", "", "bootstrap config document, used only when the state directory holds none")
		fs.Var(new(hostList), "admin-host", "another name (or name:port) clients use for the admin address; repeatable or comma-separated")
		fs.String("admin-tls-cert", "", "PEM certificate file: serve the admin API over HTTPS (with --admin-tls-key)")
		fs.String("admin-tls-key", "", "PEM private key file of --admin-tls-cert")
		fs.Int64("admin-max-body", api.MaxBodyBytes, "largest admin request body in bytes (413 beyond); PUT /api/v1/config also takes up to 3x the current document")
		fs.Int("admin-max-conns", 128, "most admin connections open at once (at the cap a new one evicts an idle or anonymous one)")
		fs.Duration("admin-anon-idle-timeout", 5*time.Second, "close an idle admin connection no request with a valid token came on after this")
		fs.Int("admin-max-event-streams", api.DefaultMaxEventStreams, "most /api/v1/events streams open at once (503 beyond)")
		fs.Int("admin-max-event-streams-per-token", api.DefaultMaxEventStreamsPerToken, "most /api/v1/events streams open at once per token (429 beyond)")
		fs.Duration("acme-retry", 10*time.Second, "first retry delay of a managed certificate's failed ACME order (doubled at each failure, up to 6h)")
		fs.String("log-format", "auto", "log format: text, json, or auto (text on a terminal, json otherwise)")
		addAccessLogFlags(fs)
		new(clusterFlags).addNodeFlags(fs)
		new(storeFlags).add(fs)
	}
	fs.SetOutput(w)
	fs.PrintDefaults()
}

func newLogger(format string, w io.Writer) (*slog.Logger, error) {
	if format == "auto" {
		format = "json"
		if isTerminal(w) {
			format = "text"
		}
	}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, nil)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, nil)), nil
	}
	return nil, fmt.Errorf("--log-format must be text, json or auto, not %q", format)
}

// isTerminal tells whether w is a terminal: people read text, services and
// log collectors get JSON.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// cmdValidate checks a document as a write of the whole config would.
func cmdValidate(args []string, stdout, stderr io.Writer) int {
	if len(args) != 1 {
		fmt.Fprintln(stderr, "usage: spliced validate FILE")
		return 2
	}
	f, err := os.Open(args[0])
	if err != nil {
		fmt.Fprintln(stderr, "spliced:", err)
		return 1
	}
	defer f.Close()
	var c config.Config
	if err := config.Decode(f, &c); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", args[0], err)
		return 1
	}
	c.Normalize()
	env := config.HostEnv()
	env.FdLimit = hardFdLimit()
	if err := config.Validate(&c, env); err != nil {
		var ve *config.ValidationError
		if errors.As(err, &ve) {
			for _, fe := range ve.Errors {
				fmt.Fprintf(stderr, "%s: %s: %s (%s)\n", args[0], fe.Field, fe.Message, fe.Code)
			}
		} else {
			fmt.Fprintf(stderr, "%s: %v\n", args[0], err)
		}
		return 1
	}
	fmt.Fprintf(stdout, "%s: valid (%d frontends, %d backends)\n", args[0], len(c.Frontends), len(c.Backends))
	return 0
}

func serve(log *slog.Logger, adm adminOptions, bootstrap string, node core.NodeIdentity, sf *storeFlags) error {
	started := time.Now()
	adminAddr, stateDir := adm.addr, adm.stateDir
	env := config.HostEnv()
	env.FdLimit = raiseFdLimit() // before anything opens a fd or derives maxconn from it
	env.NodeName, env.NodeAddress = node.Name, node.Address
	lock, err := openStateDir(stateDir)
	if err != nil {
		return err
	}
	defer lock.Close() // held until the process exits
	mark, err := readClusterMark(stateDir)
	if err != nil {
		return err
	}
	if err := checkClusterMark(stateDir, mark, sf); err != nil {
		return err
	}
	// In a cluster the store is opened first: its tokens are mirrored into
	// the state directory before the admin listener checks that one
	// exists (a new node joining a cluster with tokens, on a non-loopback
	// admin address, must not be refused for want of a token).
	var es *cluster.EtcdStorage
	reached := false // etcd answered the first contact
	if sf.clustered() {
		if es, err = sf.open(context.Background(), stateDir, log); err != nil {
			return err
		}
		defer es.Close()
		// One bounded wait for etcd (Reach: --etcd-dial-timeout, a second
		// when this node has a copy of its last generation). Unanswered,
		// the start waits no more: the tokens' mirror and the seeding of
		// an empty store need etcd's answer (done when it answers), and
		// the node runs its copy.
		if reached = es.Reach(context.Background()) == nil; reached {
			mirrorStoreTokens(context.Background(), es, stateDir, log)
		}
	}
	// The node's name is taken before anything is opened: a name another
	// live node holds refuses the start here, not once the admin address
	// and every bind are open (the node then started, exited at once, and
	// its binds had answered meanwhile). Started (watching and applying)
	// once the data plane runs the store's document, below.
	var member *cluster.Node
	if sf.clustered() {
		member, err = cluster.Register(context.Background(), cluster.NodeOptions{
			Client: es.Client(), Prefix: es.Prefix(), Storage: es, Self: node,
			AdminAddress: adminAddr, Version: version.Version, StateDir: stateDir,
			OnTokens: mirrorTokens(es, stateDir, log),
			Log:      log,
		})
		if err != nil {
			return err
		}
		defer member.Close() // a start that fails below releases the name
	}
	adm.store = sf.url
	al, err := openAdmin(adm)
	if err != nil {
		return err
	}
	ln := al.ln
	defer ln.Close()
	if !al.open && !al.tls {
		log.Warn("the admin API listens on a non-loopback address without TLS: tokens cross the network in clear",
			"admin_addr", adminAddr)
	}

	// The configuration: the state directory's, or in a cluster etcd's
	// (the state directory then keeps the lock, the audit trail, the
	// ticket keys, the tokens' mirror and the last applied generation).
	var store *config.Store
	if sf.clustered() {
		if mark == nil { // a single node's state directory joining
			if err := seedConfig(context.Background(), es, stateDir, node.Name, log); err != nil {
				return err
			}
		}
		// A store without a document (etcd wiped, or restored from a
		// snapshot older than the cluster) gets the generation this node
		// last applied, as the next one, rather than the node starting
		// empty; unreachable, the node starts from that copy anyway (and
		// seeds an empty store when etcd answers: cluster.Node).
		if reached {
			if _, err := es.SeedFromCache(context.Background(), node.Name); err != nil && !errors.Is(err, config.ErrUnavailable) {
				log.Warn("the store holds no configuration, and this node's copy could not seed it", "err", err)
			}
		}
		if store, err = config.OpenStore(es, bootstrap, log, config.StoreOptions{Node: node.Name}); err != nil {
			return err
		}
		if err := writeClusterMark(stateDir, sf.url, node.Name); err != nil {
			return fmt.Errorf("state directory: %w", err)
		}
		seedCtx, stopSeeding := context.WithCancel(context.Background())
		defer stopSeeding()
		go seedTokensUntilDone(seedCtx, es, stateDir, log)
	} else if store, err = config.Open(stateDir, bootstrap, log); err != nil {
		return err
	}
	// Session ticket keys of the TLS binds, shared by every bind's
	// *tls.Config (core/tlsconf) and set through /api/v1/tls/ticket-keys;
	// certificate bundles are read from the store (cached by hash).
	rotation := time.Duration(store.Current().Tuning.TLS.TicketRotationMs) * time.Millisecond
	var tickets *tlsconf.TicketKeys
	if sf.clustered() {
		tickets, err = tlsconf.NewSharedTicketKeys(stateDir, rotation, cluster.TicketKeyStore(es), log)
	} else {
		tickets, err = tlsconf.NewTicketKeys(stateDir, rotation, log)
	}
	if err != nil {
		return err
	}
	defer tickets.Close()
	if sf.clustered() {
		// Every node uses the cluster's keys (P/tls/ticket-keys), so that a
		// session resumes on any of them; the state directory's file is
		// their cache.
		defer cluster.ShareTicketKeys(es, tickets, log)()
	}
	// Managed certificates (core/acme): challenges answered by the data
	// plane, certificates stored through the API's write (api.New sets
	// it), workers run from here to the stop.
	ao := acme.Options{Logger: log, Store: store, Backoff: adm.acmeRetry}
	if sf.clustered() {
		// One node orders each certificate; every node answers its
		// challenges (P/acme/ in etcd).
		ao.Coordinator = cluster.NewACMECoordinator(es, node.Name)
	}
	issuer := acme.New(ao)
	certs := tlsconf.NewCerts(store.CertificateBundle)
	certs.SetChallenges(issuer)
	ctl, err := newCore(log, certs, tickets, adm.accessLog.log, issuer)
	if err != nil {
		return fmt.Errorf("starting data plane: %w", err)
	}
	cur := store.Current()
	// A cluster node validates what it applies with this machine's Env:
	// the writer checked the document for any machine.
	apply := applyEffective(ctl, env, node, sf.clustered())
	if err := apply(context.Background(), cur); err != nil {
		// The persisted config could not be applied (a port taken since the
		// last run, say). Keep serving the admin API so the operator can see
		// and fix it; /readyz reports not ready until the core runs it.
		log.Error("applying persisted config failed", "generation", cur.Generation, "err", err)
	}
	var cl core.Cluster
	if member != nil {
		member.Start(store, apply, func() int64 { return ctl.Runtime().Generation })
		cl = member
		nodesCtx, stopNodes := context.WithCancel(context.Background())
		defer stopNodes()
		go watchLiveNodes(nodesCtx, member, ctl, log) // limits_nodes.go: scope cluster
	}
	rt := ctl.Runtime()
	log.Info("spliced started", "version", version.Version, "admin_addr", adminAddr, "node", node.Name,
		"store", store.Storage().Kind(), "state_dir", stateDir, "generation", cur.Generation, "nbthread", rt.Nbthread,
		"fd_limit", env.FdLimit, "maxconn", rt.Maxconn)

	h := api.New(api.Options{
		Store:     store,
		Core:      ctl,
		Env:       env,
		Version:   version.Version,
		StateDir:  stateDir,
		AdminAddr: adminAddr,
		Logger:    log,
		Started:   started,
		Node:      node,
		Cluster:   cl,

		Tokens:       al.tokens,
		Open:         al.open,
		AdminHosts:   append(adminBoundHosts(al), adm.hosts...),
		AdminTLS:     al.tls,
		MaxBodyBytes: adm.maxBody,

		TicketKeys: tickets,
		AccessLog:  adm.accessLog.log,

		AuditKeep: adm.auditKeep,
		AuditCopy: adm.auditCopy,

		MaxEventStreams:         adm.maxStreams,
		MaxEventStreamsPerToken: adm.maxStreamsPerToken,

		ACME: issuer,
	})
	issuerCtx, stopIssuer := context.WithCancel(context.Background())
	issuerDone := make(chan struct{})
	go func() { defer close(issuerDone); issuer.Run(issuerCtx) }()
	defer func() { stopIssuer(); <-issuerDone }()
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      0, // /api/v1/events streams
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		ConnState:         connState,   // anonymous idle timeout, eviction (admin.go)
		ConnContext:       connContext, // tells connTable which requests were admitted
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()

	sigc := make(chan os.Signal, 2)
	signal.Notify(sigc, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigc)
	// SIGHUP reopens the access-log file (logrotate's postrotate).
	hupc := make(chan os.Signal, 1)
	signal.Notify(hupc, syscall.SIGHUP)
	defer signal.Stop(hupc)
	hupDone := make(chan struct{})
	defer close(hupDone)
	go func() {
		for {
			select {
			case <-hupc:
				if err := adm.accessLog.reopen(); err != nil {
					log.Error("SIGHUP: reopening the access log failed", "err", err)
				}
			case <-hupDone:
				return
			}
		}
	}()
	select {
	case sig := <-sigc:
		// The grace is tuning.grace_ms of the running config: the data
		// plane bounds its soft stop with it (engine.Engine.Close).
		log.Info("stopping", "signal", sig.String(), "grace_ms", store.Current().Tuning.GraceMs)
	case err := <-errc:
		return fmt.Errorf("admin server: %w", err)
	}
	// A second signal during the grace stops at once (HAProxy's hard stop).
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case sig := <-sigc:
			log.Warn("second signal: closing every connection now", "signal", sig.String())
			cancel()
		case <-ctx.Done():
		}
	}()
	// The cluster first: the node leaves (its key goes with its lease, so
	// writes no longer wait for it) and applies nothing more. Then the
	// data plane: it stops accepting at once and lets established
	// connections finish; the admin API stays up meanwhile for /healthz.
	if member != nil {
		_ = member.Close()
	}
	cerr := ctl.Close(ctx)
	sctx, scancel := context.WithTimeout(context.Background(), time.Second)
	defer scancel()
	_ = srv.Shutdown(sctx)
	if cerr != nil && !errors.Is(cerr, context.DeadlineExceeded) {
		return cerr
	}
	log.Info("stopped")
	return nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.IsLoopback()
}
