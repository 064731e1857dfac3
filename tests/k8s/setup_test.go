package k8s

import (
	"context"
	"errors"
	"io"
	"os"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/kubernetes"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/grpclog"

	"k8s.io/apimachinery/pkg/api/apitesting"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apiserver/pkg/apis/example"
	examplev1 "k8s.io/apiserver/pkg/apis/example/v1"
	"k8s.io/apiserver/pkg/features"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/etcd3"
	storagetesting "k8s.io/apiserver/pkg/storage/testing"
	"k8s.io/apiserver/pkg/storage/value"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/utils/clock"
)

// The example API group, encoded as example/v1 on the wire, as in Kubernetes' storage tests.
var (
	scheme = runtime.NewScheme()
	codecs = serializer.NewCodecFactory(scheme)
	codec  = apitesting.TestCodec(codecs, examplev1.SchemeGroupVersion)
)

// Every stored value carries this prefix, added and checked by storagetesting.PrefixTransformer.
const valuePrefix = "test!"

func init() {
	metav1.AddToGroupVersion(scheme, metav1.SchemeGroupVersion)
	utilruntime.Must(example.AddToScheme(scheme))
	utilruntime.Must(examplev1.AddToScheme(scheme))
	grpclog.SetLoggerV2(grpclog.NewLoggerV2(io.Discard, io.Discard, os.Stderr))
}

// etcdStore is the part of etcd3.New's (unexported) store type the tests use.
type etcdStore interface {
	storage.Interface
	CompactRevision() int64
	EnableResourceSizeEstimation(storage.KeysFunc) error
	Close()
}

// testStore is the etcd3 store under test together with what the tests reach around it for.
type testStore struct {
	etcdStore
	client      *kubernetes.Client
	transformer *swappableTransformer
	// base is the transformer the store was built with; it counts the values it reads.
	base *storagetesting.PrefixTransformer
}

type setupOptions struct {
	newFunc        func() runtime.Object
	prefix         string
	resourcePrefix string
	leaseConfig    etcd3.LeaseManagerConfig
}

type setupOption func(*setupOptions)

func withPrefix(prefix string) setupOption {
	return func(o *setupOptions) { o.prefix = prefix }
}

func withResourcePrefix(prefix string) setupOption {
	return func(o *setupOptions) { o.resourcePrefix = prefix }
}

func withLeaseConfig(cfg etcd3.LeaseManagerConfig) setupOption {
	return func(o *setupOptions) { o.leaseConfig = cfg }
}

func withoutNewFunc() setupOption {
	return func(o *setupOptions) { o.newFunc = nil }
}

// newClient connects a Kubernetes-flavoured etcd client to endpoint, with its KV and Kubernetes
// interfaces wrapped in the recorders the list tests count requests with.
func newClient(t testing.TB, endpoint string) *kubernetes.Client {
	t.Helper()
	client, err := kubernetes.New(clientv3.Config{
		Endpoints:   []string{endpoint},
		DialTimeout: 10 * time.Second,
		DialOptions: []grpc.DialOption{grpc.WithBlock()},
		Logger:      zaptest.NewLogger(t, zaptest.Level(zapcore.ErrorLevel)).Named("etcd-client"),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	client.KV = storagetesting.NewKVRecorder(client.KV)
	client.Kubernetes = storagetesting.NewKubernetesRecorder(client.Kubernetes)
	return client
}

// testSetup starts a mote store replica and builds the etcd3 store over it the way Kubernetes'
// etcd3 tests do: example pods under /pods/, the test prefix transformer, a compactor that does
// not compact by itself, and a one-second lease reuse window.
func testSetup(t testing.TB, opts ...setupOption) (context.Context, *testStore) {
	t.Helper()
	leaseConfig := etcd3.NewDefaultLeaseManagerConfig()
	// Tests may wait at most wait.ForeverTestTimeout (30s) at a time, so leases are reused for
	// one second rather than a minute.
	leaseConfig.ReuseDurationSeconds = 1
	o := setupOptions{
		newFunc:        func() runtime.Object { return &example.Pod{} },
		resourcePrefix: "/pods/",
		leaseConfig:    leaseConfig,
	}
	for _, opt := range opts {
		opt(&o)
	}
	client := newClient(t, startMote(t))
	versioner := storage.APIObjectVersioner{}
	compactor := etcd3.NewCompactor(client.Client, 0, clock.RealClock{}, nil)
	t.Cleanup(compactor.Stop)
	base := storagetesting.NewPrefixTransformer([]byte(valuePrefix), false)
	transformer := &swappableTransformer{current: base}
	s, err := etcd3.New(
		client,
		compactor,
		codec,
		o.newFunc,
		func() runtime.Object { return &example.PodList{} },
		o.prefix,
		o.resourcePrefix,
		schema.GroupResource{Resource: "pods"},
		transformer,
		o.leaseConfig,
		etcd3.NewDefaultDecoder(codec, versioner),
		versioner,
	)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return context.Background(), &testStore{etcdStore: s, client: client, transformer: transformer, base: base}
}

// swappableTransformer is the store's value transformer; tests replace what it delegates to, the
// way upstream's tests replace the transformer field of the store and of its watcher.
type swappableTransformer struct {
	mu      sync.RWMutex
	current value.Transformer
}

func (s *swappableTransformer) get() value.Transformer {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.current
}

// swap makes next the delegate and returns a function that restores the previous one.
func (s *swappableTransformer) swap(next value.Transformer) func() {
	s.mu.Lock()
	defer s.mu.Unlock()
	prev := s.current
	s.current = next
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.current = prev
	}
}

func (s *swappableTransformer) TransformFromStorage(ctx context.Context, data []byte, dataCtx value.Context) ([]byte, bool, error) {
	return s.get().TransformFromStorage(ctx, data, dataCtx)
}

func (s *swappableTransformer) TransformToStorage(ctx context.Context, data []byte, dataCtx value.Context) ([]byte, error) {
	return s.get().TransformToStorage(ctx, data, dataCtx)
}

// UpdatePrefixTransformer implements storagetesting.InterfaceWithPrefixTransformer: the store
// uses modifier's transformer, derived from a copy of the test prefix transformer, until the
// returned function is called.
func (s *testStore) UpdatePrefixTransformer(modifier storagetesting.PrefixTransformerModifier) func() {
	prefix := *s.base
	return s.transformer.swap(modifier(&prefix))
}

// CorruptTransformer implements storagetesting.InterfaceWithCorruptTransformer: until the
// returned function is called, every stored value fails to transform, and the failure is
// reported as a corrupt object, as etcd3's corrupt-object handling would.
func (s *testStore) CorruptTransformer() func() {
	return s.transformer.swap(etcd3.WithCorruptObjErrorHandlingTransformer(corruptTransformer{s.transformer.get()}))
}

type corruptTransformer struct {
	value.Transformer
}

func (corruptTransformer) TransformFromStorage(context.Context, []byte, value.Context) ([]byte, bool, error) {
	return nil, true, errors.New("bits flipped")
}

// increaseRV writes an unrelated key and returns the revision of that write.
func increaseRV(client *clientv3.Client) storagetesting.IncreaseRVFunc {
	return func(ctx context.Context, t *testing.T) int64 {
		resp, err := client.KV.Put(ctx, "increaseRV", "ok")
		if err != nil {
			t.Fatalf("Could not update increaseRV: %v", err)
		}
		return resp.Header.Revision
	}
}

// compactStorage compacts the store up to a resource version the way kube-apiserver's compactor
// does (a compare-and-swap on the compaction key, then Compact), and, when the store learns
// compactions by watching that key, waits until it has.
func compactStorage(s *testStore) storagetesting.Compaction {
	return func(ctx context.Context, t *testing.T, resourceVersion string) {
		rv, err := storage.APIObjectVersioner{}.ParseResourceVersion(resourceVersion)
		if err != nil {
			t.Fatal(err)
		}
		var version int64
		version, _, _, err = etcd3.Compact(ctx, s.client.Client, version, int64(rv))
		if err != nil {
			_, _, _, err = etcd3.Compact(ctx, s.client.Client, version, int64(rv))
		}
		if err != nil {
			t.Fatal(err)
		}
		if !utilfeature.DefaultFeatureGate.Enabled(features.ListFromCacheSnapshot) {
			return
		}
		for s.CompactRevision() != int64(rv) {
			select {
			case <-ctx.Done():
				t.Fatal(ctx.Err())
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
}

// getKeys lists the keys under the store's resource prefix, as the store's own key lister does
// for its size estimator.
func getKeys(client *clientv3.Client, prefix string) storage.KeysFunc {
	return func(ctx context.Context) ([]string, error) {
		resp, err := client.KV.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
		if err != nil {
			return nil, err
		}
		keys := make([]string, 0, len(resp.Kvs))
		for _, kv := range resp.Kvs {
			keys = append(keys, string(kv.Key))
		}
		return keys, nil
	}
}
