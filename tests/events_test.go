package tests

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

type throttled struct {
	Command    string `json:"command"`
	Key        string `json:"key"`
	Rule       string `json:"rule"`
	Limit      int64  `json:"limit"`
	RetryAfter int64  `json:"retry_after"`
}

// refuse makes key refuse: a GCRA limit of one per minute, asked twice.
func refuse(t *testing.T, c *redis.Client, key string) {
	t.Helper()
	for range 2 {
		if err := c.Do(ctx(t), "CL.THROTTLE", key, 0, 1, 60).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

func nextEvent(t *testing.T, ch <-chan *redis.Message) (throttled, string) {
	t.Helper()
	select {
	case m := <-ch:
		var ev throttled
		if err := json.Unmarshal([]byte(m.Payload), &ev); err != nil {
			t.Fatalf("message %q is not the event JSON: %v", m.Payload, err)
		}
		return ev, m.Channel
	case <-time.After(10 * time.Second):
		t.Fatal("no event within 10s")
	}
	return throttled{}, ""
}

// Every refusal is published on sluice:throttled, to RESP2 and RESP3
// subscribers and to patterns.
func TestThrottledEvents(t *testing.T) {
	s := StartServer(t, "--rules", writeRules(t, "api.yaml", apiRules))
	c := s.Client()
	setClock(t, c, future)
	for _, proto := range []int{2, 3} {
		sub := s.Client(func(o *redis.Options) { o.Protocol = proto }).Subscribe(ctx(t), "sluice:throttled")
		if _, err := sub.Receive(ctx(t)); err != nil {
			t.Fatal(err)
		}
		psub := s.Client(func(o *redis.Options) { o.Protocol = proto }).PSubscribe(ctx(t), "sluice:*")
		if _, err := psub.Receive(ctx(t)); err != nil {
			t.Fatal(err)
		}
		key := fmt.Sprintf("ev:%d", proto)
		refuse(t, c, key)
		for _, ch := range []<-chan *redis.Message{sub.Channel(), psub.Channel()} {
			ev, channel := nextEvent(t, ch)
			if channel != "sluice:throttled" || ev != (throttled{Command: "cl.throttle", Key: key, Limit: 1, RetryAfter: 60}) {
				t.Fatalf("RESP%d: %s %+v", proto, channel, ev)
			}
		}
		// RL.CHECK names its rule.
		for range 3 {
			c.Do(ctx(t), "RL.CHECK", "api", "DESCRIPTOR", "endpoint", "/e")
		}
		ev, _ := nextEvent(t, sub.Channel())
		if ev.Command != "rl.check" || ev.Key != "api" || ev.Rule != "per-endpoint" || ev.Limit != 2 {
			t.Fatalf("RESP%d RL.CHECK event %+v", proto, ev)
		}
		nextEvent(t, psub.Channel())
		sub.Close()
		psub.Close()
		advance(t, c, time.Hour)
	}
}

// redis-cli SUBSCRIBE prints the events.
func TestThrottledEventsRedisCLI(t *testing.T) {
	s := StartServer(t)
	c := s.Client()
	setClock(t, c, future)
	host, port, _ := net.SplitHostPort(s.Addr)
	cmd := exec.Command("redis-cli", "-h", host, "-p", port, "SUBSCRIBE", "sluice:throttled")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	eventually(t, "redis-cli subscribed", func() bool {
		v, _ := c.Do(ctx(t), "PUBSUB", "NUMSUB", "sluice:throttled").Slice()
		return len(v) == 2 && v[1] == int64(1)
	})
	refuse(t, c, "cli-key")
	deadline := time.After(10 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("redis-cli exited")
			}
			if strings.Contains(l, `"key":"cli-key"`) && strings.Contains(l, `"command":"cl.throttle"`) {
				return
			}
		case <-deadline:
			t.Fatal("redis-cli printed no event")
		}
	}
}

// A subscriber that never reads is dropped at its output limit; the
// limiter commands all complete meanwhile.
func TestSlowSubscriberDropped(t *testing.T) {
	s := StartServer(t, "--client-output-buffer-limit-pubsub", "65536")
	c := s.Client()
	setClock(t, c, future)
	raw, err := net.Dial("tcp", s.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if tc, ok := raw.(*net.TCPConn); ok {
		tc.SetReadBuffer(4096) // a small window, so the server's queue grows
	}
	fmt.Fprintf(raw, "SUBSCRIBE sluice:throttled\r\n")
	eventually(t, "the raw subscriber", func() bool {
		v, _ := c.Do(ctx(t), "PUBSUB", "NUMSUB", "sluice:throttled").Slice()
		return len(v) == 2 && v[1] == int64(1)
	})
	key := strings.Repeat("k", 300)
	const n = 60000
	pipe := c.Pipeline()
	for range n {
		pipe.Do(ctx(t), "CL.THROTTLE", key, 0, 1, 3600)
	}
	cmds, err := pipe.Exec(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(cmds) != n {
		t.Fatalf("%d replies, want %d", len(cmds), n)
	}
	eventually(t, "the slow subscriber dropped", func() bool {
		v, _ := c.Do(ctx(t), "PUBSUB", "NUMSUB", "sluice:throttled").Slice()
		return len(v) == 2 && v[1] == int64(0)
	})
	if !strings.Contains(s.Logs(), "dropping a pub/sub subscriber over its output limit") {
		t.Fatalf("no log of the drop:\n%s", s.Logs())
	}
}

// RESP2 subscribed mode allows only the subscription commands, and PING
// answers as a message.
func TestSubscribedMode(t *testing.T) {
	s := StartServer(t)
	raw, err := net.Dial("tcp", s.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	r := bufio.NewReader(raw)
	fmt.Fprintf(raw, "SUBSCRIBE a b\r\nGET x\r\nPING\r\nUNSUBSCRIBE\r\nGET x\r\n")
	var got []string
	for len(got) == 0 || got[len(got)-1] != "$-1" {
		raw.SetReadDeadline(time.Now().Add(10 * time.Second))
		l, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("after %q: %v", got, err)
		}
		got = append(got, strings.TrimRight(l, "\r\n"))
	}
	text := strings.Join(got, "|")
	for _, want := range []string{
		"*3|$9|subscribe|$1|a|:1|*3|$9|subscribe|$1|b|:2",
		"-ERR Can't execute 'get': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context",
		"*2|$4|pong|$0|",
		"*3|$11|unsubscribe|$1|a|:1|*3|$11|unsubscribe|$1|b|:0",
		"$-1",
	} {
		if !strings.Contains(text, want) {
			t.Fatalf("subscribed-mode exchange %q lacks %q", text, want)
		}
	}
}

// With an idle timeout, a subscriber that hears nothing for longer stays
// connected, as in Redis (which exempts Pub/Sub clients), while a plain
// client idle as long is closed: a subscription may wait hours for a
// message.
func TestIdleTimeoutSparesSubscribers(t *testing.T) {
	s := StartServer(t, "--timeout", "1s")
	c := s.Client()
	sub := c.Subscribe(ctx(t), "news")
	defer sub.Close()
	if _, err := sub.Receive(ctx(t)); err != nil {
		t.Fatalf("SUBSCRIBE: %v", err)
	}
	// A plain client connected after the subscription: once the timeout
	// has closed it, the subscriber has been idle longer still.
	idle := dialRaw(t, s.Addr)
	if n, err := idle.Read(make([]byte, 1)); n != 0 || err == nil {
		t.Fatalf("idle plain client: read %d bytes, %v; want it closed", n, err)
	}
	if n, err := c.Publish(ctx(t), "news", "still here").Result(); err != nil || n != 1 {
		t.Fatalf("PUBLISH = %d, %v; want the subscriber still connected", n, err)
	}
	msg, err := sub.ReceiveMessage(ctx(t))
	if err != nil || msg.Payload != "still here" {
		t.Fatalf("message after the idle timeout: %v, %v", msg, err)
	}
}

// THROTTLED.TOP reports the most-refused keys with their counts.
func TestThrottledTop(t *testing.T) {
	s := StartServer(t)
	c := s.Client()
	setClock(t, c, future)
	exact := map[string]int{"hot:a": 30, "hot:b": 20, "hot:c": 10, "hot:d": 3}
	for k, n := range exact {
		c.Do(ctx(t), "CL.THROTTLE", k, 0, 1, 3600) // admitted
		for range n {
			c.Do(ctx(t), "CL.THROTTLE", k, 0, 1, 3600)
		}
	}
	v, err := c.Do(ctx(t), "THROTTLED.TOP", 3).Slice()
	if err != nil {
		t.Fatal(err)
	}
	want := [][2]any{{"hot:a", int64(30)}, {"hot:b", int64(20)}, {"hot:c", int64(10)}}
	if len(v) != 3 {
		t.Fatalf("THROTTLED.TOP 3: %#v", v)
	}
	for i, w := range want {
		pair := v[i].([]any)
		if pair[0] != w[0] || pair[1] != w[1] {
			t.Fatalf("rank %d: %#v, want %v", i, pair, w)
		}
	}
	if err := c.Do(ctx(t), "THROTTLED.TOP", 0).Err(); err == nil {
		t.Fatal("count 0 accepted")
	}
}
