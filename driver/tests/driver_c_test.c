/*
 * The driver headers compiled and exercised as C (gnu11, -Wall -Wextra
 * -Werror): parse a (format 1) blob with both interfaces, look entries up
 * with and without context, keep a device's context state, wait with a
 * fake clock, and publish/snapshot through the shared-memory seqlock.
 */
#include <stdio.h>
#include <string.h>

static unsigned long long fake_now;
#define SPINTUNE_NOW_NS() (fake_now += 100)
#define SPINTUNE_CPU_RELAX() ((void)0)
#define SPINTUNE_SLEEP_NS(ns) (fake_now += (ns))
#define SPINTUNE_DELAY_NS(ns) (fake_now += (ns))

#include "spintune/policy.h"
#include "spintune/shm.h"
#include "spintune/wait.h"

#define CHECK(cond)                                                    \
	do {                                                           \
		if (!(cond)) {                                         \
			fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, #cond); \
			return 1;                                      \
		}                                                      \
	} while (0)

static void put32(unsigned char *p, unsigned v)
{
	p[0] = v & 0xff;
	p[1] = (v >> 8) & 0xff;
	p[2] = (v >> 16) & 0xff;
	p[3] = (v >> 24) & 0xff;
}

/* A two-entry blob: opcode 23 SPIN_THEN_IRQ(5 us) on class 0, and IRQ as the fallback. */
static unsigned build(unsigned char *b)
{
	unsigned char *e;

	memset(b, 0, 64 + 2 * 24);
	put32(b, SPINTUNE_BLOB_MAGIC);
	b[4] = 1;
	b[6] = 64;
	put32(b + 8, 64 + 2 * 24);
	put32(b + 16, 3);
	put32(b + 24, 2);
	b[28] = 24;
	memcpy(b + 32, "mmc0", 4);
	e = b + 64;
	e[0] = 0;
	e[1] = 0;
	e[2] = SPINTUNE_SPIN_THEN_IRQ;
	put32(e + 4, 23);
	put32(e + 8, 5000);
	e = b + 88;
	e[0] = 0xff;
	e[1] = 0xff;
	e[2] = SPINTUNE_IRQ;
	e[3] = SPINTUNE_ENTRY_FALLBACK;
	put32(e + 4, 0xffffffffu);
	put32(b + 12, spintune_crc32(0, b + 16, 64 + 2 * 24 - 16));
	return 64 + 2 * 24;
}

static unsigned long long done_at;
static unsigned read_status(int reg)
{
	(void)reg;
	return fake_now >= done_at;
}

int main(void)
{
	unsigned char blob[112];
	const unsigned len = build(blob);
	struct spintune_entry storage[4];
	struct spintune_table table;
	const struct spintune_entry *e;
	struct spintune_wait_stats stats = {0};
	unsigned val = 0;
	static unsigned long long region[(SPINTUNE_SHM_HEADER_BYTES + 256) / 8];
	struct spintune_shm *shm = (struct spintune_shm *)region;
	unsigned char copy[256];
	unsigned copied = 0, seq = 0;

	CHECK(spintune_blob_parse(blob, len, storage, 4, &table) == 0);
	CHECK(table.count == 2 && table.version == 3 && strcmp(table.device, "mmc0") == 0);
	e = spintune_lookup(&table, 0, 23, 0);
	CHECK(e->strategy == SPINTUNE_SPIN_THEN_IRQ && e->spin_ns == 5000);
	CHECK(spintune_lookup(&table, 0, 18, 4096)->flags == SPINTUNE_ENTRY_FALLBACK);

	/* The same blob into a table with its key index, and the context helpers. */
	{
		static uint64_t words[SPINTUNE_TABLE_STORAGE_WORDS];
		struct spintune_table indexed;
		struct spintune_ctx ctx = {0};
		struct spintune_features f;
		const char *why = NULL;

		CHECK(spintune_blob_storage_bytes(blob, len) <= sizeof(words));
		CHECK(spintune_table_parse(blob, len, words, sizeof(words), &indexed, &why) == 0);
		CHECK(indexed.index.multiplier != 0 && indexed.write_opcode_count == 0);
		spintune_ctx_issue(&ctx, 1000, 0, &f);
		CHECK(f.value[SPINTUNE_FEATURE_SINCE_WRITE_NS] == SPINTUNE_NO_WRITE_YET);
		CHECK(spintune_lookup_ctx(&indexed, 0, 23, &f)->spin_ns == 5000);
		spintune_ctx_done(&ctx, 1000, 1700, true);
		spintune_ctx_issue(&ctx, 2000, 512, &f);
		CHECK(f.value[SPINTUNE_FEATURE_PREV_WAIT_NS] == 700 &&
		      f.value[SPINTUNE_FEATURE_SINCE_WRITE_NS] == 300 &&
		      f.value[SPINTUNE_FEATURE_INFLIGHT] == 0 &&
		      f.value[SPINTUNE_FEATURE_BYTES] == 512);
		spintune_ctx_issue(&ctx, 2100, 0, &f);
		CHECK(f.value[SPINTUNE_FEATURE_INFLIGHT] == 1);
		CHECK(spintune_lookup_ctx(&indexed, 0, 18, &f)->flags == SPINTUNE_ENTRY_FALLBACK);
		blob[4] = 9;
		CHECK(spintune_table_parse(blob, len, words, sizeof(words), &indexed, &why) ==
		      -EPROTONOSUPPORT && strcmp(why, "unknown format version") == 0);
		blob[4] = 1;
	}

	blob[70] ^= 1; /* corrupt an entry: CRC mismatch, nothing written */
	table.count = 99;
	CHECK(spintune_blob_parse(blob, len, storage, 4, &table) == -EBADMSG);
	CHECK(table.count == 99);
	blob[70] ^= 1;

	fake_now = 0;
	done_at = 2000;
	CHECK(spintune_wait_atomic(e, read_status, val, val, &stats, 0) == 0);
	done_at = 1000000;
	CHECK(spintune_wait_atomic(e, read_status, val, val, &stats, 0) == SPINTUNE_ARM_IRQ);
	CHECK(stats.spin_hits == 1 && stats.irq_fallbacks == 1);

	spintune_shm_init(shm, 256);
	CHECK(spintune_shm_snapshot(shm, copy, sizeof(copy), &copied, &seq, 10) == -ENODATA);
	CHECK(spintune_shm_publish(shm, blob, len, 3) == 0);
	CHECK(spintune_shm_snapshot(shm, copy, sizeof(copy), &copied, &seq, 10) == 0);
	CHECK(copied == len && memcmp(copy, blob, len) == 0 && seq == 2);
	CHECK(spintune_blob_parse(copy, copied, storage, 4, &table) == 0);
	printf("driver C test: ok\n");
	return 0;
}
