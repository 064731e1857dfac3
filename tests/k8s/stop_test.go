package k8s

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// TestStopWhileWatched: kube-apiserver watches its storage for as long as it runs, so the
// replica under it is stopped with watches open. mote store waited for them to end, that is
// forever, and the SIGKILL that startMote's cleanup used to fall back on hid it; the cleanup
// now fails a test whose replica does not exit after SIGTERM. Here the watch outlives the test
// body, as it would under kube-apiserver.
func TestStopWhileWatched(t *testing.T) {
	var client *clientv3.Client
	// Registered before the replica's cleanup, so it runs after it: the watch is still open
	// when the replica gets SIGTERM.
	t.Cleanup(func() {
		if client != nil {
			_ = client.Close()
		}
	})
	endpoint := startMote(t)
	var err error
	client, err = clientv3.New(clientv3.Config{
		Endpoints:   []string{endpoint},
		DialTimeout: 10 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// The options kube-apiserver's watch cache uses.
	w := client.Watch(ctx, "/registry/", clientv3.WithPrefix(), clientv3.WithPrevKV(), clientv3.WithProgressNotify())
	if _, err := client.Put(ctx, "/registry/pods/a", "1"); err != nil {
		t.Fatal(err)
	}
	select {
	case resp := <-w:
		if err := resp.Err(); err != nil || len(resp.Events) != 1 {
			t.Fatalf("the watch answered %+v (error %v), not the put", resp, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the watch reported nothing within 10 s")
	}
}
