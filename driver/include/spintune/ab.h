/* SPDX-License-Identifier: (GPL-2.0 OR MIT) */
/*
 * spintune A/B trials (docs/verification.md): a format 3 table may carry,
 * for an entry, the incumbent's wait and a share; spintune_ab_pick() sends
 * that seeded share of the commands to the incumbent's wait, and a driver
 * that reports outcomes reports each arm apart:
 *
 *	struct spintune_ab ab;                 // per device, per table
 *	spintune_ab_init(&ab, &table);
 *	e = spintune_ab_pick(&table, spintune_lookup_ctx(...), &ab);
 *	arm = spintune_entry_is_incumbent(e);  // 0: table arm, 1: incumbent
 */
#ifndef SPINTUNE_AB_H
#define SPINTUNE_AB_H

#include "spintune/table.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * struct spintune_ab - a device's A/B arm chooser.
 * @seed: from the table's version (spintune_ab_init()).
 * @counter: commands that met a trial so far (mod 2^32).
 *
 * One per device and table; zero-initialize or spintune_ab_init(). The
 * counter is incremented atomically (atomic_t in the kernel), so callers on
 * several CPUs each get a distinct draw.
 */
struct spintune_ab {
	__u64 seed;
	spintune_counter_t counter;
};

/* SplitMix64's finalizer: a bijective mix of a 64-bit counter. */
static inline __u64 spintune__mix64(__u64 z)
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
	spintune__counter_set(&ab->counter, 0);
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
	__u64 n;

	if (!e->trial || (e->flags & SPINTUNE_ENTRY_TRIAL))
		return e;
	incumbent = &table->entries[table->count + e->trial - 1u];
	n = spintune__counter_fetch_inc(&ab->counter);
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
static inline __u32 spintune_trial_count(const struct spintune_table *table)
{
	__u32 i, n = 0;

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

#ifdef __cplusplus
}
#endif

#endif /* SPINTUNE_AB_H */
