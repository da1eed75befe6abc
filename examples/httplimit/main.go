// Command httplimit is a runnable example of the httplimit middleware: an
// HTTP server whose GET / admits 5 requests per 60 s per client address,
// decided by sluice's SW.CHECK, and serves requests anyway (fails open)
// when sluice is unreachable.
//
//	go run ./examples/httplimit --sluice-addr 127.0.0.1:6379 --listen 127.0.0.1:8080
//	curl -i http://127.0.0.1:8080/
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluice-rl/sluice/httplimit"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "httplimit example:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("httplimit", flag.ContinueOnError)
	sluiceAddr := fs.String("sluice-addr", "127.0.0.1:6379", "host:port of sluice")
	listen := fs.String("listen", "127.0.0.1:8080", "host:port to serve HTTP on")
	timeout := fs.Duration("sluice-timeout", httplimit.DefaultTimeout, "longest wait for sluice before failing open")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))

	// A retry cannot fit in the few milliseconds a decision may take; the
	// deadline should end an abandoned call, not the client's ReadTimeout.
	client := redis.NewClient(&redis.Options{Addr: *sluiceAddr, ContextTimeoutEnabled: true, MaxRetries: -1})
	defer client.Close()
	limit, err := httplimit.New(httplimit.Config{
		Client:    client,
		Key:       httplimit.RemoteAddr("example:ip:"),
		Limit:     httplimit.SlidingWindow{Limit: 5, Window: 60 * time.Second},
		Name:      "per-client",
		Timeout:   *timeout,
		OnFailure: httplimit.FailOpen,
		Jitter:    2 * time.Second,
		Logger:    log,
	})
	if err != nil {
		return err
	}

	mux := http.NewServeMux()
	mux.Handle("GET /{$}", limit.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "hello")
	})))

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(shutdown)
	}()
	log.Info("listening", "addr", ln.Addr().String(), "sluice", *sluiceAddr)
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
