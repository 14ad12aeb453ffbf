package org.kvcache;

import java.util.OptionalLong;

/**
 * One event of a cache's event stream (kvc_event_t), from
 * {@link Cache#drainEvents(boolean)}. Ids count from 1 without gaps. A
 * consumer that applies every event in id order to an index keyed by
 * (hash, place) holds exactly {@link Cache#snapshot()}'s entries: see each
 * record. The place is the tree for {@link Tier#PRIMARY} and {@link Tier#HOST}
 * ({@link TierChanged} moves an entry between the two) and the store itself
 * for {@link Tier#DISK} and {@link Tier#REMOTE}: a block can have a tree entry
 * and a store entry at once. A store's entries are addressed by hash alone
 * (no parent, LoRA id or tokens); the remote tier names only this cache's own
 * writes (include/kvcache/events.h, "Store entries").
 * {@code groups} is a bit mask of layer groups (bit g: group g).
 *
 * <pre>{@code
 * for (KvEvent e : cache.drainEvents(false)) {
 *   switch (e) { ... }                       // or instanceof patterns
 *   if (e instanceof KvEvent.Lost) { index.resync(cache.snapshot()); }
 * }
 * }</pre>
 */
public sealed interface KvEvent {
  /** The event id (for {@link Lost}, the first dropped one). */
  long id();

  /**
   * A block became reusable (commit): the entry for {@code hash} gains
   * {@code groups} (created with the other fields if absent).
   *
   * @param id event id
   * @param hash the block's portable hash ({@link Config#blockHashes})
   * @param parentHash the previous block's hash, 0 for a first block
   * @param groups layer groups stored
   * @param tier always {@link Tier#PRIMARY}
   * @param priority eviction priority (0..100)
   * @param numTokens tokens in the block
   * @param lora the LoRA id of the block's scope, if any
   * @param tokens the block's token ids when the drain asked for them, else null (an
   *     array: {@code equals} compares it by identity)
   */
  record Stored(long id, long hash, long parentHash, long groups, Tier tier, int priority,
      int numTokens, OptionalLong lora, int[] tokens) implements KvEvent {}

  /**
   * Blocks left a tier (eviction): the entry for {@code hash} loses
   * {@code groups}, and is erased when none is left.
   *
   * @param id event id
   * @param hash the block's portable hash
   * @param groups layer groups removed
   * @param tier the tier they left
   */
  record Removed(long id, long hash, long groups, Tier tier) implements KvEvent {}

  /**
   * A block moved between tiers: the entry moves to {@code tier}, holding
   * {@code groups}.
   *
   * @param id event id
   * @param hash the block's portable hash
   * @param groups layer groups the block holds in its new tier
   * @param tier the new tier
   * @param priority its eviction priority now
   */
  record TierChanged(long id, long hash, long groups, Tier tier, int priority)
      implements KvEvent {}

  /**
   * A cached block's priority changed: the entry takes {@code priority}.
   *
   * @param id event id
   * @param hash the block's portable hash
   * @param priority the new priority
   */
  record PriorityChanged(long id, long hash, int priority) implements KvEvent {}

  /**
   * Every cached block of the tree was dropped ({@link Cache#resetReuse()}): erase
   * every tree entry (PRIMARY, HOST); store entries stay.
   *
   * @param id event id
   */
  record Cleared(long id) implements KvEvent {}

  /**
   * Events {@code firstId .. firstId + count - 1} were dropped (the ring
   * was full): rebuild the index from {@link Cache#snapshot()}.
   *
   * @param firstId the first dropped id
   * @param count how many were dropped
   */
  record Lost(long firstId, long count) implements KvEvent {
    @Override
    public long id() {
      return firstId;
    }
  }

  /**
   * A kind this binding does not know (a newer library).
   *
   * @param id event id
   * @param kind the kvc_event_kind_t value
   */
  record Unknown(long id, int kind) implements KvEvent {}
}
