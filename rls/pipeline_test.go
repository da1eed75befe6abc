package rls

import (
	"bytes"
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// A call still queued when its caller's deadline passes is never sent
// (notSent: another leader may be asked); one a pipeline took is sent, and
// its caller's deadline makes its outcome unknown, not unsent.
func TestPipelinerNeverSendsAGivenUpCall(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	// A leader that reads everything and answers only go-redis's HELLO
	// (refused: the client goes on with RESP2).
	var mu sync.Mutex
	var got bytes.Buffer
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				buf := make([]byte, 4096)
				for {
					n, err := c.Read(buf)
					mu.Lock()
					got.Write(buf[:n])
					mu.Unlock()
					if bytes.Contains(buf[:n], []byte("hello")) {
						c.Write([]byte("-ERR unknown command 'hello'\r\n"))
					}
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	p := newPipeliner(redis.NewClient(&redis.Options{Addr: ln.Addr().String(), Protocol: 2, DisableIdentity: true,
		MaxRetries: -1, PoolSize: forwardPipelines, ContextTimeoutEnabled: true}), 2*time.Second)
	defer p.close()
	// Every pipeline busy with a call that hangs: each sent before the
	// next is queued, so each is a pipeline's own.
	sent := func() int {
		mu.Lock()
		defer mu.Unlock()
		return bytes.Count(got.Bytes(), []byte("PING"))
	}
	var wg sync.WaitGroup
	for i := range forwardPipelines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
			defer cancel()
			_, err := p.send(ctx, []any{[]byte("PING"), []byte{byte('a' + i)}})
			if unsent(err) || err == nil {
				t.Errorf("a call a pipeline took: %v (want an outcome unknown)", err)
			}
		}()
		deadline := time.Now().Add(time.Second)
		for sent() != i+1 {
			if time.Now().After(deadline) {
				t.Fatalf("call %d was not sent (%d sent)", i, sent())
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	// This one waits in the queue; its caller gives up first.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := p.send(ctx, []any{[]byte("PING"), []byte("queued")}); !errors.Is(err, errGaveUp) || !unsent(err) {
		t.Fatalf("a call given up in the queue: %v", err)
	}
	// A live call queued behind it: the pipeline that takes both must
	// send this one alone.
	wg.Add(1)
	go func() {
		defer wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		p.send(ctx, []any{[]byte("PING"), []byte("live")})
	}()
	for end := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		mu.Lock()
		live, leaked := bytes.Contains(got.Bytes(), []byte("live")), bytes.Contains(got.Bytes(), []byte("queued"))
		mu.Unlock()
		if leaked {
			t.Fatal("the call given up in the queue was sent")
		}
		if live {
			break
		}
		if time.Now().After(end) {
			t.Fatal("the live call queued behind it was never sent")
		}
	}
	wg.Wait()
}
