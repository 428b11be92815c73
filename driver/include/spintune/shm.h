/* SPDX-License-Identifier: (GPL-2.0 OR MIT) */
/*
 * spintune shared-memory table: how the agent's shm sink hands policy blobs
 * to user-space drivers (io_uring engines, SPDK-style pollers) that map the
 * same POSIX shared memory object (shm_open + mmap).
 *
 * Layout (host byte order; the region is at least SPINTUNE_SHM_HEADER_BYTES
 * + capacity bytes, 8-byte aligned):
 *   u32 magic "STSM", u32 layout version (1), u32 capacity (bytes, multiple
 *   of 8), u32 seq, u32 blob_bytes, u32 reserved, u64 table_version,
 *   then capacity bytes holding the blob (policy.h format).
 *
 * Concurrency: a seqlock. One writer (the agent) makes seq odd, stores the
 * blob, makes seq even; readers copy the blob and retry while seq was odd or
 * changed. All accesses are atomic (relaxed 4-byte halves of the 8-byte
 * words inside acquire/release fences: 32-bit CPUs without 64-bit atomics,
 * such as ARMv5, would otherwise call libatomic, whose 64-bit load writes
 * and faults on a read-only mapping), so a reader never sees a torn table
 * and never blocks the writer. No libc, no allocation.
 */
#ifndef SPINTUNE_SHM_H
#define SPINTUNE_SHM_H

#include "spintune/policy.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SPINTUNE_SHM_MAGIC 0x4D535453u /* "STSM" */
#define SPINTUNE_SHM_LAYOUT 1u
#define SPINTUNE_SHM_HEADER_BYTES 32u

/**
 * struct spintune_shm - the header at the start of the mapped region.
 */
struct spintune_shm {
	uint32_t magic;
	uint32_t layout;
	uint32_t capacity;
	uint32_t seq;
	uint32_t blob_bytes;
	uint32_t reserved;
	uint64_t table_version;
	uint64_t data[]; /* capacity bytes */
};

/* A 4-byte half of an 8-byte field (may alias the uint64_t it is part of). */
typedef uint32_t __attribute__((may_alias)) spintune__shm_half;

/* Stores @value into @word as two relaxed 4-byte halves. */
static inline void spintune__shm_store64(uint64_t *word, uint64_t value)
{
	spintune__shm_half *h = (spintune__shm_half *)word;
	spintune__shm_half v[2];

	__builtin_memcpy(v, &value, sizeof(value));
	__atomic_store_n(&h[0], v[0], __ATOMIC_RELAXED);
	__atomic_store_n(&h[1], v[1], __ATOMIC_RELAXED);
}

/* Loads @word as two relaxed 4-byte halves. */
static inline uint64_t spintune__shm_load64(const uint64_t *word)
{
	const spintune__shm_half *h = (const spintune__shm_half *)word;
	spintune__shm_half v[2];
	uint64_t value;

	v[0] = __atomic_load_n(&h[0], __ATOMIC_RELAXED);
	v[1] = __atomic_load_n(&h[1], __ATOMIC_RELAXED);
	__builtin_memcpy(&value, v, sizeof(value));
	return value;
}

/**
 * spintune_shm_init() - format a fresh region (writer side, once).
 * @shm: the mapped region.
 * @capacity: blob bytes it can hold; rounded down to a multiple of 8.
 */
static inline void spintune_shm_init(struct spintune_shm *shm, uint32_t capacity)
{
	shm->layout = SPINTUNE_SHM_LAYOUT;
	shm->capacity = capacity & ~7u;
	shm->blob_bytes = 0;
	shm->reserved = 0;
	shm->table_version = 0;
	__atomic_store_n(&shm->seq, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&shm->magic, SPINTUNE_SHM_MAGIC, __ATOMIC_RELEASE);
}

/**
 * spintune_shm_publish() - store a blob (single writer).
 * @shm: a region formatted by spintune_shm_init().
 * @blob: the policy blob.
 * @len: its length in bytes.
 * @table_version: the table's version.
 *
 * Returns: 0, or -E2BIG when @len exceeds the capacity.
 */
static inline int spintune_shm_publish(struct spintune_shm *shm, const void *blob,
				       uint32_t len, uint64_t table_version)
{
	const uint8_t *src = (const uint8_t *)blob;
	uint32_t seq, i;

	if (len > shm->capacity)
		return -E2BIG;
	seq = __atomic_load_n(&shm->seq, __ATOMIC_RELAXED);
	__atomic_store_n(&shm->seq, seq + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	for (i = 0; i < (len + 7) / 8; i++) {
		uint64_t word = 0;
		uint32_t b;

		for (b = 0; b < 8 && i * 8 + b < len; b++)
			word |= (uint64_t)src[i * 8 + b] << (8 * b);
		spintune__shm_store64(&shm->data[i], word);
	}
	__atomic_store_n(&shm->blob_bytes, len, __ATOMIC_RELAXED);
	spintune__shm_store64(&shm->table_version, table_version);
	__atomic_store_n(&shm->seq, seq + 2, __ATOMIC_RELEASE);
	return 0;
}

/**
 * spintune_shm_snapshot() - copy a consistent blob out (any number of readers).
 * @shm: the mapped region.
 * @out: receives the blob.
 * @cap: bytes @out can hold.
 * @len: receives the blob's length.
 * @seq_out: receives the seq of the snapshot (even; changes on every publish),
 *	so a reader can tell whether anything changed since its last copy.
 * @max_tries: attempts before giving up while a writer keeps publishing.
 *
 * Never blocks the writer. Parse the copy with spintune_blob_parse().
 *
 * Returns: 0; -ENODATA when nothing was published yet; -EINVAL for a region
 * that is not a spintune table; -E2BIG when @cap is too small; -EAGAIN after
 * @max_tries torn attempts.
 */
static inline int spintune_shm_snapshot(const struct spintune_shm *shm, void *out, uint32_t cap,
					uint32_t *len, uint32_t *seq_out, int max_tries)
{
	uint8_t *dst = (uint8_t *)out;
	int attempt;

	if (__atomic_load_n(&shm->magic, __ATOMIC_ACQUIRE) != SPINTUNE_SHM_MAGIC ||
	    shm->layout != SPINTUNE_SHM_LAYOUT)
		return -EINVAL;
	for (attempt = 0; attempt < max_tries; attempt++) {
		const uint32_t s1 = __atomic_load_n(&shm->seq, __ATOMIC_ACQUIRE);
		uint32_t n, i, s2;

		if (s1 & 1)
			continue; /* a write is in progress */
		n = __atomic_load_n(&shm->blob_bytes, __ATOMIC_RELAXED);
		if (n > shm->capacity || n > cap) {
			__atomic_thread_fence(__ATOMIC_ACQUIRE);
			if (__atomic_load_n(&shm->seq, __ATOMIC_RELAXED) != s1)
				continue;
			return -E2BIG;
		}
		for (i = 0; i < (n + 7) / 8; i++) {
			const uint64_t word = spintune__shm_load64(&shm->data[i]);
			uint32_t b;

			for (b = 0; b < 8 && i * 8 + b < n; b++)
				dst[i * 8 + b] = (uint8_t)(word >> (8 * b));
		}
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		s2 = __atomic_load_n(&shm->seq, __ATOMIC_RELAXED);
		if (s1 != s2)
			continue; /* torn: retry */
		if (s1 == 0)
			return -ENODATA;
		*len = n;
		if (seq_out)
			*seq_out = s1;
		return 0;
	}
	return -EAGAIN;
}

#ifdef __cplusplus
}
#endif

#endif /* SPINTUNE_SHM_H */
