package main

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/sluice-rl/sluice/server"
)

// serve runs the servers until SIGINT or SIGTERM (SIGHUP reloads their
// rules), then shuts them down.
func serve(srvs []*server.Server, log *slog.Logger) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	served := make(chan error, len(srvs))
	for _, srv := range srvs {
		go func() { served <- srv.Serve() }()
	}
	var ended error
	running := len(srvs)
wait:
	for {
		select {
		case ended = <-served:
			running--
			if len(srvs) == 1 {
				return ended
			}
			break wait // one member failed: stop the others
		case <-hup:
			for _, srv := range srvs {
				srv.ReloadRules() // logs and counts its own failure
			}
		case <-ctx.Done():
			break wait
		}
	}
	log.Info("shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var errs []error
	for _, srv := range srvs {
		errs = append(errs, srv.Shutdown(shutdownCtx))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for ; running > 0; running-- {
		<-served
	}
	if ended != nil {
		return ended
	}
	log.Info("stopped")
	return nil
}
