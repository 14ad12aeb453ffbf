package org.kvcache;

/**
 * The memory backing one rank's pool, for another process to map (kvc_pool_share_t; CUDA IPC,
 * see transfer.h; {@link Cache#describePoolShare}).
 *
 * @param deviceOrdinal the CUDA device holding the pool, in this process's numbering
 * @param rank the rank described
 * @param pool the pool described
 * @param handleType {@link #HANDLE_POSIX_FD}
 * @param numChunks physical allocations backing the pool now
 * @param granularity every offset and size is a multiple of it
 * @param reservedBytes address space of the pool's reservation
 * @param mappedBytes bytes backed from the pool's base
 */
public record PoolShare(int deviceOrdinal, int rank, int pool, int handleType, long numChunks,
    long granularity, long reservedBytes, long mappedBytes) {
  /** KVC_SHARE_HANDLE_POSIX_FD: a POSIX file descriptor. */
  public static final int HANDLE_POSIX_FD = 1;
}
