package etcd

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// collect reads n events from w, failing the test if the watch ends or takes over 10 s.
func collect(t testing.TB, w clientv3.WatchChan, n int) []*clientv3.Event {
	t.Helper()
	var events []*clientv3.Event
	timeout := time.After(10 * time.Second)
	for len(events) < n {
		select {
		case resp, open := <-w:
			if !open {
				t.Fatalf("the watch closed after %d of %d events", len(events), n)
			}
			if err := resp.Err(); err != nil {
				t.Fatalf("the watch failed after %d of %d events: %v", len(events), n, err)
			}
			events = append(events, resp.Events...)
		case <-timeout:
			t.Fatalf("%d of %d events after 10 s: %v", len(events), n, eventStrings(events))
		}
	}
	if len(events) > n {
		t.Fatalf("want %d events, got %v", n, eventStrings(events))
	}
	return events
}

// quiet fails the test if w delivers any event within d.
func quiet(t testing.TB, w clientv3.WatchChan, d time.Duration) {
	t.Helper()
	select {
	case resp := <-w:
		if len(resp.Events) > 0 {
			t.Fatalf("unexpected events: %v", eventStrings(resp.Events))
		}
	case <-time.After(d):
	}
}

// eventStrings renders events as "PUT key=value@mod_revision" and "DELETE key@mod_revision".
func eventStrings(events []*clientv3.Event) []string {
	out := make([]string, 0, len(events))
	for _, e := range events {
		if e.Type == mvccpb.DELETE {
			out = append(out, fmt.Sprintf("DELETE %s@%d", e.Kv.Key, e.Kv.ModRevision))
		} else {
			out = append(out, fmt.Sprintf("PUT %s=%s@%d", e.Kv.Key, e.Kv.Value, e.Kv.ModRevision))
		}
	}
	return out
}

func TestWatchEvents(t *testing.T) {
	onBoth(t, func(t *testing.T, s *server) {
		cli, c := s.client(t), ctx(t)
		from := ok(cli.Get(c, "x")).must(t).Header.Revision + 1
		prefix := cli.Watch(c, "w/", clientv3.WithPrefix(), clientv3.WithRev(from))
		ranged := cli.Watch(c, "w/a", clientv3.WithRange("w/b"), clientv3.WithRev(from))
		single := cli.Watch(c, "w/b", clientv3.WithRev(from))
		ok(cli.Put(c, "w/a", "1")).must(t)
		ok(cli.Put(c, "w/b", "2")).must(t)
		ok(cli.Put(c, "x", "outside")).must(t)
		ok(cli.Delete(c, "w/a")).must(t)
		ok(cli.Txn(c).Then(clientv3.OpPut("w/c", "3"), clientv3.OpPut("w/b", "4")).Commit()).must(t)
		got := collect(t, prefix, 5)
		// A txn's events come in the order of its operations.
		eq(t, "prefix", eventStrings(got), []string{"PUT w/a=1@2", "PUT w/b=2@3", "DELETE w/a@5", "PUT w/c=3@6", "PUT w/b=4@6"})
		eq(t, "range", eventStrings(collect(t, ranged, 2)), []string{"PUT w/a=1@2", "DELETE w/a@5"})
		eq(t, "one key", eventStrings(collect(t, single, 2)), []string{"PUT w/b=2@3", "PUT w/b=4@6"})
		b := got[4].Kv
		eq(t, "event kv", [3]int64{b.CreateRevision, b.Version, b.Lease}, [3]int64{3, 2, 0})
		if !got[0].IsCreate() || !got[3].IsCreate() || !got[4].IsModify() {
			t.Fatalf("create/modify flags: %v", eventStrings(got))
		}
		del := got[2].Kv
		eq(t, "a delete event carries the key and revision only", [4]int64{del.CreateRevision, del.Version, del.Lease, int64(len(del.Value))}, [4]int64{0, 0, 0, 0})

		// From now on (no start revision), once the watch is created.
		live := cli.Watch(c, "w/", clientv3.WithPrefix(), clientv3.WithCreatedNotify())
		created := <-live
		eq(t, "created", created.Created, true)
		eq(t, "created at the current revision", created.Header.Revision, int64(6))
		ok(cli.Put(c, "w/d", "5")).must(t)
		eq(t, "live", eventStrings(collect(t, live, 1)), []string{"PUT w/d=5@7"})

		history := cli.Watch(c, "w/b", clientv3.WithRev(1))
		eq(t, "history from revision 1", eventStrings(collect(t, history, 2)), []string{"PUT w/b=2@3", "PUT w/b=4@6"})
		future := cli.Watch(c, "w/", clientv3.WithPrefix(), clientv3.WithRev(9))
		ok(cli.Put(c, "w/e", "6")).must(t)
		ok(cli.Put(c, "w/f", "7")).must(t)
		eq(t, "from a future revision", eventStrings(collect(t, future, 1)), []string{"PUT w/f=7@9"})
	})
}

func TestWatchPrevKVAndFilters(t *testing.T) {
	onBoth(t, func(t *testing.T, s *server) {
		cli, c := s.client(t), ctx(t)
		ok(cli.Put(c, "k", "v1")).must(t)
		prev := cli.Watch(c, "k", clientv3.WithPrevKV(), clientv3.WithRev(3))
		noPut := cli.Watch(c, "k", clientv3.WithFilterPut(), clientv3.WithRev(3))
		noDelete := cli.Watch(c, "k", clientv3.WithFilterDelete(), clientv3.WithRev(3))
		plain := cli.Watch(c, "k", clientv3.WithRev(3))
		ok(cli.Put(c, "k", "v2")).must(t)
		ok(cli.Delete(c, "k")).must(t)
		ok(cli.Put(c, "k", "v3")).must(t)
		events := collect(t, prev, 3)
		var prevs []string
		for _, e := range events {
			if e.PrevKv == nil {
				prevs = append(prevs, "none")
			} else {
				prevs = append(prevs, fmt.Sprintf("%s@%d", e.PrevKv.Value, e.PrevKv.ModRevision))
			}
		}
		eq(t, "prev kvs", prevs, []string{"v1@2", "v2@3", "none"})
		for _, e := range collect(t, plain, 3) {
			if e.PrevKv != nil {
				t.Fatalf("prev_kv without asking: %v", e.PrevKv)
			}
		}
		eq(t, "no puts", eventStrings(collect(t, noPut, 1)), []string{"DELETE k@4"})
		eq(t, "no deletes", eventStrings(collect(t, noDelete, 2)), []string{"PUT k=v2@3", "PUT k=v3@5"})
		quiet(t, noPut, 200*time.Millisecond)
	})
}

func TestWatchCancel(t *testing.T) {
	onBoth(t, func(t *testing.T, s *server) {
		cli, c := s.client(t), ctx(t)
		wctx, cancel := context.WithCancel(c)
		w := cli.Watch(wctx, "k", clientv3.WithRev(2))
		ok(cli.Put(c, "k", "1")).must(t)
		collect(t, w, 1)
		cancel()
		deadline := time.After(10 * time.Second)
		for open := true; open; {
			select {
			case resp, more := <-w:
				open = more
				if more && len(resp.Events) > 0 {
					t.Fatalf("events after cancel: %v", eventStrings(resp.Events))
				}
			case <-deadline:
				t.Fatal("the watch channel stayed open after its context was canceled")
			}
		}

		// On one stream: cancel one watcher, the other keeps going.
		st := openWatch(t, s)
		st.create(t, &pb.WatchCreateRequest{Key: []byte("a")})
		st.create(t, &pb.WatchCreateRequest{Key: []byte("b")})
		noErr(t, st.Send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CancelRequest{
			CancelRequest: &pb.WatchCancelRequest{WatchId: 0},
		}}))
		canceled := st.next(t)
		eq(t, "canceled", [2]any{canceled.WatchId, canceled.Canceled}, [2]any{int64(0), true})
		ok(cli.Put(c, "a", "1")).must(t)
		ok(cli.Put(c, "b", "1")).must(t)
		resp := st.next(t)
		eq(t, "only the live watcher answers", [2]any{resp.WatchId, len(resp.Events)}, [2]any{int64(1), 1})
		noErr(t, st.Send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CancelRequest{
			CancelRequest: &pb.WatchCancelRequest{WatchId: 0},
		}}))
		st.none(t, 300*time.Millisecond)
	})
}

func TestWatchProgress(t *testing.T) {
	onBoth(t, func(t *testing.T, s *server) {
		cli, c := s.client(t), ctx(t)
		w := cli.Watch(c, "watched", clientv3.WithCreatedNotify())
		eq(t, "created", (<-w).Created, true)
		var last int64
		for i := 0; i < 3; i++ {
			last = ok(cli.Put(c, fmt.Sprintf("other%d", i), "x")).must(t).Header.Revision
		}
		noErr(t, cli.RequestProgress(c))
		select {
		case resp := <-w:
			if !resp.IsProgressNotify() {
				t.Fatalf("want a progress notification, got %+v", resp)
			}
			if resp.Header.Revision < last {
				t.Fatalf("progress at %d, before the last write at %d", resp.Header.Revision, last)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no answer to a progress request")
		}
		// The raw answer is for every watcher of the stream: watch id -1.
		st := openWatch(t, s)
		st.create(t, &pb.WatchCreateRequest{Key: []byte("watched")})
		noErr(t, st.Send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_ProgressRequest{ProgressRequest: &pb.WatchProgressRequest{}}}))
		resp := st.next(t)
		eq(t, "raw progress", [3]any{resp.WatchId, len(resp.Events), resp.Header.Revision}, [3]any{int64(-1), 0, last})
	})
}

func TestWatchProgressNotify(t *testing.T) {
	onBoth(t, func(t *testing.T, s *server) {
		cli, c := s.client(t), ctx(t)
		notified := cli.Watch(c, "idle", clientv3.WithProgressNotify(), clientv3.WithCreatedNotify())
		silent := cli.Watch(c, "idle2", clientv3.WithCreatedNotify())
		eq(t, "created", (<-notified).Created, true)
		eq(t, "created", (<-silent).Created, true)
		rev := ok(cli.Put(c, "elsewhere", "x")).must(t).Header.Revision
		start := time.Now()
		select {
		case resp := <-notified:
			if !resp.IsProgressNotify() {
				t.Fatalf("want a progress notification, got %+v", resp)
			}
			eq(t, "progress revision", resp.Header.Revision, rev)
			t.Logf("progress notification after %v", time.Since(start).Round(time.Millisecond))
		case <-time.After(3 * progressInterval):
			t.Fatalf("no progress notification in %v", 3*progressInterval)
		}
		select {
		case resp := <-silent:
			t.Fatalf("a watcher that did not ask got %+v", resp)
		case <-time.After(100 * time.Millisecond):
		}
	})
}

// bigValue is a value of n bytes.
func bigValue(n int, fill byte) string {
	return strings.Repeat(string([]byte{fill}), n)
}

func TestWatchFragment(t *testing.T) {
	onBoth(t, func(t *testing.T, s *server) {
		cli, c := s.client(t), ctx(t)
		// Four 600 kB writes, together over the 2 MiB a response may carry: etcd's request limit
		// (1.5 MiB) and what it allows gRPC on top (512 KiB).
		for i, k := range []string{"f/a", "f/b", "f/c", "f/d"} {
			ok(cli.Put(c, k, bigValue(600_000, byte('a'+i)))).must(t)
		}
		const maxBytes = 2 << 20
		st := openWatch(t, s)
		st.create(t, &pb.WatchCreateRequest{Key: []byte("f/"), RangeEnd: []byte("f0"), StartRevision: 2, Fragment: true})
		var parts []*pb.WatchResponse
		var got []string
		for {
			resp := st.next(t)
			parts = append(parts, resp)
			if len(resp.Events) == 0 {
				t.Fatalf("a fragment without events: %+v", resp)
			}
			if resp.Size() > maxBytes && len(resp.Events) > 1 {
				t.Fatalf("fragment of %d bytes with %d events", resp.Size(), len(resp.Events))
			}
			for _, e := range resp.Events {
				got = append(got, fmt.Sprintf("%s@%d", e.Kv.Key, e.Kv.ModRevision))
			}
			if !resp.Fragment {
				break
			}
		}
		if len(parts) < 2 {
			t.Fatalf("one response of %d bytes was not fragmented", parts[0].Size())
		}
		eq(t, "fragmented events", got, []string{"f/a@2", "f/b@3", "f/c@4", "f/d@5"})

		whole := openWatch(t, s)
		whole.create(t, &pb.WatchCreateRequest{Key: []byte("f/"), RangeEnd: []byte("f0"), StartRevision: 2})
		resp := whole.next(t)
		eq(t, "without fragment: one response", [2]any{len(resp.Events), resp.Fragment}, [2]any{4, false})

		events := collect(t, cli.Watch(c, "f/", clientv3.WithPrefix(), clientv3.WithRev(2), clientv3.WithFragment()), 4)
		eq(t, "clientv3 joins the fragments", len(events[3].Kv.Value), 600_000)
	})
}

func TestWatchCreateErrors(t *testing.T) {
	onBoth(t, func(t *testing.T, s *server) {
		st := openWatch(t, s)
		created := st.create(t, &pb.WatchCreateRequest{Key: []byte("k"), WatchId: 7})
		eq(t, "an id of the client's choice", created.WatchId, int64(7))
		noErr(t, st.Send(createRequest(&pb.WatchCreateRequest{Key: []byte("k"), WatchId: 7})))
		dup := st.next(t)
		eq(t, "duplicate id", [4]any{dup.WatchId, dup.Created, dup.Canceled, dup.CancelReason},
			[4]any{int64(-1), true, true, "mvcc: duplicate watch ID provided on the WatchStream"})
		noErr(t, st.Send(createRequest(&pb.WatchCreateRequest{Key: []byte("b"), RangeEnd: []byte("a")})))
		empty := st.next(t)
		eq(t, "an empty range", [4]any{empty.WatchId, empty.Created, empty.Canceled, empty.CancelReason},
			[4]any{int64(-1), true, true, "mvcc: watcher range is empty"})
		noErr(t, st.Send(createRequest(&pb.WatchCreateRequest{Key: []byte("k"), StartRevision: -1})))
		negative := st.next(t)
		eq(t, "a negative start", [4]any{negative.WatchId, negative.Created, negative.Canceled, negative.CancelReason},
			[4]any{int64(-1), true, true, rpctypes.ErrCompacted.Error()})
		auto := st.create(t, &pb.WatchCreateRequest{Key: []byte("k")})
		eq(t, "the next automatic id", auto.WatchId, int64(0))
	})
}

// rawStream is a Watch stream spoken in etcd's protocol, to see what clientv3 hides.
type rawStream struct {
	pb.Watch_WatchClient
	responses chan *pb.WatchResponse
}

func openWatch(t testing.TB, s *server) *rawStream {
	t.Helper()
	stream := ok(pb.NewWatchClient(s.conn(t)).Watch(ctx(t))).must(t)
	st := &rawStream{Watch_WatchClient: stream, responses: make(chan *pb.WatchResponse, 1024)}
	go func() {
		defer close(st.responses)
		for {
			resp, err := stream.Recv()
			if err != nil {
				return
			}
			st.responses <- resp
		}
	}()
	return st
}

func createRequest(req *pb.WatchCreateRequest) *pb.WatchRequest {
	return &pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: req}}
}

// create creates a watcher and returns the server's confirmation.
func (st *rawStream) create(t testing.TB, req *pb.WatchCreateRequest) *pb.WatchResponse {
	t.Helper()
	noErr(t, st.Send(createRequest(req)))
	resp := st.next(t)
	if !resp.Created || resp.Canceled {
		t.Fatalf("watch not created: %+v", resp)
	}
	return resp
}

// next is the next response, failing the test after 10 s.
func (st *rawStream) next(t testing.TB) *pb.WatchResponse {
	t.Helper()
	select {
	case resp, open := <-st.responses:
		if !open {
			t.Fatal("the watch stream ended")
		}
		return resp
	case <-time.After(10 * time.Second):
		t.Fatal("no watch response in 10 s")
	}
	return nil
}

// none fails the test if a response arrives within d.
func (st *rawStream) none(t testing.TB, d time.Duration) {
	t.Helper()
	select {
	case resp, open := <-st.responses:
		if open {
			t.Fatalf("unexpected watch response: %+v", resp)
		}
	case <-time.After(d):
	}
}
