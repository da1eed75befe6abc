package commands

import (
	"strconv"

	"github.com/sluice-rl/sluice/cmdspec"
	"github.com/sluice-rl/sluice/pubsub"
)

// Publish/subscribe, as Redis has it, over the Env's hub: the channel
// sluice:throttled carries a message for every refusal (see events.go).

// ThrottledChannel is the channel refusals are published on.
const ThrottledChannel = "sluice:throttled"

func pubsubCommands() []*Command {
	flags := []string{"pubsub", "noscript", "loading", "stale"}
	chans := Arg{Name: "channel", Type: "string", Multiple: true}
	return []*Command{
		{Spec: cmdspec.Spec{Name: "subscribe", Arity: -2, Flags: flags, Group: "pubsub", Since: "2.0.0", Complexity: "O(N) where N is the number of channels to subscribe to.",
			Summary: "Listens for messages published to channels.", Args: []Arg{chans}}, Run: runSubscribe},
		{Spec: cmdspec.Spec{Name: "unsubscribe", Arity: -1, Flags: flags, Group: "pubsub", Since: "2.0.0", Complexity: "O(N) where N is the number of channels to unsubscribe.",
			Summary: "Stops listening to messages posted to channels.", Args: []Arg{{Name: "channel", Type: "string", Optional: true, Multiple: true}}}, Run: runUnsubscribe},
		{Spec: cmdspec.Spec{Name: "psubscribe", Arity: -2, Flags: flags, Group: "pubsub", Since: "2.0.0", Complexity: "O(N) where N is the number of patterns to subscribe to.",
			Summary: "Listens for messages published to channels that match one or more patterns.", Args: []Arg{{Name: "pattern", Type: "pattern", Multiple: true}}}, Run: runPSubscribe},
		{Spec: cmdspec.Spec{Name: "punsubscribe", Arity: -1, Flags: flags, Group: "pubsub", Since: "2.0.0", Complexity: "O(N) where N is the number of patterns to unsubscribe.",
			Summary: "Stops listening to messages published to channels that match one or more patterns.", Args: []Arg{{Name: "pattern", Type: "pattern", Optional: true, Multiple: true}}}, Run: runPUnsubscribe},
		{Spec: cmdspec.Spec{Name: "publish", Arity: 3, Flags: []string{"pubsub", "loading", "stale", "fast"}, Group: "pubsub", Since: "2.0.0",
			Complexity: "O(N+M) where N is the number of clients subscribed to the receiving channel and M is the total number of subscribed patterns (by any client).",
			Summary:    "Posts a message to a channel.", Args: []Arg{{Name: "channel", Type: "string"}, {Name: "message", Type: "string"}}}, Run: runPublish},
		{Spec: cmdspec.Spec{Name: "pubsub", Arity: -2, Group: "pubsub", Since: "2.8.0", Summary: "A container for Pub/Sub commands.", Complexity: "Depends on subcommand."}, Subs: []*Command{
			{Spec: cmdspec.Spec{Name: "channels", Arity: -2, Flags: []string{"pubsub", "loading", "stale"}, Group: "pubsub", Since: "2.8.0",
				Summary: "Returns the active channels.", Complexity: "O(N) where N is the number of active channels",
				Args: []Arg{{Name: "pattern", Type: "pattern", Optional: true}}}, Run: runPubsubChannels},
			{Spec: cmdspec.Spec{Name: "numsub", Arity: -2, Flags: []string{"pubsub", "loading", "stale"}, Group: "pubsub", Since: "2.8.0",
				Summary: "Returns a count of subscribers to channels.", Complexity: "O(N) for the number of requested channels",
				Args: []Arg{{Name: "channel", Type: "string", Optional: true, Multiple: true}}}, Run: runPubsubNumSub},
			{Spec: cmdspec.Spec{Name: "numpat", Arity: 2, Flags: []string{"pubsub", "loading", "stale"}, Group: "pubsub", Since: "2.8.0",
				Summary: "Returns a count of unique pattern subscriptions.", Complexity: "O(1)"}, Run: runPubsubNumPat},
		}},
	}
}

// subscribedModeAllows lists what a RESP2 connection in subscribed mode may
// run.
func subscribedModeAllows(name string) bool {
	switch name {
	case "subscribe", "unsubscribe", "psubscribe", "punsubscribe", "ping", "quit", "reset":
		return true
	}
	return false
}

// subscriber is the connection's subscriber, made on first use.
func (c *Ctx) subscriber() *pubsub.Subscriber {
	if c.Conn.Sub == nil {
		c.Conn.Sub = pubsub.NewSubscriber(c.Conn.Sink)
	}
	c.Conn.Sub.SetRESP3(c.W.Proto == 3)
	return c.Conn.Sub
}

// pushHeader starts a subscription reply: a push in RESP3, an array in RESP2.
func (c *Ctx) pushHeader(n int) {
	if c.W.Proto == 3 {
		c.W.Buf = append(c.W.Buf, '>')
		c.W.Buf = strconv.AppendInt(c.W.Buf, int64(n), 10)
		c.W.Buf = append(c.W.Buf, '\r', '\n')
		return
	}
	c.W.Array(n)
}

func (c *Ctx) subReply(kind string, name []byte, count int) {
	c.pushHeader(3)
	c.W.BulkString(kind)
	if name == nil {
		c.W.Null()
	} else {
		c.W.Bulk(name)
	}
	c.W.Int(int64(count))
}

func runSubscribe(c *Ctx, args [][]byte) {
	if c.Conn.Sink == nil {
		c.W.Error("ERR SUBSCRIBE is not available on this connection")
		return
	}
	s := c.subscriber()
	for _, ch := range args[1:] {
		c.Env.PubSub.Subscribe(s, string(ch))
		c.subReply("subscribe", ch, s.Count())
	}
}

func runPSubscribe(c *Ctx, args [][]byte) {
	if c.Conn.Sink == nil {
		c.W.Error("ERR PSUBSCRIBE is not available on this connection")
		return
	}
	s := c.subscriber()
	for _, p := range args[1:] {
		g, bad := compileGlob(p)
		if bad != "" {
			c.W.Error(bad)
			return
		}
		c.Env.PubSub.PSubscribe(s, string(p), globMatcher{g})
		c.subReply("psubscribe", p, s.Count())
	}
}

// globMatcher is a compiled glob as a pubsub.Matcher.
type globMatcher struct{ g glob }

func (m globMatcher) Match(s []byte) bool { return m.g.match(s) }

func runUnsubscribe(c *Ctx, args [][]byte) {
	c.unsubscribe(args[1:], false)
}

func runPUnsubscribe(c *Ctx, args [][]byte) {
	c.unsubscribe(args[1:], true)
}

// unsubscribe answers (P)UNSUBSCRIBE: one reply per name, or per
// subscription when no name is given, or one with a nil name when there
// is nothing to leave.
func (c *Ctx) unsubscribe(names [][]byte, patterns bool) {
	kind := "unsubscribe"
	if patterns {
		kind = "punsubscribe"
	}
	s := c.Conn.Sub
	if len(names) == 0 && s != nil {
		list := s.Channels()
		if patterns {
			list = s.Patterns()
		}
		for _, n := range list {
			names = append(names, []byte(n))
		}
	}
	if len(names) == 0 {
		count := 0
		if s != nil {
			count = s.Count()
		}
		c.subReply(kind, nil, count)
		return
	}
	for _, n := range names {
		count := 0
		if s != nil {
			if patterns {
				c.Env.PubSub.PUnsubscribe(s, string(n))
			} else {
				c.Env.PubSub.Unsubscribe(s, string(n))
			}
			count = s.Count()
		}
		c.subReply(kind, n, count)
	}
}

func runPublish(c *Ctx, args [][]byte) {
	c.W.Int(int64(c.Env.PubSub.Publish(string(args[1]), args[2])))
}

func runPubsubChannels(c *Ctx, args [][]byte) {
	var m pubsub.Matcher
	if len(args) > 3 {
		c.W.Error(errArity("pubsub|channels"))
		return
	}
	if len(args) == 3 {
		g, bad := compileGlob(args[2])
		if bad != "" {
			c.W.Error(bad)
			return
		}
		m = globMatcher{g}
	}
	c.W.BulkStrings(c.Env.PubSub.Channels(m))
}

func runPubsubNumSub(c *Ctx, args [][]byte) {
	c.W.Map(len(args) - 2)
	for _, ch := range args[2:] {
		c.W.Bulk(ch)
		c.W.Int(int64(c.Env.PubSub.NumSub(string(ch))))
	}
}

func runPubsubNumPat(c *Ctx, _ [][]byte) { c.W.Int(int64(c.Env.PubSub.NumPat())) }
