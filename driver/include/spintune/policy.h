/* SPDX-License-Identifier: (GPL-2.0 OR MIT) */
/*
 * spintune policy table: the wait strategy a driver should use for each
 * (cpu class, opcode, size class) of one device, optionally refined by the
 * command's context (previous completion, time since the last write,
 * commands in flight, length), and the validating parser of the binary blob
 * the spintune agent writes (docs/policy-format.md).
 *
 * Included by kernel drivers, user-space drivers and the spintune tools.
 * No libc, no allocation, no global state: every function only touches the
 * memory it is given. Lookup and parsing may be called from any context,
 * including atomic context; they never sleep.
 *
 *	static uint64_t storage[SPINTUNE_TABLE_STORAGE_WORDS];
 *	struct spintune_table table;
 *	struct spintune_ctx ctx = {0};        // per device
 *	struct spintune_features f;
 *
 *	spintune_table_parse(blob, len, storage, sizeof(storage), &table, NULL);
 *	...
 *	issue_ns = now_ns();
 *	spintune_ctx_issue(&ctx, issue_ns, bytes, &f);
 *	e = spintune_lookup_ctx(&table, cpu_class, opcode, &f);  // O(1) + depth <= 3
 *	... wait as e says (wait.h) ...
 *	spintune_ctx_done(&ctx, issue_ns, now_ns(), spintune_is_write(&table, opcode));
 *
 * A format 3 table may carry A/B trials (docs/verification.md): for an entry
 * with one, spintune_ab_pick() sends a seeded share of the commands to the
 * incumbent's wait; a driver that reports outcomes reports each arm apart:
 *
 *	struct spintune_ab ab;                 // per device, per table
 *	spintune_ab_init(&ab, &table);
 *	e = spintune_ab_pick(&table, spintune_lookup_ctx(...), &ab);
 *	arm = spintune_entry_is_incumbent(e);  // 0: table arm, 1: incumbent
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
#define SPINTUNE_BLOB_VERSION 2u        /* what the tools write for tables without trials */
#define SPINTUNE_BLOB_VERSION_3 3u      /* with A/B trials (written only for those) */
#define SPINTUNE_BLOB_VERSION_1 1u      /* still read: no context, no write opcodes */
#define SPINTUNE_BLOB_HEADER_BYTES 64u  /* format 1 */
#define SPINTUNE_BLOB_HEADER_V2_BYTES 96u
#define SPINTUNE_BLOB_ENTRY_BYTES 24u
#define SPINTUNE_BLOB_NODE_BYTES 16u
#define SPINTUNE_BLOB_TRIAL_BYTES 16u
#define SPINTUNE_DEVICE_NAME_BYTES 32u

/* Limits a parsed table must respect; a driver may lower them. */
#ifndef SPINTUNE_MAX_ENTRIES
#define SPINTUNE_MAX_ENTRIES 1024u
#endif
#ifndef SPINTUNE_MAX_NODES
#define SPINTUNE_MAX_NODES 1024u
#endif
#ifndef SPINTUNE_MAX_SPIN_NS
#define SPINTUNE_MAX_SPIN_NS 10000000u /* 10 ms of busy-waiting at most */
#endif
#ifndef SPINTUNE_MAX_SLEEP_NS
#define SPINTUNE_MAX_SLEEP_NS 1000000000u /* 1 s */
#endif
#define SPINTUNE_MIN_POLL_INTERVAL_NS 1000u /* below 1 us a poll-sleep is a spin */
#define SPINTUNE_MAX_CONTEXT_DEPTH 3u       /* node comparisons per context lookup */
#define SPINTUNE_MAX_WRITE_OPCODES 4u

/* Wildcards used by the fallback entry. */
#define SPINTUNE_ANY_CPU_CLASS 0xFFu
#define SPINTUNE_ANY_SIZE_CLASS 0xFFu
#define SPINTUNE_ANY_OPCODE 0xFFFFFFFFu
#define SPINTUNE_ENTRY_FALLBACK 0x01u /* entry flag: the device-wide fallback */
/* Entry flag of a parsed table's trial entries (never in a blob): the
 * incumbent's wait of an A/B trial, see spintune_ab_pick(). */
#define SPINTUNE_ENTRY_TRIAL 0x02u
#define SPINTUNE_CHILD_LEAF 0x8000u   /* node child: an entry index, not a node */
/* since_write_ns of a device that has completed no write yet. */
#define SPINTUNE_NO_WRITE_YET (~(uint64_t)0)

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
 * enum spintune_feature - what a driver knows about a command at issue.
 * @SPINTUNE_FEATURE_PREV_WAIT_NS: completion time (issue -> completion) of
 *	the device's last completed command; 0 before the first.
 * @SPINTUNE_FEATURE_SINCE_WRITE_NS: issue time minus the completion time of
 *	the device's last completed write; SPINTUNE_NO_WRITE_YET before one.
 * @SPINTUNE_FEATURE_INFLIGHT: the device's commands issued before this one
 *	and not completed yet.
 * @SPINTUNE_FEATURE_BYTES: the command's transfer length.
 * @SPINTUNE_FEATURE_COUNT: number of features.
 */
enum spintune_feature {
	SPINTUNE_FEATURE_PREV_WAIT_NS = 0,
	SPINTUNE_FEATURE_SINCE_WRITE_NS = 1,
	SPINTUNE_FEATURE_INFLIGHT = 2,
	SPINTUNE_FEATURE_BYTES = 3,
	SPINTUNE_FEATURE_COUNT = 4,
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
 * @tree: 0 for a key with one entry; else the entry is one of the key's
 *	context leaves and the key's tree starts at node @tree - 1.
 * @trial: 0: no A/B trial (always before format 3; the field was reserved).
 *	Else the entry has one and its trial entry (the incumbent's wait,
 *	flags SPINTUNE_ENTRY_TRIAL) is @entries[@count + @trial - 1] of the
 *	parsed table. In a trial entry itself: the share, 1..255 commands of
 *	256 that take it.
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
	uint16_t tree;
	uint16_t trial;
};

/**
 * struct spintune_node - one comparison of a key's context tree.
 * @feature: an enum spintune_feature value.
 * @reserved: 0.
 * @left: where a command with feature < @threshold goes: a node index, or
 *	SPINTUNE_CHILD_LEAF | an entry index.
 * @right: where the others go, likewise.
 * @reserved2: 0.
 * @threshold: >= 1.
 */
struct spintune_node {
	uint8_t feature;
	uint8_t reserved;
	uint16_t left;
	uint16_t right;
	uint16_t reserved2;
	uint64_t threshold;
};

/**
 * struct spintune_index - the O(1) key index: a perfect hash (hash and
 *	displace) of the table's keys, built when the table is parsed.
 * @multiplier: odd; 0 when the table has no index (tables of headers
 *	generated before format 2): lookups binary-search then.
 * @buckets: 1 << @bucket_bits displacements.
 * @slots: 1 << @slot_bits entry indexes: each key's first entry at exactly
 *	one slot, every other slot the fallback.
 * @bucket_bits: 1..15.
 * @slot_bits: 1..15.
 *
 * With h = key * @multiplier (mod 2^64) and key as spintune__entry_key():
 * bucket = h >> (64 - @bucket_bits), slot = ((h >> (64 - @bucket_bits -
 * @slot_bits)) + @buckets[bucket]) mod (1 << @slot_bits).
 */
struct spintune_index {
	uint64_t multiplier;
	const uint16_t *buckets;
	const uint16_t *slots;
	uint8_t bucket_bits;
	uint8_t slot_bits;
};

/**
 * struct spintune_table - a device's policy table.
 * @entries: @count entries sorted by (cpu_class, opcode, size_class), the
 *	fallback entry last; a key with context has one entry per leaf, in a
 *	row, in its tree's leaf order.
 * @count: number of entries, >= 1.
 * @version: the tuner's table version.
 * @device: NUL-terminated device name the table was fitted for.
 * @nodes: @node_count context nodes, or NULL.
 * @node_count: number of nodes.
 * @write_opcode_count: number of @write_opcodes in use.
 * @write_opcodes: the opcodes whose completion resets since_write_ns.
 * @index: the key index (zero: none).
 *
 * A format 3 table's A/B trial entries follow the @count entries
 * (spintune_trial_count() of them); the struct is format 2's.
 *
 * Tables from headers generated before format 2 initialize only the first
 * four fields: they have no context and no index.
 */
struct spintune_table {
	const struct spintune_entry *entries;
	uint32_t count;
	uint64_t version;
	char device[SPINTUNE_DEVICE_NAME_BYTES];
	const struct spintune_node *nodes;
	uint32_t node_count;
	uint32_t write_opcode_count;
	uint32_t write_opcodes[SPINTUNE_MAX_WRITE_OPCODES];
	struct spintune_index index;
};

/**
 * struct spintune_features - one command's context, by enum spintune_feature.
 * @value: the features.
 */
struct spintune_features {
	uint64_t value[SPINTUNE_FEATURE_COUNT];
};

/**
 * struct spintune_ctx - per-device state the context features come from.
 * @prev_wait_ns: completion time of the last completed command.
 * @last_write_done_ns: when the last write completed (if @wrote).
 * @inflight: commands issued and not completed.
 * @wrote: a write has completed.
 *
 * Zero-initialize. Updated with plain stores (and an atomic count): calls
 * from several CPUs at once may lose an update or, on 32-bit CPUs, read a
 * torn time; a feature is a hint, and a wrong one only selects another valid
 * leaf of the same key.
 */
struct spintune_ctx {
	uint64_t prev_wait_ns;
	uint64_t last_write_done_ns;
	uint32_t inflight;
	uint32_t wrote;
};

/**
 * spintune_size_class() - size class of a transfer length.
 * @bytes: transfer length in bytes.
 *
 * Returns: the bit width of @bytes: 0 for 0, 1 for 1, 10 for 512..1023.
 */
static inline uint8_t spintune_size_class(uint64_t bytes)
{
	return bytes ? (uint8_t)(64 - __builtin_clzll(bytes)) : 0;
}

static inline uint64_t spintune__entry_key(uint8_t cpu_class, uint32_t opcode,
					   uint8_t size_class)
{
	return ((uint64_t)cpu_class << 40) | ((uint64_t)opcode << 8) | size_class;
}

static inline uint64_t spintune__key_of(const struct spintune_entry *e)
{
	return spintune__entry_key(e->cpu_class, e->opcode, e->size_class);
}

/* The entry of @key (a key's first entry), else the fallback. */
static inline const struct spintune_entry *
spintune__find(const struct spintune_table *table, uint64_t key)
{
	const struct spintune_index *ix = &table->index;
	const struct spintune_entry *fallback = &table->entries[table->count - 1];
	const struct spintune_entry *e;
	uint32_t lo = 0, hi = table->count - 1;

	if (ix->multiplier) {
		const uint64_t h = key * ix->multiplier;
		const uint32_t bucket = (uint32_t)(h >> (64 - ix->bucket_bits));
		const uint32_t base =
			(uint32_t)(h >> (64 - ix->bucket_bits - ix->slot_bits));

		e = &table->entries[ix->slots[(base + ix->buckets[bucket]) &
					      ((1u << ix->slot_bits) - 1)]];
		return spintune__key_of(e) == key ? e : fallback;
	}
	while (lo < hi) { /* no index: binary search */
		const uint32_t mid = lo + (hi - lo) / 2;
		const uint64_t k = spintune__key_of(&table->entries[mid]);

		if (k == key)
			return &table->entries[mid];
		if (k < key)
			lo = mid + 1;
		else
			hi = mid;
	}
	return fallback;
}

/* The leaf of @e's tree that @f selects (@e itself without a tree). */
static inline const struct spintune_entry *
spintune__leaf(const struct spintune_table *table, const struct spintune_entry *e,
	       const uint64_t *f)
{
	uint32_t depth, child;

	if (!e->tree)
		return e;
	child = e->tree - 1u;
	for (depth = 0; depth < SPINTUNE_MAX_CONTEXT_DEPTH; depth++) {
		const struct spintune_node *n = &table->nodes[child];

		child = f[n->feature] < n->threshold ? n->left : n->right;
		if (child & SPINTUNE_CHILD_LEAF)
			return &table->entries[child & ~SPINTUNE_CHILD_LEAF];
	}
	return e; /* not reached for a parsed table */
}

/**
 * spintune_lookup_ctx() - find the entry for one command in its context.
 * @table: a table produced by spintune_table_parse() or a generated header.
 * @cpu_class: index of the CPU class the caller runs on.
 * @opcode: the command's opcode.
 * @f: the command's features (spintune_ctx_issue()); the size class comes
 *	from @f->value[SPINTUNE_FEATURE_BYTES].
 *
 * O(1): one hash, one displacement, one slot, then at most
 * SPINTUNE_MAX_CONTEXT_DEPTH comparisons for a key with context. No
 * allocation; safe in atomic context.
 *
 * Returns: the key's entry (its leaf for @f), else the fallback (never NULL
 * for a valid table).
 */
static inline const struct spintune_entry *
spintune_lookup_ctx(const struct spintune_table *table, uint8_t cpu_class,
		    uint32_t opcode, const struct spintune_features *f)
{
	const uint64_t key = spintune__entry_key(
		cpu_class, opcode,
		spintune_size_class(f->value[SPINTUNE_FEATURE_BYTES]));

	return spintune__leaf(table, spintune__find(table, key), f->value);
}

/**
 * spintune_lookup() - find the entry for one command, without its context.
 * @table: a table produced by spintune_table_parse() or a generated header.
 * @cpu_class: index of the CPU class the caller runs on.
 * @opcode: the command's opcode.
 * @bytes: the command's transfer length in bytes.
 *
 * As spintune_lookup_ctx() for a device that has not completed anything
 * yet (prev_wait_ns 0, no write, nothing in flight): for a driver that keeps
 * no spintune_ctx. O(1) (O(log n) for tables without an index); no
 * allocation; safe in atomic context.
 *
 * Returns: the key's entry, else the table's fallback entry (never NULL for
 * a valid table).
 */
static inline const struct spintune_entry *
spintune_lookup(const struct spintune_table *table, uint8_t cpu_class,
		uint32_t opcode, uint64_t bytes)
{
	const struct spintune_entry *e = spintune__find(
		table, spintune__entry_key(cpu_class, opcode, spintune_size_class(bytes)));
	uint64_t f[SPINTUNE_FEATURE_COUNT];

	if (!e->tree)
		return e;
	f[SPINTUNE_FEATURE_PREV_WAIT_NS] = 0;
	f[SPINTUNE_FEATURE_SINCE_WRITE_NS] = SPINTUNE_NO_WRITE_YET;
	f[SPINTUNE_FEATURE_INFLIGHT] = 0;
	f[SPINTUNE_FEATURE_BYTES] = bytes;
	return spintune__leaf(table, e, f);
}

/**
 * struct spintune_ab - a device's A/B arm chooser.
 * @seed: from the table's version (spintune_ab_init()).
 * @counter: commands that met a trial so far.
 *
 * One per device and table; zero-initialize or spintune_ab_init(). The
 * counter is incremented atomically, so callers on several CPUs each get a
 * distinct draw.
 */
struct spintune_ab {
	uint64_t seed;
	uint64_t counter;
};

/* SplitMix64's finalizer: a bijective mix of a 64-bit counter. */
static inline uint64_t spintune__mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

/**
 * spintune_ab_init() - start a device's arm chooser for a table.
 * @ab: the chooser.
 * @table: the table in force.
 *
 * Seeded from @table->version: the same table gives the same sequence of
 * arms, so a run can be repeated.
 */
static inline void spintune_ab_init(struct spintune_ab *ab, const struct spintune_table *table)
{
	ab->seed = spintune__mix64(table->version ^ 0x5350544E41422D31ull);
	ab->counter = 0;
}

/**
 * spintune_ab_pick() - the entry one command waits by: @e, or for an entry
 *	with an A/B trial, a seeded share of the time its trial entry.
 * @table: the table @e came from.
 * @e: what spintune_lookup() or spintune_lookup_ctx() returned (for a
 *	table from spintune_table_parse(), spintune_blob_parse() or a
 *	generated header: those place every trial entry an entry names).
 * @ab: the device's chooser (spintune_ab_init() for @table).
 *
 * O(1): for an entry without a trial one load and a branch; with one, an
 * atomic increment and a 64-bit mix. Safe in atomic context.
 *
 * Returns: @e (the table arm), or its trial entry (the incumbent arm, for
 * share / 256 of the commands of that entry).
 */
static inline const struct spintune_entry *
spintune_ab_pick(const struct spintune_table *table, const struct spintune_entry *e,
		 struct spintune_ab *ab)
{
	const struct spintune_entry *incumbent;
	uint64_t n;

	if (!e->trial || (e->flags & SPINTUNE_ENTRY_TRIAL))
		return e;
	incumbent = &table->entries[table->count + e->trial - 1u];
	n = __atomic_fetch_add(&ab->counter, 1, __ATOMIC_RELAXED);
	return (spintune__mix64(ab->seed + n) & 0xFFu) < incumbent->trial ? incumbent : e;
}

/**
 * spintune_trial_count() - the A/B trials of a table.
 * @table: a parsed or generated table.
 *
 * O(n); for tools and reports, not the hot path.
 *
 * Returns: the number of trial entries after @table->entries[@count - 1].
 */
static inline uint32_t spintune_trial_count(const struct spintune_table *table)
{
	uint32_t i, n = 0;

	for (i = 0; i < table->count; i++)
		n += table->entries[i].trial != 0;
	return n;
}

/**
 * spintune_entry_is_incumbent() - whether spintune_ab_pick() chose the
 *	incumbent arm.
 * @e: what spintune_ab_pick() returned.
 *
 * Returns: true for a trial entry (report the outcome as arm "incumbent"),
 * false for a table entry (arm "table").
 */
static inline bool spintune_entry_is_incumbent(const struct spintune_entry *e)
{
	return (e->flags & SPINTUNE_ENTRY_TRIAL) != 0;
}

/**
 * spintune_is_write() - whether a command of @opcode is a write for @table.
 * @table: the table.
 * @opcode: the command's opcode.
 *
 * Returns: true when @opcode is one of the table's write opcodes (the block
 * layer's REQ_OP_WRITE, MMC CMD24/CMD25 unless the table says otherwise).
 */
static inline bool spintune_is_write(const struct spintune_table *table, uint32_t opcode)
{
	uint32_t i;

	for (i = 0; i < table->write_opcode_count && i < SPINTUNE_MAX_WRITE_OPCODES; i++) {
		if (table->write_opcodes[i] == opcode)
			return true;
	}
	return false;
}

/**
 * spintune_ctx_issue() - a command is issued: its features, and the count.
 * @ctx: the device's state.
 * @now_ns: the issue time (the clock of spintune_ctx_done()).
 * @bytes: the command's transfer length.
 * @f: receives the features, for spintune_lookup_ctx().
 *
 * A few loads and one atomic increment; safe in atomic context. Every call
 * must be followed by one spintune_ctx_done() for the same command.
 */
static inline void spintune_ctx_issue(struct spintune_ctx *ctx, uint64_t now_ns,
				      uint64_t bytes, struct spintune_features *f)
{
	const uint64_t last_write = ctx->last_write_done_ns;

	f->value[SPINTUNE_FEATURE_PREV_WAIT_NS] = ctx->prev_wait_ns;
	f->value[SPINTUNE_FEATURE_SINCE_WRITE_NS] =
		!ctx->wrote ? SPINTUNE_NO_WRITE_YET :
		now_ns > last_write ? now_ns - last_write : 0;
	f->value[SPINTUNE_FEATURE_INFLIGHT] =
		__atomic_fetch_add(&ctx->inflight, 1, __ATOMIC_RELAXED);
	f->value[SPINTUNE_FEATURE_BYTES] = bytes;
}

/**
 * spintune_ctx_done() - a command completed.
 * @ctx: the device's state.
 * @issue_ns: its issue time, as given to spintune_ctx_issue().
 * @done_ns: when it completed: ideally where the completion is first seen
 *	(the IRQ handler, or the poll that saw it), which is what a trace
 *	measures and what the table was fitted on.
 * @write: spintune_is_write() of its opcode.
 *
 * A few stores and one atomic decrement; safe in atomic context.
 */
static inline void spintune_ctx_done(struct spintune_ctx *ctx, uint64_t issue_ns,
				     uint64_t done_ns, bool write)
{
	ctx->prev_wait_ns = done_ns > issue_ns ? done_ns - issue_ns : 0;
	if (write) {
		ctx->last_write_done_ns = done_ns;
		ctx->wrote = 1;
	}
	__atomic_fetch_sub(&ctx->inflight, 1, __ATOMIC_RELAXED);
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

static inline uint64_t spintune__le64(const uint8_t *p)
{
	return (uint64_t)spintune__le32(p) | ((uint64_t)spintune__le32(p + 4) << 32);
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
		    e->opcode != SPINTUNE_ANY_OPCODE || e->tree)
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

/* ---- The key index ---- */

#define SPINTUNE__INDEX_SEEDS 32u      /* multipliers tried */
#define SPINTUNE__INDEX_MAX_BUCKET 8u  /* keys per bucket a multiplier may give */
#define SPINTUNE__PLACED 0x8000u       /* bucket placed (while building) */
#define SPINTUNE__EMPTY 0xFFFFu        /* free slot (while building) */

/* log2 of the slots for @keys keys: the smallest power of two >= 2 keys. */
static inline uint32_t spintune__slot_bits(uint32_t keys)
{
	uint32_t bits = 1;

	while ((1u << bits) < 2 * keys)
		bits++;
	return bits;
}

static inline uint32_t spintune__bucket_bits(uint32_t slot_bits)
{
	return slot_bits > 1 ? slot_bits - 1 : 1;
}

/**
 * spintune_table_storage_bytes() - storage spintune_table_parse() needs.
 * @entries: the blob's entry count.
 * @nodes: the blob's node count.
 *
 * Returns: bytes for the decoded entries, nodes and key index, including
 * slack to align the caller's buffer to 8 bytes.
 */
static inline size_t spintune_table_storage_bytes(uint32_t entries, uint32_t nodes)
{
	const uint32_t slot_bits = spintune__slot_bits(entries);

	return 8 + (size_t)entries * sizeof(struct spintune_entry) +
	       (size_t)nodes * sizeof(struct spintune_node) +
	       2 * ((size_t)1 << spintune__bucket_bits(slot_bits)) +
	       2 * ((size_t)1 << slot_bits) + 8;
}

/* Words (uint64_t) of storage enough for any blob within the limits. */
#define SPINTUNE_TABLE_STORAGE_WORDS                                         \
	((8 + SPINTUNE_MAX_ENTRIES * 24u + SPINTUNE_MAX_NODES * 16u +        \
	  12u * SPINTUNE_MAX_ENTRIES + 16u) / 8u + 1u)

static inline uint64_t spintune__index_multiplier(uint32_t seed)
{
	return (0x9E3779B97F4A7C15ull ^ ((uint64_t)seed * 0xBF58476D1CE4E5B9ull)) | 1u;
}

/* One seed's attempt at a perfect hash of the keys of @t (index fields
 * already sized); false when some bucket cannot be placed. */
static inline bool spintune__index_try(struct spintune_table *t, uint16_t *buckets,
				       uint16_t *slots, uint64_t multiplier)
{
	const uint32_t bbits = t->index.bucket_bits, sbits = t->index.slot_bits;
	const uint32_t nbuckets = 1u << bbits, mask = (1u << sbits) - 1;
	uint32_t i, b, size, largest = 0;

#define SPINTUNE__HASH(i) (spintune__key_of(&t->entries[i]) * multiplier)
#define SPINTUNE__FIRST(i) ((i) == 0 || spintune__key_of(&t->entries[(i) - 1]) != \
				     spintune__key_of(&t->entries[i]))
	for (b = 0; b < nbuckets; b++)
		buckets[b] = 0;
	for (i = 0; i <= mask; i++)
		slots[i] = SPINTUNE__EMPTY;
	for (i = 0; i + 1 < t->count; i++) {
		if (!SPINTUNE__FIRST(i))
			continue;
		b = (uint32_t)(SPINTUNE__HASH(i) >> (64 - bbits));
		if (++buckets[b] > SPINTUNE__INDEX_MAX_BUCKET)
			return false;
		if (buckets[b] > largest)
			largest = buckets[b];
	}
	/* Largest buckets first: each gets the first displacement at which all
	 * of its keys land on free slots. */
	for (size = largest; size >= 1; size--) {
		for (b = 0; b < nbuckets; b++) {
			uint32_t base[SPINTUNE__INDEX_MAX_BUCKET];
			uint16_t entry[SPINTUNE__INDEX_MAX_BUCKET];
			uint32_t n = 0, d, k;

			if (buckets[b] != size)
				continue;
			for (i = 0; i + 1 < t->count && n < size; i++) {
				const uint64_t h = SPINTUNE__HASH(i);

				if (!SPINTUNE__FIRST(i) || (uint32_t)(h >> (64 - bbits)) != b)
					continue;
				base[n] = (uint32_t)(h >> (64 - bbits - sbits));
				entry[n++] = (uint16_t)i;
			}
			for (d = 0; d <= mask; d++) {
				for (k = 0; k < n; k++) {
					const uint32_t slot = (base[k] + d) & mask;
					uint32_t j;

					if (slots[slot] != SPINTUNE__EMPTY)
						break;
					for (j = 0; j < k && ((base[j] + d) & mask) != slot; j++)
						;
					if (j < k)
						break;
				}
				if (k == n)
					break;
			}
			if (d > mask)
				return false;
			for (k = 0; k < n; k++)
				slots[(base[k] + d) & mask] = entry[k];
			buckets[b] = (uint16_t)(SPINTUNE__PLACED | d);
		}
	}
#undef SPINTUNE__HASH
#undef SPINTUNE__FIRST
	for (b = 0; b < nbuckets; b++)
		buckets[b] &= (uint16_t)~SPINTUNE__PLACED;
	for (i = 0; i <= mask; i++) {
		if (slots[i] == SPINTUNE__EMPTY)
			slots[i] = (uint16_t)(t->count - 1);
	}
	return true;
}

/* Builds @t's key index in @buckets and @slots (sized as
 * spintune_table_storage_bytes() says); -EINVAL when no multiplier gives a
 * perfect hash (not seen for any table the tools write: they run this). */
static inline int spintune__index_build(struct spintune_table *t, uint16_t *buckets,
					uint16_t *slots)
{
	uint32_t seed;

	t->index.slot_bits = (uint8_t)spintune__slot_bits(t->count);
	t->index.bucket_bits = (uint8_t)spintune__bucket_bits(t->index.slot_bits);
	for (seed = 0; seed < SPINTUNE__INDEX_SEEDS; seed++) {
		const uint64_t m = spintune__index_multiplier(seed);

		if (spintune__index_try(t, buckets, slots, m)) {
			t->index.multiplier = m;
			t->index.buckets = buckets;
			t->index.slots = slots;
			return 0;
		}
	}
	return -EINVAL;
}

/* ---- The parser ---- */

/* Where each part of a table goes; a NULL part is not wanted. */
struct spintune__storage {
	struct spintune_entry *entries;
	uint32_t entry_capacity;
	struct spintune_node *nodes;
	uint32_t node_capacity;
	uint16_t *buckets; /* with @slots: build the key index */
	uint16_t *slots;
};

static inline void spintune__decode_entry(const uint8_t *q, struct spintune_entry *e)
{
	e->cpu_class = q[0];
	e->size_class = q[1];
	e->strategy = q[2];
	e->flags = q[3];
	e->opcode = spintune__le32(q + 4);
	e->spin_ns = spintune__le32(q + 8);
	e->sleep_ns = spintune__le32(q + 12);
	e->poll_interval_ns = spintune__le32(q + 16);
	e->tree = (uint16_t)spintune__le16(q + 20);
	e->trial = (uint16_t)spintune__le16(q + 22);
}

/* The trial entry of blob trial @q for the entry @of: its key, the trial's
 * wait, the share in @trial. */
static inline void spintune__decode_trial(const uint8_t *q, const struct spintune_entry *of,
					  struct spintune_entry *e)
{
	e->cpu_class = of->cpu_class;
	e->size_class = of->size_class;
	e->strategy = q[3];
	e->flags = 0;
	e->opcode = of->opcode;
	e->spin_ns = spintune__le32(q + 4);
	e->sleep_ns = spintune__le32(q + 8);
	e->poll_interval_ns = spintune__le32(q + 12);
	e->tree = 0;
	e->trial = q[2];
}

static inline void spintune__decode_node(const uint8_t *q, struct spintune_node *n)
{
	n->feature = q[0];
	n->reserved = q[1];
	n->left = (uint16_t)spintune__le16(q + 2);
	n->right = (uint16_t)spintune__le16(q + 4);
	n->reserved2 = (uint16_t)spintune__le16(q + 6);
	n->threshold = spintune__le64(q + 8);
}

/* One node on the path of the tree check, with the box of the commands
 * that reach it. */
struct spintune__frame {
	struct spintune_node node;
	uint32_t side; /* children checked */
	uint64_t lo[SPINTUNE_FEATURE_COUNT];
	uint64_t hi[SPINTUNE_FEATURE_COUNT]; /* exclusive; with has_hi */
	bool has_hi[SPINTUNE_FEATURE_COUNT];
};

/*
 * Checks the tree of the key whose entries are [first, last) (all carrying
 * tree = @root + 1): its nodes are exactly @root, @root + 1, ... in preorder,
 * its leaves exactly first..last - 1 left to right, no path has more than
 * SPINTUNE_MAX_CONTEXT_DEPTH nodes, every node's feature is known, its
 * reserved fields are 0 and its threshold splits the box that reaches it
 * (both children reachable). Returns the number of nodes, or 0 when bad.
 */
static inline uint32_t spintune__check_tree(const uint8_t *nodes_at, uint32_t node_count,
					    uint32_t root, uint32_t first, uint32_t last)
{
	struct spintune__frame stack[SPINTUNE_MAX_CONTEXT_DEPTH];
	uint32_t depth = 0, next_node = root, next_leaf = first, f;
	uint32_t child = root; /* the child being entered */
	const struct spintune__frame *parent = NULL;

	for (;;) {
		if (child & SPINTUNE_CHILD_LEAF) {
			if ((child & ~SPINTUNE_CHILD_LEAF) != next_leaf || next_leaf >= last)
				return 0;
			next_leaf++;
		} else {
			struct spintune__frame *fr;

			if (child != next_node || child >= node_count ||
			    depth >= SPINTUNE_MAX_CONTEXT_DEPTH)
				return 0;
			next_node++;
			fr = &stack[depth];
			spintune__decode_node(nodes_at + (size_t)child * SPINTUNE_BLOB_NODE_BYTES,
					      &fr->node);
			if (fr->node.feature >= SPINTUNE_FEATURE_COUNT || fr->node.reserved ||
			    fr->node.reserved2)
				return 0;
			for (f = 0; f < SPINTUNE_FEATURE_COUNT; f++) {
				fr->lo[f] = parent ? parent->lo[f] : 0;
				fr->hi[f] = parent ? parent->hi[f] : 0;
				fr->has_hi[f] = parent ? parent->has_hi[f] : false;
			}
			if (parent) { /* narrow the box to the side we came from */
				f = parent->node.feature;
				if (parent->side == 1) {
					fr->hi[f] = parent->node.threshold;
					fr->has_hi[f] = true;
				} else {
					fr->lo[f] = parent->node.threshold;
				}
			}
			f = fr->node.feature;
			if (fr->node.threshold <= fr->lo[f] ||
			    (fr->has_hi[f] && fr->node.threshold >= fr->hi[f]))
				return 0;
			fr->side = 0;
			depth++;
		}
		/* The next child to enter: the first unchecked side on the path. */
		while (depth > 0 && stack[depth - 1].side == 2)
			depth--;
		if (depth == 0)
			break;
		parent = &stack[depth - 1];
		child = parent->side == 0 ? parent->node.left : parent->node.right;
		stack[depth - 1].side++;
	}
	return next_leaf == last ? next_node - root : 0;
}

/* The end of the run of entries from @first on that have @e's key. */
static inline uint32_t spintune__run_end(const uint8_t *entries_at, uint32_t count,
					 uint32_t first, const struct spintune_entry *e)
{
	uint32_t last = first + 1;

	for (; last < count; last++) {
		const uint8_t *q = entries_at + (size_t)last * SPINTUNE_BLOB_ENTRY_BYTES;

		if (q[0] != e->cpu_class || q[1] != e->size_class ||
		    spintune__le32(q + 4) != e->opcode)
			break;
	}
	return last;
}

/* The validating parser behind spintune_table_parse() and
 * spintune_blob_parse(). */
static inline int spintune__parse(const void *buf, size_t len,
				  const struct spintune__storage *st,
				  struct spintune_table *table, const char **why)
{
	const uint8_t *p = (const uint8_t *)buf;
	const uint8_t *entries_at, *nodes_at, *trials_at;
	struct spintune_table t;
	uint32_t version, header, total, count, nodes = 0, writes = 0, trials = 0, i;
	uint32_t next_node = 0;
	uint64_t prev_key = 0;
	uint16_t prev_tree = 0;

	if (!p || !st || !st->entries || !table)
		return SPINTUNE__REFUSE(why, -EINVAL, "no buffer");
	if (len < SPINTUNE_BLOB_HEADER_BYTES)
		return SPINTUNE__REFUSE(why, -EINVAL, "shorter than a header");
	if (spintune__le32(p) != SPINTUNE_BLOB_MAGIC)
		return SPINTUNE__REFUSE(why, -EINVAL, "bad magic");
	version = spintune__le16(p + 4);
	if (version != SPINTUNE_BLOB_VERSION_1 && version != SPINTUNE_BLOB_VERSION &&
	    version != SPINTUNE_BLOB_VERSION_3)
		return SPINTUNE__REFUSE(why, -EPROTONOSUPPORT, "unknown format version");
	header = version == SPINTUNE_BLOB_VERSION_1 ? SPINTUNE_BLOB_HEADER_BYTES :
						      SPINTUNE_BLOB_HEADER_V2_BYTES;
	if (spintune__le16(p + 6) != header)
		return SPINTUNE__REFUSE(why, -EINVAL, "bad header size");
	if (len < header)
		return SPINTUNE__REFUSE(why, -EINVAL, "shorter than a header");
	if (spintune__le16(p + 28) != SPINTUNE_BLOB_ENTRY_BYTES)
		return SPINTUNE__REFUSE(why, -EINVAL, "bad entry size");
	if (spintune__le16(p + 30) != 0)
		return SPINTUNE__REFUSE(why, -EINVAL, "reserved header field set");
	if (version != SPINTUNE_BLOB_VERSION_1) {
		if (spintune__le16(p + 68) != SPINTUNE_BLOB_NODE_BYTES)
			return SPINTUNE__REFUSE(why, -EINVAL, "bad node size");
		if (p[71] || (version == SPINTUNE_BLOB_VERSION && spintune__le32(p + 88)) ||
		    spintune__le32(p + 92))
			return SPINTUNE__REFUSE(why, -EINVAL, "reserved header field set");
		if (version == SPINTUNE_BLOB_VERSION_3)
			trials = spintune__le32(p + 88);
		nodes = spintune__le32(p + 64);
		writes = p[70];
		if (writes > SPINTUNE_MAX_WRITE_OPCODES)
			return SPINTUNE__REFUSE(why, -EINVAL, "more than 4 write opcodes");
		for (i = 0; i < SPINTUNE_MAX_WRITE_OPCODES; i++) {
			const uint32_t op = spintune__le32(p + 72 + 4 * i);

			if (i >= writes ? op != 0 :
			    i > 0 && op <= spintune__le32(p + 72 + 4 * (i - 1)))
				return SPINTUNE__REFUSE(why, -EINVAL,
							"write opcodes not strictly increasing, or unused ones not 0");
		}
	}
	total = spintune__le32(p + 8);
	count = spintune__le32(p + 24);
	if (count == 0)
		return SPINTUNE__REFUSE(why, -EINVAL, "no entries");
	if (count > SPINTUNE_MAX_ENTRIES)
		return SPINTUNE__REFUSE(why, -E2BIG, "more entries than SPINTUNE_MAX_ENTRIES");
	if (trials >= count)
		return SPINTUNE__REFUSE(why, -EINVAL, "more trials than non-fallback entries");
	if (count + trials > SPINTUNE_MAX_ENTRIES)
		return SPINTUNE__REFUSE(why, -E2BIG,
					"more entries and trials than SPINTUNE_MAX_ENTRIES");
	if (count + trials > st->entry_capacity)
		return SPINTUNE__REFUSE(why, -E2BIG, "more entries than the storage holds");
	if (nodes > SPINTUNE_MAX_NODES)
		return SPINTUNE__REFUSE(why, -E2BIG, "more nodes than SPINTUNE_MAX_NODES");
	if (nodes && (!st->nodes || nodes > st->node_capacity))
		return SPINTUNE__REFUSE(why, -E2BIG, "more context nodes than the storage holds");
	/* The counts' bounds keep this sum far from overflow. */
	if (total != header + count * SPINTUNE_BLOB_ENTRY_BYTES + nodes * SPINTUNE_BLOB_NODE_BYTES +
		     trials * SPINTUNE_BLOB_TRIAL_BYTES)
		return SPINTUNE__REFUSE(why, -EINVAL, "declared size does not match the entry count");
	if (len < total)
		return SPINTUNE__REFUSE(why, -EMSGSIZE, "shorter than its header declares");
	if (spintune_crc32(0, p + 16, total - 16) != spintune__le32(p + 12))
		return SPINTUNE__REFUSE(why, -EBADMSG, "CRC-32 mismatch");
	if (p[32 + SPINTUNE_DEVICE_NAME_BYTES - 1] != 0)
		return SPINTUNE__REFUSE(why, -EINVAL, "device name not terminated");
	entries_at = p + header;
	nodes_at = entries_at + (size_t)count * SPINTUNE_BLOB_ENTRY_BYTES;
	trials_at = nodes_at + (size_t)nodes * SPINTUNE_BLOB_NODE_BYTES;

	/* First pass: validate without writing anything. */
	for (i = 0; i < count; i++) {
		struct spintune_entry e;
		uint64_t key;

		spintune__decode_entry(entries_at + (size_t)i * SPINTUNE_BLOB_ENTRY_BYTES, &e);
		if ((version != SPINTUNE_BLOB_VERSION_3 && e.trial) ||
		    (version == SPINTUNE_BLOB_VERSION_1 && e.tree))
			return SPINTUNE__REFUSE(why, -EINVAL, "reserved entry field set");
		if (e.trial) {
			const uint8_t *q;

			if (e.trial > trials)
				return SPINTUNE__REFUSE(why, -EINVAL, "an entry names a trial beyond the trials");
			q = trials_at + (size_t)(e.trial - 1u) * SPINTUNE_BLOB_TRIAL_BYTES;
			if (spintune__le16(q) != i)
				return SPINTUNE__REFUSE(why, -EINVAL,
							"an entry and its trial do not name each other");
		}
		if (!spintune_entry_valid(&e))
			return SPINTUNE__REFUSE(why, -EINVAL,
						"an entry breaks a bound (strategy, parameters, flags or wildcards)");
		if (((e.flags & SPINTUNE_ENTRY_FALLBACK) != 0) != (i == count - 1))
			return SPINTUNE__REFUSE(why, -EINVAL, "the fallback entry is not exactly the last");
		key = spintune__key_of(&e);
		if (i > 0 && key == prev_key) {
			/* Another leaf of the same key's tree. */
			if (!e.tree || e.tree != prev_tree)
				return SPINTUNE__REFUSE(why, -EINVAL, "keys not strictly increasing");
		} else {
			if (i > 0 && key < prev_key)
				return SPINTUNE__REFUSE(why, -EINVAL, "keys not strictly increasing");
			if (e.tree) {
				const uint32_t last = spintune__run_end(entries_at, count, i, &e);
				uint32_t used;

				/* Trees follow each other in entry order. */
				if (e.tree - 1u != next_node)
					return SPINTUNE__REFUSE(why, -EINVAL,
								"a context tree does not start after the previous one");
				used = spintune__check_tree(nodes_at, nodes, next_node, i, last);
				if (!used)
					return SPINTUNE__REFUSE(why, -EINVAL,
								"a context tree is malformed (layout, depth, feature, threshold or leaves)");
				next_node += used;
			}
		}
		prev_key = key;
		prev_tree = e.tree;
	}
	if (next_node != nodes)
		return SPINTUNE__REFUSE(why, -EINVAL, "context nodes no tree uses");
	for (i = 0; i < trials; i++) {
		const uint8_t *q = trials_at + (size_t)i * SPINTUNE_BLOB_TRIAL_BYTES;
		const uint32_t at = spintune__le16(q);
		struct spintune_entry of, e;

		/* Strictly increasing entries, each naming this trial back: one
		 * trial per entry, one entry per trial. */
		if (at >= count || (i > 0 && at <= spintune__le16(q - SPINTUNE_BLOB_TRIAL_BYTES)))
			return SPINTUNE__REFUSE(why, -EINVAL, "trials not in increasing entry order");
		spintune__decode_entry(entries_at + (size_t)at * SPINTUNE_BLOB_ENTRY_BYTES, &of);
		if (of.trial != i + 1u)
			return SPINTUNE__REFUSE(why, -EINVAL,
						"an entry and its trial do not name each other");
		if ((of.flags & SPINTUNE_ENTRY_FALLBACK) || of.tree)
			return SPINTUNE__REFUSE(why, -EINVAL,
						"a trial on the fallback entry or a context leaf");
		if (q[2] == 0)
			return SPINTUNE__REFUSE(why, -EINVAL, "a trial share of 0 (1..255 of 256)");
		spintune__decode_trial(q, &of, &e);
		e.trial = 0;
		if (!spintune_entry_valid(&e))
			return SPINTUNE__REFUSE(why, -EINVAL,
						"a trial's wait breaks a bound (strategy or parameters)");
	}

	/* Second pass: decode (into the storage; @table only once it is all done). */
	for (i = 0; i < count; i++)
		spintune__decode_entry(entries_at + (size_t)i * SPINTUNE_BLOB_ENTRY_BYTES,
				       &st->entries[i]);
	for (i = 0; i < nodes; i++)
		spintune__decode_node(nodes_at + (size_t)i * SPINTUNE_BLOB_NODE_BYTES,
				      &st->nodes[i]);
	for (i = 0; i < trials; i++) {
		const uint8_t *q = trials_at + (size_t)i * SPINTUNE_BLOB_TRIAL_BYTES;
		struct spintune_entry *e = &st->entries[count + i];

		spintune__decode_trial(q, &st->entries[spintune__le16(q)], e);
		e->flags = SPINTUNE_ENTRY_TRIAL;
	}
	t.entries = st->entries;
	t.count = count;
	t.version = spintune__le64(p + 16);
	for (i = 0; i < SPINTUNE_DEVICE_NAME_BYTES; i++)
		t.device[i] = (char)p[32 + i];
	t.nodes = nodes ? st->nodes : NULL;
	t.node_count = nodes;
	t.write_opcode_count = writes;
	for (i = 0; i < SPINTUNE_MAX_WRITE_OPCODES; i++)
		t.write_opcodes[i] = version == SPINTUNE_BLOB_VERSION_1 ? 0 :
				     spintune__le32(p + 72 + 4 * i);
	t.index.multiplier = 0;
	t.index.buckets = NULL;
	t.index.slots = NULL;
	t.index.bucket_bits = 0;
	t.index.slot_bits = 0;
	if (st->buckets && st->slots && spintune__index_build(&t, st->buckets, st->slots))
		return SPINTUNE__REFUSE(why, -EINVAL, "no perfect hash of the keys (see policy.h)");
	*table = t;
	return 0;
}

/* The entry and node counts a blob declares, within the limits (the parser
 * refuses larger ones); one entry for a buffer too short for a header. */
static inline void spintune__declared_counts(const void *buf, size_t len, uint32_t *count,
					     uint32_t *nodes, uint32_t *trials)
{
	const uint8_t *p = (const uint8_t *)buf;
	uint32_t version = 0;

	*count = 1;
	*nodes = 0;
	*trials = 0;
	if (p && len >= SPINTUNE_BLOB_HEADER_BYTES) {
		*count = spintune__le32(p + 24);
		version = spintune__le16(p + 4);
	}
	if (version >= SPINTUNE_BLOB_VERSION && version <= SPINTUNE_BLOB_VERSION_3 &&
	    len >= SPINTUNE_BLOB_HEADER_V2_BYTES) {
		*nodes = spintune__le32(p + 64);
		if (version == SPINTUNE_BLOB_VERSION_3)
			*trials = spintune__le32(p + 88);
	}
	if (*count > SPINTUNE_MAX_ENTRIES)
		*count = SPINTUNE_MAX_ENTRIES;
	if (*nodes > SPINTUNE_MAX_NODES)
		*nodes = SPINTUNE_MAX_NODES;
	if (*trials > SPINTUNE_MAX_ENTRIES - *count)
		*trials = SPINTUNE_MAX_ENTRIES - *count;
}

/**
 * spintune_blob_storage_bytes() - storage spintune_table_parse() needs for
 *	a blob, from the counts its header declares.
 * @buf: the blob (any alignment).
 * @len: length of @buf in bytes.
 *
 * Counts above the limits are sized at the limits (the parser refuses
 * them); a buffer too short for a header needs the storage of one entry.
 * A format 3 blob's trials count as entries (each becomes a trial entry).
 *
 * Returns: bytes of storage.
 */
static inline size_t spintune_blob_storage_bytes(const void *buf, size_t len)
{
	uint32_t count, nodes, trials;

	spintune__declared_counts(buf, len, &count, &nodes, &trials);
	return spintune_table_storage_bytes(count + trials, nodes);
}

/**
 * spintune_table_parse() - validate a policy blob into a table with its
 *	context trees and O(1) key index.
 * @buf: the blob (any alignment); only the first @len bytes are read.
 * @len: length of @buf in bytes.
 * @storage: caller-provided buffer (any alignment) that receives the
 *	entries, nodes and index; SPINTUNE_TABLE_STORAGE_WORDS words hold any
 *	blob within the limits, spintune_table_storage_bytes() of the blob's
 *	counts hold that blob.
 * @storage_bytes: size of @storage.
 * @table: receives the table; it points into @storage.
 * @why: NULL, or receives a static English phrase naming the first check
 *	that failed (e.g. "CRC-32 mismatch"); untouched on success.
 *
 * Reads format 1, 2 and 3 blobs. Checks the magic, format version,
 * header, entry and node sizes, reserved fields, write opcodes, the declared
 * total size against @len, the entry count (1..SPINTUNE_MAX_ENTRIES) and
 * node count (0..SPINTUNE_MAX_NODES) against the storage, the CRC-32 of
 * everything after the CRC field, every entry (spintune_entry_valid()),
 * increasing keys (equal only for the leaves of one key's tree), exactly one
 * fallback entry in last place, every context tree (nodes in preorder right
 * after the previous tree's, leaves the key's entries in order, at most
 * SPINTUNE_MAX_CONTEXT_DEPTH nodes on a path, every leaf reachable) and the
 * device name's terminator, and every A/B trial (format 3: at most one per
 * non-fallback entry without context, the entry and its trial naming each
 * other, trials in entry order, share 1..255, the trial's wait as
 * spintune_entry_valid() requires); then builds the key index and places
 * the trial entries after the entries. Nothing is written to
 * @table unless every check passed. Never sleeps; O(n) plus the index
 * build, which scans the keys once per bucket of two or more keys.
 *
 * Returns: 0 on success; -EINVAL for a malformed blob (bad magic, sizes,
 * flags, entries, trees or order); -EPROTONOSUPPORT for an unknown format
 * version; -EMSGSIZE when @len is shorter than the blob declares; -E2BIG when
 * a count exceeds its limit or @storage; -EBADMSG on a CRC mismatch.
 */
static inline int spintune_table_parse(const void *buf, size_t len, void *storage,
				       size_t storage_bytes, struct spintune_table *table,
				       const char **why)
{
	uint8_t *at = (uint8_t *)storage;
	struct spintune__storage st;
	uint32_t count, nodes, trials, slot_bits;

	if (!buf || !at || !table)
		return SPINTUNE__REFUSE(why, -EINVAL, "no buffer");
	if (storage_bytes < spintune_blob_storage_bytes(buf, len))
		return SPINTUNE__REFUSE(why, -E2BIG, "more entries than the storage holds");
	/* The storage is carved for the declared counts; the parser checks them. */
	spintune__declared_counts(buf, len, &count, &nodes, &trials);
	at += (8 - ((uintptr_t)at & 7)) & 7;
	slot_bits = spintune__slot_bits(count); /* the index is of the entries alone */
	st.entries = (struct spintune_entry *)(void *)at;
	st.entry_capacity = count + trials;
	at += (size_t)(count + trials) * sizeof(struct spintune_entry);
	at += (8 - ((uintptr_t)at & 7)) & 7;
	st.nodes = (struct spintune_node *)(void *)at;
	st.node_capacity = nodes;
	at += (size_t)nodes * sizeof(struct spintune_node);
	st.buckets = (uint16_t *)(void *)at;
	at += 2 * ((size_t)1 << spintune__bucket_bits(slot_bits));
	st.slots = (uint16_t *)(void *)at;
	return spintune__parse(buf, len, &st, table, why);
}

/**
 * spintune_blob_parse_why() - spintune_blob_parse(), saying why it refused.
 * @buf, @len, @storage, @capacity, @table: as for spintune_blob_parse().
 * @why: as for spintune_table_parse().
 *
 * Same checks and return values as spintune_blob_parse(); for drivers that
 * log the reason of a refusal. Never sleeps.
 *
 * Returns: as spintune_blob_parse().
 */
static inline int spintune_blob_parse_why(const void *buf, size_t len,
					  struct spintune_entry *storage,
					  uint32_t capacity,
					  struct spintune_table *table,
					  const char **why)
{
	struct spintune__storage st = { storage, capacity, NULL, 0, NULL, NULL };

	return spintune__parse(buf, len, &st, table, why);
}

/**
 * spintune_blob_parse() - validate a policy blob into entries alone.
 * @buf: the blob (any alignment); only the first @len bytes are read.
 * @len: length of @buf in bytes.
 * @storage: caller-provided array that receives the decoded entries.
 * @capacity: number of entries @storage can hold.
 * @table: receives the table; its @entries point into @storage.
 *
 * The interface of format 1, kept for drivers written against it: the same
 * checks as spintune_table_parse(), but there is no room for context nodes
 * (a blob with context leaves is refused with -E2BIG) or a key index
 * (lookups binary-search, O(log n)); @capacity must also hold a format 3
 * blob's trial entries. Nothing is written to @storage or
 * @table unless every check passed. Never sleeps.
 *
 * Returns: as spintune_table_parse().
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
