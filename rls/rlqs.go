package rls

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"time"

	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	typepb "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// QuotaServiceName is Envoy's Rate Limit Quota Service (RLQS), which the
// rate_limit_quota HTTP filter streams its usage reports to.
const QuotaServiceName = "envoy.service.rate_limit_quota.v3.RateLimitQuotaService"

// quotaServer answers RLQS streams with shares (RL.SHARE): each stream is
// a holder, and each bucket it reports gets a part of its rule's rate and
// burst by what the data plane asked for (allowed + denied over the
// report's interval), as a token bucket — Envoy's filter admits from it
// locally, refilling continuously. Each report charges the counter with
// what the data plane says it admitted. The assignment lives two report
// intervals in whole seconds (at least 2 s), renewed by the next report;
// while it is unchanged it is sent the same, so Envoy keeps its bucket and
// tokens; a changed one differs in its fill interval's nanoseconds too
// (Envoy compares only those of the interval), so Envoy makes a new one.
// A bucket no rule limits is ALLOW_ALL; one whose rule admits nothing, or
// whose part is nothing now, is DENY_ALL until the next report. A bucket
// the stream stops reporting for two ttls is abandoned (abandon_action)
// and its share released; a stream that ends keeps its shares counted
// until their ttls, as its Envoy keeps its buckets.
//
// A bucket id's entries are the descriptor matched against the report's
// domain's rules, in key order (a map has no other). The decisions go
// through the same decider as ShouldRateLimit: this node's log on a
// leader, the leader's on a follower (the member channel), the domain's
// group in a sharded cluster.
type quotaServer struct {
	rlqspb.UnimplementedRateLimitQuotaServiceServer
	s *Service
}

// heldBucket is what a stream holds of one bucket: its descriptor (the
// only copy of its id's entries: the id is rebuilt from it), the units the
// data plane admitted that are not charged yet (reports that did not
// land), and when it was last reported and for how long its assignment
// lives (ns).
type heldBucket struct {
	domain   string
	desc     []string
	unspent  uint64
	seen     int64
	lifetime int64
}

// bytes is what the bucket's id takes (QuotaLimits.StreamBytes).
func (h *heldBucket) bytes() int {
	n := len(h.domain)
	for _, w := range h.desc {
		n += len(w)
	}
	return n
}

// bucketID is the bucket id a held bucket's descriptor came from.
func (h *heldBucket) bucketID() *rlqspb.BucketId {
	m := make(map[string]string, len(h.desc)/2)
	for i := 1; i+1 < len(h.desc); i += 2 {
		m[h.desc[i]] = h.desc[i+1]
	}
	return &rlqspb.BucketId{Bucket: m}
}

// streamHoldings are the buckets a stream holds leases of, by a digest of
// their domain and descriptor (the descriptor kept once, in the bucket),
// and the bytes their ids take.
type streamHoldings struct {
	buckets map[[sha256.Size]byte]*heldBucket
	bytes   int
}

func newHoldings() *streamHoldings {
	return &streamHoldings{buckets: map[[sha256.Size]byte]*heldBucket{}}
}

// bucketKey is the digest a stream holds a bucket under.
func bucketKey(domain string, desc []string) [sha256.Size]byte {
	h := sha256.New()
	var n [binary.MaxVarintLen64]byte
	for _, w := range append([]string{domain}, desc...) {
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(w)))])
		h.Write([]byte(w))
	}
	var k [sha256.Size]byte
	h.Sum(k[:0])
	return k
}

// maxStreamBuckets bounds the buckets one stream holds leases of; with
// QuotaLimits.StreamBytes, a stream's memory is bounded, as every other
// caller's.
const maxStreamBuckets = 4096

// errTooManyBuckets: a stream reported more buckets, or bucket ids of
// more bytes, than it may hold; errTooManyStreams: more streams are open
// than the server takes.
var (
	errTooManyBuckets = errors.New("rls: a quota stream reported more buckets than it may hold")
	errTooManyStreams = errors.New("rls: more quota streams are open than this server takes")
)

// maxReportInterval is the longest time_elapsed a report may say: its
// lease lives two of them, and a lease lives at most a day.
const maxReportInterval = 12 * time.Hour

// minLeaseTTL is the least ttl an assignment is given, in seconds: one
// report late is no lapse.
const minLeaseTTL = 2

// StreamRateLimitQuotas implements RLQS.
func (q quotaServer) StreamRateLimitQuotas(stream rlqspb.RateLimitQuotaService_StreamRateLimitQuotasServer) error {
	s := q.s
	ctx := stream.Context()
	if s.cfg.Password != "" && !s.authorized(bearer(ctx)) {
		s.metrics.observe("rlqs", "unauthenticated", 0)
		return status.Error(codes.Unauthenticated, "sluice: this rate limit quota service needs authorization: Bearer <password>")
	}
	if s.quotaStreams.Add(1) > int64(s.cfg.Quota.Streams) {
		s.quotaStreams.Add(-1)
		s.metrics.observe("rlqs", "exhausted", 0)
		return errorStatus(fmt.Errorf("%w (%d)", errTooManyStreams, s.cfg.Quota.Streams)).Err()
	}
	defer s.quotaStreams.Add(-1)
	var id [8]byte
	rand.Read(id[:])
	holder := "rlqs-" + hex.EncodeToString(id[:])
	held := newHoldings()
	// A stream that ends keeps its shares counted to their ttls: its
	// Envoy admits from its buckets until then.
	domain := ""
	for {
		reports, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		start := time.Now()
		if d := reports.GetDomain(); d != "" {
			domain = d
		}
		if domain == "" {
			s.metrics.observe("rlqs", "invalid", time.Since(start))
			return status.Error(codes.InvalidArgument, "sluice: a usage report needs a domain")
		}
		resp := &rlqspb.RateLimitQuotaResponse{}
		for _, u := range reports.GetBucketQuotaUsages() {
			action, err := q.assign(ctx, domain, holder, u, held)
			if err != nil {
				st := errorStatus(err)
				s.metrics.observe("rlqs", failedResult(st.Code()), time.Since(start))
				if st.Code() == codes.Unavailable || st.Code() == codes.Unknown {
					// No leader now (a failover): nothing was charged; or
					// the outcome is not known (the leader was lost with
					// the lease in flight): it is the holder's one lease of
					// the bucket, which the next report renews rather than
					// adds to. Either way the bucket keeps the assignment
					// it has until its ttl, and the next report asks again
					// — the stream goes on.
					continue
				}
				return st.Err()
			}
			resp.BucketAction = append(resp.BucketAction, action)
		}
		resp.BucketAction = append(resp.BucketAction, q.abandon(holder, held)...)
		if err := stream.Send(resp); err != nil {
			return err
		}
		s.metrics.observe("rlqs", "ok", time.Since(start))
	}
}

// bucketDescriptor is a bucket id's entries as a lease's descriptor
// words, in key order, bounded as ShouldRateLimit's descriptors are.
func bucketDescriptor(id *rlqspb.BucketId, l Limits) ([]string, error) {
	m := id.GetBucket()
	switch {
	case len(m) == 0:
		return nil, invalidReply("ERR a bucket id needs at least one entry")
	case len(m) > l.Entries:
		return nil, invalidReply(fmt.Sprintf("ERR a bucket id has %d entries, more than %d", len(m), l.Entries))
	}
	for k, v := range m {
		switch {
		case k == "":
			return nil, invalidReply("ERR a bucket id's key must not be empty")
		case len(k) > l.KeyBytes:
			return nil, invalidReply(fmt.Sprintf("ERR a bucket id's key is %d bytes, more than %d", len(k), l.KeyBytes))
		case len(v) > l.ValueBytes:
			return nil, invalidReply(fmt.Sprintf("ERR a bucket id's value is %d bytes, more than %d", len(v), l.ValueBytes))
		}
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	desc := make([]string, 0, 1+2*len(keys))
	desc = append(desc, "DESCRIPTOR")
	for _, k := range keys {
		desc = append(desc, k, m[k])
	}
	return desc, nil
}

// assign renews holder's lease of the bucket a usage report names and
// says what the data plane may admit until the next.
func (q quotaServer) assign(ctx context.Context, domain, holder string, u *rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage,
	held *streamHoldings) (*rlqspb.RateLimitQuotaResponse_BucketAction, error) {
	if len(domain) > q.s.cfg.Limits.DomainBytes {
		return nil, invalidReply(fmt.Sprintf("ERR the domain is %d bytes, more than %d", len(domain), q.s.cfg.Limits.DomainBytes))
	}
	desc, err := bucketDescriptor(u.GetBucketId(), q.s.cfg.Limits)
	if err != nil {
		return nil, err
	}
	interval := u.GetTimeElapsed().AsDuration()
	if interval > maxReportInterval {
		// Its lease would live two intervals: past a lease's longest ttl.
		return nil, invalidReply(fmt.Sprintf("ERR a report's time_elapsed is %s, more than %s", interval.Round(time.Second), maxReportInterval))
	}
	ttl := max(minLeaseTTL, 2*int64(math.Ceil(interval.Seconds())))
	over := max(1, int64(interval/time.Second))
	asked := satAdd(u.GetNumRequestsAllowed(), u.GetNumRequestsDenied())
	key := bucketKey(domain, desc)
	h := held.buckets[key]
	if h == nil {
		h = &heldBucket{domain: domain, desc: desc}
		switch cost := h.bytes(); {
		case len(held.buckets) >= maxStreamBuckets:
			return nil, fmt.Errorf("%w: more than %d", errTooManyBuckets, maxStreamBuckets)
		case held.bytes+cost > q.s.cfg.Quota.StreamBytes:
			return nil, fmt.Errorf("%w: their ids past %d bytes", errTooManyBuckets, q.s.cfg.Quota.StreamBytes)
		}
	}
	// What the data plane admitted is charged now, with what earlier
	// reports that did not land admitted; a data plane that saw no
	// request still asks for one, so its next finds a token.
	used := satAdd(h.unspent, u.GetNumRequestsAllowed())
	out, err := q.s.dec.Decide(ctx, shareArgs(domain, holder, ttl, min(used, math.MaxUint32), max(1, asked), over, desc))
	if err != nil {
		// Not asked (no leader now), or not known: either way the next
		// report charges these units (twice, if this one landed: never
		// fewer than were admitted). The bucket keeps the assignment it
		// has, which the cluster counts in force until its ttl.
		if held.buckets[key] == nil {
			// Held, so that what it admitted is charged later (not
			// abandoned before a report could).
			h.seen, h.lifetime = q.s.cfg.Now(), int64(minLeaseTTL*time.Second)
			held.buckets[key] = h
			held.bytes += h.bytes()
		}
		h.unspent = used
		return nil, err
	}
	if out.Err != "" {
		return nil, errReply{out.Err, out.Reason}
	}
	if !out.Shared {
		return nil, errBadReply
	}
	h.unspent = used - min(used, math.MaxUint32)
	sh := out.Share
	switch {
	case sh.Unlimited && held.buckets[key] != nil:
		// Nothing assigned, nothing to release: not held (its
		// assignment lapses at its ttl if it is not reported again).
		held.bytes -= h.bytes()
		delete(held.buckets, key)
	case !sh.Unlimited && held.buckets[key] == nil:
		held.buckets[key] = h
		held.bytes += h.bytes()
	}
	life := max(time.Duration(sh.TTL).Round(time.Second), time.Second)
	h.seen, h.lifetime = q.s.cfg.Now(), int64(life)
	strategy := &typepb.RateLimitStrategy{}
	switch {
	case sh.Unlimited:
		strategy.Strategy = &typepb.RateLimitStrategy_BlanketRule_{BlanketRule: typepb.RateLimitStrategy_ALLOW_ALL}
	case sh.Denied || sh.Burst <= 0:
		strategy.Strategy = &typepb.RateLimitStrategy_BlanketRule_{BlanketRule: typepb.RateLimitStrategy_DENY_ALL}
	default:
		// The generation in the interval's nanoseconds: Envoy compares
		// those (not the seconds) with its bucket's, and truncates the
		// interval to whole seconds.
		every := time.Duration(sh.Every)*time.Second + time.Duration(1+sh.Gen%(1e9-1))
		strategy.Strategy = &typepb.RateLimitStrategy_TokenBucket{TokenBucket: &typepb.TokenBucket{
			MaxTokens: uint32(min(sh.Burst, math.MaxUint32)), TokensPerFill: wrapperspb.UInt32(uint32(min(sh.PerFill, math.MaxUint32))),
			FillInterval: durationpb.New(every)}}
	}
	return &rlqspb.RateLimitQuotaResponse_BucketAction{
		BucketId: u.GetBucketId(),
		BucketAction: &rlqspb.RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction_{
			QuotaAssignmentAction: &rlqspb.RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction{
				AssignmentTimeToLive: durationpb.New(life), RateLimitStrategy: strategy}},
	}, nil
}

// shareArgs is the RL.SHARE of holder's report of a bucket: what it
// admitted (used) and was asked for (asked) over the last over seconds.
func shareArgs(domain, holder string, ttl int64, used, asked uint64, over int64, desc []string) [][]byte {
	args := []string{"RL.SHARE", domain, holder, strconv.FormatInt(ttl, 10), "USED", strconv.FormatUint(used, 10),
		"ASKED", strconv.FormatUint(min(asked, math.MaxUint32), 10), "OVER", strconv.FormatInt(min(over, 86400), 10)}
	return words(append(args, desc...))
}

// satAdd is a + b, at most the largest uint64.
func satAdd(a, b uint64) uint64 {
	if s, carry := bits.Add64(a, b, 0); carry == 0 {
		return s
	}
	return math.MaxUint64
}

// abandon drops the buckets the stream has not reported for two of
// their ttls — the data plane no longer sees requests for them — releasing
// their shares (charging what was admitted and not yet charged), and
// answers abandon_action for each, so the data plane drops their
// assignments too.
func (q quotaServer) abandon(holder string, held *streamHoldings) []*rlqspb.RateLimitQuotaResponse_BucketAction {
	now := q.s.cfg.Now()
	var out []*rlqspb.RateLimitQuotaResponse_BucketAction
	for key, h := range held.buckets {
		if now-h.seen < 2*h.lifetime {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err := q.release(ctx, holder, h)
		cancel()
		if err != nil {
			continue // asked again at the next report
		}
		delete(held.buckets, key)
		held.bytes -= h.bytes()
		out = append(out, &rlqspb.RateLimitQuotaResponse_BucketAction{BucketId: h.bucketID(),
			BucketAction: &rlqspb.RateLimitQuotaResponse_BucketAction_AbandonAction_{
				AbandonAction: &rlqspb.RateLimitQuotaResponse_BucketAction_AbandonAction{}}})
	}
	return out
}

// release asks for nothing more of h's bucket (an ask of 0 ends holder's
// assignment), charging what it admitted and was not charged yet.
func (q quotaServer) release(ctx context.Context, holder string, h *heldBucket) error {
	out, err := q.s.dec.Decide(ctx, shareArgs(h.domain, holder, minLeaseTTL, min(h.unspent, math.MaxUint32), 0, 1, h.desc))
	if err != nil {
		return err
	}
	if out.Err == "" {
		h.unspent = 0
	}
	return nil
}

// words is args as a command's words.
func words(args []string) [][]byte {
	out := make([][]byte, len(args))
	for i, a := range args {
		out[i] = []byte(a)
	}
	return out
}
