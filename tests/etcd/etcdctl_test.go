package etcd

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// etcdctl runs etcdctl against s with stdin, and returns its output; it fails the test if the
// command fails and ok is set, or succeeds and ok is not.
func etcdctl(t testing.TB, s *server, stdin string, ok bool, args ...string) string {
	t.Helper()
	cmd := exec.Command(etcdBin(t, "etcdctl"), append([]string{"--endpoints=" + s.Endpoint, "--command-timeout=10s"}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ok && err != nil {
		t.Fatalf("etcdctl %s: %v\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	if !ok {
		if err == nil {
			t.Fatalf("etcdctl %s succeeded: %s", strings.Join(args, " "), stdout.String())
		}
		return stderr.String()
	}
	return stdout.String()
}

func TestEtcdctl(t *testing.T) {
	onBoth(t, func(t *testing.T, s *server) {
		run := func(args ...string) string { t.Helper(); return etcdctl(t, s, "", true, args...) }
		eq(t, "put", run("put", "foo", "bar"), "OK\n")
		run("put", "foo/a", "1")
		run("put", "foo/b", "2")
		eq(t, "get", run("get", "foo"), "foo\nbar\n")
		eq(t, "get --prefix --keys-only", run("get", "foo", "--prefix", "--keys-only"), "foo\n\nfoo/a\n\nfoo/b\n\n")
		eq(t, "get --prefix --limit", run("get", "foo", "--prefix", "--limit=2", "--print-value-only"), "bar\n1\n")

		var got struct {
			Header struct{ Revision int64 }
			Kvs    []struct {
				Key, Value string
				Version    int64
			}
			Count int64
			More  bool
		}
		out := run("get", "foo/", "--prefix", "-w", "json")
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("get -w json: %v\n%s", err, out)
		}
		eq(t, "json revision and count", [2]int64{got.Header.Revision, got.Count}, [2]int64{4, 2})
		key, _ := base64.StdEncoding.DecodeString(got.Kvs[1].Key)
		value, _ := base64.StdEncoding.DecodeString(got.Kvs[1].Value)
		eq(t, "json kv", [3]any{string(key), string(value), got.Kvs[1].Version}, [3]any{"foo/b", "2", int64(1)})

		eq(t, "del", run("del", "foo/a"), "1\n")
		eq(t, "del --prefix", run("del", "foo", "--prefix"), "2\n")
		eq(t, "nothing left", run("get", "foo", "--prefix"), "")

		run("put", "foo", "bar")
		txn := "value(\"foo\") = \"bar\"\n\nput foo baz\n\nput foo qux\n\n"
		eq(t, "txn that succeeds", etcdctl(t, s, txn, true, "txn"), "SUCCESS\n\nOK\n")
		eq(t, "txn that fails", etcdctl(t, s, txn, true, "txn"), "FAILURE\n\nOK\n")
		eq(t, "after the txns", run("get", "foo", "--print-value-only"), "qux\n")
		txn = "mod(\"foo\") > \"0\"\nversion(\"nope\") = \"0\"\n\nget foo\ndel foo\n\n\n"
		eq(t, "txn with reads and deletes", etcdctl(t, s, txn, true, "txn"), "SUCCESS\n\nfoo\nqux\n\n1\n")

		granted := run("lease", "grant", "60")
		m := regexp.MustCompile(`^lease ([0-9a-f]+) granted with TTL\(60s\)\n$`).FindStringSubmatch(granted)
		if m == nil {
			t.Fatalf("lease grant: %q", granted)
		}
		id := m[1]
		run("put", "--lease="+id, "leased", "v")
		ttl := run("lease", "timetolive", id, "--keys")
		if !regexp.MustCompile(`^lease ` + id + ` granted with TTL\(60s\), remaining\((59|60)s\), attached keys\(\[leased\]\)\n$`).MatchString(ttl) {
			t.Fatalf("lease timetolive: %q", ttl)
		}
		eq(t, "lease list", run("lease", "list"), "found 1 leases\n"+id+"\n")
		if ka := run("lease", "keep-alive", "--once", id); !strings.Contains(ka, "keepalived with TTL(60)") {
			t.Fatalf("lease keep-alive: %q", ka)
		}
		eq(t, "lease revoke", run("lease", "revoke", id), "lease "+id+" revoked\n")
		eq(t, "a revoked lease's key", run("get", "leased"), "")
		if msg := etcdctl(t, s, "", false, "lease", "revoke", id); !strings.Contains(msg, "requested lease not found") {
			t.Fatalf("revoking twice: %q", msg)
		}

		status := run("endpoint", "status", "-w", "json")
		var st []struct {
			Status struct {
				Header struct {
					MemberID uint64 `json:"member_id"`
					Revision int64
				}
				Leader uint64
			}
		}
		if err := json.Unmarshal([]byte(status), &st); err != nil || len(st) != 1 {
			t.Fatalf("endpoint status -w json: %v\n%s", err, status)
		}
		rev := st[0].Status.Header.Revision
		// A watch in the background, from the next revision so that it cannot miss the put.
		watch := exec.Command(etcdBin(t, "etcdctl"), "--endpoints="+s.Endpoint, "watch", "w", "--rev="+strconv.FormatInt(rev+1, 10))
		var watched syncBuffer
		watch.Stdout = &watched
		if err := watch.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = watch.Process.Kill(); _ = watch.Wait() }()
		run("put", "w", "seen")
		deadline := time.Now().Add(10 * time.Second)
		for watched.String() != "PUT\nw\nseen\n" {
			if time.Now().After(deadline) {
				t.Fatalf("etcdctl watch printed %q", watched.String())
			}
			time.Sleep(20 * time.Millisecond)
		}

		eq(t, "compaction", run("compaction", strconv.FormatInt(rev, 10)), fmt.Sprintf("compacted revision %d\n", rev))
		if msg := etcdctl(t, s, "", false, "get", "foo", "--rev="+strconv.FormatInt(rev-1, 10)); !strings.Contains(msg, "Error: etcdserver: mvcc: required revision has been compacted") {
			t.Fatalf("get below the compaction: %q", msg)
		}

		id64 := strconv.FormatUint(st[0].Status.Header.MemberID, 16)
		table := run("endpoint", "status", "-w", "table")
		lines := strings.Split(strings.TrimSpace(table), "\n")
		if len(lines) != 5 {
			t.Fatalf("endpoint status -w table:\n%s", table)
		}
		header, row := cells(lines[1]), cells(lines[3])
		eq(t, "table columns", header[:3], []string{"ENDPOINT", "ID", "VERSION"})
		eq(t, "table row", row[:2], []string{s.Endpoint, id64})
		if column(header, row, "IS LEADER") != "true" || column(header, row, "IS LEARNER") != "false" {
			t.Fatalf("endpoint status -w table:\n%s", table)
		}
		eq(t, "member list", run("member", "list"),
			fmt.Sprintf("%s, started, %s, %s, http://%s, false\n", id64, s.Name, s.PeerURL, s.Endpoint))
		if health := run("endpoint", "health"); !strings.Contains(health, s.Endpoint+" is healthy") {
			t.Fatalf("endpoint health: %q", health)
		}
	})
}

// cells splits a row of an ASCII table into its trimmed cells.
func cells(line string) []string {
	var out []string
	for _, c := range strings.Split(strings.Trim(line, "|"), "|") {
		out = append(out, strings.TrimSpace(c))
	}
	return out
}

func column(header, row []string, name string) string {
	for i, h := range header {
		if h == name && i < len(row) {
			return row[i]
		}
	}
	return ""
}

// syncBuffer is a bytes.Buffer a child process writes while the test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
