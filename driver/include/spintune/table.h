/* SPDX-License-Identifier: (GPL-2.0 OR MIT) */
/*
 * spintune policy table: the wait strategy a driver should use for each
 * (cpu class, opcode, size class) of one device, optionally refined by the
 * command's context (previous completion, time since the last write,
 * commands in flight, length): the types, the O(1) lookup and the context
 * state. The blob parser is blob.h, A/B trials ab.h; policy.h includes all
 * three.
 *
 * Shared by kernel drivers, user-space drivers and the spintune tools, so
 * written with the types of <linux/types.h> (__u8 ... __u64, which are the
 * kernel's u8 ... u64). No libc, no allocation, no global state: every
 * function only touches the memory it is given. Lookup may be called from
 * any context, including hard-IRQ context; it never sleeps.
 *
 *	struct spintune_ctx ctx = {0};        // per device
 *	struct spintune_features f;
 *
 *	issue_ns = now_ns();
 *	spintune_ctx_issue(&ctx, issue_ns, bytes, &f);
 *	e = spintune_lookup_ctx(&table, cpu_class, opcode, &f);  // O(1) + depth <= 3
 *	... wait as e says (wait.h) ...
 *	spintune_ctx_done(&ctx, issue_ns, now_ns(), spintune_is_write(&table, opcode));
 */
#ifndef SPINTUNE_TABLE_H
#define SPINTUNE_TABLE_H

#include <linux/types.h>
#ifdef __KERNEL__
#include <linux/atomic.h>
#include <linux/bitops.h>
#include <linux/compiler.h>
#include <linux/errno.h>
#else
#include "spintune/uspace.h"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The few primitives that differ between the kernel and user space
 * (spintune/uspace.h has the user-space ones): a 32-bit counter
 * incremented from several CPUs, the bit width of a 64-bit value, the
 * once-accesses of fields other CPUs update, and the mark of generated
 * tables that a translation unit may not use.
 */
#ifdef __KERNEL__
typedef atomic_t spintune_counter_t;
#define spintune__counter_fetch_inc(c) ((__u32)atomic_fetch_inc_relaxed(c))
#define spintune__counter_dec(c) atomic_dec(c)
#define spintune__counter_set(c, v) atomic_set((c), (v))
#define spintune__fls64(x) fls64(x)
#define SPINTUNE__READ_ONCE(x) READ_ONCE(x)
#define SPINTUNE__WRITE_ONCE(x, v) WRITE_ONCE(x, v)
#define SPINTUNE_MAYBE_UNUSED __maybe_unused
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
/* What a wait in atomic context spins at most (spintune_wait_atomic()), and
 * the bound of every entry of a device registered as waiting only there.
 */
#ifndef SPINTUNE_MAX_ATOMIC_SPIN_NS
#define SPINTUNE_MAX_ATOMIC_SPIN_NS 100000u /* 100 us */
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
 * incumbent's wait of an A/B trial, see spintune_ab_pick().
 */
#define SPINTUNE_ENTRY_TRIAL 0x02u
#define SPINTUNE_CHILD_LEAF 0x8000u   /* node child: an entry index, not a node */
/* since_write_ns of a device that has completed no write yet. */
#define SPINTUNE_NO_WRITE_YET (~(__u64)0)

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
	__u8 cpu_class;
	__u8 size_class;
	__u8 strategy;
	__u8 flags;
	__u32 opcode;
	__u32 spin_ns;
	__u32 sleep_ns;
	__u32 poll_interval_ns;
	__u16 tree;
	__u16 trial;
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
	__u8 feature;
	__u8 reserved;
	__u16 left;
	__u16 right;
	__u16 reserved2;
	__u64 threshold;
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
	__u64 multiplier;
	const __u16 *buckets;
	const __u16 *slots;
	__u8 bucket_bits;
	__u8 slot_bits;
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
	__u32 count;
	__u64 version;
	char device[SPINTUNE_DEVICE_NAME_BYTES];
	const struct spintune_node *nodes;
	__u32 node_count;
	__u32 write_opcode_count;
	__u32 write_opcodes[SPINTUNE_MAX_WRITE_OPCODES];
	struct spintune_index index;
};

/**
 * struct spintune_features - one command's context, by enum spintune_feature.
 * @value: the features.
 */
struct spintune_features {
	__u64 value[SPINTUNE_FEATURE_COUNT];
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
	__u64 prev_wait_ns;
	__u64 last_write_done_ns;
	spintune_counter_t inflight;
	__u32 wrote;
};

/**
 * spintune_size_class() - size class of a transfer length.
 * @bytes: transfer length in bytes.
 *
 * Returns: the bit width of @bytes: 0 for 0, 1 for 1, 10 for 512..1023.
 */
static inline __u8 spintune_size_class(__u64 bytes)
{
	return (__u8)spintune__fls64(bytes);
}

static inline __u64 spintune__entry_key(__u8 cpu_class, __u32 opcode,
					   __u8 size_class)
{
	return ((__u64)cpu_class << 40) | ((__u64)opcode << 8) | size_class;
}

static inline __u64 spintune__key_of(const struct spintune_entry *e)
{
	return spintune__entry_key(e->cpu_class, e->opcode, e->size_class);
}

/* The entry of @key (a key's first entry), else the fallback. */
static inline const struct spintune_entry *
spintune__find(const struct spintune_table *table, __u64 key)
{
	const struct spintune_index *ix = &table->index;
	const struct spintune_entry *fallback = &table->entries[table->count - 1];
	const struct spintune_entry *e;
	__u32 lo = 0, hi = table->count - 1;

	if (ix->multiplier) {
		const __u64 h = key * ix->multiplier;
		const __u32 bucket = (__u32)(h >> (64 - ix->bucket_bits));
		const __u32 base =
			(__u32)(h >> (64 - ix->bucket_bits - ix->slot_bits));

		e = &table->entries[ix->slots[(base + ix->buckets[bucket]) &
					      ((1u << ix->slot_bits) - 1)]];
		return spintune__key_of(e) == key ? e : fallback;
	}
	while (lo < hi) { /* no index: binary search */
		const __u32 mid = lo + (hi - lo) / 2;
		const __u64 k = spintune__key_of(&table->entries[mid]);

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
	       const __u64 *f)
{
	__u32 depth, child;

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
spintune_lookup_ctx(const struct spintune_table *table, __u8 cpu_class,
		    __u32 opcode, const struct spintune_features *f)
{
	const __u64 key = spintune__entry_key(
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
spintune_lookup(const struct spintune_table *table, __u8 cpu_class,
		__u32 opcode, __u64 bytes)
{
	const struct spintune_entry *e = spintune__find(
		table, spintune__entry_key(cpu_class, opcode, spintune_size_class(bytes)));
	__u64 f[SPINTUNE_FEATURE_COUNT];

	if (!e->tree)
		return e;
	f[SPINTUNE_FEATURE_PREV_WAIT_NS] = 0;
	f[SPINTUNE_FEATURE_SINCE_WRITE_NS] = SPINTUNE_NO_WRITE_YET;
	f[SPINTUNE_FEATURE_INFLIGHT] = 0;
	f[SPINTUNE_FEATURE_BYTES] = bytes;
	return spintune__leaf(table, e, f);
}

/**
 * spintune_is_write() - whether a command of @opcode is a write for @table.
 * @table: the table.
 * @opcode: the command's opcode.
 *
 * Returns: true when @opcode is one of the table's write opcodes (the block
 * layer's REQ_OP_WRITE, MMC CMD24/CMD25 unless the table says otherwise).
 */
static inline bool spintune_is_write(const struct spintune_table *table, __u32 opcode)
{
	__u32 i;

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
static inline void spintune_ctx_issue(struct spintune_ctx *ctx, __u64 now_ns,
				      __u64 bytes, struct spintune_features *f)
{
	const __u64 last_write = SPINTUNE__READ_ONCE(ctx->last_write_done_ns);

	f->value[SPINTUNE_FEATURE_PREV_WAIT_NS] = SPINTUNE__READ_ONCE(ctx->prev_wait_ns);
	f->value[SPINTUNE_FEATURE_SINCE_WRITE_NS] =
		!SPINTUNE__READ_ONCE(ctx->wrote) ? SPINTUNE_NO_WRITE_YET :
		now_ns > last_write ? now_ns - last_write : 0;
	f->value[SPINTUNE_FEATURE_INFLIGHT] = spintune__counter_fetch_inc(&ctx->inflight);
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
static inline void spintune_ctx_done(struct spintune_ctx *ctx, __u64 issue_ns,
				     __u64 done_ns, bool write)
{
	SPINTUNE__WRITE_ONCE(ctx->prev_wait_ns, done_ns > issue_ns ? done_ns - issue_ns : 0);
	if (write) {
		SPINTUNE__WRITE_ONCE(ctx->last_write_done_ns, done_ns);
		SPINTUNE__WRITE_ONCE(ctx->wrote, 1);
	}
	spintune__counter_dec(&ctx->inflight);
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

/**
 * spintune_entry_atomic_ok() - whether an atomic wait can do what an entry
 *	asks.
 * @e: a valid entry (spintune_entry_valid()).
 *
 * Returns: true for IRQ, and for SPIN and SPIN_THEN_IRQ with a spin of at
 * most SPINTUNE_MAX_ATOMIC_SPIN_NS; false for the sleeping strategies and
 * longer spins (spintune_wait_atomic() would wait by the IRQ instead).
 */
static inline bool spintune_entry_atomic_ok(const struct spintune_entry *e)
{
	switch (e->strategy) {
	case SPINTUNE_IRQ:
		return true;
	case SPINTUNE_SPIN:
	case SPINTUNE_SPIN_THEN_IRQ:
		return e->spin_ns <= SPINTUNE_MAX_ATOMIC_SPIN_NS;
	default:
		return false;
	}
}

#ifdef __cplusplus
}
#endif

#endif /* SPINTUNE_TABLE_H */
