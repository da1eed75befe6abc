package raftmux

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sluice-rl/sluice/memberauth"

	"github.com/sluice-rl/sluice/cluster"
	"github.com/sluice-rl/sluice/machine"
)

// A connection reaches the layer of the group it names, and only it; one
// naming a group not hosted is closed.
func TestRoutesByGroup(t *testing.T) {
	m, err := Listen("127.0.0.1:0", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	a, _ := m.Layer("a")
	b, _ := m.Layer("b")
	if _, err := m.Layer("a"); err == nil {
		t.Fatal("a second layer for a group")
	}
	go func() {
		c, err := b.Dial(raft.ServerAddress(m.Addr().String()), time.Second)
		if err == nil {
			c.Write([]byte("to b"))
			c.Close()
		}
	}()
	c, err := b.Accept()
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(c)
	if string(got) != "to b" {
		t.Fatalf("b read %q", got)
	}
	select {
	case c := <-a.conns:
		t.Fatalf("a got b's connection %v", c.RemoteAddr())
	default:
	}
	// A group not hosted: the connection is closed at once.
	other := &Layer{mux: m, route: route{Raft, "zzz"}}
	c, err = other.Dial(raft.ServerAddress(m.Addr().String()), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	if n, err := c.Read(make([]byte, 1)); n != 0 || err == nil || strings.Contains(err.Error(), "timeout") {
		t.Fatalf("a connection for an unknown group stays open: %d %v", n, err)
	}
	a.Close()
	if _, err := a.Accept(); err != ErrClosed {
		t.Fatalf("Accept after Close: %v", err)
	}
}

// Two Raft groups of three members hosted by three processes (three
// muxes, one port each): both groups elect leaders and commit entries.
func TestGroupsShareOnePort(t *testing.T) {
	var muxes []*Mux
	for range 3 {
		m, err := Listen("127.0.0.1:0", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		muxes = append(muxes, m)
	}
	var nodes [2][]*cluster.Node
	for g, group := range []string{"g1", "g2"} {
		var peers []cluster.Peer
		for i, m := range muxes {
			peers = append(peers, cluster.Peer{ID: fmt.Sprintf("%sn%d", group, i+1), ClientAddr: fmt.Sprintf("127.0.0.1:%d", 1000+10*g+i),
				RaftAddr: m.Addr().String()})
		}
		for i, m := range muxes {
			layer, err := m.Layer(group)
			if err != nil {
				t.Fatal(err)
			}
			n, err := cluster.NewNode(cluster.Config{NodeID: peers[i].ID, Peers: peers, Dir: filepath.Join(t.TempDir(), peers[i].ID),
				StreamLayer: layer, HeartbeatTimeout: 300 * time.Millisecond, ElectionTimeout: 300 * time.Millisecond,
				LeaderLeaseTimeout: 250 * time.Millisecond, ApplyTimeout: 5 * time.Second, Log: slog.New(slog.DiscardHandler),
				Stores: func(string, *slog.Logger) (raft.LogStore, raft.StableStore, io.Closer, error) {
					s := raft.NewInmemStore()
					return s, s, io.NopCloser(nil), nil
				}}, machine.New(machine.Options{}))
			if err != nil {
				t.Fatal(err)
			}
			defer n.Close()
			nodes[g] = append(nodes[g], n)
		}
	}
	for g := range nodes {
		deadline := time.Now().Add(20 * time.Second)
		for {
			var leader *cluster.Node
			for _, n := range nodes[g] {
				if n.Serving() {
					leader = n
				}
			}
			if leader != nil {
				p := leader.Submit([][][]byte{{[]byte("CL.THROTTLE"), []byte("k"), []byte("5"), []byte("10"), []byte("60")}})
				if err := p.Wait(); err == nil {
					if reply, _ := p.Reply(0); strings.HasPrefix(string(reply), "*5") {
						break
					}
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("group %d committed nothing", g+1)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// With a cluster secret, a group's layer gets only connections that proved
// it for that group: a mux with another secret is refused on both ends.
func TestSecretGuardsTheLayers(t *testing.T) {
	secret := []byte("sixteen bytes at least, shared")
	m, err := Listen("127.0.0.1:0", secret, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	a, _ := m.Layer("a")
	stranger, err := Listen("127.0.0.1:0", []byte("another secret of some length"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer stranger.Close()
	sa, _ := stranger.Layer("a")
	if _, err := sa.Dial(raft.ServerAddress(m.Addr().String()), time.Second); err == nil {
		t.Fatal("a dialer with another secret got through")
	}
	member, err := Listen("127.0.0.1:0", secret, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer member.Close()
	ma, _ := member.Layer("a")
	go func() {
		if c, err := ma.Dial(raft.ServerAddress(m.Addr().String()), time.Second); err == nil {
			c.Write([]byte("hello a"))
			c.Close()
		}
	}()
	c, err := a.Accept()
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := io.ReadAll(c); string(got) != "hello a" {
		t.Fatalf("read %q", got)
	}
	if _, err := Listen("127.0.0.1:0", []byte("short"), nil); err == nil {
		t.Fatal("a short secret was taken")
	}
}

// A member call and a group's Raft share the port but never a listener,
// and a member call proves membership as Raft does: one without the
// secret, or with Raft's proof, is closed before the listener sees it.
func TestMemberCallsApartFromRaft(t *testing.T) {
	secret := []byte("sixteen bytes at least, shared")
	m, err := Listen("127.0.0.1:0", secret, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	rl, _ := m.Layer("g1")
	ml, err := m.Members("g1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Members("g1"); err == nil {
		t.Fatal("a group's member listener was made twice")
	}
	addr := m.Addr().String()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	go func() {
		if c, err := DialMember(ctx, addr, "g1", Guard{Secret: secret}); err == nil {
			c.Write([]byte("member call"))
			c.Close()
		}
	}()
	c, err := ml.Accept()
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := io.ReadAll(c); string(got) != "member call" {
		t.Fatalf("read %q", got)
	}
	select {
	case c := <-rl.conns:
		t.Fatalf("Raft got a member call %v", c.RemoteAddr())
	default:
	}
	// No secret: the handshake never completes; a wrong one fails.
	for _, s := range [][]byte{nil, []byte("another secret of some length")} {
		c, err := DialMember(ctx, addr, "g1", Guard{Secret: s})
		if s != nil {
			if err == nil {
				t.Fatal("a member call with another secret got through")
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		c.Write([]byte("APPLY SLUICE.IMPORT …"))
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		buf, _ := io.ReadAll(c) // the acceptor's hello, then closed
		c.Close()
		if len(buf) > 64 {
			t.Fatalf("a member call without the secret was answered: %q", buf)
		}
	}
	select {
	case c := <-ml.conns:
		t.Fatalf("a member call without the secret reached the listener: %v", c.RemoteAddr())
	case <-time.After(100 * time.Millisecond):
	}
	// Raft's proof is not a member call's: the purposes are bound.
	raw, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	raw.Write(header(route{Member, "g1"}, false))
	if err := memberauth.Dial(raw, secret, purpose(route{Raft, "g1"})); err == nil {
		t.Fatal("Raft's proof opened a member call")
	}
	raw.Close()
	r, err := readHeader(bytes.NewReader(header(route{Member, "g1"}, false)))
	if err != nil || r != (route{Member, "g1"}) {
		t.Fatalf("header round trip: %v %v", r, err)
	}
	if _, err := readHeader(bytes.NewReader([]byte{0, 0})); err == nil {
		t.Fatal("an empty member group was taken")
	}
}

// selfSignedTLS is a server and a client config for 127.0.0.1.
func selfSignedTLS(t *testing.T) (server, client *tls.Config) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "member"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}, MinVersion: tls.VersionTLS12},
		&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
}

// With TLS, Raft and member calls are encrypted after the proof: a dialer
// with the secret and the trust gets through, one speaking plain TCP (or
// not trusting the certificate) does not.
func TestTLSGuardsRaftAndMemberCalls(t *testing.T) {
	srv, cli := selfSignedTLS(t)
	secret := []byte("sixteen bytes at least, shared")
	guard := Guard{Secret: secret, ServerTLS: srv, ClientTLS: cli}
	m, err := ListenAs("127.0.0.1:0", nil, guard, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	rl, _ := m.Layer("g1")
	ml, _ := m.Members("g1")
	addr := m.Addr().String()
	peer, err := ListenAs("127.0.0.1:0", nil, guard, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	pl, _ := peer.Layer("g1")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	go func() {
		if c, err := pl.Dial(raft.ServerAddress(addr), time.Second); err == nil {
			c.Write([]byte("append entries"))
			c.Close()
		}
		if c, err := DialMember(ctx, addr, "g1", guard); err == nil {
			c.Write([]byte("member call"))
			c.Close()
		}
	}()
	for _, l := range []*Layer{rl, ml} {
		c, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		under := c
		for {
			w, ok := under.(interface{ NetConn() net.Conn })
			if _, isTLS := under.(*tls.Conn); isTLS || !ok {
				break
			}
			under = w.NetConn()
		}
		if _, ok := under.(*tls.Conn); !ok {
			t.Fatalf("an accepted %v connection is %T, not TLS", l.route.kind, c)
		}
		got, _ := io.ReadAll(c)
		if want := map[Kind]string{Raft: "append entries", Member: "member call"}[l.route.kind]; string(got) != want {
			t.Fatalf("read %q, want %q", got, want)
		}
	}
	// Plain TCP after the proof, or a dialer not trusting the
	// certificate: no connection.
	if _, err := DialMember(ctx, addr, "g1", Guard{Secret: secret, ClientTLS: &tls.Config{MinVersion: tls.VersionTLS12}}); err == nil {
		t.Fatal("a dialer not trusting the certificate got through")
	}
	if c, err := DialMember(ctx, addr, "g1", Guard{Secret: secret}); err == nil {
		c.Write([]byte("plain member call"))
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		io.ReadAll(c)
		c.Close()
	}
	select {
	case c := <-ml.conns:
		t.Fatalf("a plain connection reached the member listener: %v", c.RemoteAddr())
	case <-time.After(200 * time.Millisecond):
	}
}

// A header of either form reaches its layer — the form 0.4.0 sends, and
// the versioned one — with the secret proven; a versioned header of a
// version this member does not read is closed before the proof and
// counted as bad_version, as is a purpose it does not know.
func TestHeaderVersions(t *testing.T) {
	for _, r := range []route{{Raft, "g1"}, {Member, "g1"}, {Member, string(make([]byte, 255))}} {
		for _, versioned := range []bool{false, true} {
			back, err := readHeader(bytes.NewReader(header(r, versioned)))
			if err != nil || back != r {
				t.Fatalf("%v (versioned %v): %v %v", r, versioned, back, err)
			}
		}
	}
	if _, err := readHeader(bytes.NewReader([]byte{0, 0, HeaderVersion + 1, 1, 2, 'g', '1'})); !errors.Is(err, ErrVersion) {
		t.Fatalf("a newer version: %v", err)
	}
	if _, err := readHeader(bytes.NewReader([]byte{0, 0, HeaderVersion, 7, 2, 'g', '1'})); !errors.Is(err, ErrGroup) {
		t.Fatalf("an unknown purpose: %v", err)
	}
	secret := []byte("sixteen bytes at least, shared")
	m, err := Listen("127.0.0.1:0", secret, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	raftLayer, _ := m.Layer("g1")
	members, _ := m.Members("g1")
	for _, versioned := range []bool{false, true} {
		guard := Guard{Secret: secret, VersionedHeader: versioned}
		go func() {
			if c, err := dial(context.Background(), m.Addr().String(), route{Raft, "g1"}, guard); err == nil {
				c.Write([]byte("raft"))
				c.Close()
			}
		}()
		go func() {
			if c, err := DialMember(context.Background(), m.Addr().String(), "g1", guard); err == nil {
				c.Write([]byte("member"))
				c.Close()
			}
		}()
		for _, l := range []*Layer{raftLayer, members} {
			c, err := l.Accept()
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(c)
			if want := map[Kind]string{Raft: "raft", Member: "member"}[l.route.kind]; string(got) != want {
				t.Fatalf("versioned %v: %v's layer read %q", versioned, l.route.kind, got)
			}
		}
	}
	for _, h := range [][]byte{{0, 0, HeaderVersion + 1, 1, 2, 'g', '1'}, {0, 0, 0, 0, 2, 'g', '1'}} {
		c, err := net.Dial("tcp", m.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		c.Write(h)
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if n, _ := io.ReadAll(c); len(n) != 0 {
			t.Fatalf("a header of version %d was answered: %q", h[2], n)
		}
		c.Close()
	}
	if got := m.Refused()["bad_version"]; got != 2 {
		t.Fatalf("bad_version refusals: %d (%v)", got, m.Refused())
	}
}
