package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/redis/go-redis/v9"
)

// redisLog is go-redis' log (it logs from its connection pools, in one
// logger for the process) as the server's own: structured, at warning,
// named.
type redisLog struct{ log *slog.Logger }

func (l redisLog) Printf(ctx context.Context, format string, v ...any) {
	l.log.WarnContext(ctx, fmt.Sprintf(format, v...), "component", "go-redis")
}

// logRedisThrough sends go-redis' lines to log. go-redis keeps its logger
// in the package: only main, which wires the process, sets it.
func logRedisThrough(log *slog.Logger) { redis.SetLogger(redisLog{log}) }
