package tests

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// keyedCalls are calls of every keyed limiter command with KEY where its
// keys go (and where RL.CHECK's domain goes).
var keyedCalls = [][]string{
	{"CL.THROTTLE", "KEY", "15", "30", "60"},
	{"SW.CHECK", "KEY", "10", "60"},
	{"FW.CHECK", "KEY", "10", "60"},
	{"CONC.ACQUIRE", "KEY", "2", "30", "r1"},
	{"CONC.RENEW", "KEY", "r1", "30"},
	{"CONC.RELEASE", "KEY", "r1"},
	{"CONC.GET", "KEY"},
	{"QUOTA.CHECK", "KEY", "100", "DAY"},
	{"QUOTA.GET", "KEY"},
	{"QUOTA.REFUND", "KEY", "1"},
	{"QUOTA.RESET", "KEY"},
	{"RL.CHECKALL", "LIMIT", "KEY", "GCRA", "1", "2", "3", "LIMIT", "KEY", "FIXED", "5", "60"},
	{"RL.OVERRIDE", "SET", "KEY", "5", "minute", "DESCRIPTOR", "user", "u1"},
	{"RL.OVERRIDE", "LIST", "KEY"},
	{"RL.OVERRIDE", "DEL", "KEY", "DESCRIPTOR", "user", "u1"},
	{"RL.SCALE", "SET", "KEY", "0.5"},
	{"RL.SCALE", "GET", "KEY"},
	{"RL.CHECK", "KEY", "DESCRIPTOR", "user", "u1"},
	{"RL.RESERVE", "KEY", "r1", "60", "COST", "3", "DESCRIPTOR", "user", "u1"},
	{"RL.SETTLE", "KEY", "r1", "1"},
	{"RL.CANCEL", "KEY", "r1"},
	{"RL.SHOULDRATELIMIT", "KEY", "1", "1", "-", "-", "-", "user", "u1", "1", "-", "5", "minute", "endpoint", "/x"},
	{"GET", "KEY"}, {"TTL", "KEY"}, {"PTTL", "KEY"}, {"TYPE", "KEY"}, {"EXISTS", "KEY"}, {"DEL", "KEY"}, {"UNLINK", "KEY"},
}

// setups run before a call (after the flush) so it finds what it works
// on: a reservation to settle.
var setups = map[string][]string{
	"RL.SETTLE": {"RL.RESERVE", "KEY", "r1", "60", "COST", "3", "DESCRIPTOR", "user", "u1"},
	"RL.CANCEL": {"RL.RESERVE", "KEY", "r1", "60", "COST", "3", "DESCRIPTOR", "user", "u1"},
}

// spreads are the commands whose counters spread over the slots by design
// (they lock every slot they touch, and a sharded check splits by slot):
// only their domain's records are in the slot they report.
var spreads = []string{"RL.CHECK", "RL.SHOULDRATELIMIT", "RL.RESERVE", "RL.SETTLE", "RL.CANCEL"}

// Every keyed command, with keys holding braces, empty and binary, alone
// and inside MULTI, on a single node and on a cluster (through a cluster
// client, which routes by what COMMAND says): no internal error, and the
// keys it creates are in the slots COMMAND GETKEYS reports for it.
func TestKeysDeclaredOnceThroughClients(t *testing.T) {
	rules := "descriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 10}\n  - key: endpoint\n    rate_limit: {unit: minute, requests_per_unit: 10}\n"
	variants := []string{"plain", "a{b}c", "{}x", "", "\x00\xff{\r\n}"}
	var flags []string
	for i, v := range variants {
		if v != "" { // a rules file's domain must not be empty
			flags = append(flags, "--rules", writeRules(t, "d"+strconv.Itoa(i)+".yaml", "domain: "+strconv.Quote(v)+"\n"+rules))
		}
	}
	single := StartServer(t, flags...)
	cl := StartCluster(t, 3, nil, flags...)
	leader := cl.Leader()
	for _, node := range []struct {
		name   string
		client redis.UniversalClient
		admin  *redis.Client
	}{{"single node", single.Client(), single.Client()}, {"cluster", cl.Client(), leader.Client()}} {
		eventually(t, node.name+" loaded the rules", func() bool {
			v, err := node.admin.Do(ctx(t), "RL.RULES", "LIST", "plain").Slice()
			return err == nil && len(v) == 2
		})
		for _, v := range variants {
			for _, call := range keyedCalls {
				args := withKeyVariant(call, v)
				for _, inTx := range []bool{false, true} {
					name := node.name + ": " + strings.Join(call, " ") + " with " + strconv.Quote(v)
					if inTx {
						name += " in MULTI"
					}
					if err := node.admin.FlushAll(ctx(t)).Err(); err != nil {
						t.Fatal(err)
					}
					if setup := setups[call[0]]; setup != nil {
						if r := runCall(node.client, false, withKeyVariant(setup, v)); strings.Contains(r, "error") {
							t.Fatalf("%s: setup: %s", name, r)
						}
					}
					reply := runCall(node.client, inTx, args)
					// A reservation no rule limits holds nothing: its
					// settle answers nil.
					ruled := false
					if l, err := node.admin.Do(ctx(t), "RL.RULES", "LIST", v).Slice(); err == nil && len(l) > 0 {
						ruled = true
					}
					if setups[call[0]] != nil && ruled && reply == strconv.Quote("nil") {
						t.Errorf("%s: the reservation was not settled: %s", name, reply)
					}
					if strings.Contains(reply, "internal error") {
						t.Errorf("%s: %s", name, reply)
					}
					reported := map[int64]bool{}
					keys, err := node.admin.Do(ctx(t), append([]any{"COMMAND", "GETKEYS"}, args...)...).StringSlice()
					if err != nil {
						t.Fatalf("%s: COMMAND GETKEYS: %v", name, err)
					}
					for _, k := range keys {
						reported[keySlot(t, node.admin, k)] = true
					}
					if len(reported) == 0 || slices.Contains(spreads, call[0]) {
						continue
					}
					for _, k := range allKeys(t, node.admin) {
						if s := keySlot(t, node.admin, k); !reported[s] && k != "sluice:rules" {
							t.Errorf("%s: wrote %q in slot %d; COMMAND GETKEYS reports %q (reply %s)", name, k, s, keys, reply)
						}
					}
				}
			}
		}
	}
}

// withKeyVariant is call with every KEY replaced by key.
func withKeyVariant(call []string, key string) []any {
	args := make([]any, len(call))
	for i, w := range call {
		if w == "KEY" {
			args[i] = key
		} else {
			args[i] = w
		}
	}
	return args
}

// runCall runs args alone or as the only command of a MULTI, and returns
// the reply (or error) as text.
func runCall(c redis.UniversalClient, inTx bool, args []any) string {
	if !inTx {
		v, err := c.Do(context.Background(), args...).Result()
		return describe(v, err)
	}
	var cmd *redis.Cmd
	_, err := c.TxPipelined(context.Background(), func(p redis.Pipeliner) error {
		cmd = p.Do(context.Background(), args...)
		return nil
	})
	if cmd != nil {
		v, cerr := cmd.Result()
		return describe(v, cerr)
	}
	return describe(nil, err)
}

func describe(v any, err error) string {
	if err != nil && err != redis.Nil {
		return "error: " + err.Error()
	}
	return strings.TrimSpace(strings.ReplaceAll(strings.ReplaceAll(strconv.Quote(stringOf(v)), "\\n", " "), "\\r", ""))
}

func stringOf(v any) string {
	switch x := v.(type) {
	case []any:
		var parts []string
		for _, e := range x {
			parts = append(parts, stringOf(e))
		}
		return "[" + strings.Join(parts, " ") + "]"
	case string:
		return x
	case int64:
		return strconv.FormatInt(x, 10)
	case nil:
		return "nil"
	}
	return "?"
}

func allKeys(t *testing.T, c *redis.Client) []string {
	t.Helper()
	var keys []string
	iter := c.Scan(ctx(t), 0, "*", 1000).Iterator()
	for iter.Next(ctx(t)) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	return keys
}
