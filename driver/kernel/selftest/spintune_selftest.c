// SPDX-License-Identifier: GPL-2.0
/*
 * spintune_selftest.ko - kernel-side tests of spintune.ko's table loader.
 *
 * Debian's 6.1 kernel has no KUnit (CONFIG_KUNIT is not set), so the tests
 * run at module load and print KTAP: "ok N name" / "not ok N name" and a
 * closing "# totals: pass:P fail:F". Every way a blob can be refused is
 * tried through spintune_install_blob() on a registered device, and each
 * must leave the table in force (version and entries) untouched and name
 * its reason: the checks of format 1 on a format 1 blob (still accepted),
 * those of format 2 (context trees, write opcodes) on a format 2 blob. Also
 * covered: the RCU swap, context leaves selected by the device's state
 * (from a blob and from a generated header), the compiled-in default from a
 * generated header, the built-in rule, no default at all (the driver's
 * own waits), the outcome sums (what counts, the version, the cap and
 * overflow, the reset) in the document spintune_outcomes_show() prints,
 * the bounds of atomic context (a device registered as waiting only there
 * refuses tables that would sleep or spin long; an atomic wait of any
 * device spins a bounded number of polls and takes the IRQ where the
 * table asks for more), and firmware loading from
 * /lib/firmware/spintune/spintune_selftest.bin, the stable name of the
 * test's platform device (the virtual board ships that file; without it
 * the test says so and fails).
 *
 * The module stays loaded so its results can be read again from the log,
 * and the virtual board's guest writes to two of its devices: stfw0 (the
 * firmware test's) and statomic0 (registered as atomic).
 */
#define pr_fmt(fmt) "spintune_selftest: " fmt

#include <linux/err.h>
#include <linux/irqflags.h>
#include <linux/module.h>
#include <linux/platform_device.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/string.h>

#include <linux/spintune.h>
#include "spintune/policy.h"
#include "spintune_selftest_table.h" /* spintune header --json fixture-policy.json */

#define ST_ENTRIES 3
#define ST_BLOB_BYTES (SPINTUNE_BLOB_HEADER_BYTES + ST_ENTRIES * SPINTUNE_BLOB_ENTRY_BYTES)
#define ST_TWO_ENTRY_BYTES (SPINTUNE_BLOB_HEADER_BYTES + 2 * SPINTUNE_BLOB_ENTRY_BYTES)

static unsigned int st_run, st_failed;

static void st_report(bool ok, const char *name)
{
	st_run++;
	if (!ok)
		st_failed++;
	pr_info("%sok %u %s\n", ok ? "" : "not ", st_run, name);
}

static void st_put32(u8 *p, u32 v)
{
	p[0] = v;
	p[1] = v >> 8;
	p[2] = v >> 16;
	p[3] = v >> 24;
}

static void st_put_entry(u8 *e, u8 cpu_class, u8 size_class, u8 strategy,
			 u8 flags, u32 opcode, u32 spin_ns, u32 sleep_ns,
			 u32 poll_ns)
{
	memset(e, 0, SPINTUNE_BLOB_ENTRY_BYTES);
	e[0] = cpu_class;
	e[1] = size_class;
	e[2] = strategy;
	e[3] = flags;
	st_put32(e + 4, opcode);
	st_put32(e + 8, spin_ns);
	st_put32(e + 12, sleep_ns);
	st_put32(e + 16, poll_ns);
}

static void st_fix_crc(u8 *b, size_t total)
{
	st_put32(b + 12, spintune_crc32(0, b + 16, total - 16));
}

/*
 * A valid three-entry format 1 blob for @device, version @version: opcode 17
 * of 512 bytes spins up to @spin_ns, opcode 25 of 4 KiB takes the IRQ, the
 * fallback polls every 5 us.
 */
/* The header fields both formats share, in a zeroed @bytes-byte blob. */
static void st_put_header(u8 *b, u8 format, u8 header_bytes, u32 bytes,
			  const char *device, u64 version, u32 entries)
{
	memset(b, 0, bytes);
	st_put32(b, SPINTUNE_BLOB_MAGIC);
	b[4] = format;
	b[6] = header_bytes;
	st_put32(b + 8, bytes);
	st_put32(b + 16, (u32)version);
	st_put32(b + 20, (u32)(version >> 32));
	st_put32(b + 24, entries);
	b[28] = SPINTUNE_BLOB_ENTRY_BYTES;
	strscpy((char *)b + 32, device, SPINTUNE_DEVICE_NAME_BYTES);
}

static void st_build(u8 *b, const char *device, u64 version, u32 spin_ns)
{
	st_put_header(b, SPINTUNE_BLOB_VERSION_1, SPINTUNE_BLOB_HEADER_BYTES, ST_BLOB_BYTES,
		      device, version, ST_ENTRIES);
	st_put_entry(b + 64, 0, 10, SPINTUNE_SPIN, 0, 17, spin_ns, 0, 0);
	st_put_entry(b + 88, 0, 13, SPINTUNE_IRQ, 0, 25, 0, 0, 0);
	st_put_entry(b + 112, SPINTUNE_ANY_CPU_CLASS, SPINTUNE_ANY_SIZE_CLASS,
		     SPINTUNE_POLL_SLEEP, SPINTUNE_ENTRY_FALLBACK,
		     SPINTUNE_ANY_OPCODE, 0, 0, 5000);
	st_fix_crc(b, ST_BLOB_BYTES);
}

/**
 * struct st_case - one way to break a valid blob.
 * @name: the test's name.
 * @offset: byte to overwrite (with @value), or -1 for none.
 * @value: the byte written at @offset.
 * @entry: entry index to rewrite with @e (-1: none).
 * @e: the replacement entry (cpu, size, strategy, flags, opcode, spin, sleep, poll).
 * @len_delta: added to the length handed to the loader.
 * @fix_crc: recompute the CRC so the check under test is the one that fails.
 * @rc: the expected return value.
 * @why: a phrase the reason must contain.
 */
struct st_case {
	const char *name;
	int offset;
	u8 value;
	int entry;
	struct {
		u8 cpu_class, size_class, strategy, flags;
		u32 opcode, spin_ns, sleep_ns, poll_ns;
	} e;
	int len_delta;
	bool fix_crc;
	int rc;
	const char *why;
};

#define ST_BYTE(n, off, val, fix, err, text) \
	{ .name = n, .offset = off, .value = val, .entry = -1, .fix_crc = fix, .rc = err, .why = text }
#define ST_ENTRY(n, idx, err, text, ...) \
	{ .name = n, .offset = -1, .entry = idx, .e = { __VA_ARGS__ }, .fix_crc = true, .rc = err, .why = text }

static const struct st_case st_cases[] = {
	ST_BYTE("refuses a bad magic", 0, 'X', false, -EINVAL, "bad magic"),
	ST_BYTE("refuses an unknown format version", 4, 4, false, -EPROTONOSUPPORT,
		"unknown format version"),
	ST_BYTE("refuses a format 1 header labelled format 2", 4, 2, false, -EINVAL,
		"bad header size"),
	ST_BYTE("refuses a bad header size", 6, 65, false, -EINVAL, "bad header size"),
	ST_BYTE("refuses a bad entry size", 28, 25, false, -EINVAL, "bad entry size"),
	ST_BYTE("refuses a set reserved header field", 30, 1, false, -EINVAL,
		"reserved header field"),
	ST_BYTE("refuses a blob of no entries", 24, 0, false, -EINVAL, "no entries"),
	ST_BYTE("refuses more entries than SPINTUNE_MAX_ENTRIES", 26, 1, false, -E2BIG,
		"SPINTUNE_MAX_ENTRIES"),
	ST_BYTE("refuses a declared size that does not match the count", 8, 137, false,
		-EINVAL, "declared size"),
	{ .name = "refuses a blob shorter than a header", .offset = -1, .entry = -1,
	  .len_delta = -(ST_BLOB_BYTES - 10), .rc = -EINVAL, .why = "shorter than a header" },
	{ .name = "refuses a truncated blob", .offset = -1, .entry = -1, .len_delta = -1,
	  .rc = -EMSGSIZE, .why = "shorter than its header declares" },
	{ .name = "refuses bytes after the declared end", .offset = -1, .entry = -1,
	  .len_delta = 1, .rc = -EINVAL, .why = "after the declared end" },
	ST_BYTE("refuses a CRC mismatch", 64 + 8, 0x77, false, -EBADMSG, "CRC-32"),
	ST_BYTE("refuses an unterminated device name", 32 + SPINTUNE_DEVICE_NAME_BYTES - 1,
		'x', true, -EINVAL, "not terminated"),
	ST_BYTE("refuses a table for another device", 32, 'x', true, -ENODEV,
		"another device"),
	ST_BYTE("refuses a set reserved entry field", 64 + 20, 1, true, -EINVAL,
		"reserved entry field"),
	ST_ENTRY("refuses an unknown strategy", 0, -EINVAL, "breaks a bound",
		 0, 10, 9, 0, 17, 0, 0, 0),
	ST_ENTRY("refuses a spin above SPINTUNE_MAX_SPIN_NS", 0, -EINVAL, "breaks a bound",
		 0, 10, SPINTUNE_SPIN, 0, 17, SPINTUNE_MAX_SPIN_NS + 1, 0, 0),
	ST_ENTRY("refuses a sleep above SPINTUNE_MAX_SLEEP_NS", 0, -EINVAL, "breaks a bound",
		 0, 10, SPINTUNE_SLEEP_THEN_SPIN, 0, 17, 0, SPINTUNE_MAX_SLEEP_NS + 1, 0),
	ST_ENTRY("refuses a poll interval below 1 us", 0, -EINVAL, "breaks a bound",
		 0, 10, SPINTUNE_POLL_SLEEP, 0, 17, 0, 0, SPINTUNE_MIN_POLL_INTERVAL_NS - 1),
	ST_ENTRY("refuses a poll interval above SPINTUNE_MAX_SLEEP_NS", 0, -EINVAL,
		 "breaks a bound", 0, 10, SPINTUNE_POLL_SLEEP, 0, 17, 0, 0,
		 SPINTUNE_MAX_SLEEP_NS + 1),
	ST_ENTRY("refuses a spin of no time", 0, -EINVAL, "breaks a bound",
		 0, 10, SPINTUNE_SPIN, 0, 17, 0, 0, 0),
	ST_ENTRY("refuses an IRQ entry with a spin", 0, -EINVAL, "breaks a bound",
		 0, 10, SPINTUNE_IRQ, 0, 17, 5, 0, 0),
	ST_ENTRY("refuses a spin-then-IRQ entry with a sleep", 0, -EINVAL, "breaks a bound",
		 0, 10, SPINTUNE_SPIN_THEN_IRQ, 0, 17, 5, 5, 0),
	ST_ENTRY("refuses a sleep-then-spin entry with a poll interval", 0, -EINVAL,
		 "breaks a bound", 0, 10, SPINTUNE_SLEEP_THEN_SPIN, 0, 17, 5, 5, 5000),
	ST_ENTRY("refuses a poll-sleep entry with a spin", 0, -EINVAL, "breaks a bound",
		 0, 10, SPINTUNE_POLL_SLEEP, 0, 17, 5, 0, 5000),
	ST_ENTRY("refuses an unknown entry flag", 0, -EINVAL, "breaks a bound",
		 0, 10, SPINTUNE_IRQ, 0x02, 17, 0, 0, 0),
	ST_ENTRY("refuses a wildcard CPU class outside the fallback", 0, -EINVAL,
		 "breaks a bound", SPINTUNE_ANY_CPU_CLASS, 10, SPINTUNE_IRQ, 0, 17, 0, 0, 0),
	ST_ENTRY("refuses a size class above 64", 0, -EINVAL, "breaks a bound",
		 0, 65, SPINTUNE_IRQ, 0, 17, 0, 0, 0),
	ST_ENTRY("refuses a fallback that is not a wildcard", 2, -EINVAL, "breaks a bound",
		 0, SPINTUNE_ANY_SIZE_CLASS, SPINTUNE_IRQ, SPINTUNE_ENTRY_FALLBACK,
		 SPINTUNE_ANY_OPCODE, 0, 0, 0),
	ST_ENTRY("refuses a fallback before the end", 0, -EINVAL, "fallback entry",
		 SPINTUNE_ANY_CPU_CLASS, SPINTUNE_ANY_SIZE_CLASS, SPINTUNE_IRQ,
		 SPINTUNE_ENTRY_FALLBACK, SPINTUNE_ANY_OPCODE, 0, 0, 0),
	ST_ENTRY("refuses a table without a fallback", 2, -EINVAL, "fallback entry",
		 1, 1, SPINTUNE_IRQ, 0, 1, 0, 0, 0),
	ST_ENTRY("refuses keys out of order", 1, -EINVAL, "strictly increasing",
		 0, 9, SPINTUNE_IRQ, 0, 17, 0, 0, 0),
	ST_ENTRY("refuses a repeated key", 1, -EINVAL, "strictly increasing",
		 0, 10, SPINTUNE_IRQ, 0, 17, 0, 0, 0),
};

/*
 * A valid format 2 blob for @device, version @version: opcode 17 of 512
 * bytes spins up to 40 us; opcode 25 of 4 KiB has two context leaves, after
 * a completion under 983 us SPIN_THEN_IRQ(@spin_ns), else IRQ; the fallback
 * polls every 5 us. Opcode 25 is the device's write.
 */
#define ST_V2_ENTRIES 4
#define ST_V2_BYTES (SPINTUNE_BLOB_HEADER_V2_BYTES + ST_V2_ENTRIES * SPINTUNE_BLOB_ENTRY_BYTES + \
		     SPINTUNE_BLOB_NODE_BYTES)
#define ST_V2_ENTRY(i) (SPINTUNE_BLOB_HEADER_V2_BYTES + (i) * SPINTUNE_BLOB_ENTRY_BYTES)
#define ST_V2_NODE (ST_V2_ENTRY(ST_V2_ENTRIES))

static void st_build_v2(u8 *b, const char *device, u64 version, u32 spin_ns)
{
	st_put_header(b, SPINTUNE_BLOB_VERSION, SPINTUNE_BLOB_HEADER_V2_BYTES, ST_V2_BYTES,
		      device, version, ST_V2_ENTRIES);
	st_put32(b + 64, 1);
	b[68] = SPINTUNE_BLOB_NODE_BYTES;
	b[70] = 1;
	st_put32(b + 72, 25);
	st_put_entry(b + ST_V2_ENTRY(0), 0, 10, SPINTUNE_SPIN, 0, 17, 40000, 0, 0);
	st_put_entry(b + ST_V2_ENTRY(1), 0, 13, SPINTUNE_SPIN_THEN_IRQ, 0, 25, spin_ns, 0, 0);
	st_put_entry(b + ST_V2_ENTRY(2), 0, 13, SPINTUNE_IRQ, 0, 25, 0, 0, 0);
	b[ST_V2_ENTRY(1) + 20] = 1;
	b[ST_V2_ENTRY(2) + 20] = 1;
	st_put_entry(b + ST_V2_ENTRY(3), SPINTUNE_ANY_CPU_CLASS, SPINTUNE_ANY_SIZE_CLASS,
		     SPINTUNE_POLL_SLEEP, SPINTUNE_ENTRY_FALLBACK,
		     SPINTUNE_ANY_OPCODE, 0, 0, 5000);
	b[ST_V2_NODE] = SPINTUNE_FEATURE_PREV_WAIT_NS;
	b[ST_V2_NODE + 2] = 1; /* left: leaf entry 1 */
	b[ST_V2_NODE + 3] = SPINTUNE_CHILD_LEAF >> 8;
	b[ST_V2_NODE + 4] = 2; /* right: leaf entry 2 */
	b[ST_V2_NODE + 5] = SPINTUNE_CHILD_LEAF >> 8;
	b[ST_V2_NODE + 10] = 0x0F; /* threshold 0x0F0000 ns (983 us): one byte */
	st_fix_crc(b, ST_V2_BYTES);
}

/* Format 2's own checks: one byte each, the CRC fixed up. */
static const struct st_case st_v2_cases[] = {
	ST_BYTE("refuses a format 2 header labelled format 1", 4, 1, false, -EINVAL,
		"bad header size"),
	ST_BYTE("refuses a bad node size", 68, 12, true, -EINVAL, "bad node size"),
	ST_BYTE("refuses a set reserved byte of the format 2 header", 71, 1, true, -EINVAL,
		"reserved header field"),
	ST_BYTE("refuses a set reserved word of the format 2 header", 88, 1, true, -EINVAL,
		"reserved header field"),
	ST_BYTE("refuses more than 4 write opcodes", 70, 5, true, -EINVAL,
		"more than 4 write opcodes"),
	ST_BYTE("refuses a set unused write opcode", 76, 9, true, -EINVAL, "write opcodes"),
	ST_BYTE("refuses more nodes than SPINTUNE_MAX_NODES", 66, 1, false, -E2BIG,
		"SPINTUNE_MAX_NODES"),
	ST_BYTE("refuses a set reserved half-word of an entry", ST_V2_ENTRY(0) + 22, 1, true,
		-EINVAL, "reserved entry field"),
	ST_BYTE("refuses a tree on a key with one entry", ST_V2_ENTRY(0) + 20, 1, true,
		-EINVAL, "context tree"),
	ST_BYTE("refuses leaves of one key in different trees", ST_V2_ENTRY(2) + 20, 2, true,
		-EINVAL, "strictly increasing"),
	ST_BYTE("refuses a tree that does not start at the next node", ST_V2_ENTRY(1) + 20, 2,
		true, -EINVAL, "does not start"),
	ST_BYTE("refuses a fallback with a tree", ST_V2_ENTRY(3) + 20, 1, true, -EINVAL,
		"breaks a bound"),
	ST_BYTE("refuses an unknown context feature", ST_V2_NODE, SPINTUNE_FEATURE_COUNT, true,
		-EINVAL, "context tree"),
	ST_BYTE("refuses a set reserved byte of a node", ST_V2_NODE + 1, 1, true, -EINVAL,
		"context tree"),
	ST_BYTE("refuses leaves out of order", ST_V2_NODE + 2, 2, true, -EINVAL, "context tree"),
	ST_BYTE("refuses a leaf of another key", ST_V2_NODE + 4, 0, true, -EINVAL,
		"context tree"),
	ST_BYTE("refuses a child node that is not the next", ST_V2_NODE + 5, 0, true, -EINVAL,
		"context tree"),
	ST_BYTE("refuses a threshold of 0", ST_V2_NODE + 10, 0, true, -EINVAL, "context tree"),
};

/* The entry the device's context state selects for opcode 25 of 4 KiB. */
static struct spintune_entry st_entry_25(struct spintune_dev *sd)
{
	struct spintune_wait w;

	spintune_begin(sd, 0, 25, 4096, &w);
	w.done_ns = w.issue_ns + 1000; /* a 1 us completion: prev_wait stays short */
	spintune_end(sd, &w);
	return w.entry;
}

/* The first entry of the table in force: opcode 17, 512 bytes. */
static struct spintune_entry st_entry_17(struct spintune_dev *sd)
{
	struct spintune_wait w;

	spintune_begin(sd, 0, 17, 512, &w);
	spintune_end(sd, &w);
	return w.entry;
}

static bool st_same_entry(const struct spintune_entry *a, const struct spintune_entry *b)
{
	return a->strategy == b->strategy && a->spin_ns == b->spin_ns &&
	       a->sleep_ns == b->sleep_ns && a->poll_interval_ns == b->poll_interval_ns;
}

/* The built-in rule of the test device: IRQ for everything. */
static void st_rule(u8 cpu_class, u32 opcode, u64 bytes, struct spintune_entry *out)
{
	*out = (struct spintune_entry){ .cpu_class = cpu_class, .size_class =
		spintune_size_class(bytes), .strategy = SPINTUNE_IRQ, .opcode = opcode };
}

/*
 * Tries every case of @cases on a copy of the valid blob @good (@len bytes,
 * format 1 entries at SPINTUNE_BLOB_HEADER_BYTES): each must be refused for
 * its reason and leave version @version and @probe's entry in force.
 */
static void st_rejections(struct spintune_dev *sd, const u8 *good, size_t len,
			  const struct st_case *cases, size_t count, u64 version,
			  struct spintune_entry (*probe)(struct spintune_dev *sd))
{
	const struct spintune_entry before = probe(sd);
	u8 *b = kmalloc(len + 1, GFP_KERNEL);
	size_t i;

	if (!b) {
		st_report(false, "allocates a blob");
		return;
	}
	for (i = 0; i < count; i++) {
		const struct st_case *c = &cases[i];
		char reason[160];
		struct spintune_entry now;
		bool ok;
		int rc;

		memcpy(b, good, len);
		b[len] = 0;
		if (c->offset >= 0)
			b[c->offset] = c->value;
		if (c->entry >= 0)
			st_put_entry(b + SPINTUNE_BLOB_HEADER_BYTES +
					     c->entry * SPINTUNE_BLOB_ENTRY_BYTES,
				     c->e.cpu_class, c->e.size_class, c->e.strategy,
				     c->e.flags, c->e.opcode, c->e.spin_ns,
				     c->e.sleep_ns, c->e.poll_ns);
		if (c->fix_crc)
			st_fix_crc(b, len);
		rc = spintune_install_blob(sd, b, len + c->len_delta, "selftest");
		now = probe(sd);
		spintune_last_error(sd, reason, sizeof(reason));
		ok = rc == c->rc && spintune_version(sd) == version &&
		     st_same_entry(&before, &now) && strstr(reason, c->why);
		if (!ok)
			pr_info("# %s: rc %d (want %d), version %llu, reason '%s'\n",
				c->name, rc, c->rc, spintune_version(sd), reason);
		st_report(ok, c->name);
	}
	kfree(b);
}

/* A format 2 blob with a context tree: in force, leaves chosen by the
 * device's state, and every format 2 refusal.
 */
/*
 * The format 2 blob as format 3 with an A/B trial on opcode 17 (IRQ for
 * 128 of 256 commands): accepted; the module waits by the entry itself
 * (it does not pick arms).
 */
static void st_format3(struct spintune_dev *sd)
{
	const size_t len = ST_V2_BYTES + SPINTUNE_BLOB_TRIAL_BYTES;
	struct spintune_wait w;
	u8 *b = kzalloc(len, GFP_KERNEL);
	int rc;

	if (!b) {
		st_report(false, "allocates a format 3 blob");
		return;
	}
	st_build_v2(b, "selftest0", 11, 60000);
	b[4] = SPINTUNE_BLOB_VERSION_3;
	st_put32(b + 8, len);
	st_put32(b + 88, 1);
	b[ST_V2_ENTRY(0) + 22] = 1; /* entry 0 has trial 0 */
	b[ST_V2_BYTES + 2] = 128;   /* trial 0: entry 0, share 128, IRQ */
	b[ST_V2_BYTES + 3] = SPINTUNE_IRQ;
	st_fix_crc(b, len);
	rc = spintune_install_blob(sd, b, len, "selftest");
	spintune_begin(sd, 0, 17, 512, &w);
	spintune_end(sd, &w);
	st_report(rc == 0 && spintune_version(sd) == 11 && w.entry.strategy == SPINTUNE_SPIN,
		  "a format 3 blob with an A/B trial is put in force");
	kfree(b);
}

static void st_context(struct spintune_dev *sd)
{
	struct spintune_entry e;
	struct spintune_wait w;
	u8 *b = kmalloc(ST_V2_BYTES, GFP_KERNEL);
	int rc;

	if (!b) {
		st_report(false, "allocates a format 2 blob");
		return;
	}
	st_build_v2(b, "selftest0", 9, 60000);
	rc = spintune_install_blob(sd, b, ST_V2_BYTES, "selftest");
	e = st_entry_25(sd);
	st_report(rc == 0 && spintune_version(sd) == 9 && e.strategy == SPINTUNE_SPIN_THEN_IRQ &&
		  e.spin_ns == 60000,
		  "a format 2 blob is put in force; after short completions opcode 25 spins");
	/* A command that took 2 ms: the next opcode 25 takes the other leaf. */
	spintune_begin(sd, 0, 17, 512, &w);
	w.done_ns = w.issue_ns + 2000000;
	spintune_end(sd, &w);
	spintune_begin(sd, 0, 25, 4096, &w);
	w.done_ns = w.issue_ns + 1000;
	spintune_end(sd, &w);
	st_report(w.entry.strategy == SPINTUNE_IRQ && w.write,
		  "after a 2 ms completion opcode 25 (a write) takes the IRQ leaf");
	st_report(st_entry_25(sd).strategy == SPINTUNE_SPIN_THEN_IRQ,
		  "and after a short one it spins again");
	st_rejections(sd, b, ST_V2_BYTES, st_v2_cases, ARRAY_SIZE(st_v2_cases), 9, st_entry_25);
	kfree(b);
	st_format3(sd);
}

static void st_loader(void)
{
	static const struct spintune_dev_info info = { .name = "selftest0", .rule = st_rule };
	struct spintune_entry e;
	struct spintune_dev *sd, *dup;
	u8 *good, *newer;
	int rc;

	sd = spintune_register(&info);
	st_report(!IS_ERR(sd), "registers a device with a built-in rule");
	if (IS_ERR(sd))
		return;
	dup = spintune_register(&info);
	st_report(PTR_ERR(dup) == -EEXIST, "refuses a second device of the same name");
	e = st_entry_17(sd);
	st_report(spintune_version(sd) == 0 && e.strategy == SPINTUNE_IRQ,
		  "the built-in rule is in force at first");

	good = kmalloc(ST_BLOB_BYTES, GFP_KERNEL);
	newer = kmalloc(ST_BLOB_BYTES, GFP_KERNEL);
	if (!good || !newer)
		goto out;
	st_build(good, "selftest0", 7, 40000);
	rc = spintune_install_blob(sd, good, ST_BLOB_BYTES, "selftest");
	e = st_entry_17(sd);
	st_report(rc == 0 && spintune_version(sd) == 7 && e.strategy == SPINTUNE_SPIN &&
		  e.spin_ns == 40000, "a valid blob is put in force");
	{
		struct spintune_wait w;

		spintune_begin(sd, 3, 99, 1 << 20, &w);
		st_report(w.entry.strategy == SPINTUNE_POLL_SLEEP &&
			  w.entry.poll_interval_ns == 5000,
			  "a key not in the table gets the fallback");
	}

	st_rejections(sd, good, ST_BLOB_BYTES, st_cases, ARRAY_SIZE(st_cases), 7, st_entry_17);
	st_context(sd);

	st_build(newer, "selftest0", 10, 90000);
	rc = spintune_install_blob(sd, newer, ST_BLOB_BYTES, "selftest");
	e = st_entry_17(sd);
	st_report(rc == 0 && spintune_version(sd) == 10 && e.spin_ns == 90000,
		  "a newer blob replaces the table (RCU swap)");
out:
	kfree(good);
	kfree(newer);
	spintune_unregister(sd);
	st_report(true, "unregisters");
}

static void st_header_default(void)
{
	const struct spintune_dev_info info = {
		.name = "stheader0", .table = &spintune_selftest_stfw0,
	};
	struct spintune_dev *sd = spintune_register(&info);
	struct spintune_entry e;

	st_report(!IS_ERR(sd), "registers a device with a compiled-in table");
	if (IS_ERR(sd))
		return;
	e = st_entry_17(sd);
	st_report(spintune_version(sd) == 0 && e.strategy == SPINTUNE_SPIN &&
		  e.spin_ns == 50000, "the generated header's table is the default");
	{
		/* Opcode 18 of 4 KiB has two leaves: spin while the last
		 * completion was under 1 ms, else IRQ.
		 */
		struct spintune_wait w;

		spintune_begin(sd, 0, 18, 4096, &w);
		w.done_ns = w.issue_ns + 3000000;
		spintune_end(sd, &w);
		e = w.entry;
		spintune_begin(sd, 0, 18, 4096, &w);
		spintune_end(sd, &w);
		st_report(e.strategy == SPINTUNE_SPIN_THEN_IRQ && w.entry.strategy == SPINTUNE_IRQ,
			  "the generated header's context tree selects the leaf");
	}
	spintune_unregister(sd);
}

static void st_driver_default(void)
{
	static const struct spintune_dev_info info = { .name = "stdriver0" };
	struct spintune_dev *sd = spintune_register(&info);
	struct spintune_wait w;
	u8 *blob;
	bool before, after = false;

	st_report(!IS_ERR(sd), "registers a device without a default");
	if (IS_ERR(sd))
		return;
	before = spintune_begin(sd, 0, 17, 512, &w);
	spintune_end(sd, &w);
	blob = kmalloc(ST_BLOB_BYTES, GFP_KERNEL);
	if (blob) {
		st_build(blob, "stdriver0", 3, 1000);
		after = !spintune_install_blob(sd, blob, ST_BLOB_BYTES, "selftest") &&
			spintune_begin(sd, 0, 17, 512, &w) && w.entry.spin_ns == 1000;
		kfree(blob);
	}
	st_report(!before && after,
		  "without a default the driver waits its own way until a table arrives");
	spintune_unregister(sd);
}

/*
 * The outcomes document of @sd, as its debugfs file shows it, into @buf
 * (NUL-terminated; "" if it does not fit).
 */
static void st_read_outcomes(struct spintune_dev *sd, char *buf, size_t len)
{
	struct seq_file m = { .buf = buf, .size = len - 1 };

	spintune_outcomes_show(sd, &m);
	buf[seq_has_overflowed(&m) ? 0 : m.count] = 0;
}

/* One request of opcode 17, 512 bytes, that cost @cpu_ns and @latency_ns. */
static void st_measured(struct spintune_dev *sd, u64 cpu_ns, u64 latency_ns)
{
	struct spintune_wait w;

	spintune_begin(sd, 0, 17, 512, &w);
	w.cpu_ns = cpu_ns;
	w.latency_ns = latency_ns;
	spintune_end(sd, &w);
}

/* The sums per key in the outcomes file, checked against hand-added ones. */
static void st_outcomes(void)
{
	static const struct spintune_dev_info info = { .name = "stout0", .rule = st_rule };
	static const char empty[] =
		"{\"format\": \"spintune-outcomes\", \"format_version\": 1, \"device\": \"stout0\",\n"
		" \"mode\": \"table\", \"policy_version\": 0, \"keys\": []}\n";
	struct spintune_dev *sd = spintune_register(&info);
	const size_t len = 2048;
	struct spintune_wait w;
	char *doc;
	u8 *blob;

	doc = kmalloc(len, GFP_KERNEL);
	blob = kmalloc(ST_BLOB_BYTES, GFP_KERNEL);
	if (IS_ERR(sd) || !doc || !blob) {
		st_report(false, "registers a device for the outcome tests");
		goto out;
	}
	st_read_outcomes(sd, doc, len);
	st_report(!strcmp(doc, empty), "outcomes: a spintune-outcomes document with no keys at first");

	st_measured(sd, 1000, 3000);
	st_measured(sd, 2000, 5000);
	st_measured(sd, 5000, 0); /* not measured: not counted */
	st_read_outcomes(sd, doc, len);
	st_report(strstr(doc, "\"policy_version\": 0, \"keys\": [\n"
			 "  {\"cpu_class\": \"default\", \"opcode\": 17, \"bytes\": 512, \"size_class\": 10, \"requests\": 2,\n"
			 "   \"cpu_ns_sum\": 3000, \"latency_ns_sum\": 8000, \"cpu_ns_sq_sum\": 5000000,\n"
			 "   \"latency_ns_sq_sum\": 34000000, \"cpu_latency_ns_sum\": 13000000}]}\n"),
		  "outcomes: two measured requests under the default rule, their five sums");

	/* Begun under the rule, ended under version 7: counts for neither. */
	spintune_begin(sd, 0, 17, 512, &w);
	st_build(blob, "stout0", 7, 40000);
	if (spintune_install_blob(sd, blob, ST_BLOB_BYTES, "selftest"))
		st_report(false, "outcomes: installs version 7");
	w.cpu_ns = 1;
	w.latency_ns = 1;
	spintune_end(sd, &w);
	st_read_outcomes(sd, doc, len);
	st_report(strstr(doc, "\"policy_version\": 7, \"keys\": []}") != NULL,
		  "outcomes: a new table starts from zero; a request that began before it is not counted");

	/* Capped at 2^32 - 1 ns; a second one would overflow the squares. */
	st_measured(sd, 1ull << 40, 10);
	st_measured(sd, 1ull << 40, 10);
	st_read_outcomes(sd, doc, len);
	st_report(strstr(doc, "\"requests\": 1,\n   \"cpu_ns_sum\": 4294967295, \"latency_ns_sum\": 10, \"cpu_ns_sq_sum\": 18446744065119617025,\n") != NULL,
		  "outcomes: a request's time is capped; one that would overflow a sum is left out whole");

	spintune_outcomes_reset(sd);
	st_read_outcomes(sd, doc, len);
	st_report(strstr(doc, "\"policy_version\": 7, \"keys\": []}") != NULL,
		  "outcomes: a write resets them, the version stays");
out:
	kfree(doc);
	kfree(blob);
	if (!IS_ERR(sd))
		spintune_unregister(sd);
}

/* A blob of entries 17 (SPIN @spin_ns), 25 (IRQ) and an IRQ fallback. */
static void st_build_atomic(u8 *b, const char *device, u64 version, u32 spin_ns)
{
	st_build(b, device, version, spin_ns);
	st_put_entry(b + 112, SPINTUNE_ANY_CPU_CLASS, SPINTUNE_ANY_SIZE_CLASS,
		     SPINTUNE_IRQ, SPINTUNE_ENTRY_FALLBACK, SPINTUNE_ANY_OPCODE, 0, 0, 0);
	st_fix_crc(b, ST_BLOB_BYTES);
}

static struct spintune_dev *st_atomic_dev;

static int st_never(int *unused)
{
	return 0;
}

/*
 * Atomic context: a device registered as waiting only there refuses a
 * table that sleeps or spins beyond SPINTUNE_MAX_ATOMIC_SPIN_NS (and stays
 * registered for the guest's writes); on any device, spintune_wait_atomic()
 * with interrupts off does not sleep where the table says to, spins no more
 * polls than its budget allows, and counts the downgrade.
 */
static void st_atomic(void)
{
	static const struct spintune_dev_info info = {
		.name = "statomic0", .rule = st_rule, .atomic = true,
	};
	static const struct spintune_dev_info plain = { .name = "stplain0", .rule = st_rule };
	const u32 max_polls = SPINTUNE_MAX_ATOMIC_SPIN_NS / SPINTUNE_ATOMIC_STEP_NS + 2;
	struct spintune_dev *sd;
	char why[160];
	unsigned long flags;
	struct spintune_wait w;
	int rc, val;
	u8 *b;

	b = kmalloc(ST_BLOB_BYTES, GFP_KERNEL);
	st_atomic_dev = spintune_register(&info);
	st_report(!IS_ERR(st_atomic_dev), "registers a device that waits in atomic context");
	if (IS_ERR(st_atomic_dev) || !b) {
		st_atomic_dev = NULL;
		goto out;
	}
	st_build(b, "statomic0", 3, 40000); /* its fallback polls with sleeps */
	rc = spintune_install_blob(st_atomic_dev, b, ST_BLOB_BYTES, "selftest");
	spintune_last_error(st_atomic_dev, why, sizeof(why));
	st_report(rc == -EINVAL && strstr(why, "atomic context") &&
		  spintune_version(st_atomic_dev) == 0,
		  "an atomic device refuses a table that sleeps");
	st_build_atomic(b, "statomic0", 4, SPINTUNE_MAX_ATOMIC_SPIN_NS + 1);
	rc = spintune_install_blob(st_atomic_dev, b, ST_BLOB_BYTES, "selftest");
	st_report(rc == -EINVAL && spintune_version(st_atomic_dev) == 0,
		  "an atomic device refuses a spin beyond SPINTUNE_MAX_ATOMIC_SPIN_NS");
	st_build_atomic(b, "statomic0", 5, SPINTUNE_MAX_ATOMIC_SPIN_NS);
	rc = spintune_install_blob(st_atomic_dev, b, ST_BLOB_BYTES, "selftest");
	st_report(rc == 0 && spintune_version(st_atomic_dev) == 5,
		  "an atomic device takes a table of spins within the cap and IRQs");

	sd = spintune_register(&plain);
	if (IS_ERR(sd)) {
		st_report(false, "registers a second device");
		goto out;
	}
	/* Entry 17 spins 1 ms (a SPIN, no IRQ of its own); the fallback
	 * sleeps between polls.
	 */
	st_build(b, "stplain0", 6, 1000000);
	rc = spintune_install_blob(sd, b, ST_BLOB_BYTES, "selftest");
	local_irq_save(flags);
	spintune_begin(sd, 0, 99, 0, &w); /* the fallback: POLL_SLEEP */
	rc = spintune_wait_atomic(&w.entry, st_never, val, val, &w.stats, NULL);
	spintune_end(sd, &w);
	local_irq_restore(flags);
	st_report(rc == SPINTUNE_ARM_IRQ && w.stats.polls == 0 && w.stats.sleeps == 0 &&
		  w.stats.atomic_downgrades == 1,
		  "an atomic wait takes the IRQ where the table says to sleep, and counts it");
	local_irq_save(flags);
	spintune_begin(sd, 0, 17, 512, &w); /* SPIN 1 ms */
	rc = spintune_wait_atomic(&w.entry, st_never, val, val, &w.stats, NULL);
	spintune_end(sd, &w);
	local_irq_restore(flags);
	pr_info("# an atomic 1 ms SPIN: %llu polls (at most %u)\n", w.stats.polls, max_polls);
	st_report(rc == SPINTUNE_ARM_IRQ && w.stats.polls >= 2 && w.stats.polls <= max_polls &&
		  w.stats.atomic_downgrades == 1,
		  "an atomic spin is a bounded count of polls, capped, then the IRQ");
	spintune_unregister(sd);
out:
	kfree(b);
}

static struct platform_device *st_pdev;
static struct spintune_dev *st_fw_dev;

static void st_firmware(void)
{
	struct spintune_dev_info info = { .name = "stfw0", .rule = st_rule };
	struct spintune_entry e;

	st_pdev = platform_device_register_simple("spintune_selftest", -1, NULL, 0);
	if (IS_ERR(st_pdev)) {
		st_report(false, "creates a device for request_firmware()");
		st_pdev = NULL;
		return;
	}
	info.dev = &st_pdev->dev;
	st_fw_dev = spintune_register(&info);
	if (IS_ERR(st_fw_dev)) {
		st_report(false, "loads /lib/firmware/spintune/spintune_selftest.bin after registration");
		st_fw_dev = NULL;
		return;
	}
	spintune_firmware_wait(st_fw_dev);
	e = st_entry_17(st_fw_dev);
	if (spintune_version(st_fw_dev) != 42)
		pr_info("# no valid /lib/firmware/spintune/spintune_selftest.bin (version %llu in force)\n",
			spintune_version(st_fw_dev));
	st_report(spintune_version(st_fw_dev) == 42 && e.strategy == SPINTUNE_SPIN &&
		  e.spin_ns == 50000,
		  "loads /lib/firmware/spintune/spintune_selftest.bin after registration");
}

static int __init st_init(void)
{
	u8 storage_blob[ST_TWO_ENTRY_BYTES];
	struct spintune_entry storage[1];
	struct spintune_table table;
	const char *why = NULL;

	pr_info("KTAP version 1\n");
	st_loader();
	st_header_default();
	st_driver_default();
	st_outcomes();
	st_atomic();
	st_firmware();
	/* The one refusal a registered device cannot reach: its storage is
	 * sized from the blob, so check the parser's capacity bound directly.
	 */
	memset(storage_blob, 0, sizeof(storage_blob));
	st_put32(storage_blob, SPINTUNE_BLOB_MAGIC);
	storage_blob[4] = SPINTUNE_BLOB_VERSION_1;
	storage_blob[6] = SPINTUNE_BLOB_HEADER_BYTES;
	st_put32(storage_blob + 8, ST_TWO_ENTRY_BYTES);
	st_put32(storage_blob + 24, 2);
	storage_blob[28] = SPINTUNE_BLOB_ENTRY_BYTES;
	st_report(spintune_blob_parse_why(storage_blob, sizeof(storage_blob), storage, 1,
					  &table, &why) == -E2BIG &&
		  why && strstr(why, "storage"),
		  "refuses more entries than the caller's storage");
	pr_info("1..%u\n", st_run);
	pr_info("# totals: pass:%u fail:%u\n", st_run - st_failed, st_failed);
	return 0;
}

static void __exit st_exit(void)
{
	spintune_unregister(st_atomic_dev);
	spintune_unregister(st_fw_dev);
	if (st_pdev)
		platform_device_unregister(st_pdev);
}

module_init(st_init);
module_exit(st_exit);

MODULE_DESCRIPTION("spintune: self-test of the table loader");
MODULE_LICENSE("GPL");
