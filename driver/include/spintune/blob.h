/* SPDX-License-Identifier: (GPL-2.0 OR MIT) */
/*
 * spintune blob parser: validates the binary blob the spintune agent
 * writes (docs/policy-format.md) into a table of table.h, with its context
 * trees, A/B trials and O(1) key index. Every field is checked and every
 * count bounded before anything is written; a refused blob changes
 * nothing and the parser names its reason. Never sleeps; O(n) plus the
 * index build.
 *
 *	static __u64 storage[SPINTUNE_TABLE_STORAGE_WORDS];
 *	struct spintune_table table;
 *	const char *why;
 *
 *	rc = spintune_table_parse(blob, len, storage, sizeof(storage), &table, &why);
 */
#ifndef SPINTUNE_BLOB_H
#define SPINTUNE_BLOB_H

#include "spintune/table.h"
#ifdef __KERNEL__
#include <linux/crc32.h>
#include <asm/unaligned.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

/**
 * spintune_crc32() - CRC-32 (IEEE 802.3, as zlib's crc32()) of a buffer.
 * @crc: previous value (0 to start).
 * @buf: data.
 * @len: length of @buf in bytes.
 *
 * In the kernel, crc32_le() (lib/crc32.c; spintune selects CRC32) with
 * zlib's pre- and post-inversion; in user space a nibble table.
 *
 * Returns: the updated CRC.
 */
#ifdef __KERNEL__
static inline __u32 spintune_crc32(__u32 crc, const __u8 *buf, size_t len)
{
	return ~crc32_le(~crc, buf, len);
}

static inline __u32 spintune__le16(const __u8 *p)
{
	return get_unaligned_le16(p);
}

static inline __u32 spintune__le32(const __u8 *p)
{
	return get_unaligned_le32(p);
}

static inline __u64 spintune__le64(const __u8 *p)
{
	return get_unaligned_le64(p);
}
#else
static inline __u32 spintune_crc32(__u32 crc, const __u8 *buf, size_t len)
{
	static const __u32 nibble[16] = {
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

static inline __u32 spintune__le16(const __u8 *p)
{
	return (__u32)p[0] | ((__u32)p[1] << 8);
}

static inline __u32 spintune__le32(const __u8 *p)
{
	return (__u32)p[0] | ((__u32)p[1] << 8) | ((__u32)p[2] << 16) |
	       ((__u32)p[3] << 24);
}

static inline __u64 spintune__le64(const __u8 *p)
{
	return (__u64)spintune__le32(p) | ((__u64)spintune__le32(p + 4) << 32);
}
#endif

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
static inline __u32 spintune__slot_bits(__u32 keys)
{
	__u32 bits = 1;

	while ((1u << bits) < 2 * keys)
		bits++;
	return bits;
}

static inline __u32 spintune__bucket_bits(__u32 slot_bits)
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
static inline size_t spintune_table_storage_bytes(__u32 entries, __u32 nodes)
{
	const __u32 slot_bits = spintune__slot_bits(entries);

	return 8 + (size_t)entries * sizeof(struct spintune_entry) +
	       (size_t)nodes * sizeof(struct spintune_node) +
	       2 * ((size_t)1 << spintune__bucket_bits(slot_bits)) +
	       2 * ((size_t)1 << slot_bits) + 8;
}

/* Words (__u64) of storage enough for any blob within the limits. */
#define SPINTUNE_TABLE_STORAGE_WORDS                                         \
	((8 + SPINTUNE_MAX_ENTRIES * 24u + SPINTUNE_MAX_NODES * 16u +        \
	  12u * SPINTUNE_MAX_ENTRIES + 16u) / 8u + 1u)

static inline __u64 spintune__index_multiplier(__u32 seed)
{
	return (0x9E3779B97F4A7C15ull ^ ((__u64)seed * 0xBF58476D1CE4E5B9ull)) | 1u;
}

/* One seed's attempt at a perfect hash of the keys of @t (index fields
 * already sized); false when some bucket cannot be placed.
 */
static inline bool spintune__index_try(struct spintune_table *t, __u16 *buckets,
				       __u16 *slots, __u64 multiplier)
{
	const __u32 bbits = t->index.bucket_bits, sbits = t->index.slot_bits;
	const __u32 nbuckets = 1u << bbits, mask = (1u << sbits) - 1;
	__u32 i, b, size, largest = 0;

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
		b = (__u32)(SPINTUNE__HASH(i) >> (64 - bbits));
		if (++buckets[b] > SPINTUNE__INDEX_MAX_BUCKET)
			return false;
		if (buckets[b] > largest)
			largest = buckets[b];
	}
	/* Largest buckets first: each gets the first displacement at which all
	 * of its keys land on free slots.
	 */
	for (size = largest; size >= 1; size--) {
		for (b = 0; b < nbuckets; b++) {
			__u32 base[SPINTUNE__INDEX_MAX_BUCKET];
			__u16 entry[SPINTUNE__INDEX_MAX_BUCKET];
			__u32 n = 0, d, k;

			if (buckets[b] != size)
				continue;
			for (i = 0; i + 1 < t->count && n < size; i++) {
				const __u64 h = SPINTUNE__HASH(i);

				if (!SPINTUNE__FIRST(i) || (__u32)(h >> (64 - bbits)) != b)
					continue;
				base[n] = (__u32)(h >> (64 - bbits - sbits));
				entry[n++] = (__u16)i;
			}
			for (d = 0; d <= mask; d++) {
				for (k = 0; k < n; k++) {
					const __u32 slot = (base[k] + d) & mask;
					__u32 j;

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
			buckets[b] = (__u16)(SPINTUNE__PLACED | d);
		}
	}
#undef SPINTUNE__HASH
#undef SPINTUNE__FIRST
	for (b = 0; b < nbuckets; b++)
		buckets[b] &= (__u16)~SPINTUNE__PLACED;
	for (i = 0; i <= mask; i++) {
		if (slots[i] == SPINTUNE__EMPTY)
			slots[i] = (__u16)(t->count - 1);
	}
	return true;
}

/* Builds @t's key index in @buckets and @slots (sized as
 * spintune_table_storage_bytes() says); -EINVAL when no multiplier gives a
 * perfect hash (not seen for any table the tools write: they run this).
 */
static inline int spintune__index_build(struct spintune_table *t, __u16 *buckets,
					__u16 *slots)
{
	__u32 seed;

	t->index.slot_bits = (__u8)spintune__slot_bits(t->count);
	t->index.bucket_bits = (__u8)spintune__bucket_bits(t->index.slot_bits);
	for (seed = 0; seed < SPINTUNE__INDEX_SEEDS; seed++) {
		const __u64 m = spintune__index_multiplier(seed);

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
	__u32 entry_capacity;
	struct spintune_node *nodes;
	__u32 node_capacity;
	__u16 *buckets; /* with @slots: build the key index */
	__u16 *slots;
};

static inline void spintune__decode_entry(const __u8 *q, struct spintune_entry *e)
{
	e->cpu_class = q[0];
	e->size_class = q[1];
	e->strategy = q[2];
	e->flags = q[3];
	e->opcode = spintune__le32(q + 4);
	e->spin_ns = spintune__le32(q + 8);
	e->sleep_ns = spintune__le32(q + 12);
	e->poll_interval_ns = spintune__le32(q + 16);
	e->tree = (__u16)spintune__le16(q + 20);
	e->trial = (__u16)spintune__le16(q + 22);
}

/* The trial entry of blob trial @q for the entry @of: its key, the trial's
 * wait, the share in @trial.
 */
static inline void spintune__decode_trial(const __u8 *q, const struct spintune_entry *of,
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

static inline void spintune__decode_node(const __u8 *q, struct spintune_node *n)
{
	n->feature = q[0];
	n->reserved = q[1];
	n->left = (__u16)spintune__le16(q + 2);
	n->right = (__u16)spintune__le16(q + 4);
	n->reserved2 = (__u16)spintune__le16(q + 6);
	n->threshold = spintune__le64(q + 8);
}

/* One node on the path of the tree check, with the box of the commands
 * that reach it.
 */
struct spintune__frame {
	struct spintune_node node;
	__u32 side; /* children checked */
	__u64 lo[SPINTUNE_FEATURE_COUNT];
	__u64 hi[SPINTUNE_FEATURE_COUNT]; /* exclusive; with has_hi */
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
static inline __u32 spintune__check_tree(const __u8 *nodes_at, __u32 node_count,
					    __u32 root, __u32 first, __u32 last)
{
	struct spintune__frame stack[SPINTUNE_MAX_CONTEXT_DEPTH];
	__u32 depth = 0, next_node = root, next_leaf = first, f;
	__u32 child = root; /* the child being entered */
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
static inline __u32 spintune__run_end(const __u8 *entries_at, __u32 count,
					 __u32 first, const struct spintune_entry *e)
{
	__u32 last = first + 1;

	for (; last < count; last++) {
		const __u8 *q = entries_at + (size_t)last * SPINTUNE_BLOB_ENTRY_BYTES;

		if (q[0] != e->cpu_class || q[1] != e->size_class ||
		    spintune__le32(q + 4) != e->opcode)
			break;
	}
	return last;
}

/* The validating parser behind spintune_table_parse() and
 * spintune_blob_parse().
 */
static inline int spintune__parse(const void *buf, size_t len,
				  const struct spintune__storage *st,
				  struct spintune_table *table, const char **why)
{
	const __u8 *p = (const __u8 *)buf;
	const __u8 *entries_at, *nodes_at, *trials_at;
	struct spintune_table t;
	__u32 version, header, total, count, nodes = 0, writes = 0, trials = 0, i;
	__u32 next_node = 0;
	__u64 prev_key = 0;
	__u16 prev_tree = 0;

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
			const __u32 op = spintune__le32(p + 72 + 4 * i);

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
		__u64 key;

		spintune__decode_entry(entries_at + (size_t)i * SPINTUNE_BLOB_ENTRY_BYTES, &e);
		if ((version != SPINTUNE_BLOB_VERSION_3 && e.trial) ||
		    (version == SPINTUNE_BLOB_VERSION_1 && e.tree))
			return SPINTUNE__REFUSE(why, -EINVAL, "reserved entry field set");
		if (e.trial) {
			const __u8 *q;

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
				const __u32 last = spintune__run_end(entries_at, count, i, &e);
				__u32 used;

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
		const __u8 *q = trials_at + (size_t)i * SPINTUNE_BLOB_TRIAL_BYTES;
		const __u32 at = spintune__le16(q);
		struct spintune_entry of, e;

		/* Strictly increasing entries, each naming this trial back: one
		 * trial per entry, one entry per trial.
		 */
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
		const __u8 *q = trials_at + (size_t)i * SPINTUNE_BLOB_TRIAL_BYTES;
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
 * refuses larger ones); one entry for a buffer too short for a header.
 */
static inline void spintune__declared_counts(const void *buf, size_t len, __u32 *count,
					     __u32 *nodes, __u32 *trials)
{
	const __u8 *p = (const __u8 *)buf;
	__u32 version = 0;

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
	__u32 count, nodes, trials;

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
	__u8 *at = (__u8 *)storage;
	struct spintune__storage st;
	__u32 count, nodes, trials, slot_bits;

	if (!buf || !at || !table)
		return SPINTUNE__REFUSE(why, -EINVAL, "no buffer");
	if (storage_bytes < spintune_blob_storage_bytes(buf, len))
		return SPINTUNE__REFUSE(why, -E2BIG, "more entries than the storage holds");
	/* The storage is carved for the declared counts; the parser checks them. */
	spintune__declared_counts(buf, len, &count, &nodes, &trials);
	at += (8 - ((unsigned long)at & 7)) & 7;
	slot_bits = spintune__slot_bits(count); /* the index is of the entries alone */
	st.entries = (struct spintune_entry *)(void *)at;
	st.entry_capacity = count + trials;
	at += (size_t)(count + trials) * sizeof(struct spintune_entry);
	at += (8 - ((unsigned long)at & 7)) & 7;
	st.nodes = (struct spintune_node *)(void *)at;
	st.node_capacity = nodes;
	at += (size_t)nodes * sizeof(struct spintune_node);
	st.buckets = (__u16 *)(void *)at;
	at += 2 * ((size_t)1 << spintune__bucket_bits(slot_bits));
	st.slots = (__u16 *)(void *)at;
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
					  __u32 capacity,
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
				      __u32 capacity, struct spintune_table *table)
{
	return spintune_blob_parse_why(buf, len, storage, capacity, table, NULL);
}

/**
 * spintune_table_atomic_why() - whether every wait of a parsed table can
 *	be done in atomic context.
 * @table: a table from spintune_table_parse() (or a generated header).
 * @why: NULL, or receives why not; untouched when every wait can.
 *
 * The bound of a device whose waits all run in atomic context (a driver
 * that registers it so with spintune.ko): every entry and every A/B trial
 * entry must be spintune_entry_atomic_ok(): no sleeping strategy, no spin
 * above SPINTUNE_MAX_ATOMIC_SPIN_NS. Never sleeps; O(n).
 *
 * Returns: 0, or -EINVAL.
 */
static inline int spintune_table_atomic_why(const struct spintune_table *table,
					    const char **why)
{
	__u32 i;

	for (i = 0; i < table->count; i++) {
		const struct spintune_entry *e = &table->entries[i];

		if (!spintune_entry_atomic_ok(e) ||
		    (e->trial &&
		     !spintune_entry_atomic_ok(&table->entries[table->count + e->trial - 1u])))
			return SPINTUNE__REFUSE(why, -EINVAL,
						"an entry sleeps or spins beyond SPINTUNE_MAX_ATOMIC_SPIN_NS, and the device waits in atomic context");
	}
	return 0;
}

#ifdef __cplusplus
}
#endif

#endif /* SPINTUNE_BLOB_H */
