// Package tokens keeps the admin API's bearer tokens: tokens.json in the
// state directory, holding for each token its name, role, creation time and
// the SHA-256 of the secret, never the secret itself.
//
// A secret is "spliced_" followed by 32 random bytes in unpadded base64url:
// 256 bits of entropy, so a single unsalted SHA-256 is enough to make the
// file useless to whoever reads it (no dictionary to try), and a lookup
// costs one hash. Lookups compare the hash against every entry with
// crypto/subtle, without stopping at the first match.
//
// The file is written like core/config's documents: a temporary file (mode
// 0600) in the same directory, fsync, rename, fsync of the directory; the
// command-line edits (Add, Revoke) hold an flock on tokens.json.lock so two
// `spliced token add` at once cannot lose one. The running server reads it
// through a Checker, which stats the file on each call and re-reads it when
// its inode, size or modification time changed: `spliced token add` and
// `revoke` take effect on the next request, without a restart. A file that
// cannot be parsed makes the Checker fail closed (every lookup errors) until
// it is fixed; the previous good set is not kept, since a revoke might be
// what broke it.
//
// The file (and its lock file) is opened with O_NOFOLLOW: a symbolic link
// planted in the state directory is refused, never followed. NewChecker
// (the server's start) refuses a tokens.json that other users may access
// (the message says `chmod 600 ...`). These edits do not take the state
// directory's lock (core/config.LockDir), which the daemon holds for its
// lifetime: they run beside it, serialised among themselves only.
//
// It must not log, print or return a secret, except Add's return value
// (printed once by `spliced token add`). Checker is safe for any goroutine;
// Add, Revoke and List are for the command line.
package tokens
