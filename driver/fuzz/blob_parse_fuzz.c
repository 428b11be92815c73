/*
 * libFuzzer target: spintune_blob_parse() on arbitrary bytes must never
 * crash or read outside the buffer (AddressSanitizer checks the latter; the
 * input is copied to an exact-size heap buffer so any overread is caught),
 * and whatever it accepts must satisfy the table's invariants.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "spintune/policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct spintune_entry storage[SPINTUNE_MAX_ENTRIES];
	struct spintune_table table;
	uint8_t *copy = (uint8_t *)malloc(size ? size : 1);
	uint32_t i;

	if (!copy)
		return 0;
	memcpy(copy, data, size);
	if (spintune_blob_parse(copy, size, storage, SPINTUNE_MAX_ENTRIES, &table) == 0) {
		if (table.count == 0 || !(table.entries[table.count - 1].flags & SPINTUNE_ENTRY_FALLBACK))
			abort();
		for (i = 0; i < table.count; i++) {
			if (!spintune_entry_valid(&table.entries[i]))
				abort();
		}
		/* Lookups on an accepted table stay inside it. */
		(void)spintune_lookup(&table, 0, 0, 0);
		(void)spintune_lookup(&table, data[0 % size], 23, 4096);
	}
	free(copy);
	return 0;
}
