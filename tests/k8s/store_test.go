package k8s

// The tests of k8s.io/apiserver/pkg/storage/etcd3's store_test.go and linearized_read_test.go,
// wired to mote store.

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/apis/example"
	"k8s.io/apiserver/pkg/features"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/etcd3"
	storagetesting "k8s.io/apiserver/pkg/storage/testing"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	featuregatetesting "k8s.io/component-base/featuregate/testing"
)

// checkStorageInvariants reads key's raw value from the replica and checks it is the object
// encoded with the test prefix, without resource version or self link.
func checkStorageInvariants(client *clientv3.Client) storagetesting.KeyValidation {
	return func(ctx context.Context, t *testing.T, key string) {
		resp, err := client.KV.Get(ctx, key)
		if err != nil {
			t.Fatalf("Get of %s failed: %v", key, err)
		}
		if len(resp.Kvs) == 0 {
			t.Fatalf("expecting non empty result on key: %s", key)
		}
		value := resp.Kvs[0].Value
		if len(value) < len(valuePrefix) || string(value[:len(valuePrefix)]) != valuePrefix {
			t.Fatalf("stored value %q lacks the prefix %q", value, valuePrefix)
		}
		decoded, err := runtime.Decode(codec, value[len(valuePrefix):])
		if err != nil {
			t.Fatalf("expecting successful decode of object from %v\n%v", err, string(value))
		}
		obj := decoded.(*example.Pod)
		if obj.ResourceVersion != "" {
			t.Errorf("stored object should have empty resource version")
		}
		if obj.SelfLink != "" {
			t.Errorf("stored output should have empty selfLink")
		}
	}
}

// maxLimit is etcd3's largest page size when it grows pages of a list.
const maxLimit = 10000

// checkStorageCallsInvariants checks how many values a list transformed and how many range
// requests it sent: pages start at the requested size and double, up to maxLimit.
func checkStorageCallsInvariants(transformer *storagetesting.PrefixTransformer, recorder *storagetesting.KVRecorder) storagetesting.CallsValidation {
	return func(t *testing.T, pageSize, estimatedProcessedObjects uint64) {
		if reads := transformer.GetReadsAndReset(); reads != estimatedProcessedObjects {
			t.Errorf("unexpected reads: %d, expected: %d", reads, estimatedProcessedObjects)
		}
		estimatedGetCalls := uint64(1)
		if pageSize != 0 {
			limit := pageSize
			for sum := uint64(1); sum < estimatedProcessedObjects; {
				limit = min(limit*2, maxLimit)
				sum += limit
				estimatedGetCalls++
			}
		}
		if reads := recorder.GetReadsAndReset(); reads != estimatedGetCalls {
			t.Fatalf("unexpected reads: %d, want: %d", reads, estimatedGetCalls)
		}
	}
}

func (s *testStore) callsValidation() storagetesting.CallsValidation {
	return checkStorageCallsInvariants(s.base, s.client.KV.(*storagetesting.KVRecorder))
}

func TestCreate(t *testing.T) {
	ctx, s := testSetup(t)
	storagetesting.RunTestCreate(ctx, t, s, checkStorageInvariants(s.client.Client))
}

func TestCreateWithTTL(t *testing.T) {
	ctx, s := testSetup(t)
	storagetesting.RunTestCreateWithTTL(ctx, t, s)
}

func TestCreateWithKeyExist(t *testing.T) {
	ctx, s := testSetup(t)
	storagetesting.RunTestCreateWithKeyExist(ctx, t, s)
}

func TestGet(t *testing.T) {
	ctx, s := testSetup(t)
	storagetesting.RunTestGet(ctx, t, s)
}

func TestUnconditionalDelete(t *testing.T) {
	ctx, s := testSetup(t)
	storagetesting.RunTestUnconditionalDelete(ctx, t, s)
}

func TestConditionalDelete(t *testing.T) {
	ctx, s := testSetup(t)
	storagetesting.RunTestConditionalDelete(ctx, t, s)
}

func TestDeleteWithSuggestion(t *testing.T) {
	ctx, s := testSetup(t)
	storagetesting.RunTestDeleteWithSuggestion(ctx, t, s)
}

func TestDeleteWithSuggestionAndConflict(t *testing.T) {
	ctx, s := testSetup(t)
	storagetesting.RunTestDeleteWithSuggestionAndConflict(ctx, t, s)
}

func TestDeleteWithSuggestionOfDeletedObject(t *testing.T) {
	ctx, s := testSetup(t)
	storagetesting.RunTestDeleteWithSuggestionOfDeletedObject(ctx, t, s)
}

func TestValidateDeletionWithSuggestion(t *testing.T) {
	ctx, s := testSetup(t)
	storagetesting.RunTestValidateDeletionWithSuggestion(ctx, t, s)
}

func TestValidateDeletionWithOnlySuggestionValid(t *testing.T) {
	ctx, s := testSetup(t)
	storagetesting.RunTestValidateDeletionWithOnlySuggestionValid(ctx, t, s)
}

func TestDeleteWithConflict(t *testing.T) {
	ctx, s := testSetup(t)
	storagetesting.RunTestDeleteWithConflict(ctx, t, s)
}

func TestPreconditionalDeleteWithSuggestion(t *testing.T) {
	ctx, s := testSetup(t)
	storagetesting.RunTestPreconditionalDeleteWithSuggestion(ctx, t, s)
}

func TestPreconditionalDeleteWithSuggestionPass(t *testing.T) {
	ctx, s := testSetup(t)
	storagetesting.RunTestPreconditionalDeleteWithOnlySuggestionPass(ctx, t, s)
}

func TestListPaging(t *testing.T) {
	ctx, s := testSetup(t)
	storagetesting.RunTestListPaging(ctx, t, s)
}

func TestGetListNonRecursive(t *testing.T) {
	ctx, s := testSetup(t)
	storagetesting.RunTestGetListNonRecursive(ctx, t, increaseRV(s.client.Client), s)
}

func TestGetListRecursivePrefix(t *testing.T) {
	ctx, s := testSetup(t)
	storagetesting.RunTestGetListRecursivePrefix(ctx, t, s)
}

func TestKeySchema(t *testing.T) {
	ctx, s := testSetup(t)
	storagetesting.RunTestKeySchema(ctx, t, s)
}

func TestGuaranteedUpdate(t *testing.T) {
	ctx, s := testSetup(t)
	storagetesting.RunTestGuaranteedUpdate(ctx, t, s, checkStorageInvariants(s.client.Client))
}

func TestGuaranteedUpdateWithTTL(t *testing.T) {
	ctx, s := testSetup(t)
	storagetesting.RunTestGuaranteedUpdateWithTTL(ctx, t, s)
}

func TestGuaranteedUpdateChecksStoredData(t *testing.T) {
	ctx, s := testSetup(t)
	storagetesting.RunTestGuaranteedUpdateChecksStoredData(ctx, t, s)
}

func TestGuaranteedUpdateWithConflict(t *testing.T) {
	ctx, s := testSetup(t)
	storagetesting.RunTestGuaranteedUpdateWithConflict(ctx, t, s)
}

func TestGuaranteedUpdateWithSuggestionAndConflict(t *testing.T) {
	ctx, s := testSetup(t)
	storagetesting.RunTestGuaranteedUpdateWithSuggestionAndConflict(ctx, t, s)
}

func TestTransformationFailure(t *testing.T) {
	ctx, s := testSetup(t)
	storagetesting.RunTestTransformationFailure(ctx, t, s)
}

func TestList(t *testing.T) {
	ctx, s := testSetup(t)
	storagetesting.RunTestList(ctx, t, s, compactStorage(s), false, s.client.Kubernetes.(*storagetesting.KubernetesRecorder))
}

func TestConsistentList(t *testing.T) {
	ctx, s := testSetup(t)
	storagetesting.RunTestConsistentList(ctx, t, s, increaseRV(s.client.Client), false, true, false)
}

func TestCompactRevision(t *testing.T) {
	// The store learns compactions made by others by watching the compaction key, which it
	// does with ListFromCacheSnapshot.
	featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.ListFromCacheSnapshot, true)
	ctx, s := testSetup(t)
	storagetesting.RunTestCompactRevision(ctx, t, s, increaseRV(s.client.Client), compactStorage(s))
}

func TestListContinuation(t *testing.T) {
	ctx, s := testSetup(t)
	storagetesting.RunTestListContinuation(ctx, t, s, s.callsValidation())
}

func TestListPaginationRareObject(t *testing.T) {
	// With ListFromCacheSnapshot the store also reads the compaction key, which the request
	// count would include.
	featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.ListFromCacheSnapshot, false)
	ctx, s := testSetup(t)
	storagetesting.RunTestListPaginationRareObject(ctx, t, s, s.callsValidation())
}

func TestListContinuationWithFilter(t *testing.T) {
	ctx, s := testSetup(t)
	storagetesting.RunTestListContinuationWithFilter(ctx, t, s, s.callsValidation())
}

func TestNamespaceScopedList(t *testing.T) {
	ctx, s := testSetup(t)
	storagetesting.RunTestNamespaceScopedList(ctx, t, s)
}

func TestListInconsistentContinuation(t *testing.T) {
	ctx, s := testSetup(t)
	storagetesting.RunTestListInconsistentContinuation(ctx, t, s, compactStorage(s))
}

func TestListResourceVersionMatch(t *testing.T) {
	ctx, s := testSetup(t)
	storagetesting.RunTestListResourceVersionMatch(ctx, t, s)
}

func TestStats(t *testing.T) {
	for _, sizeBasedListCostEstimate := range []bool{true, false} {
		t.Run(fmt.Sprintf("SizeBasedListCostEstimate=%v", sizeBasedListCostEstimate), func(t *testing.T) {
			ctx, s := testSetup(t)
			if sizeBasedListCostEstimate {
				if err := s.EnableResourceSizeEstimation(getKeys(s.client.Client, "/pods/")); err != nil {
					t.Fatal(err)
				}
			}
			storagetesting.RunTestStats(ctx, t, s, codec, s.transformer, sizeBasedListCostEstimate)
		})
	}
}

func TestLeaseMaxObjectCount(t *testing.T) {
	// Upstream reads the lease manager's counter; here the replica shows which lease each key
	// got: two objects share a lease, the third gets a new one.
	cfg := etcd3.NewDefaultLeaseManagerConfig()
	cfg.MaxObjectCount = 2
	ctx, s := testSetup(t, withLeaseConfig(cfg))
	obj := &example.Pod{ObjectMeta: metav1.ObjectMeta{Name: "foo"}}
	var leases []clientv3.LeaseID
	for _, key := range []string{"/pods/testkey1", "/pods/testkey2", "/pods/testkey3"} {
		if err := s.Create(ctx, key, obj, &example.Pod{}, 120); err != nil {
			t.Fatalf("Set failed: %v", err)
		}
		resp, err := s.client.KV.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Kvs) != 1 || resp.Kvs[0].Lease == 0 {
			t.Fatalf("%s: expected one key with a lease, got %v", key, resp.Kvs)
		}
		leases = append(leases, clientv3.LeaseID(resp.Kvs[0].Lease))
	}
	if leases[0] != leases[1] {
		t.Errorf("the first two objects should share a lease, got %x and %x", leases[0], leases[1])
	}
	if leases[2] == leases[1] {
		t.Errorf("the third object should get a new lease, got %x again", leases[2])
	}
}

func TestGetCurrentResourceVersion(t *testing.T) {
	ctx, s := testSetup(t)
	versioner := storage.APIObjectVersioner{}

	pod := &example.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pod-1"}}
	key := "/pods/" + pod.Namespace + "/" + pod.Name
	created := &example.Pod{}
	require.NoError(t, s.Create(ctx, key, pod, created, 0))

	// The storage's current resource version is the revision of the pod's creation.
	current, err := s.GetCurrentResourceVersion(ctx)
	require.NoError(t, err)
	podRV, err := versioner.ParseResourceVersion(created.ResourceVersion)
	require.NoError(t, err)
	require.Equal(t, current, podRV, "expected the global etcd RV to be equal to pod's RV")

	// After an unrelated write, it is that write's revision.
	resp, err := s.client.KV.Put(ctx, "compact_rev_key", created.ResourceVersion)
	require.NoError(t, err)
	current, err = s.GetCurrentResourceVersion(ctx)
	require.NoError(t, err)
	require.Equal(t, current, uint64(resp.Header.Revision), "expected the global etcd RV to be equal to the unrelated write's RV")

	// The pod's resource version has not changed.
	got := &example.Pod{}
	require.NoError(t, s.Get(ctx, key, storage.GetOptions{}, got))
	gotRV, err := versioner.ParseResourceVersion(got.ResourceVersion)
	require.NoError(t, err)
	require.Equal(t, gotRV, podRV, "didn't expect to see the pod's RV changed")
}

func TestPrefixStats(t *testing.T) {
	for _, tc := range []struct {
		name        string
		estimate    bool
		expectStats storage.Stats
	}{
		{name: "Estimate=false", estimate: false, expectStats: storage.Stats{ObjectCount: 1}},
		{name: "Estimate=true", estimate: true, expectStats: storage.Stats{ObjectCount: 1, EstimatedAverageObjectSizeBytes: 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, s := testSetup(t, withPrefix("/registry"), withResourcePrefix("/pods/"))
			if tc.estimate {
				if err := s.EnableResourceSizeEstimation(getKeys(s.client.Client, "/registry/pods/")); err != nil {
					t.Fatal(err)
				}
			}
			// Only /registry/pods/key is one of the store's objects.
			for key, value := range map[string]string{
				"key":                "a",
				"/registry/key":      "ab",
				"/registry/pods/key": "abc",
				"/registry/podskey":  "abcd",
			} {
				if _, err := s.client.KV.Put(ctx, key, value); err != nil {
					t.Fatal(err)
				}
			}
			// The values do not decode; the list only feeds the size estimator.
			_ = s.GetList(ctx, "/pods/", storage.ListOptions{Predicate: storage.Everything, Recursive: true}, &example.PodList{})
			got, err := s.Stats(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.expectStats, got); diff != "" {
				t.Errorf("Stats diff:\n%s", diff)
			}
		})
	}
}

func TestLinearizedReadRevisionInvariant(t *testing.T) {
	// Linearizable reads must not advance the revision a later list reports.
	ctx, s := testSetup(t)
	key := "/pods//testkey"
	out := &example.Pod{}
	obj := &example.Pod{ObjectMeta: metav1.ObjectMeta{Name: "foo", SelfLink: "testlink"}}
	if err := s.Create(ctx, key, obj, out, 0); err != nil {
		t.Fatalf("Set failed: %v", err)
	}
	for range 5 {
		if _, err := s.client.KV.Get(ctx, key); err != nil {
			t.Fatalf("failed to get key: %v", err)
		}
	}
	list := &example.PodList{}
	if err := s.GetList(ctx, "/pods/", storage.ListOptions{Predicate: storage.Everything, Recursive: true}, list); err != nil {
		t.Errorf("Unexpected List error: %v", err)
	}
	if out.ResourceVersion != list.ResourceVersion {
		t.Fatalf("original revision (%s) did not match final revision after linearized reads (%s)", out.ResourceVersion, list.ResourceVersion)
	}
}

func TestInvalidKeys(t *testing.T) {
	const invalidKey = "/foo/bar/../baz"
	expected := fmt.Sprintf("invalid key: %q", invalidKey)
	expectInvalidKey := func(method string, err error) {
		t.Helper()
		if err == nil {
			t.Errorf("[%s] expected invalid key error; got nil", method)
		} else if err.Error() != expected {
			t.Errorf("[%s] expected invalid key error; got %v", method, err)
		}
	}
	ctx, s := testSetup(t)
	expectInvalidKey("Create", s.Create(ctx, invalidKey, nil, nil, 0))
	expectInvalidKey("Delete", s.Delete(ctx, invalidKey, nil, nil, nil, nil, storage.DeleteOptions{}))
	_, err := s.Watch(ctx, invalidKey, storage.ListOptions{})
	expectInvalidKey("Watch", err)
	expectInvalidKey("Get", s.Get(ctx, invalidKey, storage.GetOptions{}, nil))
	expectInvalidKey("GetList", s.GetList(ctx, invalidKey, storage.ListOptions{}, nil))
	expectInvalidKey("GuaranteedUpdate", s.GuaranteedUpdate(ctx, invalidKey, nil, true, nil, nil, nil))
}

func TestPrefixGetKeys(t *testing.T) {
	t.Skip("tests the etcd3 store's unexported key lister (store.getKeys); the keys-only prefix " +
		"range it sends is exercised through TestStats and TestPrefixStats")
}
