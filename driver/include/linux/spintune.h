/* SPDX-License-Identifier: GPL-2.0 */
/*
 * spintune: per-command wait policy tables for drivers that wait for their
 * devices (docs/kernel-module.md). The registration API of spintune.ko.
 *
 *	static const struct spintune_dev_info info = {
 *		.name = "mmc0", .dev = &pdev->dev, .rule = my_default_rule,
 *	};
 *	host->st = spintune_register(&info);	// an error is not fatal
 *	...
 *	struct spintune_wait w;
 *
 *	if (spintune_begin(host->st, 0, cmd->opcode, bytes, &w))
 *		ret = spintune_wait(&w.entry, readl, val, val & DONE,
 *				    timeout_ns, &w.stats, reg);
 *	else
 *		ret = upstream_wait(...);	// the driver's own way
 *	spintune_end(host->st, &w);
 *
 * With CONFIG_SPINTUNE off, every call here is a stub: spintune_register()
 * returns NULL, spintune_begin() false, the others do nothing, so a driver
 * patched for spintune builds and waits exactly as it did before. A driver
 * that selects nothing and depends on "SPINTUNE || !SPINTUNE" links either
 * way (built in with spintune built in or off, or as a module).
 *
 * A failed registration is not fatal either: every call accepts the NULL
 * or ERR_PTR() spintune_register() may return and then behaves as the
 * stubs do, so a driver logs the error and carries on.
 *
 * While the table in force has context leaves, each device keeps the
 * context state of spintune/table.h (previous completion time, last write,
 * commands in flight): spintune_begin() picks the context leaf of keys that
 * have one, spintune_end() records the completion. A driver that knows
 * when the hardware completed (its IRQ handler ran) sets w.done_ns before
 * spintune_end().
 *
 * A table arrives by a write of a blob to /dev/spintune/<name> (or, up to a
 * page, /sys/kernel/spintune/<name>/table), from the firmware file
 * spintune/<stable name>.bin (the device's OF node path, else its bus id;
 * requested by a work item after registration), or compiled in (a header
 * from `spintune header`, passed as @table). The blob is checked by
 * spintune_table_parse() (spintune/blob.h); a refused blob leaves the table
 * in force and the kernel log says why. Tables are swapped with RCU:
 * spintune_begin() copies the entry it needs, so a wait that sleeps never
 * touches a table that may be freed.
 */
#ifndef _LINUX_SPINTUNE_H
#define _LINUX_SPINTUNE_H

#include <linux/err.h>
#include <linux/errno.h>
#include <linux/kconfig.h>
#include <linux/string.h>
#include <linux/types.h>

#include "spintune/policy.h"
#include "spintune/wait.h"

struct device;
struct seq_file;
struct spintune_dev;

/**
 * typedef spintune_rule_fn - a driver's built-in wait rule.
 * @cpu_class: the CPU class the caller runs on.
 * @opcode: the command's opcode.
 * @bytes: the command's transfer length in bytes.
 * @out: receives the entry to use; must satisfy spintune_entry_valid().
 *
 * The rule is the driver's behaviour before spintune ("IRQ for data
 * transfers, poll every 5 us otherwise"); it is used while no table is in
 * force. Called from any context: must not sleep.
 */
typedef void (*spintune_rule_fn)(u8 cpu_class, u32 opcode, u64 bytes,
				 struct spintune_entry *out);

/**
 * struct spintune_dev_info - what a driver registers.
 * @name: device name: the sysfs directory, /dev/spintune/<name> and the
 *	device a blob must name (at most SPINTUNE_DEVICE_NAME_BYTES - 1 bytes,
 *	no '/', '"', '\\' or control characters).
 * @dev: the controller's device, for the kernel log and the firmware file,
 *	which is named after what identifies it across boots: its OF node
 *	(spintune/soc/mmc@80010000.bin), else its bus id
 *	(spintune/0000:00:04.0.bin). Pass the controller (a platform or PCI
 *	device), not a device the kernel numbers in probe order. May be NULL:
 *	then no firmware is requested.
 * @table: default table compiled in (from a generated header), or NULL.
 * @rule: built-in rule used when @table is NULL, or NULL: then, until a
 *	table arrives, spintune_begin() returns false and the driver waits as
 *	it always did (for rules that need more than the opcode and length,
 *	such as spi-bcm2835's estimate from the bus clock).
 * @atomic: every wait of the device runs in atomic context
 *	(spintune_wait_atomic()): a table that would have it sleep or spin
 *	beyond SPINTUNE_MAX_ATOMIC_SPIN_NS is refused (-EINVAL), whether
 *	compiled in (registration fails) or from a blob (the table in force
 *	stays).
 */
struct spintune_dev_info {
	const char *name;
	struct device *dev;
	const struct spintune_table *table;
	spintune_rule_fn rule;
	bool atomic;
};

/**
 * struct spintune_wait - one wait's state, on the caller's stack.
 * @entry: a copy of the entry in force for the command (its context leaf);
 *	stays valid however long the wait sleeps, whatever tables are swapped
 *	meanwhile.
 * @stats: what this wait did: pass &w.stats to the wait.h helpers.
 * @issue_ns: when spintune_begin() ran (ktime_get_ns()), if @context or
 *	the spintune_wait tracepoint is enabled; else 0.
 * @done_ns: 0, or when the driver saw the hardware complete (ktime_get_ns():
 *	when its poll saw the status, or in its IRQ handler): the completion
 *	time spintune_end() records for the next command's context and the
 *	spintune_wait tracepoint reports (@done_ns - @issue_ns); 0 records the
 *	time of spintune_end(). Every driver should set it.
 * @cpu_ns: 0, or the CPU time the request cost, as the driver measured it
 *	(docs/kernel-module.md, "Outcomes"): the waiter's spinning and polling,
 *	the completion's interrupt handler and wake-up, from issue until the
 *	waiter runs again.
 * @latency_ns: 0 (not measured: the request counts in the statistics but
 *	not in the outcomes), or issue to the waiter running again after the
 *	completion, in ns.
 * @context: the command counts in the device's context state (the table in
 *	force at spintune_begin() had context leaves).
 * @write: the command is a write for the table in force.
 * @slot: the key's statistics slot (internal).
 * @outcome_gen: the device's outcome generation at spintune_begin() (internal).
 * @version: the version of the table in force at spintune_begin() (internal).
 * @opcode: the command's opcode (internal).
 * @cpu_class: the caller's CPU class (internal).
 * @size_class: the command's size class (internal).
 */
struct spintune_wait {
	struct spintune_entry entry;
	struct spintune_wait_stats stats;
	u64 issue_ns;
	u64 done_ns;
	u64 cpu_ns;
	u64 latency_ns;
	bool context;
	bool write;
	u16 slot;
	u32 outcome_gen;
	u64 version;
	u32 opcode;
	u8 cpu_class;
	u8 size_class;
};

#if IS_ENABLED(CONFIG_SPINTUNE)

/**
 * spintune_register() - register a device and load its initial table.
 * @info: the device; copied, need not outlive the call.
 *
 * Creates /sys/kernel/spintune/<name>/, /dev/spintune/<name> and the
 * debugfs statistics, then, when @info->dev is set, queues a work item
 * that requests the firmware file spintune/<stable name>.bin (see
 * struct spintune_dev_info): a valid blob there replaces the default, a
 * refused one is logged and the default stays. Returns without waiting
 * for the file, so it may be called from a probe or an SPI ->setup() that
 * holds locks the firmware loader must not wait under. Must be called from
 * process context (may sleep).
 *
 * Return: the handle, or an ERR_PTR(): -EINVAL for a bad @info, -EEXIST
 * when the name is taken, -ENOMEM, or misc_register()'s error. An error
 * must not fail the driver's probe: every other call accepts the ERR_PTR()
 * (and NULL) and the driver then waits its own way.
 */
struct spintune_dev *spintune_register(const struct spintune_dev_info *info);

/**
 * spintune_firmware_wait() - wait until the firmware request of the
 *	registration (or of a write to the firmware attribute) has finished.
 * @sd: the handle (NULL or an ERR_PTR is ignored).
 *
 * For a driver that wants the shipped table in force before its first
 * command, and for tests. May sleep; not under a lock the firmware loader
 * may need.
 */
void spintune_firmware_wait(struct spintune_dev *sd);

/**
 * spintune_unregister() - remove a device; its tables are freed.
 * @sd: the handle (NULL or an ERR_PTR is ignored).
 *
 * Cancels a pending firmware request, removes /dev/spintune/<name> (a file
 * still open keeps the memory, its writes are refused with -ENODEV), sysfs
 * (waiting for readers and writers) and debugfs.
 * REQUIRES: no spintune_begin()/spintune_end() on @sd runs or will run.
 * May sleep.
 */
void spintune_unregister(struct spintune_dev *sd);

/**
 * spintune_begin() - look up how to wait for one command.
 * @sd: the device, or NULL or an ERR_PTR() (then: false).
 * @cpu_class: the CPU class the caller runs on (0 on a single-class SoC).
 * @opcode: the command's opcode.
 * @bytes: the command's transfer length in bytes.
 * @w: receives a copy of the entry (the leaf of the command's context for
 *	keys with one), the issue time and zeroed statistics.
 *
 * O(1): the table's key index, at most SPINTUNE_MAX_CONTEXT_DEPTH context
 * comparisons (and one clock read) for a table with context, and the
 * statistics slot; never sleeps, never allocates: safe in atomic and
 * hard-IRQ context. Every call must be followed by one spintune_end() (it
 * counts the command in flight).
 *
 * Return: true when @w->entry says how to wait; false when no table is in
 * force and the device has no rule, or @sd is not a registered device: wait
 * the driver's own way (and still call spintune_end(), with what it did in
 * @w->stats).
 */
bool spintune_begin(struct spintune_dev *sd, u8 cpu_class, u32 opcode,
		    u64 bytes, struct spintune_wait *w);

/**
 * spintune_end() - account a finished wait in the key's statistics, its
 *	outcomes and the device's context state.
 * @sd: the device.
 * @w: the wait from spintune_begin(), after the wait.h helper returned
 *	(with @w->done_ns set if the driver knows it, and @w->cpu_ns and
 *	@w->latency_ns if it measured them).
 *
 * A measured request (@w->latency_ns > 0) is added to the key's outcomes
 * (/sys/kernel/debug/spintune/<name>/outcomes) unless a table was put in
 * force or the outcomes were reset since spintune_begin(): each request
 * counts for the version it waited by. O(1); never sleeps; safe in atomic
 * and hard-IRQ context.
 */
void spintune_end(struct spintune_dev *sd, const struct spintune_wait *w);

/**
 * spintune_install_blob() - validate a blob and put it in force.
 * @sd: the device.
 * @blob: the blob (any alignment).
 * @len: its length in bytes.
 * @origin: where it came from, for the kernel log ("sysfs", "firmware").
 *
 * What the sysfs attribute and the firmware loader call. On success the
 * new table is swapped in with RCU and the old one freed after a grace
 * period; on failure the table in force stays and the log says why.
 * May sleep.
 *
 * Return: 0, or the parser's -errno (see spintune_blob_parse()); -ENODEV
 * when the blob names another device; -ENOMEM.
 */
int spintune_install_blob(struct spintune_dev *sd, const void *blob, size_t len,
			  const char *origin);

/**
 * spintune_last_error() - why the last refused blob was refused.
 * @sd: the device.
 * @buf: receives "ORIGIN: REASON (-ERRNO)", or "" when none was refused.
 * @len: size of @buf in bytes.
 *
 * What /sys/kernel/spintune/<name>/last_error shows. May sleep.
 */
void spintune_last_error(struct spintune_dev *sd, char *buf, size_t len);

/**
 * spintune_outcomes_show() - print the device's outcomes.
 * @sd: the device.
 * @m: receives a spintune-outcomes version 1 JSON document
 *	(docs/verification.md): per key, the measured requests since the
 *	table in force was put in force or the last reset, and their sums.
 *
 * What /sys/kernel/debug/spintune/<name>/outcomes shows. May sleep.
 */
void spintune_outcomes_show(struct spintune_dev *sd, struct seq_file *m);

/**
 * spintune_outcomes_reset() - start the device's outcomes from zero.
 * @sd: the device.
 *
 * What a write to the outcomes file does; the version stays. May sleep.
 */
void spintune_outcomes_reset(struct spintune_dev *sd);

/**
 * spintune_version() - the version of the table in force.
 * @sd: the device.
 *
 * Return: the blob's version, 0 while the default is in force.
 */
u64 spintune_version(struct spintune_dev *sd);

#else /* !CONFIG_SPINTUNE */

static inline struct spintune_dev *
spintune_register(const struct spintune_dev_info *info)
{
	return NULL;
}

static inline void spintune_unregister(struct spintune_dev *sd)
{
}

static inline void spintune_firmware_wait(struct spintune_dev *sd)
{
}

static inline bool spintune_begin(struct spintune_dev *sd, u8 cpu_class,
				  u32 opcode, u64 bytes,
				  struct spintune_wait *w)
{
	memset(w, 0, sizeof(*w));
	return false;
}

static inline void spintune_end(struct spintune_dev *sd,
				const struct spintune_wait *w)
{
}

static inline int spintune_install_blob(struct spintune_dev *sd,
					const void *blob, size_t len,
					const char *origin)
{
	return -EOPNOTSUPP;
}

static inline void spintune_last_error(struct spintune_dev *sd, char *buf,
				       size_t len)
{
	if (len)
		buf[0] = '\0';
}

static inline void spintune_outcomes_show(struct spintune_dev *sd,
					  struct seq_file *m)
{
}

static inline void spintune_outcomes_reset(struct spintune_dev *sd)
{
}

static inline u64 spintune_version(struct spintune_dev *sd)
{
	return 0;
}

#endif /* CONFIG_SPINTUNE */

#endif /* _LINUX_SPINTUNE_H */
