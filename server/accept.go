package server

import (
	"errors"
	"net"
	"time"

	"github.com/sluice-rl/sluice/raftmux"
)

const (
	// acceptBackoffMin and acceptBackoffMax bound the pause after a failed
	// Accept (out of descriptors, most often), doubling while it fails, so
	// the loop never spins.
	acceptBackoffMin = 5 * time.Millisecond
	acceptBackoffMax = time.Second
	// acceptLogInterval is the most often a failing Accept is logged; the
	// line counts the failures since the last one.
	acceptLogInterval = 10 * time.Second
)

// acceptLoop accepts connections until the listener closes, handing them
// to the event loops in turn.
func (s *Server) acceptLoop() error {
	defer s.conns.Done()
	reserve := openReserveFD()
	defer func() { reserve.Close() }()
	var (
		delay    time.Duration
		failures int
		lastLog  time.Time
	)
	next := 0
	for {
		nc, err := s.ln.Accept()
		if err == nil {
			delay = 0
			s.conns.Add(1)
			s.admit(nc, s.loops[next%len(s.loops)])
			next++
			continue
		}
		if errors.Is(err, net.ErrClosed) || s.stopping() {
			return nil
		}
		failures++
		if now := time.Now(); now.Sub(lastLog) >= acceptLogInterval {
			s.log.Warn("accept failing; backing off", "err", err, "failures", failures)
			failures, lastLog = 0, now
		}
		if isFDExhausted(err) {
			// Turn one waiting client away with a reply instead of leaving
			// it hanging: the reserved descriptor makes room for it.
			reserve = s.refuseWithReserve(reserve)
		}
		delay = min(max(2*delay, acceptBackoffMin), acceptBackoffMax)
		select {
		case <-s.stop:
			return nil
		case <-time.After(delay):
		}
	}
}

func (s *Server) stopping() bool {
	select {
	case <-s.stop:
		return true
	default:
		return false
	}
}

// refuseWithReserve frees the reserved descriptor, accepts one client
// with it, refuses it as over maxclients and takes the reserve back.
func (s *Server) refuseWithReserve(reserve reserveFD) reserveFD {
	if !reserve.Close() {
		return reserve
	}
	if nc, err := s.ln.Accept(); err == nil {
		s.env.Stats.ConnectionsReceived.Add(1)
		s.env.Stats.ConnectionsRejected.Add(1)
		refuse(nc, maxClientsReply)
	}
	return openReserveFD()
}

// fitMaxClients makes room for MaxClients connections in the open-files
// limit, as Redis does, beside the HTTP and gRPC doors' caps: it raises the
// soft limit if it can, and otherwise shares what there is — each open
// door at most a quarter of it, RESP the rest — and says so. Every door is
// capped, so no door's connections can take another's descriptors.
func (s *Server) fitMaxClients() {
	want := s.env.Tunables.MaxClients.Load()
	doors := s.doorFDs()
	got, limit, err := fitOpenFiles(uint64(want+doors) + reservedFDs)
	if err != nil {
		s.log.Warn("cannot read the open files limit", "err", err)
		return
	}
	if got >= uint64(want+doors)+reservedFDs {
		return
	}
	avail := max(int64(got)-reservedFDs, 4)
	if s.cfg.HTTPAddr != "" {
		s.cfg.Doors.HTTPMaxConns = int(max(min(int64(s.cfg.Doors.HTTPMaxConns), avail/4), 1))
	}
	if s.cfg.GRPCAddr != "" {
		s.cfg.Doors.GRPCMaxConns = int(max(min(int64(s.cfg.Doors.GRPCMaxConns), avail/4), 1))
	}
	if s.cfg.Replication.Enabled() {
		lim := &s.cfg.Replication.MemberLimits
		lim.MaxConns = int(max(min(int64(s.memberMaxConns()), avail/4), 1))
		if s.mux != nil {
			s.mux.SetMaxConns(lim.MaxConns)
		}
	}
	fit := max(min(want, avail-s.doorFDs()), 1)
	s.env.Tunables.MaxClients.Store(fit)
	s.env.Options.MaxClients = int(fit)
	what := "maxclients lowered to fit the open files limit"
	if fit == want {
		what = "the HTTP and gRPC connection caps lowered to fit the open files limit"
	}
	s.log.Warn(what,
		"maxclients", fit, "requested", want, "http_max_conns", s.cfg.Doors.HTTPMaxConns, "grpc_max_conns", s.cfg.Doors.GRPCMaxConns,
		"member_max_conns", s.cfg.Replication.MemberLimits.MaxConns,
		"open_files_limit", got, "hard_limit", limit, "reserved", reservedFDs)
}

// doorFDs is how many descriptors the open HTTP and gRPC doors may hold.
func (s *Server) doorFDs() int64 {
	var n int64
	if s.cfg.HTTPAddr != "" {
		n += int64(s.cfg.Doors.HTTPMaxConns)
	}
	if s.cfg.GRPCAddr != "" {
		n += int64(s.cfg.Doors.GRPCMaxConns)
	}
	if s.cfg.Replication.Enabled() {
		n += int64(s.memberMaxConns())
	}
	return n
}

// memberMaxConns is the member port's connection cap in force.
func (s *Server) memberMaxConns() int {
	if n := s.cfg.Replication.MemberLimits.MaxConns; n > 0 {
		return n
	}
	return raftmux.DefaultMaxConns
}

// fitClients makes room for want RESP clients beside the doors, raising
// the open-files limit if it can, and returns how many fit (CONFIG SET
// maxclients).
func (s *Server) fitClients(want int64) int64 {
	got, _, err := fitOpenFiles(uint64(want+s.doorFDs()) + reservedFDs)
	if err != nil {
		return want
	}
	return max(int64(got)-reservedFDs-s.doorFDs(), 1)
}

// reservedFDs is how many descriptors are kept for the store, listeners
// and logs beyond one per client (Redis' CONFIG_MIN_RESERVED_FDS).
const reservedFDs = 32
