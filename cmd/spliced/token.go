package main

// `spliced token add|list|revoke`: the admin API's bearer tokens, kept
// (hashed) in tokens.json in the state directory, or with --store in the
// cluster store (P/tokens), which every node mirrors into its own
// tokens.json. The running server reads the file again when it changes, so
// these take effect on the next request.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"text/tabwriter"
	"time"

	"github.com/spliced-proxy/spliced/api/tokens"
	"github.com/spliced-proxy/spliced/core/cluster"
)

const tokenUsage = `usage:
  spliced token add --role viewer|operator|admin --name NAME [--state-dir DIR | --store URL [--etcd-* …]]
  spliced token list [--state-dir DIR | --store URL [--etcd-* …]]
  spliced token revoke NAME [--state-dir DIR | --store URL [--etcd-* …]]
`

// tokenSet is where the tokens are: a state directory or a cluster store.
type tokenSet interface {
	list(ctx context.Context) ([]tokens.Entry, error)
	add(ctx context.Context, name string, role tokens.Role, now time.Time) (string, error)
	revoke(ctx context.Context, name string) error
}

type dirTokens string

func (d dirTokens) list(context.Context) ([]tokens.Entry, error) { return tokens.List(string(d)) }
func (d dirTokens) add(_ context.Context, name string, role tokens.Role, now time.Time) (string, error) {
	return tokens.Add(string(d), name, role, now)
}
func (d dirTokens) revoke(_ context.Context, name string) error {
	return tokens.Revoke(string(d), name)
}

// etcdTokens edits P/tokens, conditionally on its revision (EditKey).
type etcdTokens struct{ es *cluster.EtcdStorage }

func (e etcdTokens) list(ctx context.Context) ([]tokens.Entry, error) {
	b, _, err := e.es.GetKey(ctx, cluster.TokensKey)
	if err != nil || b == nil {
		return []tokens.Entry{}, err
	}
	es, err := tokens.Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", e.es.Key(cluster.TokensKey), err)
	}
	return es, nil
}

func (e etcdTokens) edit(ctx context.Context, change func([]tokens.Entry) ([]tokens.Entry, error)) error {
	return e.es.EditKey(ctx, cluster.TokensKey, func(old []byte) ([]byte, error) {
		es := []tokens.Entry{}
		if old != nil {
			var err error
			if es, err = tokens.Parse(old); err != nil {
				return nil, fmt.Errorf("%s: %w", e.es.Key(cluster.TokensKey), err)
			}
		}
		next, err := change(es)
		if err != nil {
			return nil, err
		}
		return tokens.Marshal(next), nil
	})
}

func (e etcdTokens) add(ctx context.Context, name string, role tokens.Role, now time.Time) (string, error) {
	secret, err := tokens.Generate()
	if err != nil {
		return "", err
	}
	hash := tokens.HashOf(secret)
	if err := e.edit(ctx, func(es []tokens.Entry) ([]tokens.Entry, error) { return tokens.AddTo(es, name, role, hash, now) }); err != nil {
		return "", err
	}
	return secret, nil
}

func (e etcdTokens) revoke(ctx context.Context, name string) error {
	return e.edit(ctx, func(es []tokens.Entry) ([]tokens.Entry, error) { return tokens.RevokeFrom(es, name) })
}

func cmdToken(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, tokenUsage)
		return 2
	}
	sub, args := args[0], args[1:]
	fs := flag.NewFlagSet("spliced token "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	stateDir := fs.String("state-dir", "/var/lib/spliced", "state directory (tokens.json)")
	var sf storeFlags
	sf.add(fs)
	var role, name string
	if sub == "add" {
		fs.StringVar(&role, "role", "", "viewer, operator or admin")
		fs.StringVar(&name, "name", "", "token name (lowercase letters, digits, - and _), shown in the audit log")
	}
	// revoke takes its NAME before or after the flags.
	if sub == "revoke" && len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		name, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if err := sf.check(); err != nil {
		fmt.Fprintln(stderr, "spliced:", err)
		return 2
	}
	var set tokenSet = dirTokens(*stateDir)
	if sf.clustered() {
		dirSet := false
		fs.Visit(func(f *flag.Flag) { dirSet = dirSet || f.Name == "state-dir" })
		if dirSet {
			fmt.Fprintln(stderr, "spliced: give --store or --state-dir, not both (a cluster's tokens are in its store)")
			return 2
		}
		es, err := sf.open(context.Background(), "", slog.New(slog.DiscardHandler))
		if err != nil {
			fmt.Fprintln(stderr, "spliced:", err)
			return 1
		}
		defer es.Close()
		set = etcdTokens{es}
	} else if m, err := readClusterMark(*stateDir); err != nil {
		fmt.Fprintln(stderr, "spliced:", err)
		return 1
	} else if m != nil && sub != "list" {
		// A cluster node's tokens.json mirrors the store's: an edit there
		// would be overwritten at the next change, and no other node sees it.
		fmt.Fprintln(stderr, "spliced:", refuseClusterDir(*stateDir, m, "edit its tokens"))
		return 2
	}
	ctx := context.Background()
	switch sub {
	case "add":
		if fs.NArg() != 0 || role == "" || name == "" {
			fmt.Fprint(stderr, tokenUsage)
			return 2
		}
		r, err := tokens.ParseRole(role)
		if err != nil {
			fmt.Fprintln(stderr, "spliced:", err)
			return 2
		}
		secret, err := set.add(ctx, name, r, time.Now())
		if err != nil {
			fmt.Fprintln(stderr, "spliced:", err)
			return 1
		}
		// The secret goes to stdout alone, so `T=$(spliced token add ...)`
		// captures exactly it; the reminder goes to stderr.
		fmt.Fprintln(stdout, secret)
		fmt.Fprintf(stderr, "token %q (%s) added; it is shown only this once. Use it as: Authorization: Bearer <token>\n", name, r)
		return 0
	case "list":
		if fs.NArg() != 0 {
			fmt.Fprint(stderr, tokenUsage)
			return 2
		}
		es, err := set.list(ctx)
		if err != nil {
			fmt.Fprintln(stderr, "spliced:", err)
			return 1
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tROLE\tCREATED")
		for _, e := range es {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", e.Name, e.Role, e.Created.UTC().Format(time.RFC3339))
		}
		tw.Flush()
		return 0
	case "revoke":
		if name == "" && fs.NArg() == 1 {
			name = fs.Arg(0)
		} else if fs.NArg() != 0 || name == "" {
			fmt.Fprint(stderr, tokenUsage)
			return 2
		}
		if err := set.revoke(ctx, name); err != nil {
			fmt.Fprintln(stderr, "spliced:", err)
			return 1
		}
		fmt.Fprintf(stderr, "token %q revoked\n", name)
		return 0
	}
	fmt.Fprintf(stderr, "spliced token: unknown subcommand %q\n%s", sub, tokenUsage)
	return 2
}
