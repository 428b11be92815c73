/*
 * A/B trials (format 3 blobs) in C (gnu11, -Wall -Wextra -Werror): the
 * parser reads a trial into a trial entry after the entries and refuses
 * every malformed one; spintune_ab_pick() honours the share within a bound,
 * is a function of the table version, and never diverts an entry without
 * a trial.
 */
#include <stdio.h>
#include <string.h>

#include "spintune/policy.h"

#define CHECK(cond)                                                            \
	do {                                                                   \
		if (!(cond)) {                                                 \
			fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, #cond); \
			return 1;                                              \
		}                                                              \
	} while (0)

/* Refused with -EINVAL and a reason containing @text. */
#define REFUSED(b, text)                                                          \
	(seal(b), spintune_table_parse(b, BYTES, words, sizeof(words), &t, &why) == \
			  -EINVAL && strstr(why, text) != NULL)

enum { HEADER = 96, ENTRIES = 3, TRIALS = 1 };
#define BYTES (HEADER + ENTRIES * 24 + TRIALS * 16)
#define TRIAL_AT (HEADER + ENTRIES * 24)

static void put16(unsigned char *p, unsigned v)
{
	p[0] = v & 0xff;
	p[1] = (v >> 8) & 0xff;
}

static void put32(unsigned char *p, unsigned v)
{
	put16(p, v & 0xffff);
	put16(p + 2, v >> 16);
}

static void seal(unsigned char *b)
{
	put32(b + 12, spintune_crc32(0, b + 16, BYTES - 16));
}

/*
 * Version 7 of mmc0: opcode 17 (size class 10) SLEEP_THEN_SPIN(20 us) with a
 * trial of IRQ for @share/256 of its commands; opcode 24 SPIN_THEN_IRQ(5 us)
 * without one; the IRQ fallback.
 */
static void build(unsigned char *b, unsigned share)
{
	unsigned char *e;

	memset(b, 0, BYTES);
	put32(b, SPINTUNE_BLOB_MAGIC);
	put16(b + 4, SPINTUNE_BLOB_VERSION_3);
	put16(b + 6, HEADER);
	put32(b + 8, BYTES);
	put32(b + 16, 7);
	put32(b + 24, ENTRIES);
	put16(b + 28, 24);
	memcpy(b + 32, "mmc0", 4);
	put16(b + 68, 16);
	put32(b + 88, TRIALS);
	e = b + HEADER;
	e[1] = 10;
	e[2] = SPINTUNE_SLEEP_THEN_SPIN;
	put32(e + 4, 17);
	put32(e + 12, 20000);
	put16(e + 22, 1); /* its trial: the first */
	e += 24;
	e[1] = 10;
	e[2] = SPINTUNE_SPIN_THEN_IRQ;
	put32(e + 4, 24);
	put32(e + 8, 5000);
	e += 24;
	e[0] = 0xff;
	e[1] = 0xff;
	e[2] = SPINTUNE_IRQ;
	e[3] = SPINTUNE_ENTRY_FALLBACK;
	put32(e + 4, 0xffffffffu);
	e = b + TRIAL_AT;
	put16(e, 0); /* entry 0 */
	e[2] = (unsigned char)share;
	e[3] = SPINTUNE_IRQ;
	seal(b);
}

int main(void)
{
	static uint64_t words[SPINTUNE_TABLE_STORAGE_WORDS];
	unsigned char b[BYTES], bad[BYTES];
	struct spintune_entry entries[ENTRIES + TRIALS];
	struct spintune_table t, u;
	struct spintune_ab ab, again;
	const struct spintune_entry *e, *spin, *x;
	const char *why = NULL;
	unsigned n, incumbent = 0;

	build(b, 64);
	CHECK(spintune_blob_storage_bytes(b, BYTES) >=
	      spintune_table_storage_bytes(ENTRIES + TRIALS, 0));
	CHECK(spintune_table_parse(b, BYTES, words, sizeof(words), &t, &why) == 0);
	CHECK(t.count == ENTRIES && spintune_trial_count(&t) == TRIALS && t.version == 7);
	e = spintune_lookup(&t, 0, 17, 512);
	CHECK(e->strategy == SPINTUNE_SLEEP_THEN_SPIN && e->trial == 1);
	x = &t.entries[t.count];
	CHECK(x->flags == SPINTUNE_ENTRY_TRIAL && x->trial == 64 && x->strategy == SPINTUNE_IRQ &&
	      x->opcode == 17 && x->size_class == 10 && spintune_entry_is_incumbent(x));

	/* The share within a bound: 64/256 of 25600 commands is 6400, binomial
	 * sd 69; 5 sd either side. Deterministic: the same version, the same
	 * arms; table arm entries are @e itself. */
	spintune_ab_init(&ab, &t);
	spintune_ab_init(&again, &t);
	for (n = 0; n < 25600; n++) {
		const struct spintune_entry *a = spintune_ab_pick(&t, e, &ab);

		CHECK(a == e || a == x);
		CHECK(spintune_ab_pick(&t, e, &again) == a);
		incumbent += spintune_entry_is_incumbent(a);
	}
	CHECK(incumbent > 6400 - 345 && incumbent < 6400 + 345);
	CHECK(ab.counter == 25600);
	/* Another version draws other arms. */
	u = t;
	u.version = 8;
	spintune_ab_init(&again, &u);
	spintune_ab_init(&ab, &t);
	incumbent = 0;
	for (n = 0; n < 64; n++)
		incumbent += spintune_ab_pick(&t, e, &ab) != spintune_ab_pick(&u, e, &again);
	CHECK(incumbent > 0);

	/* No trial: always the entry, and the counter does not move. */
	spin = spintune_lookup(&t, 0, 24, 512);
	CHECK(spin->trial == 0 && spin->spin_ns == 5000);
	spintune_ab_init(&ab, &t);
	for (n = 0; n < 1000; n++)
		CHECK(spintune_ab_pick(&t, spin, &ab) == spin);
	CHECK(ab.counter == 0);
	CHECK(spintune_ab_pick(&t, x, &ab) == x); /* a trial entry is final */

	/* Share 255 is valid; the entry-only interface needs room for the
	 * trial entry. */
	build(b, 255);
	CHECK(spintune_blob_parse(b, BYTES, entries, ENTRIES, &t) == -E2BIG);
	CHECK(spintune_blob_parse(b, BYTES, entries, ENTRIES + TRIALS, &t) == 0);
	CHECK(t.entries[ENTRIES].trial == 255);

	/* Refusals. */
	memcpy(bad, b, BYTES);
	bad[TRIAL_AT + 2] = 0;
	CHECK(REFUSED(bad, "share of 0"));
	memcpy(bad, b, BYTES);
	bad[TRIAL_AT + 3] = 9; /* unknown strategy */
	CHECK(REFUSED(bad, "trial's wait"));
	memcpy(bad, b, BYTES);
	bad[TRIAL_AT + 3] = SPINTUNE_SPIN; /* a spin without its timeout */
	CHECK(REFUSED(bad, "trial's wait"));
	memcpy(bad, b, BYTES);
	bad[TRIAL_AT + 3] = SPINTUNE_SPIN_THEN_IRQ;
	put32(bad + TRIAL_AT + 4, SPINTUNE_MAX_SPIN_NS + 1);
	CHECK(REFUSED(bad, "trial's wait"));
	memcpy(bad, b, BYTES);
	put16(bad + TRIAL_AT, 1); /* names entry 1, which names no trial */
	CHECK(REFUSED(bad, "name each other"));
	memcpy(bad, b, BYTES);
	put16(bad + HEADER + 22, 2); /* a trial beyond the one there is */
	CHECK(REFUSED(bad, "beyond the trials"));
	memcpy(bad, b, BYTES);
	put16(bad + HEADER + 22, 0); /* the trial names an entry without one */
	CHECK(REFUSED(bad, "name each other"));
	memcpy(bad, b, BYTES);
	put16(bad + TRIAL_AT, 2); /* on the fallback */
	put16(bad + HEADER + 22, 0);
	put16(bad + HEADER + 48 + 22, 1);
	CHECK(REFUSED(bad, "fallback entry or a context leaf"));
	memcpy(bad, b, BYTES);
	put32(bad + 88, 3); /* as many trials as entries */
	seal(bad);
	CHECK(spintune_table_parse(bad, BYTES, words, sizeof(words), &t, &why) == -EINVAL);
	memcpy(bad, b, BYTES);
	put32(bad + 88, 2); /* the size no longer matches */
	CHECK(REFUSED(bad, "declared size"));
	memcpy(bad, b, BYTES);
	put16(bad + 4, SPINTUNE_BLOB_VERSION); /* format 2: offset 88 is reserved */
	CHECK(REFUSED(bad, "reserved header field"));
	memcpy(bad, b, BYTES);
	bad[HEADER + 3] = SPINTUNE_ENTRY_TRIAL; /* never in a blob */
	CHECK(REFUSED(bad, "breaks a bound"));
	printf("A/B C test: ok\n");
	return 0;
}
