package kvcache_test

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"kvcache"
)

// The remote tier through the Go API: the settings and their errors, and a
// real redis-server (started here on a loopback port, killed at the end)
// that one cache fills and a second cache reuses from. Skips, saying why,
// without hiredis in the library or redis-server on the machine.

// startRedis starts redis-server on a free loopback port without
// persistence and returns its URL; t.Skip when there is none.
func startRedis(t *testing.T) (url string, stop func()) {
	t.Helper()
	if kvcache.Features()&kvcache.FeatureRedis == 0 {
		t.Skip("built without hiredis: install libhiredis-dev and rebuild")
	}
	bin := os.Getenv("KVC_REDIS_SERVER")
	if bin == "" {
		bin = "redis-server"
	}
	if _, err := exec.LookPath(bin); err != nil {
		t.Skipf("no %s (install redis-server): %v", bin, err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(bin, "--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--save", "",
		"--appendonly", "no", "--dir", t.TempDir())
	must(t, cmd.Start())
	stop = func() { cmd.Process.Kill(); cmd.Wait() }
	// Bounded: 500 tries of PING, 10 ms apart at most.
	for i := 0; i < 500; i++ {
		if conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second); err == nil {
			conn.SetDeadline(time.Now().Add(time.Second))
			fmt.Fprint(conn, "PING\r\n")
			line, _ := bufio.NewReader(conn).ReadString('\n')
			conn.Close()
			if line == "+PONG\r\n" {
				return fmt.Sprintf("redis://127.0.0.1:%d/0", port), stop
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	t.Fatal("redis-server did not answer PING within 5 s")
	return "", nil
}

func TestRemoteTierSettingsAndErrors(t *testing.T) {
	cfg := newConfig(t, 16)
	defer cfg.Close()
	u, ns, n, err := cfg.RemoteCache()
	must(t, err)
	if u != "" || ns != "kvc" || n != 0 {
		t.Errorf("default remote cache = %q, %q, %d", u, ns, n)
	}
	must(t, cfg.SetRemoteCache("redis://:pw@10.0.0.7:6380/1", "team-a", 4096))
	u, ns, n, err = cfg.RemoteCache()
	must(t, err)
	if u != "redis://:pw@10.0.0.7:6380/1" || ns != "team-a" || n != 4096 {
		t.Errorf("remote cache = %q, %q, %d", u, ns, n)
	}
	co, cm, err := cfg.RemoteCacheTimeouts()
	must(t, err)
	if co != time.Second || cm != time.Second {
		t.Errorf("default timeouts %v %v", co, cm)
	}
	must(t, cfg.SetRemoteCacheTimeouts(50*time.Millisecond, 20*time.Millisecond))
	co, cm, err = cfg.RemoteCacheTimeouts()
	must(t, err)
	if co != 50*time.Millisecond || cm != 20*time.Millisecond {
		t.Errorf("timeouts %v %v", co, cm)
	}
	opt, err := cfg.RemoteCacheOptional()
	must(t, err)
	if opt {
		t.Error("optional by default")
	}
	must(t, cfg.SetRemoteCacheOptional(true))
	if opt, _ = cfg.RemoteCacheOptional(); !opt {
		t.Error("not optional after SetRemoteCacheOptional(true)")
	}
	for _, tc := range []struct {
		err  error
		want string
	}{
		{cfg.SetRemoteCache("redis://h:70000/0", "", 1), "the port 70000 is not in 1..65535"},
		{cfg.SetRemoteCache("redis://h/0", "no spaces", 1), "may hold only letters"},
		{cfg.SetRemoteCache("", "", 5), "remote cache bytes must be 0 without a URL, got 5"},
		{cfg.SetRemoteCacheTimeouts(0, time.Second), "connect_ms must be in 1..600000 ms, got 0"},
	} {
		if !errors.Is(tc.err, kvcache.ErrInvalidArgument) || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("got %v, want %q", tc.err, tc.want)
		}
	}
	if _, _, n, _ = cfg.RemoteCache(); n != 4096 {
		t.Errorf("changed by a failure: %d", n)
	}
}

func TestRemoteTierSecondCacheReusesTheFirstsBlocks(t *testing.T) {
	url, stop := startRedis(t)
	tweak := func(cfg *kvcache.Config) {
		must(t, cfg.SetPartialReuse(false))
		must(t, cfg.SetRemoteCache(url, "go-test", 1<<20))
		must(t, cfg.SetRemoteCacheTimeouts(2*time.Second, 2*time.Second))
	}
	cachePrompt := func(c *kvcache.Cache, id uint64, p []int32) uint64 {
		cached, err := c.AddSequence(id, p, nil, 0)
		must(t, err)
		must(t, c.CommitSequence(id, uint64(len(p))))
		must(t, c.RemoveSequence(id))
		return cached
	}
	a := tokens(100, 13) // 3 full blocks + 1 token
	first := newCache(t, 16, tweak)
	cachePrompt(first, 1, a)
	cachePrompt(first, 2, tokens(500, 16)) // a to Redis
	must(t, first.FlushTiers())
	s, err := first.TierStats(kvcache.TierRemote)
	must(t, err)
	if s.Tier != kvcache.TierRemote || s.OfferedBlocks != 7 || s.StoredBlocks != 7 ||
		s.CapacityBytes != 1<<20 || s.DroppedBlocks != 0 || s.Errors != 0 {
		t.Errorf("after eviction: %+v", s)
	}
	must(t, first.Close())

	second := newCache(t, 16, tweak)
	if got := cachePrompt(second, 1, a); got != 12 {
		t.Errorf("second cache: cached = %d, want 12", got)
	}
	s, err = second.TierStats(kvcache.TierRemote)
	must(t, err)
	if s.OnboardedBlocks != 3 || s.Hits != 3 || s.Rejected != 0 {
		t.Errorf("after the hit: %+v", s)
	}
	must(t, second.Check())

	// Nothing listening: refused at create unless optional.
	stop()
	cfg := newConfig(t, 16)
	defer cfg.Close()
	tweak(cfg)
	if _, err := kvcache.NewCache(cfg); !errors.Is(err, kvcache.ErrDevice) ||
		!strings.Contains(err.Error(), "cannot connect within 2000 ms") {
		t.Errorf("server down: %v", err)
	}
	must(t, cfg.SetRemoteCacheOptional(true))
	c, err := kvcache.NewCache(cfg)
	must(t, err)
	defer c.Close()
	if s, err := c.TierStats(kvcache.TierRemote); err != nil || s.Errors == 0 {
		t.Errorf("optional, server down: %+v %v", s, err)
	}
}
