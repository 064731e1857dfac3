package k8s

// The tests of k8s.io/apiserver/pkg/storage/etcd3's compact_test.go: kube-apiserver's compactor
// against mote store.

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"k8s.io/apiserver/pkg/storage/etcd3"
	testingclock "k8s.io/utils/clock/testing"
)

const (
	waitDelay   = time.Millisecond
	waitTimeout = 100 * waitDelay
)

func TestCompact(t *testing.T) {
	client := newClient(t, startMote(t)).Client
	ctx := context.Background()
	clock := testingclock.NewFakeClock(time.Now())
	c := etcd3.NewCompactor(client, time.Minute, clock, nil)
	t.Cleanup(c.Stop)
	waitForClockWaiters(t, clock)

	t.Log("First compaction cycle saves revision before first write")
	clock.Step(time.Minute)
	waitForClockWaiters(t, clock)
	if got := c.CompactRevision(); got != 0 {
		t.Errorf("CompactRevision()=%d, expected %d", got, 0)
	}

	t.Log("First write")
	put, err := client.Put(ctx, "/somekey", "data")
	if err != nil {
		t.Fatalf("Put failed: %v", err)
	}
	assertNotCompacted(ctx, t, client, put.Header.Revision)

	t.Log("Second compaction cycle compacts before first write")
	clock.Step(time.Minute)
	waitForClockWaiters(t, clock)
	assertNotCompacted(ctx, t, client, put.Header.Revision)
	if got, want := c.CompactRevision(), put.Header.Revision-1; got != want {
		t.Errorf("CompactRevision()=%d, expected %d", got, want)
	}

	t.Log("Create second revision")
	put1, err := client.Put(ctx, "/somekey", "data2")
	if err != nil {
		t.Fatalf("Put failed: %v", err)
	}
	assertNotCompacted(ctx, t, client, put1.Header.Revision)

	t.Log("Third compaction cycle compacts revision after first write")
	clock.Step(time.Minute)
	waitForClockWaiters(t, clock)
	assertCompacted(ctx, t, client, put.Header.Revision)
	if got, want := c.CompactRevision(), put.Header.Revision+1; got != want {
		t.Errorf("CompactRevision()=%d, expected %d", got, want)
	}
	assertNotCompacted(ctx, t, client, put1.Header.Revision)

	t.Log("Fourth compaction cycle compacts second write")
	clock.Step(time.Minute)
	waitForClockWaiters(t, clock)
	assertCompacted(ctx, t, client, put.Header.Revision)
	assertCompacted(ctx, t, client, put1.Header.Revision)
	if got, want := c.CompactRevision(), put1.Header.Revision+1; got != want {
		t.Errorf("CompactRevision()=%d, expected %d", got, want)
	}
}

func assertCompacted(ctx context.Context, t *testing.T, client *clientv3.Client, rev int64) {
	t.Helper()
	if _, err := client.Get(ctx, "/somekey", clientv3.WithRev(rev)); !errors.Is(err, rpctypes.ErrCompacted) {
		t.Errorf("Expecting rev %d compacted, but err=%v", rev, err)
	}
}

func assertNotCompacted(ctx context.Context, t *testing.T, client *clientv3.Client, rev int64) {
	t.Helper()
	if _, err := client.Get(ctx, "/somekey", clientv3.WithRev(rev)); err != nil {
		t.Errorf("Get on rev %d failed: %v", rev, err)
	}
}

func TestCompactIntervalZero(t *testing.T) {
	client := newClient(t, startMote(t)).Client
	clock := testingclock.NewFakeClock(time.Now())
	c := etcd3.NewCompactor(client, 0, clock, nil)
	t.Cleanup(c.Stop)

	t.Log("Compact loop is disabled, no goroutine is waiting on clock")
	clockNoWaiters(t, clock)
	clock.Step(time.Minute)
	clockNoWaiters(t, clock)
}

func waitForClockWaiters(t *testing.T, clock *testingclock.FakeClock) {
	t.Helper()
	for start := time.Now(); time.Since(start) < waitTimeout; {
		if clock.HasWaiters() {
			return
		}
		time.Sleep(waitDelay)
	}
	t.Fatal("No waiters")
}

func clockNoWaiters(t *testing.T, clock *testingclock.FakeClock) {
	t.Helper()
	for start := time.Now(); time.Since(start) < waitTimeout; {
		if clock.Waiters() != 0 {
			t.Fatal("waiter")
		}
		time.Sleep(waitDelay)
	}
	if clock.Waiters() != 0 {
		t.Fatal("waiter")
	}
}

// TestCompactConflict has several compactors compact at the same logical time (the version of
// the compaction key): the first wins, the others learn the newer time and revision.
func TestCompactConflict(t *testing.T) {
	client := newClient(t, startMote(t)).Client
	ctx := context.Background()

	put, err := client.Put(ctx, "/somekey", "data")
	if err != nil {
		t.Fatalf("Put failed: %v", err)
	}

	t.Log("First compact on time 0")
	wantCompactRev := put.Header.Revision
	curTime, curRev, compactRev, err := etcd3.Compact(ctx, client, 0, wantCompactRev)
	if err != nil {
		t.Fatalf("compact failed: %v", err)
	}
	t.Log("Compaction should succeed")
	if compactRev != wantCompactRev {
		t.Errorf("Expect compact revision = %d, get = %d", wantCompactRev, compactRev)
	}
	t.Log("Current time should increase by 1")
	if curTime != 1 {
		t.Errorf("Expect current logical time = 1, get = %v", curTime)
	}
	t.Log("Current revision should increase by 1")
	wantCurrentRev := put.Header.Revision + 1
	if curRev != wantCurrentRev {
		t.Errorf("Expect current revision = %d, get = %d", wantCurrentRev, curRev)
	}

	t.Log("Second compact on time 0")
	curTime2, curRev2, compactRev2, err := etcd3.Compact(ctx, client, 0, wantCompactRev+1)
	if err != nil {
		t.Fatalf("compact failed: %v", err)
	}
	t.Log("Compaction should fail")
	if compactRev2 != wantCompactRev {
		t.Errorf("Expect compact revision = %d, get = %d", wantCompactRev, compactRev2)
	}
	t.Log("Should return same time as from the first compaction")
	if curTime != curTime2 {
		t.Errorf("Unexpected curTime (%v) != curTime2 (%v)", curTime, curTime2)
	}
	t.Log("Current revision should stay the same")
	if curRev2 != wantCurrentRev {
		t.Errorf("Expect current revision = %d, get = %d", wantCurrentRev, curRev2)
	}

	t.Log("Third compact on time 1")
	curTime3, curRev3, compactRev3, err := etcd3.Compact(ctx, client, 1, wantCompactRev+1)
	if err != nil {
		t.Fatalf("compact failed: %v", err)
	}
	t.Log("Compaction should succeed")
	wantCompactRev++
	if compactRev3 != wantCompactRev {
		t.Errorf("Expect compact revision = %d, get = %d", wantCompactRev, compactRev3)
	}
	t.Log("Current time should increase by 1")
	if curTime3 != 2 {
		t.Errorf("Expect current logical time = 2, get = %v", curTime3)
	}
	t.Log("Current revision should increase by 1")
	wantCurrentRev++
	if curRev3 != wantCurrentRev {
		t.Errorf("Expect current revision = %d, get = %d", wantCurrentRev, curRev3)
	}
}
