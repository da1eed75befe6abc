package server

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-rl/sluice/commands"
	"github.com/sluice-rl/sluice/machine"
)

// The log's apply level (package machine's levels) is raised to this
// binary's machine.Level by the one who may: a single node at once (no
// other member applies its state), a group's serving leader once every
// member of its Raft configuration reports a binary that supports it — so a
// group upgraded member by member keeps applying every entry as its oldest
// member does until the last one is upgraded.

// raiseLevelAlone raises a single node's level (no Raft: nobody else
// applies its state, so nothing is logged or stored).
func (s *Server) raiseLevelAlone() { s.env.Machine.SetLevelAlone(machine.Level) }

// levelInterval is how often a leader below this binary's level asks its
// members again (and how long it waits for each report).
const levelInterval = 250 * time.Millisecond

// levelLoop, on a replicated member, raises its group's level when it
// leads and every member supports it; it ends once the level is this
// binary's (it never goes down).
func (s *Server) levelLoop() {
	defer s.bg.Done()
	t := time.NewTicker(levelInterval)
	defer t.Stop()
	waiting := ""
	for s.env.Machine.AppliedLevel() < machine.Level {
		if s.node.Serving() {
			if behind := s.membersBehind(); behind != "" {
				if behind != waiting {
					s.log.Info("the group's apply level waits for every member to run a release that supports it",
						"level", s.env.Machine.AppliedLevel(), "supported", machine.Level, "members", behind)
					waiting = behind
				}
			} else {
				s.logLevel()
			}
		}
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
	}
}

// logLevel logs SLUICE.LEVEL with this binary's level (asked again at the
// next tick when it does not apply).
func (s *Server) logLevel() {
	args := [][]byte{[]byte("SLUICE.LEVEL"), []byte(strconv.Itoa(machine.Level))}
	get, err := commands.Replicated{Node: s.node}.ApplyAll([][][]byte{args})
	if err != nil {
		return
	}
	if reply, _ := get(0); string(reply) != "+OK\r\n" {
		s.log.Error("the apply level was refused", "reply", string(reply))
		return
	}
	s.log.Info("the group's log is at apply level", "level", machine.Level)
}

// membersBehind names the members of the Raft configuration (other than
// this one; non-voters too: they apply the log as well) not known to
// support machine.Level: their reports say less (a release before levels
// says 0), or they did not answer. "" when every one does.
func (s *Server) membersBehind() string {
	members, err := s.node.Members()
	if err != nil {
		return "(the configuration: " + err.Error() + ")"
	}
	var behind []string
	for _, m := range members {
		if m.Self {
			continue
		}
		to, ok := s.memberAt(m.ClientAddr)
		if !ok {
			behind = append(behind, m.ID+" (no member port known)")
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), levelInterval)
		rep, err := s.memberClient.Report(ctx, to)
		cancel()
		switch {
		case err != nil:
			behind = append(behind, m.ID+" (no report)")
		case rep.Level < machine.Level:
			behind = append(behind, m.ID+" (level "+strconv.Itoa(int(rep.Level))+")")
		}
	}
	return strings.Join(behind, ", ")
}
