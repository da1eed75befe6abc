package commands

import (
	"math/bits"
	"strconv"
	"sync/atomic"

	"github.com/sluice-rl/sluice/cmdspec"
	"github.com/sluice-rl/sluice/resp"
)

// Per-command latency, as Redis 7 keeps it: the time spent in each call
// (INFO commandstats usec), and a histogram with power-of-two buckets in
// microseconds (LATENCY HISTOGRAM; the Prometheus
// sluice_command_duration_seconds histogram is read from the same
// buckets). The server measures a call with the monotonic clock read that
// also starts the next call, so a pipeline costs one read per command.

// LatencyBuckets is the number of histogram buckets: bucket 0 holds calls
// of at most 1 µs, bucket i of (2^(i-1), 2^i] µs; the last holds the rest.
const LatencyBuckets = 32

// latency is one command's timing.
type latency struct {
	nanos   atomic.Int64
	buckets [LatencyBuckets]atomic.Int64
	failed  atomic.Int64
}

// latencyBucket is the bucket of a call of ns nanoseconds.
func latencyBucket(ns int64) int {
	us := (ns + 999) / 1000
	if us <= 1 {
		return 0
	}
	return min(bits.Len64(uint64(us-1)), LatencyBuckets-1)
}

// Observe records one call of the command that took ns nanoseconds, and
// whether its reply was an error.
func (c *Command) Observe(ns int64, failed bool) {
	ns = max(ns, 0)
	c.lat.nanos.Add(ns)
	c.lat.buckets[latencyBucket(ns)].Add(1)
	if failed {
		c.lat.failed.Add(1)
	}
}

// Latency is the command's total time in calls, in nanoseconds, and the
// count of calls in each bucket (not cumulative).
func (c *Command) Latency() (totalNanos int64, buckets [LatencyBuckets]int64) {
	for i := range buckets {
		buckets[i] = c.lat.buckets[i].Load()
	}
	return c.lat.nanos.Load(), buckets
}

// Failed counts the calls that answered an error.
func (c *Command) Failed() int64 { return c.lat.failed.Load() }

func (l *latency) reset() {
	l.nanos.Store(0)
	l.failed.Store(0)
	for i := range l.buckets {
		l.buckets[i].Store(0)
	}
}

// BucketUpperMicros is bucket i's upper bound in microseconds.
func BucketUpperMicros(i int) int64 { return int64(1) << i }

// commandstat is INFO commandstats' value for cmd.
func commandstat(cmd *Command) string {
	calls := cmd.Calls()
	nanos, _ := cmd.Latency()
	usec := nanos / 1000
	perCall := 0.0
	if calls > 0 {
		perCall = float64(nanos) / 1000 / float64(calls)
	}
	return "calls=" + itoa(calls) + ",usec=" + itoa(usec) + ",usec_per_call=" +
		strconv.FormatFloat(perCall, 'f', 2, 64) + ",rejected_calls=0,failed_calls=" + itoa(cmd.Failed())
}

func latencyCommand() *Command {
	sub := func(name string, arity int, summary string, run func(*Ctx, [][]byte), args ...Arg) *Command {
		return &Command{Spec: cmdspec.Spec{Name: name, Arity: arity, Flags: []string{"admin", "noscript", "loading", "stale"},
			Group: "server", Since: "2.8.13", Summary: summary, Complexity: "O(1)", Args: args}, Run: run}
	}
	histogram := sub("histogram", -2, "Returns the cumulative distribution of latencies of a subset or all commands.",
		runLatencyHistogram, Arg{Name: "command", Type: "string", Optional: true, Multiple: true})
	histogram.Since = "7.0.0"
	histogram.Complexity = "O(N) where N is the number of commands with latency information being retrieved."
	return &Command{Spec: cmdspec.Spec{Name: "latency", Arity: -2, Group: "server", Since: "2.8.13",
		Summary: "A container for latency diagnostics commands.", Complexity: "Depends on subcommand."}, Subs: []*Command{
		histogram,
		// The latency monitor (latency-monitor-threshold) is off, as it
		// is in Redis by default: no events, nothing to reset.
		sub("latest", 2, "Returns the latest latency samples for all events.", func(c *Ctx, _ [][]byte) { c.W.Array(0) }),
		sub("history", 3, "Returns timestamp-latency samples for an event.", func(c *Ctx, _ [][]byte) { c.W.Array(0) },
			Arg{Name: "event", Type: "string"}),
		sub("reset", -2, "Resets the latency data for one or more events.", func(c *Ctx, _ [][]byte) { c.W.Int(0) },
			Arg{Name: "event", Type: "string", Optional: true, Multiple: true}),
		sub("doctor", 2, "Returns a human-readable latency analysis report.", func(c *Ctx, _ [][]byte) {
			c.W.Verbatim("Dave, the latency monitor is off (as in Redis by default). Per-command latency: LATENCY HISTOGRAM and INFO commandstats.\n")
		}),
		sub("graph", 3, "Returns a latency graph for an event.", func(c *Ctx, args [][]byte) {
			c.W.Error("ERR No samples available for event '" + resp.Clip(args[2], 128) + "'")
		}, Arg{Name: "event", Type: "string"}),
		sub("help", 2, "Returns helpful text about the different subcommands.", func(c *Ctx, _ [][]byte) {
			c.W.BulkStrings([]string{"LATENCY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
				"HISTOGRAM [COMMAND ...]", "    Return a cumulative distribution of latencies in the format of a histogram for the specified command names.",
				"    If no commands are specified then all histograms are replied.",
				"LATEST", "    Return the latest latency samples for all events (none: the latency monitor is off).",
				"HISTORY <event>", "    Return time-latency samples for the specified event.",
				"RESET [<event> ...]", "    Reset latency data of one or more events.",
				"DOCTOR", "    Return a human readable latency analysis report.",
				"HELP", "    Print this help."})
		}),
	},
	}
}

// runLatencyHistogram is LATENCY HISTOGRAM [command …]: for each command
// with calls, {calls, histogram_usec: {upper bound µs: calls at most that
// long}} over the buckets from the first to the last that hold calls.
func runLatencyHistogram(c *Ctx, args [][]byte) {
	var cmds []*Command
	if len(args) > 2 {
		for _, name := range args[2:] {
			if cmd := c.Env.Table.lookupFull(name); cmd != nil && cmd.Calls() > 0 && !contains(cmds, cmd) {
				cmds = append(cmds, cmd)
			}
		}
	} else {
		for _, cmd := range c.Env.Table.Commands() {
			if cmd.Calls() > 0 {
				cmds = append(cmds, cmd)
			}
			for _, s := range cmd.Subs {
				if s.Calls() > 0 {
					cmds = append(cmds, s)
				}
			}
		}
	}
	c.W.Map(len(cmds))
	for _, cmd := range cmds {
		_, buckets := cmd.Latency()
		first, last := -1, -1
		for i, n := range buckets {
			if n > 0 {
				if first < 0 {
					first = i
				}
				last = i
			}
		}
		c.W.BulkString(cmd.FullName())
		c.W.Map(2)
		c.W.BulkString("calls")
		c.W.Int(cmd.Calls())
		c.W.BulkString("histogram_usec")
		if first < 0 {
			c.W.Map(0)
			continue
		}
		c.W.Map(last - first + 1)
		var cum int64
		for i := 0; i <= last; i++ {
			cum += buckets[i]
			if i >= first {
				c.W.Int(BucketUpperMicros(i))
				c.W.Int(cum)
			}
		}
	}
}

func contains(cmds []*Command, cmd *Command) bool {
	for _, c := range cmds {
		if c == cmd {
			return true
		}
	}
	return false
}
