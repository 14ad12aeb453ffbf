package org.kvcache;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;

/**
 * Options of {@link Cache#addSequence} and {@link Cache#probe}
 * (kvc_sequence_options_t): eviction priorities, retention ranges and
 * durations, and the scope (salt, LoRA
 * id, extra keys). Only sequences with equal scopes share blocks; no salt
 * differs from an empty salt, and no LoRA differs from LoRA id 0. A plain
 * mutable Java object: the native struct is built for each call.
 */
public final class SequenceOptions {
  /** Default eviction priority (KVC_DEFAULT_PRIORITY). */
  public static final int DEFAULT_PRIORITY = 35;

  private int promptPriority = DEFAULT_PRIORITY;
  private int decodePriority = DEFAULT_PRIORITY;
  private boolean hasLora;
  private long loraId;
  private byte[] salt;
  private final List<ExtraKey> extraKeys = new ArrayList<>();
  private final List<RetentionRange> retentionRanges = new ArrayList<>();
  private long decodeDurationMs;

  /** The defaults: priorities 35, no salt, no LoRA, no extra keys. */
  public SequenceOptions() {}

  /** Eviction priority of prompt blocks, 0..100. */
  public SequenceOptions promptPriority(int priority) {
    this.promptPriority = Args.u32("prompt_priority", priority);
    return this;
  }

  /** Eviction priority of blocks holding only generated tokens, 0..100. */
  public SequenceOptions decodePriority(int priority) {
    this.decodePriority = Args.u32("decode_priority", priority);
    return this;
  }

  /** Cache salt bytes (copied); null for none, which differs from empty. */
  public SequenceOptions salt(byte[] salt) {
    this.salt = salt == null ? null : salt.clone();
    return this;
  }

  /** Cache salt as UTF-8 bytes; null for none. */
  public SequenceOptions salt(String salt) {
    this.salt = salt == null ? null : salt.getBytes(StandardCharsets.UTF_8);
    return this;
  }

  /** LoRA adapter id (any 64-bit value). */
  public SequenceOptions lora(long loraId) {
    this.hasLora = true;
    this.loraId = loraId;
    return this;
  }

  /** No LoRA adapter. */
  public SequenceOptions noLora() {
    this.hasLora = false;
    this.loraId = 0;
    return this;
  }

  /** Adds an extra key covering tokens [offset, offset + length). */
  public SequenceOptions extraKey(long offset, long length, byte[] data) {
    extraKeys.add(new ExtraKey(offset, length, Args.notNull("extra key data", data).clone()));
    return this;
  }

  /**
   * Adds a retention range over the prompt (in token order); prompt blocks
   * outside every range take the prompt priority for ever.
   */
  public SequenceOptions retentionRange(long start, long end, int priority, long durationMs) {
    retentionRanges.add(new RetentionRange(start, end, priority, durationMs));
    return this;
  }

  /** How long the decode priority lasts after a generated block becomes reusable; 0 for ever. */
  public SequenceOptions decodeDurationMs(long durationMs) {
    this.decodeDurationMs = durationMs;
    return this;
  }

  /** The retention ranges, in order. */
  public List<RetentionRange> retentionRanges() {
    return Collections.unmodifiableList(retentionRanges);
  }

  /** How long the decode priority lasts; 0 for ever. */
  public long decodeDurationMs() {
    return decodeDurationMs;
  }

  /** Eviction priority of prompt blocks. */
  public int promptPriority() {
    return promptPriority;
  }

  /** Eviction priority of generated blocks. */
  public int decodePriority() {
    return decodePriority;
  }

  /** Whether a LoRA id is set. */
  public boolean hasLora() {
    return hasLora;
  }

  /** The LoRA id (meaningful when {@link #hasLora()}). */
  public long loraId() {
    return loraId;
  }

  /** A copy of the salt, or null for none. */
  public byte[] salt() {
    return salt == null ? null : salt.clone();
  }

  /** The extra keys, in order. */
  public List<ExtraKey> extraKeys() {
    return Collections.unmodifiableList(extraKeys);
  }

  // ----- native struct ------------------------------------------------------

  private static long[] extraKeyLayout;

  private static synchronized long[] extraKeyLayout() {
    if (extraKeyLayout == null) {
      long[] l = new long[6];
      for (int i = 0; i < l.length; i++) {
        l[i] = KvcNative.kvcj_extra_key_layout(i);
      }
      extraKeyLayout = l;
    }
    return extraKeyLayout;
  }

  private static long[] retentionRangeLayout;

  private static synchronized long[] retentionRangeLayout() {
    if (retentionRangeLayout == null) {
      long[] l = new long[6];
      for (int i = 0; i < l.length; i++) {
        l[i] = KvcNative.kvcj_retention_range_layout(i);
      }
      retentionRangeLayout = l;
    }
    return retentionRangeLayout;
  }

  /** Scratch regions of the salt, extra keys and ranges; see {@link #toNative}. */
  static final class Regions {
    int salt = -1;
    int keys = -1;
    int[] data;
    int ranges = -1;
  }

  /** Reserves the scratch this options needs (before any address is taken). */
  Regions reserve(Scratch s) {
    Regions l = new Regions();
    if (salt != null) {
      l.salt = s.alloc(salt.length);
      s.putBytes(l.salt, salt);
    }
    if (!extraKeys.isEmpty()) {
      long[] k = extraKeyLayout();
      l.keys = s.alloc(k[0] * extraKeys.size());
      l.data = new int[extraKeys.size()];
      for (int i = 0; i < extraKeys.size(); i++) {
        byte[] d = extraKeys.get(i).data();
        l.data[i] = s.alloc(d.length);
        s.putBytes(l.data[i], d);
      }
    }
    if (!retentionRanges.isEmpty()) {
      l.ranges = s.alloc(retentionRangeLayout()[0] * retentionRanges.size());
    }
    return l;
  }

  /** Fills a native struct (already initialised) after every alloc of the call. */
  void toNative(Scratch s, Regions l, kvc_sequence_options_t o) {
    o.setPrompt_priority(promptPriority);
    o.setDecode_priority(decodePriority);
    o.setHas_lora(hasLora);
    o.setLora_id(loraId);
    if (salt != null) {
      o.setSalt(s.address(l.salt));
      o.setSalt_size(salt.length);
    }
    if (!extraKeys.isEmpty()) {
      long[] k = extraKeyLayout();
      for (int i = 0; i < extraKeys.size(); i++) {
        ExtraKey e = extraKeys.get(i);
        int at = l.keys + (int) (k[0] * i);
        s.putLong(at + (int) k[1], e.offset());
        s.putLong(at + (int) k[2], e.length());
        s.putLong(at + (int) k[3], e.data().length == 0 ? 0 : s.address(l.data[i]));
        s.putLong(at + (int) k[4], e.data().length);
      }
      o.setExtra_keys(s.address(l.keys));
      o.setNum_extra_keys(extraKeys.size());
    }
    if (!retentionRanges.isEmpty()) {
      long[] k = retentionRangeLayout();
      for (int i = 0; i < retentionRanges.size(); i++) {
        RetentionRange r = retentionRanges.get(i);
        int at = l.ranges + (int) (k[0] * i);
        s.putLong(at + (int) k[1], r.start());
        s.putLong(at + (int) k[2], r.end());
        s.putInts(at + (int) k[3], new int[] {r.priority()}, 0, 1);
        s.putInts(at + (int) k[4], new int[] {0}, 0, 1);
        s.putLong(at + (int) k[5], r.durationMs());
      }
      o.setRetention_ranges(s.address(l.ranges));
      o.setNum_retention_ranges(retentionRanges.size());
    }
    o.setDecode_duration_ms(decodeDurationMs);
  }
}
