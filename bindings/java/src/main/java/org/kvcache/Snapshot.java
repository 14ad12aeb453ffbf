package org.kvcache;

import java.util.List;

/**
 * Every cached block of a cache (both tiers), parents before children, as
 * of event {@code eventId}: applying the events with larger ids gives the
 * cache's state at any later moment ({@link Cache#snapshot()}).
 *
 * @param eventId the newest event emitted before the snapshot (0: none)
 * @param entries the cached blocks (unmodifiable)
 */
public record Snapshot(long eventId, List<SnapshotEntry> entries) {}
