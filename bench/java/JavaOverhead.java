package org.kvcache;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.IntBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.function.LongUnaryOperator;

/**
 * Per-call overhead of the Java binding: the same cheap kvcache calls timed
 * in a C loop (c_loops.c, one JNI call for the whole loop), through the
 * SWIG low-level layer (KvcNative: one JNI call each) and through the
 * idiomatic API (org.kvcache), in one process and one run. Each variant runs
 * {@code iters} calls per repetition; repetitions rotate the order of the
 * variants; the table gives the median ns per call and the overhead over C.
 *
 * <p>In package org.kvcache (from its own jar) to reach the package-private
 * low-level layer. Run through build/bindings/java/run-java-overhead-bench.sh.
 */
public final class JavaOverhead {
  private JavaOverhead() {}

  static native long cVersion(long iters);

  static native long cGetNumLayers(long config, long iters);

  static native long cBlocksNeeded(long cache, long id, long iters);

  static native long cGetStats(long cache, long iters);

  static native long cSequenceLengths(long cache, long ids, long count, long lengths, long iters);

  static native long cErrorPath(long cache, long iters);

  private static volatile long sink;

  /** One measured variant: runs n calls, returns the ns they took. */
  private record Variant(String call, String path, LongUnaryOperator run) {}

  private static long timeJava(long n, Runnable body) {
    long t0 = System.nanoTime();
    for (long i = 0; i < n; i++) {
      body.run();
    }
    return System.nanoTime() - t0;
  }

  public static void main(String[] argv) {
    long iters = argv.length > 0 ? Long.parseLong(argv[0]) : 1_000_000L;
    int reps = argv.length > 1 ? Integer.parseInt(argv[1]) : 7;
    NativeLibrary.load();
    System.load(new java.io.File(System.getProperty("kvcache.bench.native")).getAbsolutePath());

    // Scratch for the low-level calls: out values and id/length arrays.
    final int batch = 64;
    ByteBuffer mem = ByteBuffer.allocateDirect(4096).order(ByteOrder.nativeOrder());
    long base = KvcNative.kvcj_buffer_address(mem);
    long out = base;
    long idsAddr = base + 64;
    long lensAddr = idsAddr + 8L * batch;

    try (Config config = new Config().setNumLayers(32).setKvHeads(8).setHeadDim(128)
            .setDtype(DType.BF16).setTokensPerBlock(16).setMaxTokens(64 * 1024);
        Cache cache = new Cache(config)) {
      // A low-level twin of the same cache for the C and KvcNative paths.
      KvcNative.kvc_config_clone(configAddress(config), out);
      long cfg = mem.getLong(0);
      KvcNative.kvc_cache_create(cfg, out);
      long raw = mem.getLong(0);
      long[] ids = new long[batch];
      int[] prompt = new int[1000];
      for (int i = 0; i < prompt.length; i++) {
        prompt[i] = i;
      }
      for (int i = 0; i < batch; i++) {
        ids[i] = i + 1;
        cache.addSequence(ids[i], prompt, 0, 200 + i, null, 0);
        final int n = 200 + i;
        final long id = ids[i];
        Scratch.scope(unused -> {
          Scratch s = Scratch.get();
          int t = s.alloc(4L * n);
          s.putInts(t, prompt, 0, n);
          KvcNative.kvc_sequence_add(raw, id, s.address(t), n, null, 0, 0);
          return 0;
        });
        mem.putLong(64 + 8 * i, ids[i]);
      }
      int[] lengths = new int[batch];
      IntBuffer lengthsDirect = ByteBuffer.allocateDirect(4 * batch)
          .order(ByteOrder.nativeOrder()).asIntBuffer();
      kvc_cache_stats_t st = new kvc_cache_stats_t();

      List<Variant> v = new ArrayList<>();
      v.add(new Variant("kvc_version", "C loop", n -> cVersion(n)));
      v.add(new Variant("kvc_version", "JNI low-level", n -> timeJava(n,
          () -> sink += KvcNative.kvc_version())));
      v.add(new Variant("kvc_version", "idiomatic", n -> timeJava(n,
          () -> sink += KvCache.version())));
      v.add(new Variant("kvc_config_get_num_layers", "C loop", n -> cGetNumLayers(cfg, n)));
      v.add(new Variant("kvc_config_get_num_layers", "JNI low-level", n -> timeJava(n, () -> {
        KvcNative.kvc_config_get_num_layers(cfg, out);
        sink += mem.getInt(0);
      })));
      v.add(new Variant("kvc_config_get_num_layers", "idiomatic", n -> timeJava(n,
          () -> sink += config.getNumLayers())));
      v.add(new Variant("kvc_sequence_blocks_needed", "C loop", n -> cBlocksNeeded(raw, 1, n)));
      v.add(new Variant("kvc_sequence_blocks_needed", "JNI low-level", n -> timeJava(n, () -> {
        KvcNative.kvc_sequence_blocks_needed(raw, 1, 100, out);
        sink += mem.getLong(0);
      })));
      v.add(new Variant("kvc_sequence_blocks_needed", "idiomatic", n -> timeJava(n,
          () -> sink += cache.blocksNeeded(1, 100))));
      v.add(new Variant("kvc_cache_get_stats", "C loop", n -> cGetStats(raw, n)));
      v.add(new Variant("kvc_cache_get_stats", "JNI low-level", n -> timeJava(n, () -> {
        KvcNative.kvc_cache_stats_init(st);
        KvcNative.kvc_cache_get_stats(raw, st);
        sink += st.getFree_blocks();
      })));
      v.add(new Variant("kvc_cache_get_stats", "idiomatic (record of 18, one JNI call)", n -> timeJava(n,
          () -> sink += cache.stats().freeBlocks())));
      v.add(new Variant("kvc_batch_sequence_lengths (64 ids)", "C loop",
          n -> cSequenceLengths(raw, idsAddr, batch, lensAddr, n)));
      v.add(new Variant("kvc_batch_sequence_lengths (64 ids)", "JNI low-level",
          n -> timeJava(n, () -> {
            KvcNative.kvc_batch_sequence_lengths(raw, idsAddr, batch, lensAddr);
            sink += mem.getInt(64 + 8 * batch);
          })));
      v.add(new Variant("kvc_batch_sequence_lengths (64 ids)", "idiomatic, int[]",
          n -> timeJava(n, () -> {
            cache.sequenceLengths(ids, lengths);
            sink += lengths[0];
          })));
      v.add(new Variant("kvc_batch_sequence_lengths (64 ids)", "idiomatic, direct IntBuffer",
          n -> timeJava(n, () -> {
            cache.sequenceLengths(ids, lengthsDirect);
            sink += lengthsDirect.get(0);
          })));
      v.add(new Variant("error path (remove unknown id)", "C loop + message",
          n -> cErrorPath(raw, n / 10)));
      v.add(new Variant("error path (remove unknown id)", "idiomatic, KvCacheException",
          n -> timeJava(n / 10, () -> {
            try {
              cache.removeSequence(0xdead);
            } catch (KvCacheException e) {
              sink += e.statusCode();
            }
          })));

      // Warm-up (JIT), then rotated repetitions.
      for (Variant x : v) {
        x.run().applyAsLong(Math.max(iters / 2, 1000));
      }
      double[][] ns = new double[v.size()][reps];
      for (int r = 0; r < reps; r++) {
        for (int k = 0; k < v.size(); k++) {
          int idx = (k + r) % v.size();
          Variant x = v.get(idx);
          long n = x.call().startsWith("error") ? iters / 10 : iters;
          long t = x.run().applyAsLong(iters);
          if (t < 0) {
            throw new IllegalStateException(x.call() + " failed in C");
          }
          ns[idx][r] = (double) t / n;
        }
      }

      System.out.printf("iterations per repetition: %d (error path: %d), repetitions: %d%n%n",
          iters, iters / 10, reps);
      System.out.println("| call | path | ns/call (median) | min | max | overhead vs C (ns) |");
      System.out.println("|---|---|---:|---:|---:|---:|");
      double c = 0;
      for (int k = 0; k < v.size(); k++) {
        double[] a = ns[k].clone();
        Arrays.sort(a);
        double med = a[a.length / 2];
        if (v.get(k).path().startsWith("C loop")) {
          c = med;
        }
        System.out.printf("| %s | %s | %.1f | %.1f | %.1f | %s |%n", v.get(k).call(),
            v.get(k).path(), med, a[0], a[a.length - 1],
            v.get(k).path().startsWith("C loop") ? "-" : String.format("%+.1f", med - c));
      }
      st.delete();
      KvcNative.kvc_cache_destroy(raw);
      KvcNative.kvc_config_destroy(cfg);
    }
    if (sink == 42) {
      System.out.println();
    }
  }

  /** The native address of an idiomatic config (package access, for the clone). */
  private static long configAddress(Config config) {
    return config.callLong(address -> address);
  }
}
