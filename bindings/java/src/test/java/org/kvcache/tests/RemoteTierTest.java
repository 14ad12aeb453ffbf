package org.kvcache.tests;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.InputStream;
import java.io.OutputStream;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.kvcache.Cache;
import org.kvcache.Config;
import org.kvcache.KvCache;
import org.kvcache.KvCacheException;
import org.kvcache.Status;
import org.kvcache.Tier;
import org.kvcache.TierStats;

/**
 * The remote tier: its settings and errors, and a real redis-server (started
 * here on a loopback port, killed at the end) that one cache fills and a
 * second cache reuses from. Skips, saying why, without hiredis in the library
 * or redis-server on the machine.
 */
class RemoteTierTest {
  @TempDir Path dir;

  /** A redis-server on a free loopback port without persistence. */
  private static final class RedisServer implements AutoCloseable {
    final Process process;
    final int port;

    RedisServer(Process process, int port) {
      this.process = process;
      this.port = port;
    }

    String url() {
      return "redis://127.0.0.1:" + port + "/0";
    }

    boolean ping() {
      try (Socket s = new Socket("127.0.0.1", port)) {
        s.setSoTimeout(1000);
        OutputStream out = s.getOutputStream();
        out.write("PING\r\n".getBytes(StandardCharsets.US_ASCII));
        out.flush();
        byte[] reply = new byte[7];
        InputStream in = s.getInputStream();
        int n = 0;
        while (n < reply.length) {
          int r = in.read(reply, n, reply.length - n);
          if (r < 0) {
            return false;
          }
          n += r;
        }
        return new String(reply, StandardCharsets.US_ASCII).equals("+PONG\r\n");
      } catch (java.io.IOException e) {
        return false;
      }
    }

    @Override
    public void close() {
      process.destroyForcibly();
      try {
        process.waitFor();
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
  }

  private RedisServer startRedis() throws Exception {
    assumeTrue((KvCache.features() & KvCache.FEATURE_REDIS) != 0,
        "built without hiredis: install libhiredis-dev and rebuild");
    String bin = System.getenv().getOrDefault("KVC_REDIS_SERVER", "/usr/bin/redis-server");
    assumeTrue(Files.isExecutable(Path.of(bin)), "no " + bin + " (install redis-server)");
    int port;
    try (ServerSocket probe = new ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
      port = probe.getLocalPort();
    }
    Process p = new ProcessBuilder(bin, "--port", Integer.toString(port), "--bind", "127.0.0.1",
        "--save", "", "--appendonly", "no", "--dir", dir.toString())
        .redirectErrorStream(true)
        .redirectOutput(ProcessBuilder.Redirect.DISCARD)
        .start();
    RedisServer server = new RedisServer(p, port);
    // Bounded: 500 tries of PING, 10 ms apart at most.
    for (int i = 0; i < 500; i++) {
      if (server.ping()) {
        return server;
      }
      Thread.sleep(10);
    }
    server.close();
    throw new AssertionError("redis-server did not answer PING within 5 s");
  }

  private static Config config(String url) {
    return Fixtures.config(4)
        .setPartialReuse(false)
        .setRemoteCache(url, "java-test", 1 << 20)
        .setRemoteCacheTimeouts(Duration.ofSeconds(2), Duration.ofSeconds(2));
  }

  private static long cachePrompt(Cache cache, long id, int[] tokens) {
    long cached = cache.addSequence(id, tokens);
    cache.commit(id, tokens.length);
    cache.removeSequence(id);
    return cached;
  }

  @Test
  void settingsAndErrors() {
    try (Config c = Fixtures.config(4)) {
      assertEquals("", c.getRemoteCacheUrl());
      assertEquals("kvc", c.getRemoteCacheNamespace());
      assertEquals(0, c.getRemoteCacheBytes());
      assertEquals(Duration.ofSeconds(1), c.getRemoteCacheConnectTimeout());
      assertEquals(Duration.ofSeconds(1), c.getRemoteCacheCommandTimeout());
      assertFalse(c.getRemoteCacheOptional());
      c.setRemoteCache("redis://:pässword@10.0.0.7:6380/1", "team-a", 4096)
          .setRemoteCacheTimeouts(Duration.ofMillis(50), Duration.ofMillis(20))
          .setRemoteCacheOptional(true);
      assertEquals("redis://:pässword@10.0.0.7:6380/1", c.getRemoteCacheUrl());
      assertEquals("team-a", c.getRemoteCacheNamespace());
      assertEquals(4096, c.getRemoteCacheBytes());
      assertEquals(Duration.ofMillis(50), c.getRemoteCacheConnectTimeout());
      assertEquals(Duration.ofMillis(20), c.getRemoteCacheCommandTimeout());
      assertTrue(c.getRemoteCacheOptional());
      KvCacheException e = assertThrows(KvCacheException.class,
          () -> c.setRemoteCache("redis://h:70000/0", null, 1));
      assertEquals(Status.INVALID_ARGUMENT, e.status());
      assertTrue(e.getMessage().contains("the port 70000 is not in 1..65535"), e.getMessage());
      e = assertThrows(KvCacheException.class, () -> c.setRemoteCache("redis://h/0", "", 1));
      assertTrue(e.getMessage().contains("must be 1..64 bytes long"), e.getMessage());
      e = assertThrows(KvCacheException.class,
          () -> c.setRemoteCacheTimeouts(Duration.ZERO, Duration.ofSeconds(1)));
      assertTrue(e.getMessage().contains("connect_ms must be in 1..600000 ms, got 0"),
          e.getMessage());
      assertEquals(4096, c.getRemoteCacheBytes());  // unchanged by the failures
      c.setRemoteCache(null, null, 0);
      assertEquals("", c.getRemoteCacheUrl());
    }
  }

  @Test
  void aSecondCacheReusesWhatTheFirstOffloaded() throws Exception {
    int[] a = Fixtures.tokens(100, 13); // 3 full blocks + 1 token
    String url;
    try (RedisServer server = startRedis()) {
      url = server.url();
      try (Config c = config(url); Cache first = new Cache(c)) {
        assertEquals(0, cachePrompt(first, 1, a));
        assertEquals(0, cachePrompt(first, 2, Fixtures.tokens(500, 16))); // a to Redis
        first.flushTiers();
        TierStats s = first.tierStats(Tier.REMOTE);
        assertEquals(Tier.REMOTE, s.tier());
        assertEquals(7, s.offeredBlocks());
        assertEquals(7, s.storedBlocks());
        assertEquals(0, s.droppedBlocks());
        assertEquals(0, s.errors());
        assertEquals(1 << 20, s.capacityBytes());
      }
      try (Config c = config(url); Cache second = new Cache(c)) {
        assertEquals(12, cachePrompt(second, 1, a));
        TierStats s = second.tierStats(Tier.REMOTE);
        assertEquals(3, s.onboardedBlocks());
        assertEquals(3, s.hits());
        assertEquals(0, s.rejected());
        second.check();
      }
    }
    // Nothing listening: refused at create unless optional.
    try (Config c = config(url)) {
      KvCacheException e = assertThrows(KvCacheException.class, () -> new Cache(c));
      assertEquals(Status.DEVICE, e.status());
      assertTrue(e.getMessage().contains("cannot connect within 2000 ms"), e.getMessage());
      c.setRemoteCacheOptional(true);
      try (Cache cache = new Cache(c)) {
        assertTrue(cache.tierStats(Tier.REMOTE).errors() >= 1);
      }
    }
  }
}
