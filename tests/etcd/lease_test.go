package etcd

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func leaseIDs(t testing.TB, cli *clientv3.Client) []clientv3.LeaseID {
	t.Helper()
	var ids []clientv3.LeaseID
	for _, l := range ok(cli.Leases(ctx(t))).must(t).Leases {
		ids = append(ids, l.ID)
	}
	return ids
}

func TestLease(t *testing.T) {
	onBoth(t, func(t *testing.T, s *server) {
		cli, c := s.client(t), ctx(t)
		g := ok(cli.Grant(c, 60)).must(t)
		granted := time.Now()
		eq(t, "granted TTL", g.TTL, int64(60))
		// Whole seconds left, rounded down: 59 within the first second.
		if first := ok(cli.TimeToLive(c, g.ID)).must(t).TTL; time.Since(granted) < 900*time.Millisecond {
			eq(t, "remaining TTL just after the grant", first, int64(59))
		}
		if g.ID <= 0 {
			t.Fatalf("lease id %d", g.ID)
		}
		ok(cli.Put(c, "lk1", "a", clientv3.WithLease(g.ID))).must(t)
		ok(cli.Put(c, "lk2", "b", clientv3.WithLease(g.ID))).must(t)
		ok(cli.Put(c, "lk3", "c", clientv3.WithLease(g.ID))).must(t)
		ok(cli.Put(c, "lk3", "c")).must(t)
		ok(cli.Put(c, "other", "d")).must(t)
		eq(t, "a key's lease", clientv3.LeaseID(ok(cli.Get(c, "lk1")).must(t).Kvs[0].Lease), g.ID)

		ttl := ok(cli.TimeToLive(c, g.ID, clientv3.WithAttachedKeys())).must(t)
		eq(t, "granted", ttl.GrantedTTL, int64(60))
		if ttl.TTL < 58 || ttl.TTL > 60 {
			t.Fatalf("remaining TTL %d, want 58..60", ttl.TTL)
		}
		var attached []string
		for _, k := range ttl.Keys {
			attached = append(attached, string(k))
		}
		eq(t, "attached keys (lk3 was put again without the lease)", sorted(attached), []string{"lk1", "lk2"})
		eq(t, "keys only when asked", len(ok(cli.TimeToLive(c, g.ID)).must(t).Keys), 0)
		if !slices.Contains(leaseIDs(t, cli), g.ID) {
			t.Fatalf("Leases does not list %x", g.ID)
		}

		once := ok(cli.KeepAliveOnce(c, g.ID)).must(t)
		eq(t, "keep-alive", [2]any{once.ID, once.TTL}, [2]any{g.ID, int64(60)})
		kctx, stop := context.WithCancel(c)
		alive := ok(cli.KeepAlive(kctx, g.ID)).must(t)
		select {
		case resp := <-alive:
			if resp == nil || resp.TTL != 60 {
				t.Fatalf("keep-alive stream: %+v", resp)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no keep-alive response")
		}
		stop()

		next := ok(cli.Get(c, "x")).must(t).Header.Revision + 1
		w := cli.Watch(c, "lk", clientv3.WithPrefix(), clientv3.WithRev(next))
		revoked := ok(cli.Revoke(c, g.ID)).must(t)
		eq(t, "revoking deletes the keys in one revision", eventStrings(collect(t, w, 2)), []string{
			"DELETE lk1@" + itoa(next), "DELETE lk2@" + itoa(next),
		})
		eq(t, "revoke answers after the deletes", revoked.Header.Revision, next)
		eq(t, "lease keys gone", keys(ok(cli.Get(c, "", clientv3.WithPrefix())).must(t).Kvs), []string{"lk3", "other"})
		eq(t, "TTL of a revoked lease", ok(cli.TimeToLive(c, g.ID)).must(t).TTL, int64(-1))
		_, err := cli.Revoke(c, g.ID)
		wantErr(t, err, rpctypes.ErrLeaseNotFound)
		_, err = cli.KeepAliveOnce(c, g.ID)
		wantErr(t, err, rpctypes.ErrLeaseNotFound)
		if slices.Contains(leaseIDs(t, cli), g.ID) {
			t.Fatalf("Leases still lists %x", g.ID)
		}
		_, err = cli.Grant(c, 9_000_000_001)
		wantErr(t, err, rpctypes.ErrLeaseTTLTooLarge)
		eq(t, "the shortest TTL", ok(cli.Grant(c, 0)).must(t).TTL, int64(1))

		empty := ok(cli.Grant(c, 60)).must(t)
		before := ok(cli.Get(c, "x")).must(t).Header.Revision
		eq(t, "revoking a lease without keys writes nothing", ok(cli.Revoke(c, empty.ID)).must(t).Header.Revision, before)
	})
}

func TestLeaseExpiry(t *testing.T) {
	onBoth(t, func(t *testing.T, s *server) {
		cli, c := s.client(t), ctx(t)
		short := ok(cli.Grant(c, 2)).must(t)
		kept := ok(cli.Grant(c, 2)).must(t)
		start := time.Now()
		ok(cli.Put(c, "e/1", "x", clientv3.WithLease(short.ID))).must(t)
		ok(cli.Put(c, "e/2", "y", clientv3.WithLease(short.ID))).must(t)
		ok(cli.Put(c, "k/1", "z", clientv3.WithLease(kept.ID))).must(t)
		w := cli.Watch(c, "e/", clientv3.WithPrefix(), clientv3.WithRev(5))
		kctx, stop := context.WithCancel(c)
		defer stop()
		ok(cli.KeepAlive(kctx, kept.ID)).must(t)

		events := collect(t, w, 2)
		took := time.Since(start)
		t.Logf("the lease expired after %v", took.Round(time.Millisecond))
		eq(t, "expiry deletes the keys in one revision", eventStrings(events), []string{"DELETE e/1@5", "DELETE e/2@5"})
		if took < 1500*time.Millisecond {
			t.Fatalf("a 2 s lease expired after %v", took)
		}
		eq(t, "TTL of an expired lease", ok(cli.TimeToLive(c, short.ID)).must(t).TTL, int64(-1))
		eq(t, "keys gone", ok(cli.Get(c, "e/", clientv3.WithPrefix())).must(t).Count, int64(0))

		time.Sleep(time.Until(start.Add(3 * time.Second)))
		eq(t, "a kept-alive lease keeps its key", values(ok(cli.Get(c, "k/1")).must(t).Kvs), []string{"z"})
		if ttl := ok(cli.TimeToLive(c, kept.ID)).must(t).TTL; ttl <= 0 {
			t.Fatalf("kept-alive lease TTL %d", ttl)
		}
	})
}

func TestRequireLeader(t *testing.T) {
	onBoth(t, func(t *testing.T, s *server) {
		cli := s.client(t)
		c := clientv3.WithRequireLeader(ctx(t))
		w := cli.Watch(c, "rl", clientv3.WithRev(2))
		ok(cli.Put(c, "rl", "1")).must(t)
		eq(t, "get", values(ok(cli.Get(c, "rl")).must(t).Kvs), []string{"1"})
		ok(cli.Txn(c).Then(clientv3.OpPut("rl", "2")).Commit()).must(t)
		ok(cli.Grant(c, 10)).must(t)
		eq(t, "watch", eventStrings(collect(t, w, 2)), []string{"PUT rl=1@2", "PUT rl=2@3"})
	})
}

func TestMaintenance(t *testing.T) {
	onBoth(t, func(t *testing.T, s *server) {
		cli, c := s.client(t), ctx(t)
		rev := ok(cli.Put(c, "k", "v")).must(t).Header.Revision
		st := ok(cli.Status(c, s.Endpoint)).must(t)
		if !strings.HasPrefix(st.Version, "3.") {
			t.Fatalf("version %q", st.Version)
		}
		if st.Header.MemberId == 0 || st.Leader != st.Header.MemberId {
			t.Fatalf("member %x, leader %x: a lone member leads", st.Header.MemberId, st.Leader)
		}
		if st.DbSize <= 0 || st.RaftIndex == 0 {
			t.Fatalf("db size %d, raft index %d", st.DbSize, st.RaftIndex)
		}
		eq(t, "status revision", st.Header.Revision, rev)
		members := ok(cli.MemberList(c)).must(t).Members
		eq(t, "one member", len(members), 1)
		m := members[0]
		eq(t, "member", [5]any{m.ID, m.Name, m.ClientURLs, m.PeerURLs, m.IsLearner},
			[5]any{st.Header.MemberId, s.Name, []string{"http://" + s.Endpoint}, []string{s.PeerURL}, false})
		eq(t, "no alarms", len(ok(cli.AlarmList(c)).must(t).Alarms), 0)
	})
}
