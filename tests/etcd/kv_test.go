package etcd

import (
	"bytes"
	"fmt"
	"sort"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func TestPut(t *testing.T) {
	onBoth(t, func(t *testing.T, s *server) {
		cli, c := s.client(t), ctx(t)
		first := ok(cli.Put(c, "k", "v1")).must(t)
		eq(t, "revision of the first write", first.Header.Revision, int64(2))
		if first.PrevKv != nil {
			t.Fatalf("prev_kv without asking: %v", first.PrevKv)
		}
		second := ok(cli.Put(c, "k", "v2", clientv3.WithPrevKV())).must(t)
		eq(t, "revision", second.Header.Revision, int64(3))
		prev := second.PrevKv
		if prev == nil || string(prev.Value) != "v1" || prev.ModRevision != 2 || prev.Version != 1 {
			t.Fatalf("prev_kv: got %v, want v1 at revision 2, version 1", prev)
		}
		got := ok(cli.Get(c, "k")).must(t)
		eq(t, "count", got.Count, int64(1))
		kv := got.Kvs[0]
		eq(t, "kv", [4]any{string(kv.Value), kv.CreateRevision, kv.ModRevision, kv.Version},
			[4]any{"v2", int64(2), int64(3), int64(2)})

		lease := ok(cli.Grant(c, 60)).must(t)
		ok(cli.Put(c, "k", "", clientv3.WithIgnoreValue(), clientv3.WithLease(lease.ID))).must(t)
		kv = ok(cli.Get(c, "k")).must(t).Kvs[0]
		eq(t, "ignore_value keeps the value", string(kv.Value), "v2")
		eq(t, "ignore_value sets the lease", clientv3.LeaseID(kv.Lease), lease.ID)
		ok(cli.Put(c, "k", "v3", clientv3.WithIgnoreLease())).must(t)
		kv = ok(cli.Get(c, "k")).must(t).Kvs[0]
		eq(t, "ignore_lease sets the value", string(kv.Value), "v3")
		eq(t, "ignore_lease keeps the lease", clientv3.LeaseID(kv.Lease), lease.ID)
		eq(t, "version", kv.Version, int64(4))
		ok(cli.Put(c, "k", "v4")).must(t)
		eq(t, "a put without a lease drops it", ok(cli.Get(c, "k")).must(t).Kvs[0].Lease, int64(0))

		_, err := cli.Put(c, "missing", "", clientv3.WithIgnoreValue())
		wantErr(t, err, rpctypes.ErrKeyNotFound)
		_, err = cli.Put(c, "missing", "", clientv3.WithIgnoreLease())
		wantErr(t, err, rpctypes.ErrKeyNotFound)
		_, err = cli.Put(c, "k", "x", clientv3.WithIgnoreValue())
		wantErr(t, err, rpctypes.ErrValueProvided)
		_, err = cli.Put(c, "k", "", clientv3.WithIgnoreLease(), clientv3.WithLease(lease.ID))
		wantErr(t, err, rpctypes.ErrLeaseProvided)
		_, err = cli.Put(c, "", "v")
		wantErr(t, err, rpctypes.ErrEmptyKey)
		_, err = cli.Put(c, "k", "v", clientv3.WithLease(0x1234))
		wantErr(t, err, rpctypes.ErrLeaseNotFound)
		eq(t, "failed puts write nothing", ok(cli.Get(c, "k")).must(t).Header.Revision, int64(6))

		binKey, binValue := "\x00\xff\x01key", "\xff\x00value\x00"
		ok(cli.Put(c, binKey, binValue)).must(t)
		kv = ok(cli.Get(c, binKey)).must(t).Kvs[0]
		eq(t, "binary key and value", [2]string{string(kv.Key), string(kv.Value)}, [2]string{binKey, binValue})
	})
}

// rangeData writes keys whose key, value, version, create and mod revision orders all differ,
// and returns them as the server lists them.
func rangeData(t *testing.T, cli *clientv3.Client) []*mvccpb.KeyValue {
	c := ctx(t)
	for _, kv := range [][2]string{
		{"a", "5"}, {"a/1", "3"}, {"a/2", "9"}, {"a/3", "1"}, {"b", "7"}, {"b/1", "2"}, {"c", "4"},
	} {
		ok(cli.Put(c, kv[0], kv[1])).must(t)
	}
	// Versions and mod revisions now differ from creation order.
	ok(cli.Put(c, "a/2", "6")).must(t)
	ok(cli.Put(c, "b", "8")).must(t)
	ok(cli.Put(c, "a/2", "0")).must(t)
	return ok(cli.Get(c, "", clientv3.WithPrefix())).must(t).Kvs
}

func TestRange(t *testing.T) {
	onBoth(t, func(t *testing.T, s *server) {
		cli, c := s.client(t), ctx(t)
		all := rangeData(t, cli)
		eq(t, "every key", keys(all), []string{"a", "a/1", "a/2", "a/3", "b", "b/1", "c"})
		eq(t, "values", values(all), []string{"5", "3", "0", "1", "8", "2", "4"})

		get := func(key string, opts ...clientv3.OpOption) *clientv3.GetResponse {
			t.Helper()
			return ok(cli.Get(c, key, opts...)).must(t)
		}
		eq(t, "one key", keys(get("a").Kvs), []string{"a"})
		eq(t, "a missing key", get("a/").Count, int64(0))
		eq(t, "prefix", keys(get("a/", clientv3.WithPrefix()).Kvs), []string{"a/1", "a/2", "a/3"})
		eq(t, "range", keys(get("a/2", clientv3.WithRange("b/1")).Kvs), []string{"a/2", "a/3", "b"})
		eq(t, "from key", keys(get("b", clientv3.WithFromKey()).Kvs), []string{"b", "b/1", "c"})
		eq(t, "an empty range", get("c", clientv3.WithRange("a")).Count, int64(0))

		// Paging: each page starts just after the last key of the one before.
		var paged []string
		start, pages := "a", 0
		for {
			page := get(start, clientv3.WithFromKey(), clientv3.WithLimit(3))
			pages++
			paged = append(paged, keys(page.Kvs)...)
			if page.Count != int64(7-len(paged)+len(page.Kvs)) {
				t.Fatalf("page %d: count %d is not every key from %q", pages, page.Count, start)
			}
			if !page.More {
				break
			}
			eq(t, "a page with more is full", len(page.Kvs), 3)
			start = string(page.Kvs[len(page.Kvs)-1].Key) + "\x00"
		}
		eq(t, "pages", pages, 3)
		eq(t, "paged keys", paged, keys(all))
		limited := get("", clientv3.WithPrefix(), clientv3.WithLimit(7))
		eq(t, "a limit that fits has no more", limited.More, false)

		counted := get("a/", clientv3.WithPrefix(), clientv3.WithCountOnly(), clientv3.WithLimit(1))
		eq(t, "count only: count", counted.Count, int64(3))
		eq(t, "count only: no kvs", len(counted.Kvs), 0)
		eq(t, "count only: no more", counted.More, false)

		keysOnly := get("a/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
		eq(t, "keys only: keys", keys(keysOnly.Kvs), []string{"a/1", "a/2", "a/3"})
		for _, kv := range keysOnly.Kvs {
			if len(kv.Value) != 0 || kv.Version == 0 || kv.ModRevision == 0 {
				t.Fatalf("keys only: %v should have metadata and no value", kv)
			}
		}

		targets := map[string]clientv3.SortTarget{
			"key": clientv3.SortByKey, "version": clientv3.SortByVersion, "create": clientv3.SortByCreateRevision,
			"mod": clientv3.SortByModRevision, "value": clientv3.SortByValue,
		}
		field := map[string]func(kv *mvccpb.KeyValue) []byte{
			"key":     func(kv *mvccpb.KeyValue) []byte { return kv.Key },
			"version": func(kv *mvccpb.KeyValue) []byte { return []byte(fmt.Sprintf("%020d", kv.Version)) },
			"create":  func(kv *mvccpb.KeyValue) []byte { return []byte(fmt.Sprintf("%020d", kv.CreateRevision)) },
			"mod":     func(kv *mvccpb.KeyValue) []byte { return []byte(fmt.Sprintf("%020d", kv.ModRevision)) },
			"value":   func(kv *mvccpb.KeyValue) []byte { return kv.Value },
		}
		for name, target := range targets {
			for _, order := range []clientv3.SortOrder{clientv3.SortNone, clientv3.SortAscend, clientv3.SortDescend} {
				byTarget := func(kvs []*mvccpb.KeyValue) []string {
					want := append([]*mvccpb.KeyValue(nil), kvs...)
					// Fewer than 13 keys: etcd's sort is an insertion sort, so ties keep key order.
					sort.SliceStable(want, func(i, j int) bool {
						a, b := field[name](want[i]), field[name](want[j])
						if order == clientv3.SortDescend {
							return bytes.Compare(a, b) > 0
						}
						return bytes.Compare(a, b) < 0
					})
					return keys(want)
				}
				got := get("", clientv3.WithPrefix(), clientv3.WithSort(target, order))
				eq(t, fmt.Sprintf("sorted by %s, order %v", name, order), keys(got.Kvs), byTarget(all))
				top := get("", clientv3.WithPrefix(), clientv3.WithSort(target, order), clientv3.WithLimit(2))
				// Without an order etcd takes the first keys (one more than the limit, to
				// know if there are more), sorts those and then applies the limit.
				want := byTarget(all)[:2]
				if order == clientv3.SortNone {
					want = byTarget(all[:3])[:2]
				}
				eq(t, fmt.Sprintf("top 2 by %s, order %v", name, order), keys(top.Kvs), want)
				eq(t, "top 2 has more", top.More, true)
			}
		}
		eq(t, "last created", keys(get("", clientv3.WithLastCreate()...).Kvs), []string{"c"})
		eq(t, "first modified", keys(get("a", clientv3.WithFirstRev()...).Kvs), []string{"a"})

		// Revisions: a/2 was 9 at its creation, 6 a write later.
		created := ok(cli.Get(c, "a/2")).must(t).Kvs[0].CreateRevision
		old := get("a/2", clientv3.WithRev(created))
		eq(t, "value at creation", values(old.Kvs), []string{"9"})
		eq(t, "version at creation", old.Kvs[0].Version, int64(1))
		eq(t, "a read in the past answers at the current revision", old.Header.Revision, int64(11))
		eq(t, "keys at revision 3", keys(get("", clientv3.WithPrefix(), clientv3.WithRev(3)).Kvs), []string{"a", "a/1"})
		_, err := cli.Get(c, "a", clientv3.WithRev(100))
		wantErr(t, err, rpctypes.ErrFutureRev)

		// Revision filters apply after counting, as on etcd.
		filter := func(opts ...clientv3.OpOption) []string {
			resp := get("", append([]clientv3.OpOption{clientv3.WithPrefix()}, opts...)...)
			eq(t, "filters do not change count", resp.Count, int64(7))
			return keys(resp.Kvs)
		}
		// Creation revisions are 2..8 in key order; mod revisions are a/2 11, b 10, and the
		// others' creation revisions.
		eq(t, "min mod", filter(clientv3.WithMinModRev(8)), []string{"a/2", "b", "c"})
		eq(t, "max mod", filter(clientv3.WithMaxModRev(4)), []string{"a", "a/1"})
		eq(t, "min create", filter(clientv3.WithMinCreateRev(7)), []string{"b/1", "c"})
		eq(t, "max create", filter(clientv3.WithMaxCreateRev(3)), []string{"a", "a/1"})
		eq(t, "min and max mod", filter(clientv3.WithMinModRev(5), clientv3.WithMaxModRev(10)), []string{"a/3", "b", "b/1", "c"})
		eq(t, "filter then limit", filter(clientv3.WithMinModRev(5), clientv3.WithLimit(1)), []string{"a/2"})
		eq(t, "serializable", keys(get("b", clientv3.WithSerializable()).Kvs), []string{"b"})
	})
}

func TestDelete(t *testing.T) {
	onBoth(t, func(t *testing.T, s *server) {
		cli, c := s.client(t), ctx(t)
		for _, k := range []string{"a", "b", "c", "d/1", "d/2", "e"} {
			ok(cli.Put(c, k, "v-"+k)).must(t)
		}
		del := ok(cli.Delete(c, "a")).must(t)
		eq(t, "deleted", del.Deleted, int64(1))
		eq(t, "revision", del.Header.Revision, int64(8))
		none := ok(cli.Delete(c, "zzz")).must(t)
		eq(t, "deleting nothing", none.Deleted, int64(0))
		eq(t, "deleting nothing takes no revision", none.Header.Revision, int64(8))
		ranged := ok(cli.Delete(c, "b", clientv3.WithRange("d"), clientv3.WithPrevKV())).must(t)
		eq(t, "range deleted", ranged.Deleted, int64(2))
		eq(t, "prev kvs", values(ranged.PrevKvs), []string{"v-b", "v-c"})
		eq(t, "one revision", ranged.Header.Revision, int64(9))
		eq(t, "prefix deleted", ok(cli.Delete(c, "d/", clientv3.WithPrefix())).must(t).Deleted, int64(2))
		eq(t, "from key deleted", ok(cli.Delete(c, "e", clientv3.WithFromKey())).must(t).Deleted, int64(1))
		eq(t, "nothing left", ok(cli.Get(c, "", clientv3.WithPrefix())).must(t).Count, int64(0))
		eq(t, "history keeps the deleted", values(ok(cli.Get(c, "a", clientv3.WithRev(7))).must(t).Kvs), []string{"v-a"})

		again := ok(cli.Put(c, "a", "new")).must(t)
		kv := ok(cli.Get(c, "a")).must(t).Kvs[0]
		eq(t, "a new generation", [2]int64{kv.CreateRevision, kv.Version}, [2]int64{again.Header.Revision, 1})

		_, err := cli.Delete(c, "")
		wantErr(t, err, rpctypes.ErrEmptyKey)
	})
}

func TestTxnCompares(t *testing.T) {
	onBoth(t, func(t *testing.T, s *server) {
		cli, c := s.client(t), ctx(t)
		kRev := ok(cli.Put(c, "k", "v")).must(t).Header.Revision
		lease := ok(cli.Grant(c, 60)).must(t)
		lRev := ok(cli.Put(c, "l", "x", clientv3.WithLease(lease.ID))).must(t).Header.Revision
		ok(cli.Put(c, "p/1", "a")).must(t)
		ok(cli.Put(c, "p/2", "b")).must(t)
		ok(cli.Put(c, "p/2", "c")).must(t)
		cases := []struct {
			name string
			cmp  clientv3.Cmp
			want bool
		}{
			{"value =", clientv3.Compare(clientv3.Value("k"), "=", "v"), true},
			{"value !=", clientv3.Compare(clientv3.Value("k"), "!=", "v"), false},
			{"value >", clientv3.Compare(clientv3.Value("k"), ">", "a"), true},
			{"value <", clientv3.Compare(clientv3.Value("k"), "<", "a"), false},
			{"value of a missing key", clientv3.Compare(clientv3.Value("nope"), "=", ""), false},
			{"value != on a missing key", clientv3.Compare(clientv3.Value("nope"), "!=", "x"), false},
			{"version =", clientv3.Compare(clientv3.Version("k"), "=", 1), true},
			{"version >", clientv3.Compare(clientv3.Version("k"), ">", 0), true},
			{"version <", clientv3.Compare(clientv3.Version("k"), "<", 1), false},
			{"version !=", clientv3.Compare(clientv3.Version("k"), "!=", 1), false},
			{"version of a missing key", clientv3.Compare(clientv3.Version("nope"), "=", 0), true},
			{"create =", clientv3.Compare(clientv3.CreateRevision("k"), "=", kRev), true},
			{"create <", clientv3.Compare(clientv3.CreateRevision("k"), "<", kRev), false},
			{"create of a missing key", clientv3.Compare(clientv3.CreateRevision("nope"), "=", 0), true},
			{"mod =", clientv3.Compare(clientv3.ModRevision("k"), "=", kRev), true},
			{"mod > ", clientv3.Compare(clientv3.ModRevision("l"), ">", kRev), true},
			{"mod !=", clientv3.Compare(clientv3.ModRevision("l"), "!=", lRev), false},
			{"lease =", clientv3.Compare(clientv3.LeaseValue("l"), "=", lease.ID), true},
			{"lease of a key without", clientv3.Compare(clientv3.LeaseValue("k"), "=", 0), true},
			{"lease >", clientv3.Compare(clientv3.LeaseValue("k"), ">", 0), false},
			{"every key of a prefix", clientv3.Compare(clientv3.Version("p/"), "=", 1).WithPrefix(), false},
			{"some key of a prefix", clientv3.Compare(clientv3.Version("p/"), ">", 0).WithPrefix(), true},
			{"a range", clientv3.Compare(clientv3.Value("p/1"), "<", "d").WithRange("p/3"), true},
		}
		for _, tc := range cases {
			resp := ok(cli.Txn(c).If(tc.cmp).Then(clientv3.OpGet("k")).Else(clientv3.OpGet("l")).Commit()).must(t)
			if resp.Succeeded != tc.want {
				t.Fatalf("%s: succeeded %v, want %v", tc.name, resp.Succeeded, tc.want)
			}
			want := map[bool]string{true: "k", false: "l"}[tc.want]
			eq(t, tc.name+": branch", keys(resp.Responses[0].GetResponseRange().Kvs), []string{want})
		}
		all := ok(cli.Txn(c).If(
			clientv3.Compare(clientv3.Value("k"), "=", "v"),
			clientv3.Compare(clientv3.Version("k"), "=", 2),
		).Commit()).must(t)
		eq(t, "every compare must hold", all.Succeeded, false)
		eq(t, "a read-only txn takes no revision", all.Header.Revision, int64(6))
	})
}

func TestTxnWrites(t *testing.T) {
	onBoth(t, func(t *testing.T, s *server) {
		cli, c := s.client(t), ctx(t)
		rev := ok(cli.Put(c, "k", "v")).must(t).Header.Revision
		ok(cli.Put(c, "gone", "x")).must(t)
		cas := func(mod int64) (*clientv3.TxnResponse, error) {
			return cli.Txn(c).If(clientv3.Compare(clientv3.ModRevision("k"), "=", mod)).
				Then(clientv3.OpPut("k", "w"), clientv3.OpPut("k2", "x"), clientv3.OpGet("k"), clientv3.OpDelete("gone")).
				Else(clientv3.OpPut("lost", "yes"), clientv3.OpGet("k")).Commit()
		}
		won := ok(cas(rev)).must(t)
		eq(t, "succeeded", won.Succeeded, true)
		eq(t, "one revision for every write", won.Header.Revision, rev+2)
		eq(t, "responses", len(won.Responses), 4)
		seen := won.Responses[2].GetResponseRange()
		eq(t, "a range sees the writes before it", values(seen.Kvs), []string{"w"})
		eq(t, "at the txn's revision", seen.Kvs[0].ModRevision, rev+2)
		eq(t, "deleted in the txn", won.Responses[3].GetResponseDeleteRange().Deleted, int64(1))
		eq(t, "k2 written with k", ok(cli.Get(c, "k2")).must(t).Kvs[0].ModRevision, rev+2)

		lost := ok(cas(rev)).must(t)
		eq(t, "a stale compare fails", lost.Succeeded, false)
		eq(t, "the else branch ran", values(ok(cli.Get(c, "lost")).must(t).Kvs), []string{"yes"})
		eq(t, "else reads", values(lost.Responses[1].GetResponseRange().Kvs), []string{"w"})

		// Nested: every compare, nested ones too, sees the state before the txn began, while
		// ranges see the writes before them.
		nested := ok(cli.Txn(c).Then(
			clientv3.OpPut("n", "1"),
			clientv3.OpTxn(
				[]clientv3.Cmp{clientv3.Compare(clientv3.Version("n"), "=", 0)},
				[]clientv3.Op{clientv3.OpPut("inner", "then"), clientv3.OpGet("n")},
				[]clientv3.Op{clientv3.OpPut("inner", "else")},
			),
			clientv3.OpTxn(
				[]clientv3.Cmp{clientv3.Compare(clientv3.Value("k"), "=", "nope")},
				[]clientv3.Op{clientv3.OpPut("inner2", "then")},
				[]clientv3.Op{clientv3.OpTxn(nil, []clientv3.Op{clientv3.OpPut("deep", "yes")}, nil)},
			),
		).Commit()).must(t)
		eq(t, "nested txns share the revision", nested.Header.Revision, rev+4)
		inner := nested.Responses[1].GetResponseTxn()
		eq(t, "the nested compare saw the state before the txn", inner.Succeeded, true)
		eq(t, "the nested range saw the put before it", values(inner.Responses[1].GetResponseRange().Kvs), []string{"1"})
		eq(t, "inner", values(ok(cli.Get(c, "inner")).must(t).Kvs), []string{"then"})
		eq(t, "second nested txn failed", nested.Responses[2].GetResponseTxn().Succeeded, false)
		eq(t, "deep", values(ok(cli.Get(c, "deep")).must(t).Kvs), []string{"yes"})
		eq(t, "inner2 not written", ok(cli.Get(c, "inner2")).must(t).Count, int64(0))

		// What is checked before a txn runs is checked on the branch it takes only.
		_, err := cli.Txn(c).Then(clientv3.OpPut("x", "y", clientv3.WithLease(0x4321))).Commit()
		wantErr(t, err, rpctypes.ErrLeaseNotFound)
		taken := ok(cli.Txn(c).If(clientv3.Compare(clientv3.Version("k"), ">", 0)).
			Then(clientv3.OpPut("x", "y")).
			Else(clientv3.OpPut("x", "y", clientv3.WithLease(0x4321)), clientv3.OpPut("nokey", "", clientv3.WithIgnoreValue())).
			Commit()).must(t)
		eq(t, "an unknown lease on the branch not taken", taken.Succeeded, true)
		_, err = cli.Txn(c).Then(clientv3.OpGet("k", clientv3.WithRev(1000))).Commit()
		wantErr(t, err, rpctypes.ErrFutureRev)
		_, err = cli.Txn(c).Then(clientv3.OpPut("nokey", "", clientv3.WithIgnoreValue())).Commit()
		wantErr(t, err, rpctypes.ErrKeyNotFound)
	})
}

func TestTxnLimits(t *testing.T) {
	onBoth(t, func(t *testing.T, s *server) {
		cli, c := s.client(t), ctx(t)
		puts := func(n int, prefix string) []clientv3.Op {
			ops := make([]clientv3.Op, n)
			for i := range ops {
				ops[i] = clientv3.OpPut(fmt.Sprintf("%s%03d", prefix, i), "v")
			}
			return ops
		}
		full := ok(cli.Txn(c).Then(puts(128, "max/")...).Commit()).must(t)
		eq(t, "128 ops", len(full.Responses), 128)
		_, err := cli.Txn(c).Then(puts(129, "over/")...).Commit()
		wantErr(t, err, rpctypes.ErrTooManyOps)
		_, err = cli.Txn(c).Else(puts(129, "over/")...).Commit()
		wantErr(t, err, rpctypes.ErrTooManyOps)
		// A nested txn may only use what its parent left: 128 less the parent's 101 ops.
		_, err = cli.Txn(c).Then(append(puts(100, "outer/"), clientv3.OpTxn(nil, puts(28, "inner/"), nil))...).Commit()
		wantErr(t, err, rpctypes.ErrTooManyOps)
		ok(cli.Txn(c).Then(append(puts(100, "outer/"), clientv3.OpTxn(nil, puts(27, "inner/"), nil))...).Commit()).must(t)

		dup := func(ops ...clientv3.Op) error {
			_, err := cli.Txn(c).Then(ops...).Commit()
			return err
		}
		wantErr(t, dup(clientv3.OpPut("d", "1"), clientv3.OpPut("d", "2")), rpctypes.ErrDuplicateKey)
		wantErr(t, dup(clientv3.OpPut("d/x", "1"), clientv3.OpDelete("d/", clientv3.WithPrefix())), rpctypes.ErrDuplicateKey)
		wantErr(t, dup(clientv3.OpDelete("d/", clientv3.WithPrefix()), clientv3.OpPut("d/x", "1")), rpctypes.ErrDuplicateKey)
		wantErr(t, dup(clientv3.OpTxn(nil, []clientv3.Op{clientv3.OpPut("d", "1")}, nil), clientv3.OpPut("d", "2")), rpctypes.ErrDuplicateKey)
		wantErr(t, dup(clientv3.OpPut("d", "2"), clientv3.OpTxn(nil, []clientv3.Op{clientv3.OpPut("d", "1")}, nil)), rpctypes.ErrDuplicateKey)
		wantErr(t, dup(clientv3.OpTxn(nil, []clientv3.Op{clientv3.OpDelete("d")}, nil), clientv3.OpPut("d", "2")), rpctypes.ErrDuplicateKey)
		wantErr(t, dup(
			clientv3.OpTxn(nil, []clientv3.Op{clientv3.OpPut("d", "1")}, nil),
			clientv3.OpTxn(nil, nil, []clientv3.Op{clientv3.OpPut("d", "1")}),
		), rpctypes.ErrDuplicateKey)
		// Allowed: the branches of one txn exclude each other, deletes may overlap, and a
		// range is not a write.
		ok(cli.Txn(c).Then(clientv3.OpTxn(nil, []clientv3.Op{clientv3.OpPut("d", "1")}, []clientv3.Op{clientv3.OpPut("d", "2")})).Commit()).must(t)
		ok(cli.Txn(c).Then(clientv3.OpDelete("d"), clientv3.OpDelete("d", clientv3.WithPrefix())).Commit()).must(t)
		ok(cli.Txn(c).Then(clientv3.OpGet("d"), clientv3.OpPut("d", "3"), clientv3.OpGet("d")).Commit()).must(t)

		_, err = cli.Txn(c).If(clientv3.Compare(clientv3.Version(""), "=", 0)).Commit()
		wantErr(t, err, rpctypes.ErrEmptyKey)
		_, err = cli.Txn(c).Then(clientv3.OpGet("")).Commit()
		wantErr(t, err, rpctypes.ErrEmptyKey)
		_, err = cli.Txn(c).Else(clientv3.OpDelete("")).Commit()
		wantErr(t, err, rpctypes.ErrEmptyKey)
	})
}

func TestCompaction(t *testing.T) {
	onBoth(t, func(t *testing.T, s *server) {
		cli, c := s.client(t), ctx(t)
		for i := 1; i <= 5; i++ {
			ok(cli.Put(c, "k", fmt.Sprintf("v%d", i))).must(t)
		}
		ok(cli.Put(c, "other", "x")).must(t)
		ok(cli.Delete(c, "other")).must(t)
		// k: v1@2 .. v5@6; other: put@7, deleted@8.
		ok(cli.Compact(c, 4)).must(t)
		_, err := cli.Get(c, "k", clientv3.WithRev(3))
		wantErr(t, err, rpctypes.ErrCompacted)
		eq(t, "at the compaction point", values(ok(cli.Get(c, "k", clientv3.WithRev(4))).must(t).Kvs), []string{"v3"})
		eq(t, "now", values(ok(cli.Get(c, "k")).must(t).Kvs), []string{"v5"})
		eq(t, "history above the point", values(ok(cli.Get(c, "other", clientv3.WithRev(7))).must(t).Kvs), []string{"x"})
		_, err = cli.Compact(c, 4)
		wantErr(t, err, rpctypes.ErrCompacted)
		_, err = cli.Compact(c, 2)
		wantErr(t, err, rpctypes.ErrCompacted)
		_, err = cli.Compact(c, 100)
		wantErr(t, err, rpctypes.ErrFutureRev)
		_, err = cli.Txn(c).Then(clientv3.OpGet("k", clientv3.WithRev(2))).Commit()
		wantErr(t, err, rpctypes.ErrCompacted)

		w := cli.Watch(c, "k", clientv3.WithRev(3))
		resp, open := <-w
		if !open {
			t.Fatal("a watch below the compaction point closed without a response")
		}
		eq(t, "compact revision", resp.CompactRevision, int64(4))
		eq(t, "canceled", resp.Canceled, true)
		wantErr(t, resp.Err(), rpctypes.ErrCompacted)
		if _, stillOpen := <-w; stillOpen {
			t.Fatal("the compacted watch is still open")
		}

		events := collect(t, cli.Watch(c, "", clientv3.WithPrefix(), clientv3.WithRev(4)), 5)
		eq(t, "history from the compaction point", eventStrings(events), []string{
			"PUT k=v3@4", "PUT k=v4@5", "PUT k=v5@6", "PUT other=x@7", "DELETE other@8",
		})

		ok(cli.Compact(c, 8)).must(t)
		eq(t, "the last revision can be compacted to", values(ok(cli.Get(c, "k", clientv3.WithRev(8))).must(t).Kvs), []string{"v5"})
		eq(t, "a deleted key stays deleted", ok(cli.Get(c, "other")).must(t).Count, int64(0))
	})
}

func TestErrorCodes(t *testing.T) {
	onBoth(t, func(t *testing.T, s *server) {
		kv, lease, c := pb.NewKVClient(s.conn(t)), pb.NewLeaseClient(s.conn(t)), ctx(t)
		_, err := kv.Range(c, &pb.RangeRequest{})
		wantStatus(t, err, rpctypes.ErrGRPCEmptyKey)
		_, err = kv.Put(c, &pb.PutRequest{Value: []byte("v")})
		wantStatus(t, err, rpctypes.ErrGRPCEmptyKey)
		_, err = kv.DeleteRange(c, &pb.DeleteRangeRequest{})
		wantStatus(t, err, rpctypes.ErrGRPCEmptyKey)
		_, err = kv.Range(c, &pb.RangeRequest{Key: []byte("k"), Revision: 99})
		wantStatus(t, err, rpctypes.ErrGRPCFutureRev)
		_, err = kv.Range(c, &pb.RangeRequest{Key: []byte("k"), SortTarget: 9})
		wantStatus(t, err, rpctypes.ErrGRPCInvalidSortOption)
		_, err = kv.Range(c, &pb.RangeRequest{Key: []byte("k"), SortOrder: 7})
		wantStatus(t, err, rpctypes.ErrGRPCInvalidSortOption)
		_, err = kv.Put(c, &pb.PutRequest{Key: []byte("k"), Lease: 77})
		wantStatus(t, err, rpctypes.ErrGRPCLeaseNotFound)
		_, err = kv.Txn(c, &pb.TxnRequest{Success: []*pb.RequestOp{{}}})
		wantStatus(t, err, rpctypes.ErrGRPCKeyNotFound)
		_, err = kv.Compact(c, &pb.CompactionRequest{Revision: 50})
		wantStatus(t, err, rpctypes.ErrGRPCFutureRev)
		_, err = lease.LeaseRevoke(c, &pb.LeaseRevokeRequest{ID: 77})
		wantStatus(t, err, rpctypes.ErrGRPCLeaseNotFound)
		_, err = lease.LeaseGrant(c, &pb.LeaseGrantRequest{TTL: 9_000_000_001})
		wantStatus(t, err, rpctypes.ErrGRPCLeaseTTLTooLarge)
		ok(lease.LeaseGrant(c, &pb.LeaseGrantRequest{ID: 77, TTL: 60})).must(t)
		_, err = lease.LeaseGrant(c, &pb.LeaseGrantRequest{ID: 77, TTL: 60})
		wantStatus(t, err, rpctypes.ErrGRPCLeaseExist)
	})
}
