package config

import "fmt"

// ValidateChange is Validate of c, a change of prev: prev (nil: none)
// passed Validate with the same env, and its unchanged servers are not
// checked against the field rules again (the write path's validation).
// A cluster node validates what it receives this way (core/cluster).
func ValidateChange(c *Config, env Env, prev *Config) error {
	return validate(c, env, prev, nil)
}

// CloneSharingServers is Clone but for the backends' lists of servers,
// which the copy shares with c (see UpdateOptions.ShareServers): for a
// change (Delta.Apply replaces a list it changes, never writes into it).
func (c *Config) CloneSharingServers() *Config { return c.cloneSharingServers() }

// Advance makes the config build returns, from Current, the new Current,
// under the store's write lock: how a cluster node adopts a generation
// from the change it received rather than by loading the whole document
// (core/cluster). build returns nil (and no error) to change nothing; the
// config it returns must be newer than the one it was given, and is
// immutable from then on.
func (s *Store) Advance(build func(cur *Config) (*Config, error)) (*Config, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.cur.Load()
	next, err := build(cur)
	if err != nil || next == nil {
		return nil, err
	}
	if cur != nil && next.Generation <= cur.Generation {
		return nil, fmt.Errorf("config store: advance to generation %d from %d", next.Generation, cur.Generation)
	}
	s.cur.Store(next)
	s.log.Info("config advanced from the store's change", "generation", next.Generation)
	return next, nil
}
