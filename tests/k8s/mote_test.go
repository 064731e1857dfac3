package k8s

import (
	"bytes"
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
)

// moteBinary is the mote executable under test: $MOTE_BIN, or the release build of this checkout.
func moteBinary(t testing.TB) string {
	t.Helper()
	bin := os.Getenv("MOTE_BIN")
	if bin == "" {
		bin = filepath.Join("..", "..", "target", "release", "mote")
	}
	abs, err := filepath.Abs(bin)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(abs); err != nil {
		t.Fatalf("mote binary: %v (build it with `cargo build --release --locked`, or set MOTE_BIN)", err)
	}
	return abs
}

// freePorts returns n distinct loopback TCP ports that were free a moment ago.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("could not bind a free port: %v", err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

// lockedBuffer collects a child process's output while the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// stopWithin is how long a replica may take to exit after SIGTERM, generous for a loaded
// machine: mote store ends its open streams and exits at once.
const stopWithin = 10 * time.Second

// startLock serialises picking ports and starting a replica, so two tests of this process never
// race for the same port.
var startLock sync.Mutex

// startMote starts one `mote store` replica on free loopback ports with a fresh data directory,
// waits until its etcd API accepts connections, and returns that API's address. The replica is
// stopped when the test ends; if the test failed, its log is attached to the test output.
func startMote(t testing.TB) string {
	t.Helper()
	bin := moteBinary(t)
	startLock.Lock()
	defer startLock.Unlock()
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		endpoint, err := tryStartMote(t, bin)
		if err == nil {
			return endpoint
		}
		lastErr = err
	}
	t.Fatalf("mote store did not start: %v", lastErr)
	return ""
}

func tryStartMote(t testing.TB, bin string) (string, error) {
	ports := freePorts(t, 2)
	endpoint := fmt.Sprintf("127.0.0.1:%d", ports[0])
	dir := t.TempDir()
	cmd := exec.Command(bin, "store",
		"--name", "a",
		"--listen", endpoint,
		"--peer-listen", fmt.Sprintf("127.0.0.1:%d", ports[1]),
		"--data", filepath.Join(dir, "data"),
		"--log", "warn",
	)
	log := &lockedBuffer{}
	cmd.Stdout = log
	cmd.Stderr = log
	cmd.SysProcAttr = childProcAttr()
	if err := cmd.Start(); err != nil {
		return "", err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	deadline := time.Now().Add(30 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", endpoint, time.Second)
		if err == nil {
			conn.Close()
			break
		}
		select {
		case err := <-exited:
			return "", fmt.Errorf("mote store exited before serving (%v): %s", err, strings.TrimSpace(log.String()))
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-exited
			return "", fmt.Errorf("mote store did not listen on %s within 30s: %s", endpoint, log.String())
		}
	}

	t.Cleanup(func() {
		// kube-apiserver's storage holds watches until the end; a replica that waited for
		// them would never stop. A hang or a failed exit is a defect, not something to kill
		// quietly.
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("mote store exited with %v on SIGTERM", err)
			}
		case <-time.After(stopWithin):
			t.Errorf("mote store was still running %v after SIGTERM: it hangs on open streams instead of stopping (killed it)", stopWithin)
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			if out := strings.TrimSpace(log.String()); out != "" {
				t.Logf("mote store log:\n%s", out)
			}
		}
	})
	return endpoint, nil
}
