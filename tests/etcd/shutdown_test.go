package etcd

import (
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// exitWithin is how long a server may take to exit after SIGTERM on a loaded 2-core machine.
const exitWithin = 5 * time.Second

// startEtcdctl starts a long-running etcdctl command against s (a watch, a keep-alive) and
// returns its standard output as it grows. It is killed when the test ends, as it outlives the
// server (etcdctl keeps retrying a stream its server ended); a failed test shows its stderr.
func startEtcdctl(t testing.TB, s *server, args ...string) *syncBuffer {
	t.Helper()
	cmd := exec.Command(etcdBin(t, "etcdctl"), append([]string{"--endpoints=" + s.Endpoint}, args...)...)
	out, errs := &syncBuffer{}, &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, errs
	if err := cmd.Start(); err != nil {
		t.Fatalf("etcdctl %s: %v", strings.Join(args, " "), err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("etcdctl %s stderr:\n%s", strings.Join(args, " "), errs.String())
		}
	})
	return out
}

// waitForOutput waits until out matches want, or fails the test after 10 s.
func waitForOutput(t testing.TB, what string, out *syncBuffer, want *regexp.Regexp) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !want.MatchString(out.String()) {
		if time.Now().After(deadline) {
			t.Fatalf("%s printed %q", what, out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestSigtermWithStreamsOpen: with etcdctl holding a watch and a lease keep-alive open, mote
// store stopped on SIGTERM only once they ended, that is never (kube-apiserver's watches hung
// its storage tests the same way). It must end the streams and exit at once. (etcd 3.6.8 is not
// held to this: it waits its request timeout, 7 s by default, for the streams, then cuts their
// connections. A watch never ends by itself, so waiting gains nothing.)
func TestSigtermWithStreamsOpen(t *testing.T) {
	s := startMote(t, newMoteSpec(t, "a"))
	// From revision 1, so the watch sees the put whenever it is established.
	watch := startEtcdctl(t, s, "watch", "shutdown/", "--prefix", "--rev=1")
	etcdctl(t, s, "", true, "put", "shutdown/k", "v")
	waitForOutput(t, "etcdctl watch", watch, regexp.MustCompile(`^PUT\nshutdown/k\nv\n$`))

	granted := etcdctl(t, s, "", true, "lease", "grant", "60")
	m := regexp.MustCompile(`^lease ([0-9a-f]+) granted`).FindStringSubmatch(granted)
	if m == nil {
		t.Fatalf("lease grant: %q", granted)
	}
	keepAlive := startEtcdctl(t, s, "lease", "keep-alive", m[1])
	waitForOutput(t, "etcdctl lease keep-alive", keepAlive, regexp.MustCompile(`keepalived with TTL\(60\)`))

	if err := s.terminate(t, exitWithin); err != nil {
		t.Fatalf("mote store exited with %v on SIGTERM", err)
	}
}
