package member

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"

	"google.golang.org/grpc"

	"github.com/sluice-rl/sluice/memberpb"
)

// MaxMessage bounds one member message (a slot's import is the largest:
// its records, in chunks the mover sizes below this).
const MaxMessage = 64 << 20

// Applier applies an internal command a member of 0.4.0 sent (as Apply,
// see legacy.go), through the group's log. It returns the applied
// command's reply, or an error
// wrapping one of the package's sentinels (ErrNotLeader with the leader's
// client address in leader, ErrRefused, ErrNotApplied, ErrUnknownOutcome),
// or the applied command's typed refusal (*machine.StaleEpochError).
type Applier func(ctx context.Context, command [][]byte) (reply []byte, leader string, err error)

// ServerConfig is what a member's server needs. Each of Place, Apply,
// Report, Part and Decide may be nil: its calls are then refused
// (REFUSED, nothing applied).
type ServerConfig struct {
	// Group is the id of this member's group (1 to 255 bytes, as the
	// member port's header carries it): a call naming another is refused.
	Group string
	// Place logs the placement requests members send.
	Place PlaceFunc
	// Apply applies what a member of 0.4.0 asks (its placement requests).
	Apply Applier
	// Report is what this member knows of its group, now.
	Report func() Report
	// Part decides parts of checks across groups.
	Part PartFunc
	// Decide runs the RL.SHOULDRATELIMIT calls followers forward.
	Decide DecideFunc
	// Log receives calls refused (nil: discarded).
	Log *slog.Logger
}

// ErrConfig: a ServerConfig that cannot serve.
var ErrConfig = errors.New("member: invalid server config")

// Validate reports whether the config can serve.
func (c *ServerConfig) Validate() error {
	if c.Group == "" || len(c.Group) > 255 {
		return fmt.Errorf("%w: a group id is 1 to 255 bytes, not %d", ErrConfig, len(c.Group))
	}
	return nil
}

// Server serves one member's calls on a listener of the member port.
type Server struct {
	cfg  ServerConfig
	grpc *grpc.Server
}

// Serve serves calls on ln (a raftmux member listener: its connections
// proved membership, when the cluster has a secret) until Stop; an invalid
// cfg serves nothing (ErrConfig).
func Serve(ln net.Listener, cfg ServerConfig) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg, grpc: grpc.NewServer(grpc.MaxRecvMsgSize(MaxMessage), grpc.MaxSendMsgSize(MaxMessage))}
	memberpb.RegisterMemberServer(s.grpc, service{s})
	go s.grpc.Serve(ln)
	return s, nil
}

// Stop closes the listener and every call's connection.
func (s *Server) Stop() { s.grpc.Stop() }

type service struct{ s *Server }

func (v service) Report(_ context.Context, in *memberpb.ReportRequest) (*memberpb.MemberReport, error) {
	cfg := &v.s.cfg
	if in.GetGroup() != cfg.Group {
		return &memberpb.MemberReport{Code: memberpb.Code_WRONG_GROUP}, nil
	}
	if cfg.Report == nil {
		return &memberpb.MemberReport{Code: memberpb.Code_REFUSED}, nil
	}
	return cfg.Report().message(), nil
}
