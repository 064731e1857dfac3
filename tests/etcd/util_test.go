package etcd

import (
	"errors"
	"reflect"
	"sort"
	"strconv"
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/status"
)

// result is a call's value and error, for ok(call(...)).must(t).
type result[T any] struct {
	v   T
	err error
}

// ok holds a call's results until must checks them.
func ok[T any](v T, err error) result[T] { return result[T]{v, err} }

// must fails the test if the call failed, and returns its value.
func (r result[T]) must(t testing.TB) T {
	t.Helper()
	if r.err != nil {
		t.Fatalf("unexpected error: %v", r.err)
	}
	return r.v
}

// noErr fails the test on err.
func noErr(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("unexpected error: %v", err)
	}
}

// wantErr fails the test unless err is want, as clientv3 turns etcd's gRPC errors into
// rpctypes values (which also means the gRPC code and message matched etcd's).
func wantErr(t testing.TB, err error, want error) {
	t.Helper()
	if err == nil {
		t.Fatalf("want error %q, got none", want)
	}
	if !errors.Is(err, want) {
		t.Fatalf("want error %q (%T), got %q (%T)", want, want, err, err)
	}
}

// wantStatus fails the test unless err is the gRPC status want, code and message, as etcd sends
// it (for raw gRPC calls, which clientv3 does not translate).
func wantStatus(t testing.TB, err error, want error) {
	t.Helper()
	got, _ := status.FromError(err)
	exp, _ := status.FromError(want)
	if err == nil || got.Code() != exp.Code() || got.Message() != exp.Message() {
		t.Fatalf("want gRPC error %v %q, got %v", exp.Code(), exp.Message(), err)
	}
	if rpctypes.Error(err) == nil {
		t.Fatalf("rpctypes does not recognise %v", err)
	}
}

// keys lists the keys of kvs in order.
func keys(kvs []*mvccpb.KeyValue) []string {
	out := make([]string, 0, len(kvs))
	for _, kv := range kvs {
		out = append(out, string(kv.Key))
	}
	return out
}

// values lists the values of kvs in order.
func values(kvs []*mvccpb.KeyValue) []string {
	out := make([]string, 0, len(kvs))
	for _, kv := range kvs {
		out = append(out, string(kv.Value))
	}
	return out
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}

// eq fails the test unless got equals want.
func eq[T any](t testing.TB, what string, got, want T) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
