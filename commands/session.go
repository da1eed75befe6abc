package commands

import (
	"errors"
	"fmt"
	"time"

	"github.com/sluice-rl/sluice/machine"
)

// Session runs commands for a front door that is not a RESP connection
// (the gRPC rate limit service and its HTTP twin). Each command goes
// through Dispatch exactly as a connection's would — counted and timed,
// handed to the Applier, batched into the log on a replicated node — and
// its reply waits for durability as a connection's does. A Session is used
// by one goroutine at a time; pool them.
type Session struct {
	ctx  Ctx
	conn Conn
	w    Writer
}

// ErrNotDurable: a change the command made could not be made durable, so
// its reply must not be taken as an answer.
var ErrNotDurable = errors.New("commands: the change did not reach the disk")

// NewSession makes a session named addr (what CLIENT-like reports show,
// e.g. "grpc").
func (e *Env) NewSession(addr string) *Session {
	s := &Session{}
	s.conn = Conn{Addr: addr, Proto: 2, Authenticated: true, Created: e.Clock.Now()}
	s.w.Proto = 2
	s.ctx = Ctx{Env: e, Conn: &s.conn, W: &s.w}
	return s
}

// Do runs one command and returns its RESP2 reply, valid until the next
// Do. An error means the reply must not be used (the change it reports did
// not reach the disk).
func (s *Session) Do(args [][]byte) ([]byte, error) {
	start := time.Now()
	s.ctx.Reset()
	s.w.Buf, s.w.LastError = s.w.Buf[:0], ""
	s.ctx.Env.Table.Dispatch(&s.ctx, args)
	s.ctx.Settle()
	if cmd := s.ctx.Command(); cmd != nil {
		// An error the door wrote, or one the batch settled with.
		cmd.Observe(int64(time.Since(start)), s.w.LastError != "" || s.ctx.applied && s.ctx.outcome.Err != "")
	}
	if s.conn.DurablePending() {
		if err := s.conn.AwaitDurable(); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrNotDurable, err)
		}
	}
	return s.w.Buf, nil
}

// Decide runs one machine command, as Do does, and returns its typed
// outcome instead of its
// reply: a door that is not RESP formats its own reply from it. A command
// refused before it applied (unknown, malformed, redirected) has only
// Outcome.Err.
func (s *Session) Decide(args [][]byte) (machine.Outcome, error) {
	s.w.LastError = ""
	if _, err := s.Do(args); err != nil {
		return machine.Outcome{}, err
	}
	if s.ctx.applied {
		return s.ctx.outcome, nil
	}
	return s.refused(args), nil
}

// refused is the outcome of a command the door refused before anything
// was applied: why, if the door said (Ctx.refuse), else the command was
// wrong for it (unknown, of the wrong arity, not allowed here).
func (s *Session) refused(args [][]byte) machine.Outcome {
	out := machine.Outcome{Err: s.w.LastError, Reason: s.ctx.refusal}
	if out.Err == "" {
		out.Err = "ERR " + string(args[0]) + " is not a machine command"
	}
	if out.Reason == machine.ReasonNone {
		out.Reason = machine.ReasonInvalid
	}
	return out
}

// DecideAll runs cmds, machine commands, as one batch, as a RESP
// connection's pipeline runs: those the log takes go into it together and
// are waited for once. It returns each command's typed outcome, in order
// (one refused before it applied has only Outcome.Err). An error means no
// outcome may be used (a change did not reach the disk).
func (s *Session) DecideAll(cmds [][][]byte) ([]machine.Outcome, error) {
	outs := make([]machine.Outcome, len(cmds))
	deferred := make([]int, 0, len(cmds))
	var captured []machine.Outcome
	s.w.Buf = s.w.Buf[:0]
	for i, args := range cmds {
		s.ctx.Reset()
		s.w.LastError = ""
		queued := len(s.ctx.batch.nargs)
		s.ctx.Env.Table.Dispatch(&s.ctx, args)
		switch {
		case len(s.ctx.batch.nargs) > queued:
			deferred = append(deferred, i)
		case s.ctx.applied:
			outs[i] = s.ctx.outcome
		default:
			outs[i] = s.refused(args)
		}
	}
	s.ctx.captured = &captured
	s.ctx.Settle()
	s.ctx.captured = nil
	if len(captured) != len(deferred) {
		return nil, errors.New("commands: a batch's outcomes do not match its commands")
	}
	for j, i := range deferred {
		outs[i] = captured[j]
	}
	if s.conn.DurablePending() {
		if err := s.conn.AwaitDurable(); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrNotDurable, err)
		}
	}
	return outs, nil
}
