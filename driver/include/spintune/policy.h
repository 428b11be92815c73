/* SPDX-License-Identifier: (GPL-2.0 OR MIT) */
/*
 * spintune policy table: the wait strategy a driver should use for each
 * (cpu class, opcode, size class) of one device, and the validating parser
 * of the binary blob the spintune agent writes (docs/policy-format.md).
 *
 * Included by kernel drivers, user-space drivers and the spintune tools.
 * No libc, no allocation, no global state: every function only touches the
 * memory it is given. Lookup and parsing may be called from any context,
 * including atomic context; they never sleep.
 */
#ifndef SPINTUNE_POLICY_H
#define SPINTUNE_POLICY_H

#ifdef __KERNEL__
#include <linux/errno.h>
#include <linux/types.h>
#else
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Marks generated tables that a translation unit may not use. */
#if defined(__GNUC__) || defined(__clang__)
#define SPINTUNE_MAYBE_UNUSED __attribute__((unused))
#else
#define SPINTUNE_MAYBE_UNUSED
#endif

/* Blob constants; see docs/policy-format.md. */
#define SPINTUNE_BLOB_MAGIC 0x4E545053u /* "SPTN" in little-endian order */
#define SPINTUNE_BLOB_VERSION 1u
#define SPINTUNE_BLOB_HEADER_BYTES 64u
#define SPINTUNE_BLOB_ENTRY_BYTES 24u
#define SPINTUNE_DEVICE_NAME_BYTES 32u

/* Limits a parsed table must respect; a driver may lower them. */
#ifndef SPINTUNE_MAX_ENTRIES
#define SPINTUNE_MAX_ENTRIES 1024u
#endif
#ifndef SPINTUNE_MAX_SPIN_NS
#define SPINTUNE_MAX_SPIN_NS 10000000u /* 10 ms of busy-waiting at most */
#endif
#ifndef SPINTUNE_MAX_SLEEP_NS
#define SPINTUNE_MAX_SLEEP_NS 1000000000u /* 1 s */
#endif
#define SPINTUNE_MIN_POLL_INTERVAL_NS 1000u /* below 1 us a poll-sleep is a spin */

/* Wildcards used by the fallback entry. */
#define SPINTUNE_ANY_CPU_CLASS 0xFFu
#define SPINTUNE_ANY_SIZE_CLASS 0xFFu
#define SPINTUNE_ANY_OPCODE 0xFFFFFFFFu
#define SPINTUNE_ENTRY_FALLBACK 0x01u /* entry flag: the device-wide fallback */

/**
 * enum spintune_strategy - how to wait for one command.
 * @SPINTUNE_IRQ: arm the interrupt and sleep.
 * @SPINTUNE_SPIN: busy-poll to completion, giving up after @spin_ns.
 * @SPINTUNE_SPIN_THEN_IRQ: busy-poll for @spin_ns, then arm the IRQ and sleep.
 * @SPINTUNE_SLEEP_THEN_SPIN: timer-sleep @sleep_ns, then busy-poll for at
 *	most @spin_ns, then arm the IRQ.
 * @SPINTUNE_POLL_SLEEP: poll, sleeping @poll_interval_ns between polls.
 */
enum spintune_strategy {
	SPINTUNE_IRQ = 1,
	SPINTUNE_SPIN = 2,
	SPINTUNE_SPIN_THEN_IRQ = 3,
	SPINTUNE_SLEEP_THEN_SPIN = 4,
	SPINTUNE_POLL_SLEEP = 5,
};

/**
 * struct spintune_entry - one row of a policy table (host byte order).
 * @cpu_class: index of the CPU class, or SPINTUNE_ANY_CPU_CLASS.
 * @size_class: bit width of the transfer length in bytes (0: no data), or
 *	SPINTUNE_ANY_SIZE_CLASS.
 * @strategy: an enum spintune_strategy value.
 * @flags: SPINTUNE_ENTRY_FALLBACK or 0.
 * @opcode: the driver's opcode, or SPINTUNE_ANY_OPCODE.
 * @spin_ns: spin threshold (SPIN_THEN_IRQ), timeout (SPIN) or post-sleep spin
 *	bound (SLEEP_THEN_SPIN); 0 otherwise.
 * @sleep_ns: SLEEP_THEN_SPIN sleep; 0 otherwise.
 * @poll_interval_ns: POLL_SLEEP interval; 0 otherwise.
 */
struct spintune_entry {
	uint8_t cpu_class;
	uint8_t size_class;
	uint8_t strategy;
	uint8_t flags;
	uint32_t opcode;
	uint32_t spin_ns;
	uint32_t sleep_ns;
	uint32_t poll_interval_ns;
};

/**
 * struct spintune_table - a device's policy table.
 * @entries: @count entries sorted by (cpu_class, opcode, size_class), keys
 *	unique, the fallback entry last.
 * @count: number of entries, >= 1.
 * @version: the tuner's table version.
 * @device: NUL-terminated device name the table was fitted for.
 */
struct spintune_table {
	const struct spintune_entry *entries;
	uint32_t count;
	uint64_t version;
	char device[SPINTUNE_DEVICE_NAME_BYTES];
};

/**
 * spintune_size_class() - size class of a transfer length.
 * @bytes: transfer length in bytes.
 *
 * Returns: the bit width of @bytes: 0 for 0, 1 for 1, 10 for 512..1023.
 */
static inline uint8_t spintune_size_class(uint64_t bytes)
{
	uint8_t width = 0;

	while (bytes) {
		width++;
		bytes >>= 1;
	}
	return width;
}

static inline uint64_t spintune__entry_key(uint8_t cpu_class, uint32_t opcode,
					   uint8_t size_class)
{
	return ((uint64_t)cpu_class << 40) | ((uint64_t)opcode << 8) | size_class;
}

/**
 * spintune_lookup() - find the entry for one command.
 * @table: a table produced by spintune_blob_parse() or a generated header.
 * @cpu_class: index of the CPU class the caller runs on.
 * @opcode: the command's opcode.
 * @bytes: the command's transfer length in bytes.
 *
 * Binary search, O(log n), no allocation; safe in atomic context.
 *
 * Returns: the exact entry, else the table's fallback entry (never NULL
 * for a valid table).
 */
static inline const struct spintune_entry *
spintune_lookup(const struct spintune_table *table, uint8_t cpu_class,
		uint32_t opcode, uint64_t bytes)
{
	const uint64_t key = spintune__entry_key(cpu_class, opcode,
						 spintune_size_class(bytes));
	uint32_t lo = 0, hi = table->count - 1; /* last entry is the fallback */

	while (lo < hi) {
		const uint32_t mid = lo + (hi - lo) / 2;
		const struct spintune_entry *e = &table->entries[mid];
		const uint64_t k = spintune__entry_key(e->cpu_class, e->opcode,
						       e->size_class);

		if (k == key)
			return e;
		if (k < key)
			lo = mid + 1;
		else
			hi = mid;
	}
	return &table->entries[table->count - 1];
}

/**
 * spintune_crc32() - CRC-32 (IEEE 802.3, as zlib's crc32()) of a buffer.
 * @crc: previous value (0 to start).
 * @buf: data.
 * @len: length of @buf in bytes.
 *
 * Returns: the updated CRC.
 */
static inline uint32_t spintune_crc32(uint32_t crc, const uint8_t *buf, size_t len)
{
	static const uint32_t nibble[16] = {
		0x00000000u, 0x1DB71064u, 0x3B6E20C8u, 0x26D930ACu,
		0x76DC4190u, 0x6B6B51F4u, 0x4DB26158u, 0x5005713Cu,
		0xEDB88320u, 0xF00F9344u, 0xD6D6A3E8u, 0xCB61B38Cu,
		0x9B64C2B0u, 0x86D3D2D4u, 0xA00AE278u, 0xBDBDF21Cu,
	};
	size_t i;

	crc = ~crc;
	for (i = 0; i < len; i++) {
		crc ^= buf[i];
		crc = (crc >> 4) ^ nibble[crc & 15];
		crc = (crc >> 4) ^ nibble[crc & 15];
	}
	return ~crc;
}

static inline uint32_t spintune__le16(const uint8_t *p)
{
	return (uint32_t)p[0] | ((uint32_t)p[1] << 8);
}

static inline uint32_t spintune__le32(const uint8_t *p)
{
	return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
	       ((uint32_t)p[3] << 24);
}

/**
 * spintune_entry_valid() - whether one decoded entry respects every bound.
 * @e: the entry.
 *
 * Returns: true when the strategy is known, its parameters are within the
 * compile-time caps and the parameters it does not use are 0.
 */
static inline bool spintune_entry_valid(const struct spintune_entry *e)
{
	if (e->spin_ns > SPINTUNE_MAX_SPIN_NS || e->sleep_ns > SPINTUNE_MAX_SLEEP_NS ||
	    e->poll_interval_ns > SPINTUNE_MAX_SLEEP_NS)
		return false;
	if (e->flags & ~SPINTUNE_ENTRY_FALLBACK)
		return false;
	if (e->flags & SPINTUNE_ENTRY_FALLBACK) {
		if (e->cpu_class != SPINTUNE_ANY_CPU_CLASS ||
		    e->size_class != SPINTUNE_ANY_SIZE_CLASS ||
		    e->opcode != SPINTUNE_ANY_OPCODE)
			return false;
	} else if (e->cpu_class == SPINTUNE_ANY_CPU_CLASS || e->size_class > 64) {
		return false;
	}
	switch (e->strategy) {
	case SPINTUNE_IRQ:
		return e->spin_ns == 0 && e->sleep_ns == 0 && e->poll_interval_ns == 0;
	case SPINTUNE_SPIN:
		return e->spin_ns > 0 && e->sleep_ns == 0 && e->poll_interval_ns == 0;
	case SPINTUNE_SPIN_THEN_IRQ:
		return e->sleep_ns == 0 && e->poll_interval_ns == 0;
	case SPINTUNE_SLEEP_THEN_SPIN:
		return e->poll_interval_ns == 0;
	case SPINTUNE_POLL_SLEEP:
		return e->spin_ns == 0 && e->sleep_ns == 0 &&
		       e->poll_interval_ns >= SPINTUNE_MIN_POLL_INTERVAL_NS;
	default:
		return false;
	}
}

/* Records why a blob was refused (when the caller asked) and returns rc. */
#define SPINTUNE__REFUSE(why, rc, text)                                    \
	({                                                                 \
		if (why)                                                   \
			*(why) = (text);                                   \
		(rc);                                                      \
	})

/**
 * spintune_blob_parse_why() - spintune_blob_parse(), saying why it refused.
 * @buf, @len, @storage, @capacity, @table: as for spintune_blob_parse().
 * @why: NULL, or receives a static English phrase naming the first check
 *	that failed (e.g. "CRC-32 mismatch"); untouched on success.
 *
 * Same checks and return values as spintune_blob_parse(); for drivers that
 * log the reason of a refusal (spintune.ko). Never sleeps.
 *
 * Returns: as spintune_blob_parse().
 */
static inline int spintune_blob_parse_why(const void *buf, size_t len,
					  struct spintune_entry *storage,
					  uint32_t capacity,
					  struct spintune_table *table,
					  const char **why)
{
	const uint8_t *p = (const uint8_t *)buf;
	uint32_t total, count, i;
	uint64_t prev_key = 0;

	if (!p || !storage || !table)
		return SPINTUNE__REFUSE(why, -EINVAL, "no buffer");
	if (len < SPINTUNE_BLOB_HEADER_BYTES)
		return SPINTUNE__REFUSE(why, -EINVAL, "shorter than a header");
	if (spintune__le32(p) != SPINTUNE_BLOB_MAGIC)
		return SPINTUNE__REFUSE(why, -EINVAL, "bad magic");
	if (spintune__le16(p + 4) != SPINTUNE_BLOB_VERSION)
		return SPINTUNE__REFUSE(why, -EPROTONOSUPPORT, "unknown format version");
	if (spintune__le16(p + 6) != SPINTUNE_BLOB_HEADER_BYTES)
		return SPINTUNE__REFUSE(why, -EINVAL, "bad header size");
	if (spintune__le16(p + 28) != SPINTUNE_BLOB_ENTRY_BYTES)
		return SPINTUNE__REFUSE(why, -EINVAL, "bad entry size");
	if (spintune__le16(p + 30) != 0)
		return SPINTUNE__REFUSE(why, -EINVAL, "reserved header field set");
	total = spintune__le32(p + 8);
	count = spintune__le32(p + 24);
	if (count == 0)
		return SPINTUNE__REFUSE(why, -EINVAL, "no entries");
	if (count > SPINTUNE_MAX_ENTRIES)
		return SPINTUNE__REFUSE(why, -E2BIG, "more entries than SPINTUNE_MAX_ENTRIES");
	if (count > capacity)
		return SPINTUNE__REFUSE(why, -E2BIG, "more entries than the storage holds");
	/* count <= SPINTUNE_MAX_ENTRIES keeps this product far from overflow. */
	if (total != SPINTUNE_BLOB_HEADER_BYTES + count * SPINTUNE_BLOB_ENTRY_BYTES)
		return SPINTUNE__REFUSE(why, -EINVAL, "declared size does not match the entry count");
	if (len < total)
		return SPINTUNE__REFUSE(why, -EMSGSIZE, "shorter than its header declares");
	if (spintune_crc32(0, p + 16, total - 16) != spintune__le32(p + 12))
		return SPINTUNE__REFUSE(why, -EBADMSG, "CRC-32 mismatch");
	if (p[32 + SPINTUNE_DEVICE_NAME_BYTES - 1] != 0)
		return SPINTUNE__REFUSE(why, -EINVAL, "device name not terminated");

	/* First pass: validate without writing anything. */
	for (i = 0; i < count; i++) {
		const uint8_t *q = p + SPINTUNE_BLOB_HEADER_BYTES + i * SPINTUNE_BLOB_ENTRY_BYTES;
		struct spintune_entry e;
		uint64_t key;

		e.cpu_class = q[0];
		e.size_class = q[1];
		e.strategy = q[2];
		e.flags = q[3];
		e.opcode = spintune__le32(q + 4);
		e.spin_ns = spintune__le32(q + 8);
		e.sleep_ns = spintune__le32(q + 12);
		e.poll_interval_ns = spintune__le32(q + 16);
		if (spintune__le32(q + 20) != 0)
			return SPINTUNE__REFUSE(why, -EINVAL, "reserved entry field set");
		if (!spintune_entry_valid(&e))
			return SPINTUNE__REFUSE(why, -EINVAL,
						"an entry breaks a bound (strategy, parameters, flags or wildcards)");
		if (((e.flags & SPINTUNE_ENTRY_FALLBACK) != 0) != (i == count - 1))
			return SPINTUNE__REFUSE(why, -EINVAL, "the fallback entry is not exactly the last");
		key = spintune__entry_key(e.cpu_class, e.opcode, e.size_class);
		if (i > 0 && key <= prev_key)
			return SPINTUNE__REFUSE(why, -EINVAL, "keys not strictly increasing");
		prev_key = key;
	}

	/* Second pass: decode. */
	for (i = 0; i < count; i++) {
		const uint8_t *q = p + SPINTUNE_BLOB_HEADER_BYTES + i * SPINTUNE_BLOB_ENTRY_BYTES;

		storage[i].cpu_class = q[0];
		storage[i].size_class = q[1];
		storage[i].strategy = q[2];
		storage[i].flags = q[3];
		storage[i].opcode = spintune__le32(q + 4);
		storage[i].spin_ns = spintune__le32(q + 8);
		storage[i].sleep_ns = spintune__le32(q + 12);
		storage[i].poll_interval_ns = spintune__le32(q + 16);
	}
	table->entries = storage;
	table->count = count;
	table->version = (uint64_t)spintune__le32(p + 16) |
			 ((uint64_t)spintune__le32(p + 20) << 32);
	for (i = 0; i < SPINTUNE_DEVICE_NAME_BYTES; i++)
		table->device[i] = (char)p[32 + i];
	return 0;
}

/**
 * spintune_blob_parse() - validate a policy blob and decode it into a table.
 * @buf: the blob (any alignment); only the first @len bytes are read.
 * @len: length of @buf in bytes.
 * @storage: caller-provided array that receives the decoded entries.
 * @capacity: number of entries @storage can hold.
 * @table: receives the table; its @entries point into @storage.
 *
 * Checks the magic, format version, header and entry sizes, the declared
 * total size against @len, the entry count (1..SPINTUNE_MAX_ENTRIES and
 * <= @capacity), the CRC-32 of everything after the CRC field, every entry
 * (spintune_entry_valid()), strictly increasing keys, exactly one fallback
 * entry in last place, and the device name's terminator. Nothing is
 * written to @storage or @table unless every check passed. Never sleeps.
 *
 * Returns: 0 on success; -EINVAL for a malformed blob (bad magic, sizes,
 * flags, entries or order); -EPROTONOSUPPORT for an unknown format version;
 * -EMSGSIZE when @len is shorter than the blob declares; -E2BIG when the
 * entry count exceeds SPINTUNE_MAX_ENTRIES or @capacity; -EBADMSG on a CRC
 * mismatch.
 */
static inline int spintune_blob_parse(const void *buf, size_t len,
				      struct spintune_entry *storage,
				      uint32_t capacity, struct spintune_table *table)
{
	return spintune_blob_parse_why(buf, len, storage, capacity, table, NULL);
}

#ifdef __cplusplus
}
#endif

#endif /* SPINTUNE_POLICY_H */
