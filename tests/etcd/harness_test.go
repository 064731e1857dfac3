// Package etcd drives mote store with real etcd clients (clientv3, etcdctl) and compares it with
// a real etcd 3.6.8 server started beside it.
//
// The harness starts `mote store` (MOTE_BIN, default ../../target/release/mote) and `etcd`
// (ETCD_BIN, else $ETCD_TOOLS_DIR/bin/etcd, else ../../target/etcd-v3.6.8/bin/etcd) on free
// loopback ports with temporary data directories, and kills them when the test ends. A failed
// test prints the end of each server's log.
package etcd

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// progressInterval is how often a server sends progress notifications to idle watchers that
// asked for them. mote store's interval is fixed (crates/store/src/watch.rs); etcd is started
// with the same one.
const progressInterval = 5 * time.Second

// etcdTools is where scripts/etcd-tools installs etcd's binaries by default.
const etcdTools = "../../target/etcd-v3.6.8"

// moteBin is the mote binary under test.
func moteBin(t testing.TB) string {
	return binary(t, "MOTE_BIN", "../../target/release/mote", "build it: cargo build --release --locked")
}

// etcdBin is one of etcd's tools: "etcd" (ETCD_BIN) or "etcdctl" (ETCDCTL_BIN).
func etcdBin(t testing.TB, tool string) string {
	dir := os.Getenv("ETCD_TOOLS_DIR")
	if dir == "" {
		dir = etcdTools
	}
	env := strings.ToUpper(tool) + "_BIN"
	return binary(t, env, filepath.Join(dir, "bin", tool), "install it: scripts/etcd-tools")
}

func binary(t testing.TB, env, fallback, hint string) string {
	path := os.Getenv(env)
	if path == "" {
		path = fallback
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if _, err := os.Stat(abs); err != nil {
		t.Fatalf("%s not found (set %s or %s): %v", abs, env, hint, err)
	}
	return abs
}

var (
	portsMu sync.Mutex
	given   = map[int]bool{}
)

// freePort is a loopback port nobody listens on, never handed out twice by this process.
func freePort(t testing.TB) int {
	portsMu.Lock()
	defer portsMu.Unlock()
	for {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("no free port: %v", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if !given[port] {
			given[port] = true
			return port
		}
	}
}

// server is one running mote store replica or etcd member.
type server struct {
	Kind     string // "mote" or "etcd"
	Name     string
	Endpoint string // host:port of the client API
	PeerURL  string
	cmd      *exec.Cmd
	log      string
	exited   chan struct{}
	waitErr  error // how the process ended, once exited is closed
}

// moteSpec says how to start one replica; ports are picked by the caller so that replicas can
// name each other as peers before any of them starts.
type moteSpec struct {
	name       string
	clientPort int
	peerPort   int
	peers      []string // NAME=URL of the peer API
}

func newMoteSpec(t testing.TB, name string) moteSpec {
	return moteSpec{name: name, clientPort: freePort(t), peerPort: freePort(t)}
}

// startMote starts one mote store replica with a fresh data directory.
func startMote(t testing.TB, spec moteSpec) *server {
	t.Helper()
	dir := t.TempDir()
	args := []string{
		"store",
		"--name", spec.name,
		"--listen", fmt.Sprintf("127.0.0.1:%d", spec.clientPort),
		"--peer-listen", fmt.Sprintf("127.0.0.1:%d", spec.peerPort),
		"--data", filepath.Join(dir, "data"),
		"--pull-interval-ms", "20",
		"--log", "warn",
	}
	if len(spec.peers) > 0 {
		args = append(args, "--peers", strings.Join(spec.peers, ","))
	}
	s := &server{
		Kind:     "mote",
		Name:     spec.name,
		Endpoint: fmt.Sprintf("127.0.0.1:%d", spec.clientPort),
		PeerURL:  fmt.Sprintf("http://127.0.0.1:%d", spec.peerPort),
	}
	s.start(t, dir, moteBin(t), args)
	return s
}

// startEtcd starts a single-member etcd with a fresh data directory. The election timeout is
// short so that its minimum lease TTL is 1 s, like mote store's, and it starts quickly.
func startEtcd(t testing.TB) *server {
	t.Helper()
	dir := t.TempDir()
	client, peer := freePort(t), freePort(t)
	s := &server{
		Kind:     "etcd",
		Name:     "etcd",
		Endpoint: fmt.Sprintf("127.0.0.1:%d", client),
		PeerURL:  fmt.Sprintf("http://127.0.0.1:%d", peer),
	}
	clientURL := "http://" + s.Endpoint
	args := []string{
		"--name", s.Name,
		"--data-dir", filepath.Join(dir, "data"),
		"--listen-client-urls", clientURL,
		"--advertise-client-urls", clientURL,
		"--listen-peer-urls", s.PeerURL,
		"--initial-advertise-peer-urls", s.PeerURL,
		"--initial-cluster", s.Name + "=" + s.PeerURL,
		"--election-timeout", "500",
		"--heartbeat-interval", "100",
		"--watch-progress-notify-interval", progressInterval.String(),
		"--unsafe-no-fsync",
		"--log-level", "warn",
	}
	s.start(t, dir, etcdBin(t, "etcd"), args)
	return s
}

func (s *server) start(t testing.TB, dir, bin string, args []string) {
	t.Helper()
	s.log = filepath.Join(dir, s.Kind+"-"+s.Name+".log")
	logFile, err := os.Create(s.log)
	if err != nil {
		t.Fatal(err)
	}
	s.cmd = exec.Command(bin, args...)
	s.cmd.Stdout = logFile
	s.cmd.Stderr = logFile
	// If the test binary dies without its cleanups (a -timeout panic), the server goes too.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", bin, err)
	}
	logFile.Close()
	s.exited = make(chan struct{})
	go func() {
		s.waitErr = s.cmd.Wait()
		close(s.exited)
	}()
	t.Cleanup(func() {
		s.stop()
		if t.Failed() {
			t.Logf("end of the %s %s log (%s):\n%s", s.Kind, s.Name, s.log, tail(s.log, 30))
		}
	})
	s.waitReady(t)
}

// stop kills the process and waits for it to go.
func (s *server) stop() {
	select {
	case <-s.exited:
		return
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.exited
}

// terminate sends SIGTERM and waits up to within for the server to exit, returning how it
// exited. A server still running then fails the test, named as the hang it is (a caller
// stopping it with SIGTERM would wait forever), and is killed.
func (s *server) terminate(t testing.TB, within time.Duration) error {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM to %s %s: %v", s.Kind, s.Name, err)
	}
	start := time.Now()
	select {
	case <-s.exited:
		t.Logf("%s %s exited %v after SIGTERM", s.Kind, s.Name, time.Since(start).Round(time.Millisecond))
		return s.waitErr
	case <-time.After(within):
		s.stop()
		t.Fatalf("%s %s was still running %v after SIGTERM: it hangs instead of stopping", s.Kind, s.Name, within)
		return nil
	}
}

// waitReady waits until the server answers Status, or fails the test if it exits or takes
// more than 20 s.
func (s *server) waitReady(t testing.TB) {
	t.Helper()
	cli := s.clientWithoutCleanup(t)
	defer cli.Close()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		_, err := cli.Status(ctx, s.Endpoint)
		cancel()
		if err == nil {
			return
		}
		select {
		case <-s.exited:
			t.Fatalf("%s %s exited during start-up:\n%s", s.Kind, s.Name, tail(s.log, 30))
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s %s not ready after 20 s: %v\n%s", s.Kind, s.Name, err, tail(s.log, 30))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *server) clientWithoutCleanup(t testing.TB) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{s.Endpoint},
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		t.Fatalf("client for %s: %v", s.Endpoint, err)
	}
	return cli
}

// client is a clientv3 client of the server, closed when the test ends.
func (s *server) client(t testing.TB) *clientv3.Client {
	t.Helper()
	cli := s.clientWithoutCleanup(t)
	t.Cleanup(func() { cli.Close() })
	return cli
}

// conn is a plain gRPC connection to the server, for requests clientv3 cannot express and for
// seeing raw watch responses.
func (s *server) conn(t testing.TB) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(s.Endpoint,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20), grpc.MaxCallSendMsgSize(64<<20)))
	if err != nil {
		t.Fatalf("grpc connection to %s: %v", s.Endpoint, err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// tail is the last n lines of the file at path.
func tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}

// ctx is a context that gives up well before the test binary's own timeout.
func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// onBoth runs body as two parallel subtests, "etcd" and "mote", each against a fresh server:
// an assertion that holds on etcd is one that mote store must meet.
func onBoth(t *testing.T, body func(t *testing.T, s *server)) {
	t.Run("etcd", func(t *testing.T) {
		t.Parallel()
		body(t, startEtcd(t))
	})
	t.Run("mote", func(t *testing.T) {
		t.Parallel()
		body(t, startMote(t, newMoteSpec(t, "a")))
	})
}
