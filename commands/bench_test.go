package commands

import (
	"fmt"
	"testing"

	"github.com/sluice-rl/sluice/clock"
	"github.com/sluice-rl/sluice/machine"
)

// testEnv is an Env without a network, for benchmarks and unit tests.
func testEnv() *Env { return newEnv(clock.New(nil)) }

// newEnv is an Env on its own state machine and the given clock.
func newEnv(clk *clock.Clock) *Env {
	m := machine.New(machine.Options{})
	return &Env{Machine: m, Clock: clk, Table: NewTable(m), Stats: &Stats{}}
}

func testCtx(env *Env) *Ctx {
	return &Ctx{Env: env, Conn: &Conn{Proto: 2, Authenticated: true}, W: &Writer{Proto: 2}}
}

// BenchmarkDispatchThrottle is one CL.THROTTLE from parsed arguments to
// reply bytes, on 100k keys as redis-benchmark -r 100000 sends them.
func BenchmarkDispatchThrottle(b *testing.B) {
	env := testEnv()
	c := testCtx(env)
	const keys = 100_000
	argv := make([][][]byte, keys)
	for i := range argv {
		argv[i] = [][]byte{[]byte("CL.THROTTLE"), []byte(fmt.Sprintf("key:%012d", i)), []byte("100"), []byte("10"), []byte("1")}
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		c.Reset()
		c.W.Buf = c.W.Buf[:0]
		env.Table.Dispatch(c, argv[i%keys])
		i++
	}
}
