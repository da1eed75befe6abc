// Command sluice is a rate-limit server that speaks the Redis protocol.
//
// It only turns flags into server configs (flags.go, members.go) and runs
// the servers until SIGINT or SIGTERM (serve.go).
package main

import (
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"

	"github.com/sluice-rl/sluice/server"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "sluice:", err)
		os.Exit(1)
	}
}

// run wires: the flags, what they name, the servers, until a signal.
func run(args []string) error {
	o, err := parseFlags(args)
	if err != nil || o.help {
		return err
	}
	if o.version {
		fmt.Println("sluice", o.cfg.Version)
		return nil
	}
	setGCPercent(o.gcPercent)
	hosted, err := o.resolve()
	if err != nil {
		return err
	}
	level, err := server.ParseLogLevel(o.cfg.LogLevel)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	logRedisThrough(log)
	if o.clusterJoin != "" {
		if err := o.join(log); err != nil {
			return err
		}
	}
	if hosted == nil {
		// The Go memory limit follows maxmemory unless GOMEMLIMIT says.
		_, fixed := os.LookupEnv("GOMEMLIMIT")
		o.cfg.GoMemoryLimit = !fixed
		return listenAndServe([]server.Config{o.cfg}, []*slog.Logger{log}, log)
	}
	cfgs, mux, err := hostedConfigs(o.cfg, hosted, log)
	if err != nil {
		return err
	}
	defer mux.Close()
	var logs []*slog.Logger
	for _, id := range hosted {
		logs = append(logs, log.With("member", id))
	}
	return listenAndServe(cfgs, logs, log)
}

// setGCPercent sets Go's GC target unless GOGC does.
func setGCPercent(percent int) {
	if _, set := os.LookupEnv("GOGC"); !set && percent >= 0 {
		// Measured on the gRPC door (rlsbench, 50 callers, four alternating
		// pairs): 400 against Go's 100, +10% calls/s and -15% p99 for ~20
		// MB more resident under load; the heap holds requests in flight,
		// not keys.
		debug.SetGCPercent(percent)
	}
}

// listenAndServe makes a server of each config, binds them, and serves
// until a signal.
func listenAndServe(cfgs []server.Config, logs []*slog.Logger, log *slog.Logger) error {
	var srvs []*server.Server
	for i, c := range cfgs {
		srv, err := server.New(c, logs[i], nil)
		if err != nil {
			return err
		}
		if err := srv.Listen(); err != nil {
			return err
		}
		srvs = append(srvs, srv)
	}
	return serve(srvs, log)
}
