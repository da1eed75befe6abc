package server

// Connections that have not authenticated (with a password set) are
// bounded in time and in number: each has AuthTimeout to authenticate, and
// together they hold at most half of maxclients — at that cap the oldest
// of them is closed to make room for a new one. Without this, 184 silent
// connections held every maxclients slot and locked out every client that
// knew the password until they chose to leave.

// enteredUnauthenticated counts a new connection that has yet to
// authenticate, closing the oldest such one past the cap.
func (s *Server) enteredUnauthenticated(cs *connState) {
	cs.reg.unauthenticated.Store(true)
	if s.unauthenticated.Add(1) <= max(s.env.Tunables.MaxClients.Load()/2, 1) {
		return
	}
	if old := s.clients.oldestUnauthenticated(cs); old != nil && s.leftUnauthenticated(old) {
		s.env.Stats.ConnectionsRejected.Add(1)
		s.log.Debug("closing the oldest unauthenticated client for a new one", "addr", old.conn.Addr)
		old.reg.killed.Store(true)
		old.reg.nc.Close()
		s.clients.uncount(old)
	}
}

// leftUnauthenticated takes cs out of the unauthenticated count (it
// authenticated, or is closing); false if it was not in it.
func (s *Server) leftUnauthenticated(cs *connState) bool {
	if cs.reg.unauthenticated.CompareAndSwap(true, false) {
		s.unauthenticated.Add(-1)
		return true
	}
	return false
}

// authChanged follows a connection's AUTH (or RESET, which signs it out).
func (s *Server) authChanged(cs *connState) {
	if cs.authed {
		s.leftUnauthenticated(cs)
	} else if cs.reg.unauthenticated.CompareAndSwap(false, true) {
		s.unauthenticated.Add(1)
	}
}

// authExpired reports a connection still unauthenticated past the auth
// timeout (now: monotonic ns).
func (s *Server) authExpired(cs *connState, now int64) bool {
	t := s.cfg.AuthTimeout
	return t > 0 && !cs.authed && now-cs.connected >= int64(t)
}

// authTimeoutOn reports whether connections are closed for not
// authenticating in time.
func (s *Server) authTimeoutOn() bool { return s.cfg.RequirePass != "" && s.cfg.AuthTimeout > 0 }

// oldestUnauthenticated is the unauthenticated connection that connected
// first, other than except, or nil.
func (r *clientRegistry) oldestUnauthenticated(except *connState) *connState {
	r.mu.Lock()
	defer r.mu.Unlock()
	var oldest *connState
	for _, cs := range r.conns {
		if cs != except && cs.reg.unauthenticated.Load() && !cs.reg.killed.Load() && (oldest == nil || cs.conn.ID < oldest.conn.ID) {
			oldest = cs
		}
	}
	return oldest
}
