package config

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// CertsDir is the directory of the state directory that holds the
// certificates' chains and keys: one file per chain, <chain_sha256>.pem
// (the chain's CERTIFICATE blocks, then the PKCS #8 PRIVATE KEY), mode 0600
// in a 0700 directory, written atomically (WriteFileAtomic) before the
// revision that refers to it. Files are never rewritten with other content
// (the name is the chain's hash, the key is determined by the leaf) and
// removed while the current config or a kept revision refers to it, so
// restoring any kept revision finds its certificates (pruneCertificates).
// Open refuses a certs/ that other users can reach (checkCertsAccess).
const CertsDir = "certs"

func (d *DirStorage) certsDir() string { return filepath.Join(d.dir, CertsDir) }

func certFileName(chainSHA256 string) string { return chainSHA256 + ".pem" }

// saveCertificates writes the bundles (by chain_sha256), before the
// revision that refers to them. A refusal of the OS is a *StorageError.
// Writing a name that exists writes the same content.
func (d *DirStorage) saveCertificates(bundles map[string][]byte) error {
	if len(bundles) == 0 {
		return nil
	}
	dir := d.certsDir()
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return d.storageFailed(err)
	}
	// A symbolic link planted in place of certs/ is refused, not followed.
	if fi, err := os.Lstat(dir); err != nil {
		return d.storageFailed(err)
	} else if !fi.IsDir() {
		return d.storageFailed(fmt.Errorf("%s is not a directory", dir))
	}
	for _, sum := range slices.Sorted(maps.Keys(bundles)) {
		if !isHexSHA256(sum) {
			return fmt.Errorf("config store: certificate bundle named %q: %w", truncateString(sum, 64), ErrInvalid)
		}
		if err := d.writeFile(dir, certFileName(sum), bundles[sum], nil); err != nil {
			return d.storageFailed(err)
		}
	}
	return nil
}

// checkCertsAccess refuses to open a state directory whose certs/ (or a
// file in it) other users can reach: the files hold private keys, written
// 0600 in a 0700 directory; a mode changed since (a restore from backup, a
// chmod -R) would leave them readable while spliced keeps serving, so the
// start is refused, naming the fix, as for tokens.json.
func (d *DirStorage) checkCertsAccess() error {
	dir := d.certsDir()
	fi, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("config store: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("config store: %s must be a directory, not a symbolic link or a file (remove it)", dir)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("config store: %s holds private keys and is accessible to other users (mode %04o): fix it with `chmod 700 %s`", dir, fi.Mode().Perm(), dir)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("config store: %w", err)
	}
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil {
			continue // removed meanwhile
		}
		if fi.Mode().Perm()&0o077 != 0 {
			path := filepath.Join(dir, e.Name())
			return fmt.Errorf("config store: %s holds a private key and is accessible to other users (mode %04o): fix it with `chmod 600 %s`", path, fi.Mode().Perm(), path)
		}
	}
	return nil
}

// CertificateBundle reads the chain and key of meta (PEM, as Update stored
// them). It is how the TLS layer loads a certificate; the API never
// answers it. A bundle the storage does not hold is an error wrapping
// ErrNotFound.
func (s *Store) CertificateBundle(meta Certificate) ([]byte, error) {
	if !isHexSHA256(meta.ChainSHA256) {
		return nil, fmt.Errorf("certificate %q: chain_sha256 %q: %w", meta.Name, meta.ChainSHA256, ErrInvalid)
	}
	return s.st.CertificateBundle(context.Background(), meta.ChainSHA256)
}

// CertificateBundle reads certs/<chainSHA256>.pem (never through a
// symbolic link); absent, an error wrapping ErrNotFound and fs.ErrNotExist.
func (d *DirStorage) CertificateBundle(_ context.Context, chainSHA256 string) ([]byte, error) {
	if !isHexSHA256(chainSHA256) {
		return nil, fmt.Errorf("certificate bundle %q: %w", truncateString(chainSHA256, 64), ErrInvalid)
	}
	b, err := readFileNoFollow(filepath.Join(d.certsDir(), certFileName(chainSHA256)))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("certificate bundle %s: %w (%w)", chainSHA256, ErrNotFound, err)
	}
	return b, err
}

// splitBundle separates a stored bundle into its certificates and its key.
func splitBundle(b []byte) (certPEM, keyPEM string) {
	var certs, key bytes.Buffer
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			break
		}
		if blk.Type == "CERTIFICATE" {
			_ = pem.Encode(&certs, blk)
		} else {
			_ = pem.Encode(&key, blk)
		}
	}
	return certs.String(), key.String()
}

// checkCertificateFiles verifies that every certificate of next that is
// not unchanged from cur has its file, and that the file yields exactly its
// metadata: a PUT of the whole document (or a restore) cannot name a chain
// that is not stored, nor attach metadata of its own choosing. Validity
// dates are not checked again (restoring a revision is not an upload).
func (s *Store) checkCertificateFiles(cur, next *Config, bundles map[string][]byte) error {
	var p problems
	for i := range next.Certificates {
		c := &next.Certificates[i]
		if j := cur.FindCertificate(c.Name); j >= 0 && reflect.DeepEqual(cur.Certificates[j], *c) {
			continue
		}
		if c.ACME != nil {
			// The account file must exist (its content is the API's).
			if err := s.checkAccountFile(c.ACME.AccountSHA256, bundles); err != nil {
				if errors.Is(err, ErrUnavailable) {
					return err
				}
				p.addf("/certificates/"+strconv.Itoa(i)+"/acme/account_sha256", CodeUnknownReference, "no stored ACME account has account_sha256 %s: create the certificate with POST /api/v1/certificates", truncateString(c.ACME.AccountSHA256, 64))
			}
			if c.ChainSHA256 == "" {
				continue // not issued yet: no chain to check
			}
		}
		ptr := "/certificates/" + strconv.Itoa(i) + "/chain_sha256"
		b, ok := bundles[c.ChainSHA256]
		var err error
		if !ok {
			b, err = s.CertificateBundle(*c)
		}
		if errors.Is(err, ErrUnavailable) {
			return err // the storage cannot say: not the client's mistake
		}
		if err != nil {
			p.addf(ptr, CodeUnknownReference, "no stored certificate has chain_sha256 %s: upload it with POST /api/v1/certificates", truncateString(c.ChainSHA256, 64))
			continue
		}
		certPEM, keyPEM := splitBundle(b)
		got, _, err := ParseCertificate(c.Name, certPEM, keyPEM, noValidityCheck)
		got.ACME = c.ACME // the desired state, not derived from the file
		if err != nil || !reflect.DeepEqual(got, *c) {
			p.add("/certificates/"+strconv.Itoa(i), CodeInvalid, "the metadata does not match the stored certificate "+c.ChainSHA256+": it is derived from the certificate, not set")
		}
	}
	return p.err()
}

// checkAccountFile reports whether the account file sum is among bundles
// or stored.
func (s *Store) checkAccountFile(sum string, bundles map[string][]byte) error {
	if _, ok := bundles[sum]; ok {
		return nil
	}
	if !isHexSHA256(sum) {
		return ErrInvalid
	}
	_, err := s.st.CertificateBundle(context.Background(), sum)
	return err
}

// revisionCertificates is the part of a revision RevisionCertificates
// reads: the chains it refers to.
type revisionCertificates struct {
	Config revisionCertificateList `json:"config"`
	// a delta revision refers to those of its base (a revision before it)
	// and, when they changed, to those in its "rest"
	Delta struct {
		Rest revisionCertificateList `json:"rest"`
	} `json:"delta"`
}

type revisionCertificateList struct {
	Certificates []struct {
		ChainSHA256 string `json:"chain_sha256"`
		ACME        *struct {
			AccountSHA256 string `json:"account_sha256"`
		} `json:"acme"`
	} `json:"certificates"`
}

// RevisionCertificates lists the chain_sha256 of the certificates a
// revision (its JSON: header and config) refers to, without decoding the
// rest of the config: what certificate pruning keeps, in the state
// directory and in etcd (core/cluster).
func RevisionCertificates(r io.Reader) ([]string, error) {
	var rc revisionCertificates
	if err := json.NewDecoder(r).Decode(&rc); err != nil {
		return nil, err
	}
	sums := make([]string, 0, len(rc.Config.Certificates)+len(rc.Delta.Rest.Certificates))
	for _, c := range append(rc.Config.Certificates, rc.Delta.Rest.Certificates...) {
		if c.ChainSHA256 != "" {
			sums = append(sums, c.ChainSHA256)
		}
		if c.ACME != nil && c.ACME.AccountSHA256 != "" {
			sums = append(sums, c.ACME.AccountSHA256) // a managed certificate's account file
		}
	}
	return sums, nil
}

// pruneCertificates removes the files of certs/ that neither the current
// config nor any kept revision refers to (the keys of replaced or deleted
// certificates do not stay on disk longer than the history that can restore
// them), and temporary files a crashed write left there. It runs under the
// store's lock, at Open and after a write that replaced or deleted a
// certificate: a file only a pruned revision referred to goes at the next
// such write or start. A revision that cannot be read keeps every file
// (nothing is removed), and failures are logged, never returned: the write
// that triggered it is committed.
func (d *DirStorage) pruneCertificates(cur *Config) {
	dir := d.certsDir()
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	d.removeTemps(dir, ".")
	keep := map[string]bool{}
	for i := range cur.Certificates {
		for _, sum := range cur.Certificates[i].Files() {
			keep[sum] = true
		}
	}
	names, err := d.revisionNames()
	if err != nil {
		d.log.Warn("certificate files not pruned: revisions unreadable", "err", err)
		return
	}
	for _, n := range names {
		data, err := readFileNoFollow(filepath.Join(d.revDir(), n))
		var sums []string
		if err == nil {
			sums, err = RevisionCertificates(bytes.NewReader(data))
		}
		if err != nil {
			d.log.Warn("certificate files not pruned: a revision is unreadable", "file", n, "err", err)
			return
		}
		for _, sum := range sums {
			keep[sum] = true
		}
	}
	for _, e := range ents {
		sum, ok := strings.CutSuffix(e.Name(), ".pem")
		if !ok || !isHexSHA256(sum) || keep[sum] || !e.Type().IsRegular() {
			continue
		}
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			d.log.Warn("removing an unreferenced certificate file failed", "file", e.Name(), "err", err)
			continue
		}
		d.log.Info("removed a certificate file no revision refers to", "chain_sha256", sum)
	}
}

// certificatesDropped reports whether plan replaces or deletes a
// certificate, leaving a file that may no longer be referenced.
func certificatesDropped(plan Plan) bool {
	for _, it := range plan.Items {
		if strings.HasPrefix(it.Object, "certificate/") && it.Op != OpCreate {
			return true
		}
	}
	return false
}
