// Package k8s runs Kubernetes' own storage conformance tests against mote store.
//
// The tests build the real k8s.io/apiserver/pkg/storage/etcd3 store (the storage layer of
// kube-apiserver) over a go.etcd.io/etcd/client/v3 client connected to a single `mote store`
// replica, with the example API group codecs Kubernetes' tests use, and run the exported generic
// tests of k8s.io/apiserver/pkg/storage/testing (create, get, delete, guaranteed update, list and
// pagination, consistent list, compaction, watch) plus the etcd3 package's compactor tests, wired
// the way upstream wires them against an embedded etcd. Passing proves that, to kube-apiserver's
// storage layer, one mote store replica is indistinguishable from etcd.
//
// Each test starts its own replica on free loopback ports with a temporary data directory. The
// binary is $MOTE_BIN, by default ../../target/release/mote (build it with
// `cargo build --release --locked`); scripts/test-k8s runs the suite.
package k8s
