package memberauth

import (
	"crypto/hmac"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"testing"
)

var (
	secret = []byte("0123456789abcdef-the-cluster")
	other  = []byte("0123456789abcdef-another-one")
)

// both runs the two sides over a pipe and returns their errors.
func both(dSecret, aSecret []byte, dPurpose, aPurpose string) (dial, accept error) {
	d, a := net.Pipe()
	defer d.Close()
	defer a.Close()
	done := make(chan error, 1)
	go func() {
		err := Accept(a, aSecret, aPurpose)
		if err != nil {
			a.Close() // as the callers do: nothing more crosses it
		}
		done <- err
	}()
	dial = Dial(d, dSecret, dPurpose)
	if dial != nil {
		d.Close()
	}
	return dial, <-done
}

func TestHandshake(t *testing.T) {
	if d, a := both(secret, secret, "raft/g1", "raft/g1"); d != nil || a != nil {
		t.Fatalf("the same secret: dial %v, accept %v", d, a)
	}
	for _, tc := range []struct {
		name           string
		ds, as         []byte
		dp, ap         string
		dialerRefuses  bool
		acceptorRefuse bool
	}{
		{"the acceptor lacks the secret", secret, other, "raft/g1", "raft/g1", true, true},
		{"the dialer lacks the secret", other, secret, "raft/g1", "raft/g1", true, true},
		{"another group's connection", secret, secret, "raft/g1", "raft/g2", true, true},
	} {
		d, a := both(tc.ds, tc.as, tc.dp, tc.ap)
		if !errors.Is(d, ErrRefused) || !errors.Is(a, ErrRefused) {
			t.Fatalf("%s: dial %v, accept %v", tc.name, d, a)
		}
	}
	if err := Dial(nil, []byte("short"), "x"); !errors.Is(err, ErrSecret) {
		t.Fatalf("a short secret: %v", err)
	}
}

// recordDialer runs an honest dialer against a fake acceptor that answers
// as a real one would, and returns what the dialer sent in its two
// messages (for replays and cuts).
func recordDialer(t *testing.T) (helloMsg, proof []byte) {
	t.Helper()
	d, a := net.Pipe()
	defer d.Close()
	defer a.Close()
	got := make(chan [2][]byte, 1)
	go func() {
		var h [helloLen]byte
		io.ReadFull(a, h[:])
		nd, _ := readHello(h[:])
		v := versionOf(nd)
		na := nonce(v)
		a.Write(append(hello(na), mac(secret, "acceptor", "p", nd, na)...))
		var m [macLen]byte
		io.ReadFull(a, m[:])
		got <- [2][]byte{h[:], m[:]}
	}()
	if err := Dial(d, secret, "p"); err != nil {
		t.Fatal(err)
	}
	r := <-got
	return r[0], r[1]
}

// Every cut or changed byte of what a dialer sends is refused by the
// acceptor, and a recorded proof does not open another connection (the
// acceptor's nonce is new each time).
func TestEveryCutOrFlippedByteIsRefused(t *testing.T) {
	helloMsg, proof := recordDialer(t)
	stream := append(append([]byte{}, helloMsg...), proof...)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	try := func(b []byte) error {
		d, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		a, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		d.Write(b)
		d.(*net.TCPConn).CloseWrite() // and nothing more
		return Accept(a, secret, "p")
	}
	if err := try(stream); !errors.Is(err, ErrRefused) {
		t.Fatalf("a replayed handshake: %v", err)
	}
	for cut := range len(stream) {
		if err := try(stream[:cut]); !errors.Is(err, ErrRefused) {
			t.Fatalf("cut at %d: %v", cut, err)
		}
	}
	for i := range helloLen - nonceLen { // the magic and the version
		b := append([]byte{}, stream...)
		b[i] ^= 0x40
		if err := try(b); !errors.Is(err, ErrRefused) {
			t.Fatalf("byte %d flipped: %v", i, err)
		}
	}
}

// A hello of another version is refused with ErrVersion, even with a
// proof that would hold for this one: an acceptor answers nothing to it,
// a dialer sends no proof back.
func TestAnotherVersionIsRefused(t *testing.T) {
	const purpose = "raft/g1"
	// A dialer of version 2 that proves the secret as version 1 does.
	d, a := net.Pipe()
	go func() {
		defer d.Close()
		nd := make([]byte, nonceLen)
		hello := append(append([]byte(magic), 2), nd...)
		if _, err := d.Write(hello); err != nil {
			return
		}
		reply := make([]byte, helloLen+macLen)
		if _, err := io.ReadFull(d, reply); err != nil {
			return
		}
		d.Write(mac(secret, "dialer", purpose, nd, reply[len(magic)+1:helloLen]))
	}()
	err := Accept(a, secret, purpose)
	a.Close()
	if !errors.Is(err, ErrVersion) || !errors.Is(err, ErrRefused) {
		t.Fatalf("a dialer of version 2: %v", err)
	}
	// An acceptor of version 2 that proves the secret as version 1 does.
	d2, a2 := net.Pipe()
	sent := make(chan int, 1)
	go func() {
		defer a2.Close()
		h := make([]byte, helloLen)
		if _, err := io.ReadFull(a2, h); err != nil {
			sent <- 0
			return
		}
		na := make([]byte, nonceLen)
		a2.Write(append(append(append([]byte(magic), 2), na...), mac(secret, "acceptor", purpose, h[len(magic)+1:], na)...))
		proof := make([]byte, macLen)
		n, _ := io.ReadFull(a2, proof)
		sent <- n
	}()
	err = Dial(d2, secret, purpose)
	d2.Close()
	if !errors.Is(err, ErrVersion) || !errors.Is(err, ErrRefused) {
		t.Fatalf("an acceptor of version 2: %v", err)
	}
	if n := <-sent; n != 0 {
		t.Fatalf("the dialer sent %d bytes of proof to an acceptor of another version", n)
	}
}

// v1Dial and v1Accept are the handshake as 0.4.0 speaks it: nonces
// without the version's mark, MACs without the version.
func v1Dial(c net.Conn, purpose string) error {
	nd := nonce(1)
	c.Write(hello(nd))
	reply := make([]byte, helloLen+macLen)
	if _, err := io.ReadFull(c, reply); err != nil {
		return err
	}
	na := reply[len(magic)+1 : helloLen]
	if !hmac.Equal(reply[helloLen:], mac(secret, "acceptor", purpose, nd, na)) {
		return ErrRefused
	}
	_, err := c.Write(mac(secret, "dialer", purpose, nd, na))
	return err
}

func v1Accept(c net.Conn, purpose string) error {
	h := make([]byte, helloLen)
	if _, err := io.ReadFull(c, h); err != nil {
		return err
	}
	nd, na := h[len(magic)+1:], nonce(1)
	c.Write(append(hello(na), mac(secret, "acceptor", purpose, nd, na)...))
	m := make([]byte, macLen)
	if _, err := io.ReadFull(c, m); err != nil {
		return err
	}
	if !hmac.Equal(m, mac(secret, "dialer", purpose, nd, na)) {
		return ErrRefused
	}
	return nil
}

// A member of this version and one of 0.4.0 prove membership to each
// other either way round (version 1, by the rule that lets a cluster be
// upgraded member by member); two of this version speak version 2.
func TestVersionsMeet(t *testing.T) {
	const purpose = "raft/g1"
	run := func(dial, accept func(net.Conn) error) (error, error) {
		d, a := net.Pipe()
		defer d.Close()
		defer a.Close()
		done := make(chan error, 1)
		go func() { done <- accept(a) }()
		de := dial(d)
		return de, <-done
	}
	dialNew := func(c net.Conn) error { return Dial(c, secret, purpose) }
	acceptNew := func(c net.Conn) error { return Accept(c, secret, purpose) }
	if d, a := run(func(c net.Conn) error { return v1Dial(c, purpose) }, acceptNew); d != nil || a != nil {
		t.Fatalf("a 0.4.0 dialer: dial %v, accept %v", d, a)
	}
	if d, a := run(dialNew, func(c net.Conn) error { return v1Accept(c, purpose) }); d != nil || a != nil {
		t.Fatalf("a 0.4.0 acceptor: dial %v, accept %v", d, a)
	}
	// Two of this version speak version 2: both nonces carry the mark.
	d, m1 := net.Pipe()
	m2, a := net.Pipe()
	accepted := make(chan error, 1)
	go func() { accepted <- Accept(a, secret, purpose); a.Close() }()
	marks := make(chan [2]byte, 1)
	go func() {
		defer m1.Close()
		defer m2.Close()
		h, r, p := make([]byte, helloLen), make([]byte, helloLen+macLen), make([]byte, macLen)
		io.ReadFull(m1, h)
		m2.Write(h)
		io.ReadFull(m2, r)
		m1.Write(r)
		io.ReadFull(m1, p)
		m2.Write(p)
		marks <- [2]byte{versionOf(h[len(magic)+1:]), versionOf(r[len(magic)+1 : helloLen])}
	}()
	if err := Dial(d, secret, purpose); err != nil {
		t.Fatal(err)
	}
	if err := <-accepted; err != nil {
		t.Fatal(err)
	}
	if v := <-marks; v != [2]byte{version, version} {
		t.Fatalf("two members of this version spoke versions %v", v)
	}
}

// The network cannot change the version: a mark taken off a nonce, or put
// on one, leaves the MACs unequal, and the handshake is refused.
func TestVersionCannotBeChangedOnTheWay(t *testing.T) {
	const purpose = "raft/g1"
	for _, tc := range []struct {
		name        string
		dialer      func(net.Conn) error
		toAcceptor  func([]byte)
		toDialer    func([]byte)
		acceptorOld bool
	}{
		{name: "the dialer's mark taken off", dialer: func(c net.Conn) error { return Dial(c, secret, purpose) },
			toAcceptor: func(h []byte) { h[len(magic)+1] ^= 1 }},
		{name: "the acceptor's mark taken off", dialer: func(c net.Conn) error { return Dial(c, secret, purpose) },
			toDialer: func(r []byte) { r[len(magic)+1] ^= 1 }},
		{name: "a mark put on an old dialer's nonce", dialer: func(c net.Conn) error { return v1Dial(c, purpose) },
			toAcceptor: func(h []byte) { copy(h[len(magic)+1:], versionMark) }},
	} {
		d, m1 := net.Pipe()
		m2, a := net.Pipe()
		accepted := make(chan error, 1)
		go func() { accepted <- Accept(a, secret, purpose); a.Close() }()
		go func() { // the network between them
			defer m1.Close()
			defer m2.Close()
			h := make([]byte, helloLen)
			if _, err := io.ReadFull(m1, h); err != nil {
				return
			}
			if tc.toAcceptor != nil {
				tc.toAcceptor(h)
			}
			m2.Write(h)
			r := make([]byte, helloLen+macLen)
			if _, err := io.ReadFull(m2, r); err != nil {
				return
			}
			if tc.toDialer != nil {
				tc.toDialer(r)
			}
			m1.Write(r)
			p := make([]byte, macLen)
			if _, err := io.ReadFull(m1, p); err != nil {
				return
			}
			m2.Write(p)
		}()
		de := tc.dialer(d)
		d.Close()
		ae := <-accepted
		if de == nil && ae == nil {
			t.Errorf("%s: both ends took the handshake", tc.name)
		}
		if ae == nil {
			t.Errorf("%s: the acceptor took it (dialer: %v)", tc.name, de)
		}
	}
}

// The placeholder secret deploy/envoy ships is refused as a secret (it is
// in every clone), and the file holds exactly that placeholder.
func TestThePlaceholderSecretIsRefused(t *testing.T) {
	shipped, err := os.ReadFile("../deploy/envoy/cluster-secret")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimRight(string(shipped), "\r\n"); got != Placeholder {
		t.Fatalf("deploy/envoy/cluster-secret holds %q, not the placeholder Check refuses", got)
	}
	if err := Check([]byte(Placeholder)); !errors.Is(err, ErrPlaceholder) {
		t.Fatalf("Check(the placeholder) = %v", err)
	}
	if err := Check([]byte("a secret of our own, long enough")); err != nil {
		t.Fatal(err)
	}
}
