// Command sluice is a rate-limit server that speaks the Redis protocol.
//
// It only turns flags into a server.Config and runs the server until
// SIGINT or SIGTERM.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/sluice-rl/sluice/server"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "sluice:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	cfg := server.DefaultConfig()
	fs := flag.NewFlagSet("sluice", flag.ContinueOnError)
	fs.StringVar(&cfg.Addr, "addr", cfg.Addr, "host:port to serve the Redis protocol on")
	fs.StringVar(&cfg.DataDir, "data-dir", cfg.DataDir, "directory for persistent state (created if missing)")
	fs.TextVar(&cfg.QuotaFsync, "quota-fsync", cfg.QuotaFsync, "when quota changes reach the disk: always (before the reply), everysec or no")
	fs.DurationVar(&cfg.SnapshotInterval, "snapshot-interval", cfg.SnapshotInterval, "snapshot the keyspace this often when it changed (0: only on SAVE, BGSAVE and shutdown)")
	fs.BoolVar(&cfg.RebuildQuotaStore, "rebuild-quota-store", false, "rebuild a missing or damaged quota store from the snapshot instead of refusing to start (quota changes since the snapshot are lost; a sound store is kept)")
	version := fs.Bool("version", false, "print the version and exit")
	fs.StringVar(&cfg.RequirePass, "requirepass", cfg.RequirePass, "password clients must AUTH with (empty: no AUTH)")
	passFile := fs.String("requirepass-file", "", "read the AUTH password from this file (first line)")
	fs.StringVar(&cfg.TLSCertFile, "tls-cert-file", cfg.TLSCertFile, "PEM certificate: serve --addr over TLS (with --tls-key-file)")
	fs.StringVar(&cfg.TLSKeyFile, "tls-key-file", cfg.TLSKeyFile, "PEM private key for --tls-cert-file")
	fs.BoolVar(&cfg.ProtectedMode, "protected-mode", cfg.ProtectedMode, "refuse non-loopback clients while no password is set")
	fs.Int64Var(&cfg.Protocol.MaxBulkLen, "proto-max-bulk-len", cfg.Protocol.MaxBulkLen, "largest bulk string a client may send, bytes")
	fs.Int64Var(&cfg.Protocol.MaxArgs, "proto-max-args", cfg.Protocol.MaxArgs, "most arguments in one command")
	fs.IntVar(&cfg.OutputBufferLimit, "client-output-buffer-limit", cfg.OutputBufferLimit, "close a client whose unsent replies pass this many bytes (0: no limit)")
	fs.StringVar(&cfg.LogLevel, "log-level", cfg.LogLevel, "debug, info, warn or error")
	fs.BoolVar(&cfg.EnableDebugCommand, "enable-debug-command", cfg.EnableDebugCommand, "allow DEBUG CLOCK (tests only)")
	fs.IntVar(&cfg.MaxClients, "maxclients", cfg.MaxClients, "most client connections at once")
	fs.DurationVar(&cfg.IdleTimeout, "timeout", cfg.IdleTimeout, "close connections idle this long (0: never)")
	fs.StringVar(&cfg.MetricsAddr, "metrics-addr", cfg.MetricsAddr, "host:port for the Prometheus /metrics endpoint (empty: off)")
	fs.StringVar(&cfg.AdvertiseAddr, "advertise-addr", cfg.AdvertiseAddr, "host:port cluster topology replies announce (empty: the listen address, or the address each client reached when listening on 0.0.0.0)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if *version {
		fmt.Println("sluice", cfg.Version)
		return nil
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if *passFile != "" {
		if cfg.RequirePass != "" {
			return errors.New("give --requirepass or --requirepass-file, not both")
		}
		b, err := os.ReadFile(*passFile)
		if err != nil {
			return fmt.Errorf("requirepass file: %w", err)
		}
		cfg.RequirePass, _, _ = strings.Cut(string(b), "\n")
		cfg.RequirePass = strings.TrimSuffix(cfg.RequirePass, "\r")
		if cfg.RequirePass == "" {
			return fmt.Errorf("requirepass file %s: first line is empty", *passFile)
		}
	}
	level, err := server.ParseLogLevel(cfg.LogLevel)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	srv, err := server.New(cfg, log, nil)
	if err != nil {
		return err
	}
	if err := srv.Listen(); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	served := make(chan error, 1)
	go func() { served <- srv.Serve() }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return err
	}
	<-served
	log.Info("stopped")
	return nil
}
