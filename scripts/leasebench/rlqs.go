package main

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sluice-rl/sluice/httplimit"
	"github.com/sluice-rl/sluice/internal/quotaplane"
)

// quotaHolder is an Envoy-like data plane of one bucket: it decides each
// request from its assignment as Envoy's filter does (quotaplane) and
// reports its usage on its RLQS stream once a second, as Envoy does.
type quotaHolder struct {
	mu     sync.Mutex
	bucket quotaplane.Bucket
	start  time.Time
	conn   *grpc.ClientConn
	cancel context.CancelFunc
	done   chan struct{}
}

var benchBucket = &rlqspb.BucketId{Bucket: map[string]string{"route": "/api"}}

func newQuotaHolder(parent context.Context, addr string, start time.Time, reports *atomic.Int64) (*quotaHolder, error) {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(parent)
	st, err := rlqspb.NewRateLimitQuotaServiceClient(conn).StreamRateLimitQuotas(ctx)
	if err != nil {
		cancel()
		conn.Close()
		return nil, err
	}
	q := &quotaHolder{start: start, conn: conn, cancel: cancel, done: make(chan struct{})}
	go q.report(st, reports)
	return q, nil
}

// report sends the bucket's usage every second (and at once, as Envoy does
// for a new bucket) and takes each answer's assignment.
func (q *quotaHolder) report(st rlqspb.RateLimitQuotaService_StreamRateLimitQuotasClient, reports *atomic.Int64) {
	defer close(q.done)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	last := time.Duration(0)
	for {
		q.mu.Lock()
		now := time.Since(q.start)
		u := q.bucket.Usage(benchBucket, now-last)
		q.mu.Unlock()
		last = now
		if err := st.Send(&rlqspb.RateLimitQuotaUsageReports{Domain: "bench",
			BucketQuotaUsages: []*rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{u}}); err != nil {
			return
		}
		resp, err := st.Recv()
		if err != nil {
			return
		}
		reports.Add(1)
		q.mu.Lock()
		for _, a := range resp.GetBucketAction() {
			q.bucket.Assign(a, time.Since(q.start))
		}
		q.mu.Unlock()
		if _, ok := <-tick.C; !ok {
			return
		}
	}
}

// Check decides a request from the bucket's assignment.
func (q *quotaHolder) Check(context.Context, httplimit.Doer, *http.Request, string) (httplimit.Decision, error) {
	q.mu.Lock()
	ok := q.bucket.Request(time.Since(q.start))
	q.mu.Unlock()
	return httplimit.Decision{Limited: !ok}, nil
}

// Validate is Limit's.
func (q *quotaHolder) Validate() error { return nil }

func (q *quotaHolder) close() {
	q.cancel()
	<-q.done
	q.conn.Close()
}
