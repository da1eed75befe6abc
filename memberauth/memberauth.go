// Package memberauth makes the two ends of a connection to a member port
// prove they hold the cluster's secret (--cluster-secret-file) before
// anything else crosses it: a process that cannot prove membership cannot
// append to a group's log, vote, take a snapshot or make a member call,
// and a member never talks to a listener that is not one. Package raftmux
// runs it on every connection of the member port.
//
// The handshake is a mutual challenge and response, bound to the
// connection's purpose (a group's Raft, or member calls for it):
//
//	dialer → acceptor: "SLMA" 1 nonce_d(16)
//	acceptor → dialer: "SLMA" 1 nonce_a(16) HMAC(secret, "acceptor" purpose nonce_d nonce_a)
//	dialer → acceptor: HMAC(secret, "dialer" purpose nonce_d nonce_a)
//
// HMAC is HMAC-SHA256. Fresh nonces on both sides make a recorded
// handshake useless on another connection. The secret is never sent. It
// proves membership; it does not hide the traffic — with --tls-cert-file
// the member port speaks TLS after it (raftmux.Guard).
//
// Versions. The byte after "SLMA" is the hellos' layout, 1 for every
// version so far: a hello of another layout is refused (ErrVersion)
// before anything is answered. The handshake's version is said inside the
// nonces, which both MACs cover, so the network cannot change it: a
// dialer of version 2 starts its nonce with "SLv2", and an acceptor of
// version 2 that sees it answers with a nonce that starts so too. An
// acceptor that does not (a member of 0.4.0, which speaks version 1)
// answers a nonce without it — served, by this rule, so a cluster can be
// upgraded member by member; a dialer without it is answered in version
// 1 alike. A version changed on the way — the mark taken off a nonce, or
// put on — leaves the MACs unequal: refused. Version 2 changes nothing
// else yet: it is the place a next change is chosen in, where the network
// cannot choose it.
package memberauth

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

// Errors.
var (
	// ErrSecret: a secret too short to be one.
	ErrSecret = errors.New("memberauth: the cluster secret must be at least 16 bytes")
	// ErrPlaceholder: the secret is the placeholder deploy/envoy ships,
	// which everyone who has the repository knows.
	ErrPlaceholder = errors.New("memberauth: the cluster secret is the repository's placeholder; write a secret of your own (head -c 32 /dev/urandom | base64)")
	// ErrRefused: the other end did not prove it holds the secret, or
	// spoke something else.
	ErrRefused = errors.New("memberauth: the other end did not prove cluster membership")
	// ErrVersion, with ErrRefused: the other end's hello is of a layout
	// this member does not read. Nothing is answered to it.
	ErrVersion = errors.New("memberauth: the other end speaks another version of the handshake")
)

// MinSecret is the shortest secret taken.
const MinSecret = 16

// Placeholder is the text of the cluster secret file deploy/envoy ships
// to be replaced; Check refuses it.
const Placeholder = "replace-me-with-your-own-cluster-secret-of-32+-bytes"

// Timeout bounds a handshake.
const Timeout = 5 * time.Second

const (
	magic = "SLMA"
	// layout is the hellos' layout byte; version the handshake's, said by
	// versionMark at the start of a nonce (version 1 says nothing).
	layout      = 1
	version     = 2
	versionMark = "SLv2"
	nonceLen    = 16
	helloLen    = len(magic) + 1 + nonceLen
	macLen      = sha256.Size
	maxPurpose  = 255
)

// Check reports whether secret can be used.
func Check(secret []byte) error {
	switch {
	case len(secret) < MinSecret:
		return ErrSecret
	case string(secret) == Placeholder:
		return ErrPlaceholder
	}
	return nil
}

// Dial runs the dialer's side of the handshake on c (deadline: Timeout).
func Dial(c net.Conn, secret []byte, purpose string) error {
	if err := checkArgs(secret, purpose); err != nil {
		return err
	}
	c.SetDeadline(time.Now().Add(Timeout))
	defer c.SetDeadline(time.Time{})
	nd := nonce(version)
	if _, err := c.Write(hello(nd)); err != nil {
		return fmt.Errorf("%w: %w", ErrRefused, err)
	}
	var reply [helloLen + macLen]byte
	if _, err := io.ReadFull(c, reply[:]); err != nil {
		return fmt.Errorf("%w: %w", ErrRefused, err)
	}
	na, err := readHello(reply[:helloLen])
	if err != nil {
		return err
	}
	// The acceptor's nonce says its version (2, or 1 from a member of
	// 0.4.0), and both MACs cover it.
	if !hmac.Equal(reply[helloLen:], mac(secret, "acceptor", purpose, nd, na)) {
		return ErrRefused
	}
	if _, err := c.Write(mac(secret, "dialer", purpose, nd, na)); err != nil {
		return fmt.Errorf("%w: %w", ErrRefused, err)
	}
	return nil
}

// Accept runs the acceptor's side of the handshake on c (deadline:
// Timeout). On an error the caller closes c: nothing was served on it.
func Accept(c net.Conn, secret []byte, purpose string) error {
	defer c.SetDeadline(time.Time{})
	return AcceptBy(c, secret, purpose, time.Now().Add(Timeout))
}

// AcceptBy is Accept that must end by deadline (a member port's one
// deadline for everything before a connection serves); it leaves c's
// deadline set to it.
func AcceptBy(c net.Conn, secret []byte, purpose string, deadline time.Time) error {
	if err := checkArgs(secret, purpose); err != nil {
		return err
	}
	c.SetDeadline(deadline)
	var h [helloLen]byte
	if _, err := io.ReadFull(c, h[:]); err != nil {
		return fmt.Errorf("%w: %w", ErrRefused, err)
	}
	nd, err := readHello(h[:])
	if err != nil {
		return err
	}
	// Answered in the dialer's version: 2 when its nonce says so, else 1
	// (a member of 0.4.0).
	na := nonce(versionOf(nd))
	if _, err := c.Write(append(hello(na), mac(secret, "acceptor", purpose, nd, na)...)); err != nil {
		return fmt.Errorf("%w: %w", ErrRefused, err)
	}
	var m [macLen]byte
	if _, err := io.ReadFull(c, m[:]); err != nil {
		return fmt.Errorf("%w: %w", ErrRefused, err)
	}
	if !hmac.Equal(m[:], mac(secret, "dialer", purpose, nd, na)) {
		return ErrRefused
	}
	return nil
}

func checkArgs(secret []byte, purpose string) error {
	if err := Check(secret); err != nil {
		return err
	}
	if len(purpose) > maxPurpose {
		return fmt.Errorf("memberauth: purpose %q is over %d bytes", purpose, maxPurpose)
	}
	return nil
}

func hello(nonce []byte) []byte {
	b := make([]byte, 0, helloLen)
	b = append(b, magic...)
	b = append(b, layout)
	return append(b, nonce...)
}

// nonce is a fresh nonce that says version v: marked for 2; for 1, never
// one that reads as marked.
func nonce(v byte) []byte {
	n := make([]byte, nonceLen)
	for {
		rand.Read(n)
		if v == version {
			copy(n, versionMark)
		}
		if versionOf(n) == v {
			return n
		}
	}
}

// versionOf is the handshake version a nonce says.
func versionOf(nonce []byte) byte {
	if bytes.HasPrefix(nonce, []byte(versionMark)) {
		return version
	}
	return 1
}

// readHello is the nonce of a hello of this layout; ErrRefused for
// anything else, with ErrVersion for a hello of another layout.
func readHello(b []byte) ([]byte, error) {
	if !bytes.HasPrefix(b, []byte(magic)) {
		return nil, ErrRefused
	}
	if l := b[len(magic)]; l != layout {
		return nil, fmt.Errorf("%w: %w: hello layout %d, this member reads %d", ErrRefused, ErrVersion, l, layout)
	}
	return b[len(magic)+1:], nil
}

// mac is HMAC(secret, role purpose nonces), each part length-prefixed so
// no two different inputs run together alike.
func mac(secret []byte, role, purpose string, nd, na []byte) []byte {
	h := hmac.New(sha256.New, secret)
	for _, part := range [][]byte{[]byte(role), []byte(purpose), nd, na} {
		h.Write([]byte{byte(len(part))})
		h.Write(part)
	}
	return h.Sum(nil)
}
