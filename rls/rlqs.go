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

// quotaServer answers RLQS streams with leases (RL.LEASE): each stream is
// a holder, each bucket a lease it holds. On every report of a bucket the
// holder gives back what it did not use of its last grant (RL.LEASE
// RETURN, from the report's allowed count: never more than it left) and
// asks for what it was asked for in the report's interval (allowed +
// denied); the grant comes back as a token bucket of that many tokens,
// filled once per ttl, the ttl two report intervals in whole seconds (at
// least 2 s) — renewed by the next report long before it ends. A bucket
// no rule limits is ALLOW_ALL; one whose rule admits nothing, or whose
// share is nothing now, is DENY_ALL until the next report. A bucket the
// stream stops reporting for two ttls is abandoned (abandon_action).
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
// only copy of its id's entries: the id is rebuilt from it), the last
// grant, and when it was last reported and for how long its assignment
// lives (ns).
type heldBucket struct {
	domain  string
	desc    []string
	granted int64
	// allowed is what the data plane reported admitting since the grant:
	// a report whose return did not land keeps its count for the next
	// return, which gives back only what all of them left.
	allowed uint64
	// grant is the id of the grant held (0: not known, a log below apply
	// level 1): its return names it, so a late copy of the return never
	// ends a later grant.
	grant    int64
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
	defer q.giveBack(holder, held)
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
	asked, carry := bits.Add64(u.GetNumRequestsAllowed(), u.GetNumRequestsDenied(), 0)
	if carry != 0 {
		asked = math.MaxUint64 // counts that overflow: as many as can be
	}
	want := max(1, min(asked, math.MaxUint32))
	key := bucketKey(domain, desc)
	if held.buckets[key] == nil {
		cost := (&heldBucket{domain: domain, desc: desc}).bytes()
		switch {
		case len(held.buckets) >= maxStreamBuckets:
			return nil, fmt.Errorf("%w: more than %d", errTooManyBuckets, maxStreamBuckets)
		case held.bytes+cost > q.s.cfg.Quota.StreamBytes:
			return nil, fmt.Errorf("%w: their ids past %d bytes", errTooManyBuckets, q.s.cfg.Quota.StreamBytes)
		}
	}
	refunded := false
	if h := held.buckets[key]; h != nil && h.granted > 0 {
		// What the last grant left, by the data plane's counts since it
		// (this report's, and those of reports whose return did not
		// land): it may have admitted under an older assignment too, so
		// this is never more than it left.
		h.allowed = satAdd(h.allowed, u.GetNumRequestsAllowed())
		unused := max(h.granted-int64(min(h.allowed, math.MaxInt64)), 0)
		out, err := q.s.dec.Decide(ctx, returnArgs(domain, holder, unused, h.grant, desc))
		if err != nil {
			// Not asked (no leader now), or not known: the next report
			// gives it back again (naming the grant: a copy that landed
			// ends nothing), with this report's count kept; a lease asked
			// for now would only be the one held.
			return nil, err
		}
		if out.Err != "" {
			q.s.cfg.Log.Warn("rlqs: a lease was not given back", "domain", domain, "reply", out.Err)
		}
		h.granted, h.grant, h.allowed = 0, 0, 0
		refunded = true
	}
	args := append([]string{"RL.LEASE", domain, holder, strconv.FormatInt(ttl, 10), "WANT", strconv.FormatUint(want, 10)}, desc...)
	out, err := q.s.dec.Decide(ctx, words(args))
	if err != nil {
		if code := errorStatus(err).Code(); refunded && (code == codes.Unavailable || code == codes.Unknown) {
			// What the data plane's assignment had left was just given
			// back: its token bucket must not go on admitting from it.
			// Nothing to admit until the next report asks again (a lease
			// whose outcome is not known is renewed then, not added to).
			return denyAll(u.GetBucketId(), time.Duration(ttl)*time.Second), nil
		}
		return nil, err
	}
	if out.Err != "" {
		return nil, errReply{out.Err, out.Reason}
	}
	if !out.Leased {
		return nil, errBadReply
	}
	l := out.Lease
	life := time.Duration(l.TTL).Round(time.Second)
	if life < time.Second {
		life = time.Second
	}
	if l.Unlimited {
		// Nothing charged, nothing to give back: not held (its assignment
		// lapses at its ttl if it is not reported again).
		if h := held.buckets[key]; h != nil {
			held.bytes -= h.bytes()
			delete(held.buckets, key)
		}
	} else if h := held.buckets[key]; h != nil {
		h.granted, h.grant, h.seen, h.lifetime = l.Granted, l.Grant, q.s.cfg.Now(), int64(life)
	} else {
		h := &heldBucket{domain: domain, desc: desc, granted: l.Granted, grant: l.Grant, seen: q.s.cfg.Now(), lifetime: int64(life)}
		held.buckets[key] = h
		held.bytes += h.bytes()
	}
	strategy := &typepb.RateLimitStrategy{}
	switch {
	case l.Unlimited:
		strategy.Strategy = &typepb.RateLimitStrategy_BlanketRule_{BlanketRule: typepb.RateLimitStrategy_ALLOW_ALL}
	case l.Denied || l.Granted <= 0:
		strategy.Strategy = &typepb.RateLimitStrategy_BlanketRule_{BlanketRule: typepb.RateLimitStrategy_DENY_ALL}
	default:
		tokens := uint32(min(l.Granted, math.MaxUint32))
		strategy.Strategy = &typepb.RateLimitStrategy_TokenBucket{TokenBucket: &typepb.TokenBucket{
			MaxTokens: tokens, TokensPerFill: wrapperspb.UInt32(tokens), FillInterval: durationpb.New(life)}}
	}
	return &rlqspb.RateLimitQuotaResponse_BucketAction{
		BucketId: u.GetBucketId(),
		BucketAction: &rlqspb.RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction_{
			QuotaAssignmentAction: &rlqspb.RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction{
				AssignmentTimeToLive: durationpb.New(life), RateLimitStrategy: strategy}},
	}, nil
}

// denyAll is an assignment that admits nothing for life.
func denyAll(id *rlqspb.BucketId, life time.Duration) *rlqspb.RateLimitQuotaResponse_BucketAction {
	return &rlqspb.RateLimitQuotaResponse_BucketAction{
		BucketId: id,
		BucketAction: &rlqspb.RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction_{
			QuotaAssignmentAction: &rlqspb.RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction{
				AssignmentTimeToLive: durationpb.New(life),
				RateLimitStrategy: &typepb.RateLimitStrategy{Strategy: &typepb.RateLimitStrategy_BlanketRule_{
					BlanketRule: typepb.RateLimitStrategy_DENY_ALL}}}},
	}
}

// satAdd is a + b, at most the largest uint64.
func satAdd(a, b uint64) uint64 {
	if s, carry := bits.Add64(a, b, 0); carry == 0 {
		return s
	}
	return math.MaxUint64
}

// abandon ends the leases of the buckets the stream has not reported for
// two of their ttls — the data plane no longer sees requests for them —
// giving back nothing unused (what they left is not known: their charge
// stays), and answers abandon_action for each, so the data plane drops
// their assignments too.
func (q quotaServer) abandon(holder string, held *streamHoldings) []*rlqspb.RateLimitQuotaResponse_BucketAction {
	now := q.s.cfg.Now()
	var out []*rlqspb.RateLimitQuotaResponse_BucketAction
	for key, h := range held.buckets {
		if now-h.seen < 2*h.lifetime {
			continue
		}
		if h.granted > 0 {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_, err := q.s.dec.Decide(ctx, returnArgs(h.domain, holder, 0, h.grant, h.desc))
			cancel()
			if err != nil {
				continue // asked again at the next report
			}
		}
		delete(held.buckets, key)
		held.bytes -= h.bytes()
		out = append(out, &rlqspb.RateLimitQuotaResponse_BucketAction{BucketId: h.bucketID(),
			BucketAction: &rlqspb.RateLimitQuotaResponse_BucketAction_AbandonAction_{
				AbandonAction: &rlqspb.RateLimitQuotaResponse_BucketAction_AbandonAction{}}})
	}
	return out
}

// giveBack ends a stream's leases: what they left is not known (the data
// plane's last report came before its last requests), so each is given
// back at nothing unused — its charge stays, as if it had run out — and
// its record goes now instead of at its ttl.
func (q quotaServer) giveBack(holder string, held *streamHoldings) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, h := range held.buckets {
		if h.granted <= 0 {
			continue
		}
		if _, err := q.s.dec.Decide(ctx, returnArgs(h.domain, holder, 0, h.grant, h.desc)); err != nil {
			return // it expires with its ttl
		}
	}
}

// returnArgs is the RL.LEASE RETURN giving back unused units of holder's
// lease of the bucket desc names: of the grant whose id is grant (0: the
// one held).
func returnArgs(domain, holder string, unused, grant int64, desc []string) [][]byte {
	args := []string{"RL.LEASE", "RETURN", domain, holder, "UNUSED", strconv.FormatInt(unused, 10)}
	if grant > 0 {
		args = append(args, "GRANT", strconv.FormatInt(grant, 10))
	}
	return words(append(args, desc...))
}

// words is args as a command's words.
func words(args []string) [][]byte {
	out := make([][]byte, len(args))
	for i, a := range args {
		out[i] = []byte(a)
	}
	return out
}
