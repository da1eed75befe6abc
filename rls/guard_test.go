package rls

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
)

// The guard refuses a call without the password on its headers, counts
// the calls waiting for their message (apart for the open methods) up to
// its budget, and its sweep cuts the connection of a call that sent none
// in time — only that one.
func TestGuard(t *testing.T) {
	var cut []string
	g := NewGuard(GuardConfig{Password: "pw", BodyTimeout: time.Hour, MaxWaiting: 2,
		CloseConn: func(a net.Addr) bool { cut = append(cut, a.String()); return true }})
	defer g.Close()
	from := func(port int) context.Context {
		return peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port}})
	}
	rl := func(auth string) *tap.Info {
		md := metadata.MD{}
		if auth != "" {
			md.Set("authorization", auth)
		}
		return &tap.Info{FullMethodName: "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit", Header: md}
	}
	for _, auth := range []string{"", "Bearer wrong", "pw", "Basic pw"} {
		if _, err := g.tap(from(1), rl(auth)); status.Code(err) != codes.Unauthenticated {
			t.Fatalf("authorization %q: %v", auth, err)
		}
	}
	if _, err := g.tap(from(1), rl("Bearer pw")); err != nil { // never sends its message
		t.Fatal(err)
	}
	quick, err := g.tap(from(2), rl("Bearer pw"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.tap(from(3), rl("Bearer pw")); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("past the waiting budget: %v", err)
	}
	health := &tap.Info{FullMethodName: "/grpc.health.v1.Health/Check", Header: metadata.MD{}}
	if _, err := g.tap(from(4), health); err != nil {
		t.Fatalf("a health check beside a full budget of rate limit calls: %v", err)
	}
	if _, err := g.unary(quick, nil, nil, func(context.Context, any) (any, error) { return nil, nil }); err != nil {
		t.Fatal(err)
	}
	if g.Waiting() != 2 {
		t.Fatalf("waiting %d, want 2 (the slow call, the health check)", g.Waiting())
	}
	g.sweep(time.Now().Add(time.Minute).UnixNano())
	if len(cut) != 0 {
		t.Fatalf("cut %v before the timeout", cut)
	}
	g.sweep(time.Now().Add(2 * time.Hour).UnixNano())
	if len(cut) != 2 || cut[0] != "127.0.0.1:1" || cut[1] != "127.0.0.1:4" || g.Waiting() != 0 || g.Overdue() != 2 {
		t.Fatalf("after the timeout: cut %v, waiting %d, overdue %d", cut, g.Waiting(), g.Overdue())
	}
}
