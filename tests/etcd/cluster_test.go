package etcd

import (
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// startReplicas starts n mote store replicas, each with the others as peers.
func startReplicas(t *testing.T, names ...string) []*server {
	specs := make([]moteSpec, len(names))
	for i, name := range names {
		specs[i] = newMoteSpec(t, name)
	}
	for i := range specs {
		for j, peer := range specs {
			if i != j {
				specs[i].peers = append(specs[i].peers, fmt.Sprintf("%s=http://127.0.0.1:%d", peer.name, peer.peerPort))
			}
		}
	}
	servers := make([]*server, len(specs))
	for i, spec := range specs {
		servers[i] = startMote(t, spec)
	}
	return servers
}

// contents is every key and value a replica holds, as "key=value".
func contents(t testing.TB, cli *clientv3.Client) []string {
	t.Helper()
	resp := ok(cli.Get(ctx(t), "", clientv3.WithPrefix())).must(t)
	out := make([]string, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		out = append(out, string(kv.Key)+"="+string(kv.Value))
	}
	return out
}

// converge polls the replicas until they all hold the same keys and values and those satisfy
// check, and returns them; it fails the test after 30 s.
func converge(t *testing.T, what string, clients []*clientv3.Client, check func([]string) error) []string {
	t.Helper()
	start := time.Now()
	var last [][]string
	var err error
	for time.Since(start) < 30*time.Second {
		last = last[:0]
		for _, cli := range clients {
			last = append(last, contents(t, cli))
		}
		same := true
		for _, c := range last[1:] {
			same = same && reflect.DeepEqual(c, last[0])
		}
		if same {
			if err = check(last[0]); err == nil {
				t.Logf("%s: the replicas converged in %v (%d keys)", what, time.Since(start).Round(time.Millisecond), len(last[0]))
				return last[0]
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	for i, c := range last {
		t.Logf("replica %d holds %v", i, c)
	}
	t.Fatalf("%s: the replicas did not converge in 30 s (last check: %v)", what, err)
	return nil
}

func TestReplicasConverge(t *testing.T) {
	replicas := startReplicas(t, "a", "b", "c")
	clients := make([]*clientv3.Client, len(replicas))
	for i, r := range replicas {
		clients[i] = r.client(t)
	}
	c := ctx(t)

	// Every replica writes its own keys, deletes one of them, and writes one shared key, all at
	// once.
	var wg sync.WaitGroup
	for i, cli := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := replicas[i].Name
			for j := 0; j < 20; j++ {
				if _, err := cli.Put(c, fmt.Sprintf("own/%s/%02d", name, j), fmt.Sprintf("%s%d", name, j)); err != nil {
					t.Errorf("put on %s: %v", name, err)
				}
				if _, err := cli.Put(c, "shared", fmt.Sprintf("%s%d", name, j)); err != nil {
					t.Errorf("put on %s: %v", name, err)
				}
			}
			if _, err := cli.Delete(c, fmt.Sprintf("own/%s/00", name)); err != nil {
				t.Errorf("delete on %s: %v", name, err)
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	var want []string
	for _, r := range replicas {
		for j := 1; j < 20; j++ {
			want = append(want, fmt.Sprintf("own/%s/%02d=%s%d", r.Name, j, r.Name, j))
		}
	}
	all := converge(t, "concurrent writes", clients, func(kvs []string) error {
		own := kvs[:len(kvs)-1]
		if !reflect.DeepEqual(own, want) {
			return fmt.Errorf("own keys %v", own)
		}
		return nil
	})
	shared := all[len(all)-1]
	if shared != "shared=a19" && shared != "shared=b19" && shared != "shared=c19" {
		t.Fatalf("the shared key converged to %q, not to some replica's last write", shared)
	}

	// A key written on a and deleted on b stays deleted everywhere.
	ok(clients[0].Put(c, "doomed/1", "x")).must(t)
	ok(clients[0].Put(c, "doomed/2", "y")).must(t)
	converge(t, "writes on a", clients, func(kvs []string) error {
		if kvs[0] != "doomed/1=x" || kvs[1] != "doomed/2=y" {
			return fmt.Errorf("no doomed keys yet")
		}
		return nil
	})
	// A watch on c sees what b deletes.
	rev := ok(clients[2].Get(c, "x")).must(t).Header.Revision + 1
	w := clients[2].Watch(c, "doomed/", clientv3.WithPrefix(), clientv3.WithRev(rev))
	eq(t, "deleted on b", ok(clients[1].Delete(c, "doomed/", clientv3.WithPrefix())).must(t).Deleted, int64(2))
	events := collect(t, w, 2)
	eq(t, "c's watch sees b's deletes", []string{string(events[0].Kv.Key), string(events[1].Kv.Key)}, []string{"doomed/1", "doomed/2"})
	converge(t, "a delete on b", clients, func(kvs []string) error {
		if kvs[0] == "doomed/1=x" || kvs[1] == "doomed/2=y" {
			return fmt.Errorf("doomed keys still there")
		}
		return nil
	})
	// More writes everywhere, so every replica pulls again: the deleted keys stay gone.
	for i, cli := range clients {
		ok(cli.Put(c, "later", fmt.Sprint(i))).must(t)
	}
	time.Sleep(300 * time.Millisecond)
	converge(t, "later writes", clients, func(kvs []string) error {
		for _, kv := range kvs {
			if strings.HasPrefix(kv, "doomed/") {
				return fmt.Errorf("%s came back", kv)
			}
		}
		return nil
	})
	// A write after the delete brings the key back, everywhere.
	ok(clients[2].Put(c, "doomed/1", "again")).must(t)
	converge(t, "a write after the delete", clients, func(kvs []string) error {
		if kvs[0] != "doomed/1=again" {
			return fmt.Errorf("first key %s", kvs[0])
		}
		return nil
	})

	members := ok(clients[1].MemberList(c)).must(t).Members
	var names []string
	for _, m := range members {
		names = append(names, m.Name)
	}
	eq(t, "members", sorted(names), []string{"a", "b", "c"})
}
