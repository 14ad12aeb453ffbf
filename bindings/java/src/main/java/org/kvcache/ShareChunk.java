package org.kvcache;

/**
 * One exported chunk of a pool (kvc_share_chunk_t; {@link Cache#exportPoolChunk}).
 *
 * @param fd a new POSIX file descriptor for the chunk, owned by the caller (send it over a
 *     Unix-domain socket, then close it)
 * @param index the chunk
 * @param offset its place from the pool's base
 * @param size its bytes
 */
public record ShareChunk(int fd, long index, long offset, long size) {}
