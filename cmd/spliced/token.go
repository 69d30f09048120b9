package main

// `spliced token add|list|revoke`: the admin API's bearer tokens, kept
// (hashed) in tokens.json in the state directory. The running server reads
// the file again when it changes, so these take effect on the next request.

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spliced-proxy/spliced/api/tokens"
)

const tokenUsage = `usage:
  spliced token add --role viewer|operator|admin --name NAME [--state-dir DIR]
  spliced token list [--state-dir DIR]
  spliced token revoke NAME [--state-dir DIR]
`

func cmdToken(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, tokenUsage)
		return 2
	}
	sub, args := args[0], args[1:]
	fs := flag.NewFlagSet("spliced token "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	stateDir := fs.String("state-dir", "/var/lib/spliced", "state directory (tokens.json)")
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
	// A cluster node's tokens.json mirrors the store's: an edit there
	// would be overwritten at the next change, and no other node sees it.
	if m, err := readClusterMark(*stateDir); err != nil {
		fmt.Fprintln(stderr, "spliced:", err)
		return 1
	} else if m != nil && sub != "list" {
		fmt.Fprintln(stderr, "spliced:", refuseClusterDir(*stateDir, m, "edit its tokens"))
		return 2
	}
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
		secret, err := tokens.Add(*stateDir, name, r, time.Now())
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
		es, err := tokens.List(*stateDir)
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
		if err := tokens.Revoke(*stateDir, name); err != nil {
			fmt.Fprintln(stderr, "spliced:", err)
			return 1
		}
		fmt.Fprintf(stderr, "token %q revoked\n", name)
		return 0
	}
	fmt.Fprintf(stderr, "spliced token: unknown subcommand %q\n%s", sub, tokenUsage)
	return 2
}
