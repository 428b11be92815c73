/*
 * libFuzzer target: the blob parsers (spintune_table_parse() and the entry-
 * only spintune_blob_parse()) on arbitrary bytes must never crash or read
 * outside the buffer (AddressSanitizer checks the latter; the input is
 * copied to an exact-size heap buffer so any overread is caught), and
 * whatever they accept must satisfy the table's invariants: lookups, with
 * and without context, stay inside the table, and an A/B pick returns
 * the entry or its own trial entry (same key, a valid wait, share 1..255).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "spintune/policy.h"

static void check_table(const struct spintune_table *t, const uint8_t *data, size_t size)
{
	const struct spintune_entry *first = t->entries, *end = t->entries + t->count;
	const struct spintune_entry *e;
	struct spintune_features f;
	uint32_t i, trials;

	if (t->count == 0 || !(t->entries[t->count - 1].flags & SPINTUNE_ENTRY_FALLBACK))
		abort();
	for (i = 0; i < t->count; i++) {
		if (!spintune_entry_valid(&t->entries[i]))
			abort();
		if (t->entries[i].tree > t->node_count)
			abort();
	}
	/* Every key finds itself (or a leaf of its own key); others the fallback. */
	for (i = 0; i + 1 < t->count; i++) {
		const struct spintune_entry *k = &t->entries[i];

		e = spintune_lookup(t, k->cpu_class, k->opcode,
				    k->size_class ? 1ull << (k->size_class - 1) : 0);
		if (e < first || e >= end || spintune__key_of(e) != spintune__key_of(k))
			abort();
	}
	for (i = 0; i + 8 <= size && i < 256; i += 8) {
		memcpy(f.value, data + i, 8);
		f.value[1] = f.value[0] * 3;
		f.value[2] = data[i] % 8;
		f.value[3] = f.value[0] >> (data[i] % 64);
		e = spintune_lookup_ctx(t, data[i] % 4, data[i + 1], &f);
		if (e < first || e >= end)
			abort();
	}
	e = spintune_lookup(t, size ? data[0] : 0, 23, 4096);
	if (e < first || e >= end)
		abort();
	trials = spintune_trial_count(t);
	for (i = 0; i < trials; i++) {
		const struct spintune_entry *x = &t->entries[t->count + i];
		struct spintune_entry plain = *x;

		plain.flags = 0;
		plain.trial = 0;
		if (!(x->flags & SPINTUNE_ENTRY_TRIAL) || x->trial == 0 || x->trial > 255 ||
		    !spintune_entry_valid(&plain))
			abort();
	}
	for (i = 0; i + 1 < t->count; i++) {
		struct spintune_ab ab;
		const struct spintune_entry *k = &t->entries[i];
		int n;

		spintune_ab_init(&ab, t);
		for (n = 0; n < 4; n++) {
			e = spintune_ab_pick(t, k, &ab);
			if (e != k && (e < end || e >= end + trials ||
				       spintune__key_of(e) != spintune__key_of(k)))
				abort();
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint64_t storage[SPINTUNE_TABLE_STORAGE_WORDS];
	static struct spintune_entry entries[SPINTUNE_MAX_ENTRIES];
	struct spintune_table table;
	uint8_t *copy = (uint8_t *)malloc(size ? size : 1);

	if (!copy)
		return 0;
	memcpy(copy, data, size);
	if (spintune_table_parse(copy, size, storage, sizeof(storage), &table, NULL) == 0) {
		check_table(&table, data, size);
		if (table.index.multiplier == 0)
			abort(); /* an accepted table always has its index */
	}
	if (spintune_blob_parse(copy, size, entries, SPINTUNE_MAX_ENTRIES, &table) == 0) {
		check_table(&table, data, size);
		if (table.node_count != 0)
			abort(); /* no room for nodes: a tree is refused */
	}
	free(copy);
	return 0;
}
