package etcd

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/status"
)

// The differential test: one sequence of operations, hand-written cases then a few hundred
// generated from a seed, goes to a fresh etcd and a fresh mote store replica, and every
// response must be the same once what legitimately differs is normalised:
//
//   - the identity in the top-level header (cluster_id, member_id, raft_term);
//   - lease ids, which each server picks: a lease is named by the order it was granted in;
//   - a lease's remaining TTL may differ by a second (the servers were asked a few
//     milliseconds apart), and the keys of TimeToLive and the leases of Leases are sorted
//     (etcd's come from a map, and in expiry order, which depends on when each server
//     granted them);
//   - how a watch's events are split into responses (where history stops and live events
//     start is a matter of timing), and the header revision of responses carrying events.
//
// The generator steers clear of what cannot compare or what breaks etcd itself: lease ids are
// compared for (in)equality only; TTLs are a minute or more, so no lease expires during the
// sequence; and generated txns hold no ignore_value or ignore_lease puts and no "from key"
// deletes (range_end "\0"). etcd 3.6.8's duplicate-key check reads such a delete as covering
// no key, so a txn may delete a key and then put it: an ignore_* put then panics etcd, and a
// compaction at that revision loses the put. The hand-written cases check the check itself.
//
// Set DIFF_SEED to run one more sequence from that seed, and DIFF_OPS for its length.

// diffKeys is the whole keyspace: at most 12 keys, so that etcd's sort, an insertion sort at
// that size, keeps ties in key order (beyond 12 its order among ties is arbitrary).
var diffKeys = []string{"a", "a/1", "a/2", "a/3", "a/9", "b", "b/1", "b/2", "c", "c/1", "d", "x"}

// diffPrefixes all cover some key of diffKeys.
var diffPrefixes = []string{"a/", "b/", "a", "c", "d"}

const (
	// unknownLease is never granted: requests with it must fail alike.
	unknownLease = 0x5eed
	// leaseToken+n stands for the n-th lease granted, in normalised responses.
	leaseToken = 7_000_000
)

// leaseRef stands for the n-th lease granted in a request; each backend puts its own id in.
func leaseRef(n int) int64 { return -int64(n) - 1 }

// op is one step of the sequence.
type op struct {
	Kind    string // range, put, delete, txn, compact, grant, revoke, ttl, leases, keepalive, watch
	Range   *pb.RangeRequest
	Put     *pb.PutRequest
	Delete  *pb.DeleteRangeRequest
	Txn     *pb.TxnRequest
	Compact int64
	Grant   *pb.LeaseGrantRequest
	Lease   int64 // a lease for revoke, ttl and keepalive: a leaseRef or unknownLease
	Keys    bool  // ttl: with the attached keys
	Watch   *pb.WatchCreateRequest
}

func (o op) String() string {
	switch o.Kind {
	case "range":
		return "range " + o.Range.String()
	case "put":
		return "put " + o.Put.String()
	case "delete":
		return "delete " + o.Delete.String()
	case "txn":
		return "txn " + o.Txn.String()
	case "compact":
		return fmt.Sprintf("compact %d", o.Compact)
	case "grant":
		return "grant " + o.Grant.String()
	case "watch":
		return "watch " + o.Watch.String()
	}
	return fmt.Sprintf("%s lease=%d keys=%v", o.Kind, o.Lease, o.Keys)
}

// backend is one server under comparison.
type backend struct {
	name   string
	kv     pb.KVClient
	lease  pb.LeaseClient
	watch  pb.WatchClient
	leases []int64 // every lease granted, in grant order
}

func newBackend(t *testing.T, s *server) *backend {
	conn := s.conn(t)
	return &backend{name: s.Kind, kv: pb.NewKVClient(conn), lease: pb.NewLeaseClient(conn), watch: pb.NewWatchClient(conn)}
}

// leaseID is this backend's id for a lease in a request.
func (b *backend) leaseID(v int64) int64 {
	if v >= 0 {
		return v
	}
	return b.leases[-v-1]
}

// normLease is the normalised name of one of this backend's lease ids.
func (b *backend) normLease(id int64) int64 {
	for i, l := range b.leases {
		if l == id {
			return leaseToken + int64(i)
		}
	}
	return id
}

type wire interface {
	Marshal() ([]byte, error)
	Unmarshal([]byte) error
}

// clone deep-copies a request, so each backend can put its own lease ids in.
func clone[T any, P interface {
	*T
	wire
}](m P) P {
	b, err := m.Marshal()
	if err != nil {
		panic(err)
	}
	c := P(new(T))
	if err := c.Unmarshal(b); err != nil {
		panic(err)
	}
	return c
}

func (b *backend) putRequest(p *pb.PutRequest) *pb.PutRequest {
	c := clone(p)
	c.Lease = b.leaseID(c.Lease)
	return c
}

func (b *backend) txnRequest(t *pb.TxnRequest) *pb.TxnRequest {
	c := clone(t)
	b.fillTxn(c)
	return c
}

func (b *backend) fillTxn(t *pb.TxnRequest) {
	for _, cmp := range t.Compare {
		if l, ok := cmp.TargetUnion.(*pb.Compare_Lease); ok {
			l.Lease = b.leaseID(l.Lease)
		}
	}
	for _, ops := range [][]*pb.RequestOp{t.Success, t.Failure} {
		for _, o := range ops {
			switch r := o.Request.(type) {
			case *pb.RequestOp_RequestPut:
				r.RequestPut.Lease = b.leaseID(r.RequestPut.Lease)
			case *pb.RequestOp_RequestTxn:
				b.fillTxn(r.RequestTxn)
			}
		}
	}
}

// topHeader drops what names the server from a response's own header.
func topHeader(h *pb.ResponseHeader) {
	if h != nil {
		h.ClusterId, h.MemberId, h.RaftTerm = 0, 0, 0
	}
}

func (b *backend) normKV(kv *mvccpb.KeyValue) {
	if kv != nil {
		kv.Lease = b.normLease(kv.Lease)
	}
}

func (b *backend) normKVs(kvs []*mvccpb.KeyValue) {
	for _, kv := range kvs {
		b.normKV(kv)
	}
}

// normTxn normalises the lease ids in a txn response; nested headers are compared as they are.
func (b *backend) normTxn(r *pb.TxnResponse) {
	for _, op := range r.Responses {
		switch v := op.Response.(type) {
		case *pb.ResponseOp_ResponseRange:
			b.normKVs(v.ResponseRange.Kvs)
		case *pb.ResponseOp_ResponsePut:
			b.normKV(v.ResponsePut.PrevKv)
		case *pb.ResponseOp_ResponseDeleteRange:
			b.normKVs(v.ResponseDeleteRange.PrevKvs)
		case *pb.ResponseOp_ResponseTxn:
			b.normTxn(v.ResponseTxn)
		}
	}
}

func errString(err error) string {
	s, _ := status.FromError(err)
	return fmt.Sprintf("error %v %q", s.Code(), s.Message())
}

// outcome is what one backend answered to one op, normalised; ttl is a remaining lease TTL,
// compared with a second's leeway.
type outcome struct {
	text string
	ttl  int64
}

// do sends o to the backend and returns its normalised answer.
func (b *backend) do(t *testing.T, o op) outcome {
	c := ctx(t)
	switch o.Kind {
	case "range":
		r, err := b.kv.Range(c, o.Range)
		if err != nil {
			return outcome{text: errString(err)}
		}
		topHeader(r.Header)
		b.normKVs(r.Kvs)
		return outcome{text: r.String()}
	case "put":
		r, err := b.kv.Put(c, b.putRequest(o.Put))
		if err != nil {
			return outcome{text: errString(err)}
		}
		topHeader(r.Header)
		b.normKV(r.PrevKv)
		return outcome{text: r.String()}
	case "delete":
		r, err := b.kv.DeleteRange(c, o.Delete)
		if err != nil {
			return outcome{text: errString(err)}
		}
		topHeader(r.Header)
		b.normKVs(r.PrevKvs)
		return outcome{text: r.String()}
	case "txn":
		r, err := b.kv.Txn(c, b.txnRequest(o.Txn))
		if err != nil {
			return outcome{text: errString(err)}
		}
		topHeader(r.Header)
		b.normTxn(r)
		return outcome{text: r.String()}
	case "compact":
		r, err := b.kv.Compact(c, &pb.CompactionRequest{Revision: o.Compact})
		if err != nil {
			return outcome{text: errString(err)}
		}
		topHeader(r.Header)
		return outcome{text: r.String()}
	case "grant":
		r, err := b.lease.LeaseGrant(c, o.Grant)
		if err != nil {
			return outcome{text: errString(err)}
		}
		b.leases = append(b.leases, r.ID)
		topHeader(r.Header)
		r.ID = b.normLease(r.ID)
		return outcome{text: r.String()}
	case "revoke":
		r, err := b.lease.LeaseRevoke(c, &pb.LeaseRevokeRequest{ID: b.leaseID(o.Lease)})
		if err != nil {
			return outcome{text: errString(err)}
		}
		topHeader(r.Header)
		return outcome{text: r.String()}
	case "ttl":
		r, err := b.lease.LeaseTimeToLive(c, &pb.LeaseTimeToLiveRequest{ID: b.leaseID(o.Lease), Keys: o.Keys})
		if err != nil {
			return outcome{text: errString(err)}
		}
		topHeader(r.Header)
		r.ID = b.normLease(r.ID)
		sort.Slice(r.Keys, func(i, j int) bool { return string(r.Keys[i]) < string(r.Keys[j]) })
		ttl := r.TTL
		r.TTL = 0
		return outcome{text: r.String(), ttl: ttl}
	case "leases":
		r, err := b.lease.LeaseLeases(c, &pb.LeaseLeasesRequest{})
		if err != nil {
			return outcome{text: errString(err)}
		}
		topHeader(r.Header)
		for _, l := range r.Leases {
			l.ID = b.normLease(l.ID)
		}
		sort.Slice(r.Leases, func(i, j int) bool { return r.Leases[i].ID < r.Leases[j].ID })
		return outcome{text: r.String()}
	case "keepalive":
		stream, err := b.lease.LeaseKeepAlive(c)
		if err != nil {
			t.Fatalf("%s: keep-alive stream: %v", b.name, err)
		}
		if err := stream.Send(&pb.LeaseKeepAliveRequest{ID: b.leaseID(o.Lease)}); err != nil {
			return outcome{text: errString(err)}
		}
		r, err := stream.Recv()
		_ = stream.CloseSend()
		if err != nil {
			return outcome{text: errString(err)}
		}
		topHeader(r.Header)
		r.ID = b.normLease(r.ID)
		return outcome{text: r.String()}
	case "watch":
		return outcome{text: b.replay(t, o.Watch)}
	}
	t.Fatalf("unknown op %q", o.Kind)
	return outcome{}
}

// replay opens a watch and collects what it delivers up to a marker: a write the test makes
// inside the watched range once the watch is created (a put, or for a watch that filters puts
// a put and a delete), so it knows when history has been delivered.
func (b *backend) replay(t *testing.T, create *pb.WatchCreateRequest) string {
	c, cancel := context.WithTimeout(ctx(t), 15*time.Second)
	defer cancel()
	stream, err := b.watch.Watch(c)
	if err != nil {
		t.Fatalf("%s: watch stream: %v", b.name, err)
	}
	defer func() { _ = stream.CloseSend() }()
	if err := stream.Send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: create}}); err != nil {
		t.Fatalf("%s: watch create: %v", b.name, err)
	}
	var out []string
	control := func(r *pb.WatchResponse) string {
		return fmt.Sprintf("id=%d created=%v canceled=%v compact=%d reason=%q fragment=%v revision=%d",
			r.WatchId, r.Created, r.Canceled, r.CompactRevision, r.CancelReason, r.Fragment, r.Header.Revision)
	}
	first, err := stream.Recv()
	if err != nil {
		t.Fatalf("%s: watch: %v", b.name, err)
	}
	out = append(out, "created: "+control(first))
	if first.Canceled {
		return strings.Join(out, "\n")
	}
	if len(first.Events) > 0 {
		t.Fatalf("%s: events in the created response", b.name)
	}
	key := markerKey(create)
	noPut := false
	for _, f := range create.Filters {
		noPut = noPut || f == pb.WatchCreateRequest_NOPUT
	}
	put := b.do(t, op{Kind: "put", Put: &pb.PutRequest{Key: []byte(key), Value: []byte("marker")}})
	out = append(out, "marker: "+put.text)
	marker := revisionOf(t, put.text)
	if noPut {
		del := b.do(t, op{Kind: "delete", Delete: &pb.DeleteRangeRequest{Key: []byte(key)}})
		out = append(out, "marker: "+del.text)
		marker++
	}
	for {
		r, err := stream.Recv()
		if err != nil {
			t.Fatalf("%s: watch ended before its marker at %d: %v\n%s", b.name, marker, err, strings.Join(out, "\n"))
		}
		if len(r.Events) == 0 {
			out = append(out, "response: "+control(r))
			if r.Canceled {
				return strings.Join(out, "\n")
			}
			continue
		}
		if r.Canceled || r.CompactRevision != 0 || r.Created || r.WatchId != first.WatchId {
			out = append(out, "events with: "+control(r))
		}
		for _, e := range r.Events {
			b.normKV(e.Kv)
			b.normKV(e.PrevKv)
			out = append(out, "event: "+e.String())
			if string(e.Kv.Key) == key && e.Kv.ModRevision == marker {
				return strings.Join(append(out, b.progress(t, stream)), "\n")
			}
		}
	}
}

// progress asks a stream whose watcher has caught up for a progress notification, and
// returns it.
func (b *backend) progress(t *testing.T, stream pb.Watch_WatchClient) string {
	req := &pb.WatchRequest{RequestUnion: &pb.WatchRequest_ProgressRequest{ProgressRequest: &pb.WatchProgressRequest{}}}
	if err := stream.Send(req); err != nil {
		t.Fatalf("%s: progress request: %v", b.name, err)
	}
	r, err := stream.Recv()
	if err != nil {
		t.Fatalf("%s: no answer to a progress request: %v", b.name, err)
	}
	topHeader(r.Header)
	return "progress: " + r.String()
}

// revisionOf reads the header revision back from a normalised put or delete response.
func revisionOf(t *testing.T, text string) int64 {
	i := strings.Index(text, "revision:")
	if i < 0 {
		t.Fatalf("no revision in %q", text)
	}
	f := strings.Fields(text[i+len("revision:"):])
	rev, err := strconv.ParseInt(strings.Trim(f[0], "> "), 10, 64)
	if err != nil {
		t.Fatalf("revision in %q: %v", text, err)
	}
	return rev
}

// inRange says whether key is in etcd's range [start, end).
func inRange(key string, start, end []byte) bool {
	switch {
	case len(end) == 0:
		return key == string(start)
	case len(end) == 1 && end[0] == 0:
		return key >= string(start)
	default:
		return key >= string(start) && key < string(end)
	}
}

// markerKey is a key of diffKeys in the watched range; the generator only asks for watches
// over ranges that have one.
func markerKey(w *pb.WatchCreateRequest) string {
	for _, k := range diffKeys {
		if inRange(k, w.Key, w.RangeEnd) {
			return k
		}
	}
	panic("a watch over a range without keys: " + w.String())
}

// gen makes random ops, tracking what it needs to make them plausible.
type gen struct {
	r         *rand.Rand
	rev       int64
	compacted int64
	granted   int // leases granted so far
	live      []int
	values    []string
	n         int
}

func (g *gen) key() string { return diffKeys[g.r.IntN(len(diffKeys))] }

func prefixEnd(p string) []byte { return []byte(clientv3.GetPrefixRangeEnd(p)) }

// keyRange is a random key or range, in each of etcd's encodings.
func (g *gen) keyRange() ([]byte, []byte) {
	switch g.r.IntN(7) {
	case 0, 1:
		return []byte(g.key()), nil
	case 2:
		p := diffPrefixes[g.r.IntN(len(diffPrefixes))]
		return []byte(p), prefixEnd(p)
	case 3:
		a, b := g.key(), g.key()
		return []byte(a), []byte(b)
	case 4:
		return []byte(g.key()), []byte{0}
	case 5:
		return []byte{0}, []byte{0}
	default:
		return []byte("a"), []byte("c")
	}
}

// revision is a revision around the readable history: some compacted, some in the future.
func (g *gen) revision() int64 {
	low := max(1, g.compacted-2)
	return low + g.r.Int64N(g.rev+3-low)
}

func (g *gen) value() string {
	if len(g.values) > 0 && g.r.IntN(2) == 0 {
		return g.values[g.r.IntN(len(g.values))]
	}
	g.n++
	v := fmt.Sprintf("v%d", g.n)
	g.values = append(g.values, v)
	return v
}

// lease is a lease to use: mostly a live one, sometimes one revoked or never granted.
func (g *gen) lease() int64 {
	switch {
	case len(g.live) > 0 && g.r.IntN(8) != 0:
		return leaseRef(g.live[g.r.IntN(len(g.live))])
	case g.granted > 0 && g.r.IntN(2) == 0:
		return leaseRef(g.r.IntN(g.granted))
	default:
		return unknownLease
	}
}

func (g *gen) rangeRequest() *pb.RangeRequest {
	key, end := g.keyRange()
	req := &pb.RangeRequest{Key: key, RangeEnd: end, Serializable: g.r.IntN(2) == 0}
	if g.r.IntN(3) == 0 {
		req.Limit = g.r.Int64N(5)
	}
	if g.r.IntN(4) == 0 {
		req.Revision = g.revision()
	}
	if g.r.IntN(2) == 0 {
		req.SortOrder = pb.RangeRequest_SortOrder(g.r.IntN(3))
		req.SortTarget = pb.RangeRequest_SortTarget(g.r.IntN(5))
	}
	req.KeysOnly = g.r.IntN(6) == 0
	req.CountOnly = g.r.IntN(6) == 0
	for _, f := range []*int64{&req.MinModRevision, &req.MaxModRevision, &req.MinCreateRevision, &req.MaxCreateRevision} {
		if g.r.IntN(8) == 0 {
			*f = g.r.Int64N(g.rev + 1)
		}
	}
	return req
}

func (g *gen) putRequest(inTxn bool) *pb.PutRequest {
	req := &pb.PutRequest{Key: []byte(g.key()), Value: []byte(g.value()), PrevKv: g.r.IntN(2) == 0}
	if g.r.IntN(4) == 0 {
		req.Lease = g.lease()
	}
	switch g.r.IntN(25) {
	case 0:
		req.IgnoreValue, req.Value = true, nil
	case 1:
		req.IgnoreLease, req.Lease = true, 0
	case 2:
		req.IgnoreValue = true
	case 3:
		if !inTxn {
			req.Key = nil
		}
	}
	return req
}

func (g *gen) deleteRequest() *pb.DeleteRangeRequest {
	key, end := g.keyRange()
	return &pb.DeleteRangeRequest{Key: key, RangeEnd: end, PrevKv: g.r.IntN(2) == 0}
}

func (g *gen) compare() *pb.Compare {
	c := &pb.Compare{Key: []byte(g.key()), Result: pb.Compare_CompareResult(g.r.IntN(4)), Target: pb.Compare_CompareTarget(g.r.IntN(5))}
	if g.r.IntN(6) == 0 {
		c.Key, c.RangeEnd = g.keyRange()
	}
	switch c.Target {
	case pb.Compare_VALUE:
		c.TargetUnion = &pb.Compare_Value{Value: []byte(g.value())}
	case pb.Compare_VERSION:
		c.TargetUnion = &pb.Compare_Version{Version: g.r.Int64N(4)}
	case pb.Compare_CREATE:
		c.TargetUnion = &pb.Compare_CreateRevision{CreateRevision: g.r.Int64N(g.rev + 1)}
	case pb.Compare_MOD:
		c.TargetUnion = &pb.Compare_ModRevision{ModRevision: g.r.Int64N(g.rev + 1)}
	case pb.Compare_LEASE:
		// Each server picks its own lease ids, so only whether a key has a lease, and which,
		// compares alike: a lease id is compared for (in)equality only.
		if g.r.IntN(3) == 0 {
			c.TargetUnion = &pb.Compare_Lease{Lease: 0}
		} else {
			c.TargetUnion = &pb.Compare_Lease{Lease: g.lease()}
			c.Result = []pb.Compare_CompareResult{pb.Compare_EQUAL, pb.Compare_NOT_EQUAL}[g.r.IntN(2)]
		}
	}
	return c
}

func (g *gen) txnRequest(depth int) *pb.TxnRequest {
	req := &pb.TxnRequest{}
	for i := g.r.IntN(4); i > 0; i-- {
		req.Compare = append(req.Compare, g.compare())
	}
	branch := func() []*pb.RequestOp {
		var ops []*pb.RequestOp
		for i := g.r.IntN(4); i > 0; i-- {
			switch k := g.r.IntN(10); {
			case k < 3:
				r := g.rangeRequest()
				if g.r.IntN(3) != 0 {
					r.Revision = 0
				}
				ops = append(ops, &pb.RequestOp{Request: &pb.RequestOp_RequestRange{RequestRange: r}})
			case k < 6:
				// No ignore_value or ignore_lease in a txn (see the top of the file).
				p := g.putRequest(true)
				p.IgnoreValue, p.IgnoreLease = false, false
				if len(p.Value) == 0 {
					p.Value = []byte(g.value())
				}
				ops = append(ops, &pb.RequestOp{Request: &pb.RequestOp_RequestPut{RequestPut: p}})
			case k < 8:
				// No "from key" delete in a txn (see the top of the file).
				d := g.deleteRequest()
				if bytes.Equal(d.RangeEnd, []byte{0}) {
					d.RangeEnd = []byte("y")
				}
				ops = append(ops, &pb.RequestOp{Request: &pb.RequestOp_RequestDeleteRange{RequestDeleteRange: d}})
			case depth < 2:
				ops = append(ops, &pb.RequestOp{Request: &pb.RequestOp_RequestTxn{RequestTxn: g.txnRequest(depth + 1)}})
			}
		}
		return ops
	}
	req.Success, req.Failure = branch(), branch()
	return req
}

func (g *gen) watchRequest() *pb.WatchCreateRequest {
	req := &pb.WatchCreateRequest{PrevKv: g.r.IntN(2) == 0}
	for {
		req.Key, req.RangeEnd = g.keyRange()
		if g.r.IntN(8) == 0 {
			break // maybe an empty range, which etcd refuses
		}
		if hasKey(req.Key, req.RangeEnd) {
			break
		}
	}
	switch k := g.r.IntN(10); {
	case k < 3:
		req.StartRevision = 0
	case k == 3:
		req.StartRevision = -1
	default:
		req.StartRevision = min(g.revision(), g.rev+1)
	}
	switch g.r.IntN(5) {
	case 0:
		req.Filters = []pb.WatchCreateRequest_FilterType{pb.WatchCreateRequest_NOPUT}
	case 1:
		req.Filters = []pb.WatchCreateRequest_FilterType{pb.WatchCreateRequest_NODELETE}
	}
	return req
}

func hasKey(start, end []byte) bool {
	for _, k := range diffKeys {
		if inRange(k, start, end) {
			return true
		}
	}
	return false
}

// next is a random op.
func (g *gen) next() op {
	switch k := g.r.IntN(100); {
	case k < 25:
		return op{Kind: "put", Put: g.putRequest(false)}
	case k < 45:
		return op{Kind: "range", Range: g.rangeRequest()}
	case k < 55:
		return op{Kind: "delete", Delete: g.deleteRequest()}
	case k < 75:
		return op{Kind: "txn", Txn: g.txnRequest(0)}
	case k < 77:
		c := g.revision()
		if g.r.IntN(4) == 0 {
			c = g.rev
		}
		return op{Kind: "compact", Compact: c}
	case k < 82:
		req := &pb.LeaseGrantRequest{TTL: 60 + g.r.Int64N(240)}
		// TTLs of a minute and more: a lease that expires during the sequence would expire
		// at a slightly different op on each server.
		switch g.r.IntN(12) {
		case 0:
			req.ID = 1001 + g.r.Int64N(3)
		case 1:
			req.TTL = 9_000_000_001
		}
		return op{Kind: "grant", Grant: req}
	case k < 85:
		return op{Kind: "revoke", Lease: g.lease()}
	case k < 88:
		return op{Kind: "ttl", Lease: g.lease(), Keys: g.r.IntN(2) == 0}
	case k < 89:
		return op{Kind: "leases"}
	case k < 91:
		return op{Kind: "keepalive", Lease: g.lease()}
	default:
		return op{Kind: "watch", Watch: g.watchRequest()}
	}
}

func txnOf(compare []*pb.Compare, success, failure []*pb.RequestOp) *pb.TxnRequest {
	return &pb.TxnRequest{Compare: compare, Success: success, Failure: failure}
}

func opPut(key, value string) *pb.RequestOp {
	return &pb.RequestOp{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte(key), Value: []byte(value)}}}
}

func opDelete(key, end string) *pb.RequestOp {
	return &pb.RequestOp{Request: &pb.RequestOp_RequestDeleteRange{RequestDeleteRange: &pb.DeleteRangeRequest{Key: []byte(key), RangeEnd: []byte(end)}}}
}

func opRange(r *pb.RangeRequest) *pb.RequestOp {
	return &pb.RequestOp{Request: &pb.RequestOp_RequestRange{RequestRange: r}}
}

func opTxn(t *pb.TxnRequest) *pb.RequestOp {
	return &pb.RequestOp{Request: &pb.RequestOp_RequestTxn{RequestTxn: t}}
}

// handWritten are the cases a random sequence rarely reaches.
func handWritten() []op {
	put := func(key, value string) op {
		return op{Kind: "put", Put: &pb.PutRequest{Key: []byte(key), Value: []byte(value), PrevKv: true}}
	}
	rng := func(r *pb.RangeRequest) op { return op{Kind: "range", Range: r} }
	txn := func(t *pb.TxnRequest) op { return op{Kind: "txn", Txn: t} }
	all := []byte{0}
	cmp := func(key string, target pb.Compare_CompareTarget, result pb.Compare_CompareResult, union any) *pb.Compare {
		c := &pb.Compare{Key: []byte(key), Target: target, Result: result}
		switch u := union.(type) {
		case int64:
			c.TargetUnion = &pb.Compare_Version{Version: u}
		case string:
			c.TargetUnion = &pb.Compare_Value{Value: []byte(u)}
		}
		return c
	}
	return []op{
		{Kind: "compact", Compact: 0},
		{Kind: "compact", Compact: -1},
		put("a", "1"), put("a/1", "5"), put("a/2", "3"), put("b", "4"), put("a", "2"), put("c", "0"),
		// count_only with a limit: no kvs, so no more.
		rng(&pb.RangeRequest{Key: all, RangeEnd: all, CountOnly: true, Limit: 1}),
		// No order: the limit applies before the sort.
		rng(&pb.RangeRequest{Key: all, RangeEnd: all, SortTarget: pb.RangeRequest_VALUE, Limit: 2}),
		rng(&pb.RangeRequest{Key: all, RangeEnd: all, SortTarget: pb.RangeRequest_VALUE, SortOrder: pb.RangeRequest_DESCEND, Limit: 2}),
		rng(&pb.RangeRequest{Key: all, RangeEnd: all, SortTarget: pb.RangeRequest_VERSION, SortOrder: pb.RangeRequest_DESCEND, KeysOnly: true}),
		rng(&pb.RangeRequest{Key: []byte("a"), RangeEnd: all, MinModRevision: 4, Limit: 1}),
		rng(&pb.RangeRequest{Key: []byte("c"), RangeEnd: []byte("a")}),
		rng(&pb.RangeRequest{Key: []byte("a"), SortTarget: 7}),
		rng(&pb.RangeRequest{Key: []byte("a"), SortOrder: 5}),
		// Every compare, nested ones too, sees the state before the txn.
		txn(txnOf(nil, []*pb.RequestOp{
			opPut("d", "new"),
			opTxn(txnOf([]*pb.Compare{cmp("d", pb.Compare_VERSION, pb.Compare_EQUAL, int64(0))},
				[]*pb.RequestOp{opRange(&pb.RangeRequest{Key: []byte("d")}), opPut("x", "then")},
				[]*pb.RequestOp{opPut("x", "else")})),
			opRange(&pb.RangeRequest{Key: []byte("x")}),
		}, nil)),
		// Checks apply to the branch taken only.
		txn(txnOf([]*pb.Compare{cmp("a", pb.Compare_VALUE, pb.Compare_EQUAL, "2")},
			[]*pb.RequestOp{opPut("b", "5")},
			[]*pb.RequestOp{{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte("b"), Lease: unknownLease}}}})),
		txn(txnOf(nil, []*pb.RequestOp{opRange(&pb.RangeRequest{Key: []byte("a"), Revision: 100})}, nil)),
		txn(txnOf(nil, []*pb.RequestOp{{}}, nil)),
		// Compare results and targets etcd does not name.
		txn(txnOf([]*pb.Compare{{Key: []byte("a"), Target: pb.Compare_VERSION, Result: 9}}, []*pb.RequestOp{opPut("x", "odd result")}, nil)),
		txn(txnOf([]*pb.Compare{{Key: []byte("a"), Target: 9, Result: pb.Compare_EQUAL}}, []*pb.RequestOp{opPut("x", "odd target")}, nil)),
		txn(txnOf([]*pb.Compare{{Key: []byte("a"), Target: pb.Compare_MOD, Result: pb.Compare_GREATER, TargetUnion: &pb.Compare_Version{Version: 100}}}, []*pb.RequestOp{opPut("x", "union")}, nil)),
		// Duplicate keys as etcd finds them: puts against puts and deletes, through nesting.
		txn(txnOf(nil, []*pb.RequestOp{opTxn(txnOf(nil, []*pb.RequestOp{opPut("d", "1")}, nil)), opTxn(txnOf(nil, []*pb.RequestOp{opDelete("d", "")}, nil))}, nil)),
		txn(txnOf(nil, []*pb.RequestOp{opTxn(txnOf(nil, []*pb.RequestOp{opDelete("d", "")}, nil)), opTxn(txnOf(nil, []*pb.RequestOp{opPut("d", "1")}, nil))}, nil)),
		txn(txnOf(nil, []*pb.RequestOp{opPut("b", "1"), opDelete("a", "\x00")}, nil)),
		txn(txnOf(nil, []*pb.RequestOp{opPut("b", "1"), opDelete("a", "c")}, nil)),
		txn(txnOf(nil, []*pb.RequestOp{opTxn(txnOf(nil, []*pb.RequestOp{opPut("d", "1")}, []*pb.RequestOp{opPut("d", "2")})), opPut("a", "3")}, nil)),
		// Put checks: an unknown lease is found before a missing key.
		op{Kind: "put", Put: &pb.PutRequest{Key: []byte("nope"), IgnoreValue: true, Lease: unknownLease}},
		op{Kind: "put", Put: &pb.PutRequest{Key: []byte("nope"), IgnoreValue: true}},
		op{Kind: "delete", Delete: &pb.DeleteRangeRequest{Key: []byte("nope"), PrevKv: true}},
		// Leases: the shortest TTL (revoked at once, before it can expire), an id of the
		// client's choice, a negative id.
		{Kind: "grant", Grant: &pb.LeaseGrantRequest{TTL: 0}},
		{Kind: "keepalive", Lease: leaseRef(0)},
		{Kind: "revoke", Lease: leaseRef(0)},
		{Kind: "grant", Grant: &pb.LeaseGrantRequest{TTL: 120, ID: 1000}},
		{Kind: "grant", Grant: &pb.LeaseGrantRequest{TTL: 120, ID: 1000}},
		{Kind: "grant", Grant: &pb.LeaseGrantRequest{TTL: 120, ID: -5}},
		{Kind: "put", Put: &pb.PutRequest{Key: []byte("b/1"), Value: []byte("leased"), Lease: leaseRef(1)}},
		{Kind: "put", Put: &pb.PutRequest{Key: []byte("b/2"), Value: []byte("leased"), Lease: leaseRef(1)}},
		{Kind: "ttl", Lease: leaseRef(1), Keys: true},
		{Kind: "revoke", Lease: leaseRef(1)},
		{Kind: "ttl", Lease: leaseRef(1), Keys: true},
		{Kind: "keepalive", Lease: leaseRef(1)},
		{Kind: "keepalive", Lease: leaseRef(2)},
		{Kind: "leases"},
		// Watches: an empty range, a negative start, from the start, after a compaction.
		{Kind: "watch", Watch: &pb.WatchCreateRequest{Key: []byte("b"), RangeEnd: []byte("a")}},
		{Kind: "watch", Watch: &pb.WatchCreateRequest{Key: []byte("a"), StartRevision: -3}},
		{Kind: "watch", Watch: &pb.WatchCreateRequest{Key: all, RangeEnd: all, StartRevision: 1, PrevKv: true}},
		{Kind: "compact", Compact: 5},
		{Kind: "watch", Watch: &pb.WatchCreateRequest{Key: all, RangeEnd: all, StartRevision: 4}},
		{Kind: "watch", Watch: &pb.WatchCreateRequest{Key: all, RangeEnd: all, StartRevision: 5, PrevKv: true}},
		rng(&pb.RangeRequest{Key: all, RangeEnd: all, Revision: 5}),
		rng(&pb.RangeRequest{Key: all, RangeEnd: all, Revision: 4}),
		{Kind: "compact", Compact: 5},
	}
}

func TestDifferential(t *testing.T) {
	seeds := []uint64{1, 2}
	if s := os.Getenv("DIFF_SEED"); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("DIFF_SEED=%q: %v", s, err)
		}
		seeds = append(seeds, seed)
	}
	length := 400
	if s := os.Getenv("DIFF_OPS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("DIFF_OPS=%q: %v", s, err)
		}
		length = n
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Parallel()
			differential(t, seed, length)
		})
	}
}

func differential(t *testing.T, seed uint64, length int) {
	etcd, mote := startEtcd(t), startMote(t, newMoteSpec(t, "a"))
	backends := []*backend{newBackend(t, etcd), newBackend(t, mote)}
	g := &gen{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), rev: 1}
	ops := handWritten()
	kinds := map[string]int{}
	start := time.Now()
	for i := 0; i < len(ops)+length; i++ {
		var o op
		if i < len(ops) {
			o = ops[i]
		} else {
			o = g.next()
		}
		kinds[o.Kind]++
		var got [2]outcome
		for j, b := range backends {
			got[j] = b.do(t, o)
		}
		if d := got[0].ttl - got[1].ttl; d >= -1 && d <= 1 {
			got[1].ttl = got[0].ttl
		}
		if got[0] != got[1] {
			t.Fatalf("op %d (seed %d): %s\netcd: %s (ttl %d)\nmote: %s (ttl %d)",
				i, seed, o, got[0].text, got[0].ttl, got[1].text, got[1].ttl)
		}
		g.observe(t, backends[0], o, got[0].text)
	}
	t.Logf("seed %d: %d ops alike on etcd and mote store in %v: %v", seed, len(ops)+length, time.Since(start).Round(time.Millisecond), kinds)
}

// observe updates what the generator knows after op o answered text on etcd.
func (g *gen) observe(t *testing.T, etcd *backend, o op, text string) {
	resp, err := etcd.kv.Range(ctx(t), &pb.RangeRequest{Key: []byte{0}, RangeEnd: []byte{0}, CountOnly: true})
	if err != nil {
		t.Fatalf("reading etcd's revision: %v", err)
	}
	g.rev = resp.Header.Revision
	failed := strings.HasPrefix(text, "error")
	switch o.Kind {
	case "compact":
		if !failed {
			g.compacted = max(g.compacted, o.Compact)
		}
	case "grant":
		if !failed {
			g.live = append(g.live, g.granted)
			g.granted++
		}
	case "revoke":
		if !failed && o.Lease < 0 {
			n := int(-o.Lease - 1)
			for i, l := range g.live {
				if l == n {
					g.live = append(g.live[:i], g.live[i+1:]...)
					break
				}
			}
		}
	}
}
