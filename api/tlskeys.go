package api

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/spliced-proxy/spliced/core/config"
	"github.com/spliced-proxy/spliced/core/tlsconf"
)

// Session ticket keys (core/tlsconf.TicketKeys): GET describes them by id,
// PUT replaces them. Neither answers a key, and the audit entry of a PUT
// holds the request line and its outcome, never the body.

// TicketKeysView is the answer of GET and PUT /api/v1/tls/ticket-keys.
type TicketKeysView struct {
	// Keys are the session ticket keys, the one that encrypts first.
	Keys []TicketKeyView `json:"keys"`
}

// TicketKeyView describes one session ticket key without revealing it.
type TicketKeyView struct {
	// ID is the first 8 hex digits of the SHA-256 of the key: equal ids
	// on two nodes mean they share the key.
	ID      string    `json:"id" example:"3f9a0c12"`
	Created time.Time `json:"created"`
	// Source is "generated" (made and rotated by spliced every
	// tuning.tls.ticket_rotation_ms) or "api" (set by PUT, never rotated).
	Source string `json:"source" example:"generated"`
}

// TicketKeysUpload is the body of PUT /api/v1/tls/ticket-keys.
type TicketKeysUpload struct {
	// Keys are 1 to 8 keys of 32 random bytes each, in standard base64
	// (`head -c 32 /dev/urandom | base64`). The first encrypts new
	// tickets; all decrypt.
	Keys []string `json:"keys" example:"q83vEjRWeJq83vEjRWeJq83vEjRWeJq83vEjRWeJq80="`
}

func (s *server) ticketKeysView() TicketKeysView {
	info := s.tickets.Info()
	v := TicketKeysView{Keys: make([]TicketKeyView, len(info))}
	for i, k := range info {
		v.Keys[i] = TicketKeyView{ID: k.ID, Created: k.Created, Source: k.Source}
	}
	return v
}

func (s *server) ticketKeysEnabled() error {
	if s.tickets == nil {
		return fmt.Errorf("session ticket keys are not managed by this process: %w", config.ErrNotFound)
	}
	return nil
}

// getTicketKeys godoc
//
//	@Summary		Describe the session ticket keys
//	@Description	Ids (the first 8 hex digits of each key's SHA-256), creation times and source of the keys that encrypt (the first) and decrypt the session tickets of every TLS bind; never a key.
//	@Tags			tls
//	@Produce		json
//	@Success		200	{object}	TicketKeysView
//	@Failure		404	{object}	Problem	"no ticket keys in this process"
//	@x-spliced-role	"admin"
//	@Router			/api/v1/tls/ticket-keys [get]
func (s *server) getTicketKeys(w http.ResponseWriter, r *http.Request) error {
	if err := s.ticketKeysEnabled(); err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	return writeValue(w, http.StatusOK, s.ticketKeysView())
}

// putTicketKeys godoc
//
//	@Summary		Set the session ticket keys
//	@Description	Replaces the session ticket keys of every TLS bind with 1 to 8 keys of 32 bytes (standard base64): the first encrypts new tickets, all decrypt. Set the same keys on several nodes so that they resume each other's sessions; in a cluster (--store etcd://…) they are written to the store and every node uses them. Automatic rotation stops: rotate by setting them again, the new key first and the previous ones after it (HAProxy's "set ssl tls-key"). The keys are stored 0600 in the state directory (and, in a cluster, in etcd) and survive a restart; neither the answer nor the audit trail holds them. Tickets encrypted with a key no longer listed are refused (a full handshake follows).
//	@Tags			tls
//	@Accept			json
//	@Produce		json
//	@Param			keys	body		TicketKeysUpload	true	"the keys, the encrypting one first"
//	@Param			dry_run	query		bool				false	"check the keys, answer the current ones and change nothing"
//	@Success		200		{object}	TicketKeysView
//	@Failure		400		{object}	Problem	"malformed body"
//	@Failure		404		{object}	Problem	"no ticket keys in this process"
//	@Failure		413		{object}	Problem
//	@Failure		415		{object}	Problem
//	@Failure		422		{object}	Problem	"no key, more than 8, not base64, not 32 bytes"
//	@Failure		503		{object}	Problem	"the state directory refused the write, or etcd cannot be reached (a cluster): nothing changed"
//	@Failure		507		{object}	Problem	"the state directory is full: nothing changed"
//	@x-spliced-role	"admin"
//	@Router			/api/v1/tls/ticket-keys [put]
func (s *server) putTicketKeys(w http.ResponseWriter, r *http.Request) error {
	if err := s.ticketKeysEnabled(); err != nil {
		return err
	}
	var in TicketKeysUpload
	if err := decodeBody(r, &in); err != nil {
		return err
	}
	dry, err := dryRun(r)
	if err != nil {
		return err
	}
	keys, err := parseTicketKeys(in.Keys)
	if err != nil || dry {
		if err == nil {
			w.Header().Set("Cache-Control", "no-store")
			return writeValue(w, http.StatusOK, s.ticketKeysView())
		}
		return err
	}
	if err := s.tickets.Set(keys); err != nil {
		return err
	}
	v := s.ticketKeysView()
	s.log.Info("session ticket keys set", "actor", actor(r.Context()), "keys", len(v.Keys), "encrypting", v.Keys[0].ID)
	w.Header().Set("Cache-Control", "no-store")
	return writeValue(w, http.StatusOK, v)
}

// parseTicketKeys checks an upload; the messages never repeat a value.
func parseTicketKeys(in []string) ([][32]byte, error) {
	var errs []config.FieldError
	if len(in) == 0 || len(in) > tlsconf.MaxTicketKeys {
		errs = append(errs, config.FieldError{Field: "/keys", Code: config.CodeOutOfRange,
			Message: fmt.Sprintf("give 1 to %d keys, not %d", tlsconf.MaxTicketKeys, len(in))})
	}
	keys := make([][32]byte, 0, len(in))
	for i, k := range in {
		b, err := base64.StdEncoding.DecodeString(k)
		switch {
		case err != nil:
			errs = append(errs, config.FieldError{Field: "/keys/" + strconv.Itoa(i), Code: config.CodeFormat,
				Message: "not standard base64 (head -c 32 /dev/urandom | base64)"})
		case len(b) != 32:
			errs = append(errs, config.FieldError{Field: "/keys/" + strconv.Itoa(i), Code: config.CodeOutOfRange,
				Message: fmt.Sprintf("a key is 32 bytes, not %d", len(b))})
		default:
			keys = append(keys, [32]byte(b))
		}
	}
	if len(errs) > 0 {
		return nil, &config.ValidationError{Errors: errs}
	}
	return keys, nil
}
