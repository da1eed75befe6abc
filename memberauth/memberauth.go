// Package memberauth makes the two ends of a connection to a member port
// prove they hold the cluster's secret (--cluster-secret-file) before
// anything else crosses it: a process that cannot prove membership cannot
// append to a group's log, vote, take a snapshot or make a member call,
// and a member never talks to a listener that is not one. Package raftmux
// runs it on every connection of the member port.
//
// The handshake is a mutual challenge and response, versioned, bound to
// the connection's purpose (a group's Raft, or member calls for it):
//
//	dialer → acceptor: "SLMA" version(1) nonce_d(16)
//	acceptor → dialer: "SLMA" version(1) nonce_a(16) HMAC(secret, "acceptor" purpose nonce_d nonce_a)
//	dialer → acceptor: HMAC(secret, "dialer" purpose nonce_d nonce_a)
//
// HMAC is HMAC-SHA256. Fresh nonces on both sides make a recorded
// handshake useless on another connection. One version is spoken: a hello
// of another is refused (ErrVersion) before anything is answered, so a
// version cannot be stripped by the network — there is nothing to fall
// back to. A next version must be chosen inside what the MACs cover (the
// dialer's offer and the acceptor's choice), so that it cannot be either. The secret is never sent. It
// proves membership; it does not hide the traffic — with --tls-cert-file
// the member port speaks TLS after it (raftmux.Guard).
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
	// ErrRefused: the other end did not prove it holds the secret, or
	// spoke something else.
	ErrRefused = errors.New("memberauth: the other end did not prove cluster membership")
	// ErrVersion, with ErrRefused: the other end speaks another version
	// of the handshake. Nothing is answered to it.
	ErrVersion = errors.New("memberauth: the other end speaks another version of the handshake")
)

// MinSecret is the shortest secret taken.
const MinSecret = 16

// Timeout bounds a handshake.
const Timeout = 5 * time.Second

const (
	magic      = "SLMA"
	version    = 1
	nonceLen   = 16
	helloLen   = len(magic) + 1 + nonceLen
	macLen     = sha256.Size
	maxPurpose = 255
)

// Check reports whether secret can be used.
func Check(secret []byte) error {
	if len(secret) < MinSecret {
		return ErrSecret
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
	var nd [nonceLen]byte
	rand.Read(nd[:])
	if _, err := c.Write(hello(nd[:])); err != nil {
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
	if !hmac.Equal(reply[helloLen:], mac(secret, "acceptor", purpose, nd[:], na)) {
		return ErrRefused
	}
	if _, err := c.Write(mac(secret, "dialer", purpose, nd[:], na)); err != nil {
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
	var na [nonceLen]byte
	rand.Read(na[:])
	if _, err := c.Write(append(hello(na[:]), mac(secret, "acceptor", purpose, nd, na[:])...)); err != nil {
		return fmt.Errorf("%w: %w", ErrRefused, err)
	}
	var m [macLen]byte
	if _, err := io.ReadFull(c, m[:]); err != nil {
		return fmt.Errorf("%w: %w", ErrRefused, err)
	}
	if !hmac.Equal(m[:], mac(secret, "dialer", purpose, nd, na[:])) {
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
	b = append(b, version)
	return append(b, nonce...)
}

// readHello is the nonce of a hello of this version; ErrRefused for
// anything else, with ErrVersion for a hello of another version.
func readHello(b []byte) ([]byte, error) {
	if !bytes.HasPrefix(b, []byte(magic)) {
		return nil, ErrRefused
	}
	if v := b[len(magic)]; v != version {
		return nil, fmt.Errorf("%w: %w: version %d, this member speaks %d", ErrRefused, ErrVersion, v, version)
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
