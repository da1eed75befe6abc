// Package pubsub is Redis publish/subscribe for one server: channels and
// glob patterns, fire-and-forget delivery. A publisher never waits for a
// subscriber: each message is handed to the subscriber's Sink, which
// queues it without blocking and drops the subscriber once its queue passes
// its limit (Redis' client-output-buffer-limit pubsub).
package pubsub

import (
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
)

// Sink takes a subscriber's encoded messages. Push must not block; it
// reports false when the subscriber was dropped (over its output limit, or
// gone).
type Sink interface {
	Push(msg []byte) bool
}

// Matcher is a compiled glob pattern.
type Matcher interface {
	Match(s []byte) bool
}

// Subscriber is one connection's subscriptions. Its methods are called
// from that connection's goroutine; the hub reads it under its own lock.
type Subscriber struct {
	sink Sink
	// resp3 chooses push messages (>) over arrays.
	resp3    atomic.Bool
	channels map[string]struct{}
	patterns map[string]struct{}
}

// NewSubscriber is a subscriber delivering to sink.
func NewSubscriber(sink Sink) *Subscriber {
	return &Subscriber{sink: sink, channels: map[string]struct{}{}, patterns: map[string]struct{}{}}
}

// SetRESP3 chooses the message encoding (HELLO 3: push messages).
func (s *Subscriber) SetRESP3(on bool) { s.resp3.Store(on) }

// Count is how many channels and patterns s is subscribed to.
func (s *Subscriber) Count() int { return len(s.channels) + len(s.patterns) }

// Channels lists s's channels (sorted), for an UNSUBSCRIBE of all.
func (s *Subscriber) Channels() []string { return sortedKeys(s.channels) }

// Patterns lists s's patterns (sorted).
func (s *Subscriber) Patterns() []string { return sortedKeys(s.patterns) }

func sortedKeys(m map[string]struct{}) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

type pattern struct {
	m    Matcher
	subs map[*Subscriber]struct{}
}

// Hub routes messages to subscribers.
type Hub struct {
	mu       sync.RWMutex
	channels map[string]map[*Subscriber]struct{}
	patterns map[string]*pattern
	// active counts subscriptions, so a publisher with no audience costs
	// one atomic load.
	active atomic.Int64
}

// New is an empty hub.
func New() *Hub {
	return &Hub{channels: map[string]map[*Subscriber]struct{}{}, patterns: map[string]*pattern{}}
}

// Active reports whether anyone subscribes to anything.
// A nil hub has no subscribers.
func (h *Hub) Active() bool { return h != nil && h.active.Load() > 0 }

// Subscribe adds channel to s; it reports false if s already had it.
func (h *Hub) Subscribe(s *Subscriber, channel string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := s.channels[channel]; ok {
		return false
	}
	s.channels[channel] = struct{}{}
	subs := h.channels[channel]
	if subs == nil {
		subs = map[*Subscriber]struct{}{}
		h.channels[channel] = subs
	}
	subs[s] = struct{}{}
	h.active.Add(1)
	return true
}

// Unsubscribe removes channel from s; it reports whether s had it.
func (h *Hub) Unsubscribe(s *Subscriber, channel string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := s.channels[channel]; !ok {
		return false
	}
	delete(s.channels, channel)
	subs := h.channels[channel]
	delete(subs, s)
	if len(subs) == 0 {
		delete(h.channels, channel)
	}
	h.active.Add(-1)
	return true
}

// PSubscribe adds a pattern (compiled as m) to s.
func (h *Hub) PSubscribe(s *Subscriber, pat string, m Matcher) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := s.patterns[pat]; ok {
		return false
	}
	s.patterns[pat] = struct{}{}
	p := h.patterns[pat]
	if p == nil {
		p = &pattern{m: m, subs: map[*Subscriber]struct{}{}}
		h.patterns[pat] = p
	}
	p.subs[s] = struct{}{}
	h.active.Add(1)
	return true
}

// PUnsubscribe removes a pattern from s.
func (h *Hub) PUnsubscribe(s *Subscriber, pat string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := s.patterns[pat]; !ok {
		return false
	}
	delete(s.patterns, pat)
	if p := h.patterns[pat]; p != nil {
		delete(p.subs, s)
		if len(p.subs) == 0 {
			delete(h.patterns, pat)
		}
	}
	h.active.Add(-1)
	return true
}

// Drop removes every subscription of s (its connection closed).
func (h *Hub) Drop(s *Subscriber) {
	if h == nil {
		return
	}
	for _, c := range s.Channels() {
		h.Unsubscribe(s, c)
	}
	for _, p := range s.Patterns() {
		h.PUnsubscribe(s, p)
	}
}

// Publish sends msg on channel to every subscriber of it and of a pattern
// matching it, and returns how many received it (a subscriber matching by
// several patterns counts once per match, as in Redis).
func (h *Hub) Publish(channel string, msg []byte) int {
	if !h.Active() {
		return 0
	}
	h.mu.RLock()
	defer h.mu.RUnlock()
	n := 0
	var enc [2][]byte // RESP2, RESP3
	for s := range h.channels[channel] {
		k := s.kind()
		if enc[k] == nil {
			enc[k] = appendMessage(nil, k == 1, "", channel, msg)
		}
		if s.sink.Push(enc[k]) {
			n++
		}
	}
	for pat, p := range h.patterns {
		if len(p.subs) == 0 || !p.m.Match([]byte(channel)) {
			continue
		}
		var penc [2][]byte
		for s := range p.subs {
			k := s.kind()
			if penc[k] == nil {
				penc[k] = appendMessage(nil, k == 1, pat, channel, msg)
			}
			if s.sink.Push(penc[k]) {
				n++
			}
		}
	}
	return n
}

func (s *Subscriber) kind() int {
	if s.resp3.Load() {
		return 1
	}
	return 0
}

// appendMessage encodes a message, or with a pattern a pmessage.
func appendMessage(dst []byte, resp3 bool, pat, channel string, msg []byte) []byte {
	n := 3
	if pat != "" {
		n = 4
	}
	if resp3 {
		dst = append(dst, '>')
	} else {
		dst = append(dst, '*')
	}
	dst = strconv.AppendInt(dst, int64(n), 10)
	dst = append(dst, '\r', '\n')
	if pat != "" {
		dst = appendBulk(dst, "pmessage")
		dst = appendBulk(dst, pat)
	} else {
		dst = appendBulk(dst, "message")
	}
	dst = appendBulk(dst, channel)
	return appendBulk(dst, string(msg))
}

func appendBulk(dst []byte, s string) []byte {
	dst = append(dst, '$')
	dst = strconv.AppendInt(dst, int64(len(s)), 10)
	dst = append(dst, '\r', '\n')
	dst = append(dst, s...)
	return append(dst, '\r', '\n')
}

// Channels lists the channels with subscribers matching pattern m (nil:
// all), sorted.
func (h *Hub) Channels(m Matcher) []string {
	if h == nil {
		return nil
	}
	h.mu.RLock()
	defer h.mu.RUnlock()
	var out []string
	for c := range h.channels {
		if m == nil || m.Match([]byte(c)) {
			out = append(out, c)
		}
	}
	sort.Strings(out)
	return out
}

// NumSub is the number of subscribers of channel.
func (h *Hub) NumSub(channel string) int {
	if h == nil {
		return 0
	}
	h.mu.RLock()
	defer h.mu.RUnlock()
	return len(h.channels[channel])
}

// NumPat is the number of patterns subscribed to.
func (h *Hub) NumPat() int {
	if h == nil {
		return 0
	}
	h.mu.RLock()
	defer h.mu.RUnlock()
	return len(h.patterns)
}
