package memberauth

import (
	"errors"
	"io"
	"net"
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
		na := make([]byte, nonceLen)
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
