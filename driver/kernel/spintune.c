// SPDX-License-Identifier: GPL-2.0
/*
 * spintune.ko - policy tables for drivers that wait for their devices.
 *
 * A driver registers a device (spintune_register()) with a default: a table
 * compiled in from a generated header, or a built-in rule. Tables arrive as
 * blobs (docs/policy-format.md): written to /dev/spintune/<name> (any
 * length, staged per open file) or /sys/kernel/spintune/<name>/table (one
 * write of at most a page), what `spintune-agent --sink attr:...` does, or
 * shipped in /lib/firmware as spintune/<stable name>.bin, requested from a
 * work item after registration. Each blob is checked by the same parser
 * user space uses (spintune_table_parse() in spintune/blob.h), then put in
 * force with an RCU pointer swap; the old table is freed after a grace
 * period. A refused blob changes nothing and the kernel log says why.
 *
 * Per device:
 *   /dev/spintune/<name>                  the blob in force (read), a new one (write)
 *   /sys/kernel/spintune/<name>/table     the same, a blob of at most a page
 *   /sys/kernel/spintune/<name>/version   the version in force, 0 for the default
 *   /sys/kernel/spintune/<name>/source    rule, header, driver, firmware or sysfs
 *   /sys/kernel/spintune/<name>/last_error why the last refused blob was refused
 *   /sys/kernel/spintune/<name>/firmware  the firmware file's name (read); any
 *	write requests it again
 *   /sys/kernel/debug/spintune/<name>/stats   wait statistics per key
 *   /sys/kernel/debug/spintune/<name>/outcomes  measured cost per key under the
 *	table in force, a spintune-outcomes JSON document (read); any write
 *	resets it
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/debugfs.h>
#include <linux/device.h>
#include <linux/err.h>
#include <linux/firmware.h>
#include <linux/hash.h>
#include <linux/kobject.h>
#include <linux/list.h>
#include <linux/miscdevice.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/of.h>
#include <linux/overflow.h>
#include <linux/percpu.h>
#include <linux/rcupdate.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/sysfs.h>
#include <linux/timekeeping.h>
#include <linux/uaccess.h>
#include <linux/workqueue.h>
#include <asm/unaligned.h>

#include <linux/spintune.h>

#define CREATE_TRACE_POINTS
#include "spintune_trace.h"

/* Statistics slots per device: a power of two, plus slot 0 for overflow. */
#define SPINTUNE_SLOT_BITS 7
#define SPINTUNE_SLOTS (1u << SPINTUNE_SLOT_BITS)
#define SPINTUNE_SLOT_PROBES 8
/* A request's cpu_ns and latency_ns are capped here (4.29 s) so that their
 * squares and product fit a u64.
 */
#define SPINTUNE_OUTCOME_MAX_NS U32_MAX
/* No valid blob is longer: whatever its origin, a longer one is refused
 * before anything is allocated for it. Trials take entries' places
 * (entries + trials <= SPINTUNE_MAX_ENTRIES) and are shorter than them.
 */
#define SPINTUNE_MAX_BLOB_BYTES                                                \
	(SPINTUNE_BLOB_HEADER_V2_BYTES + SPINTUNE_MAX_ENTRIES * SPINTUNE_BLOB_ENTRY_BYTES + \
	 SPINTUNE_MAX_NODES * SPINTUNE_BLOB_NODE_BYTES)
#define SPINTUNE_ORIGIN_SYSFS "sysfs"
#define SPINTUNE_ORIGIN_CDEV "dev"
#define SPINTUNE_ORIGIN_FIRMWARE "firmware"

/**
 * struct spintune_installed - a table put in force from a blob.
 * @rcu: frees it after the grace period that follows its replacement.
 * @table: the decoded table; it points into @storage.
 * @blob: the blob it came from (read back through sysfs), after @storage.
 * @blob_bytes: length of @blob.
 * @storage: the decoded entries, context nodes and key index
 *	(spintune_table_parse()).
 */
struct spintune_installed {
	struct rcu_head rcu;
	struct spintune_table table;
	const u8 *blob;
	size_t blob_bytes;
	u64 storage[];
};

/**
 * struct spintune_outcome - measured cost of a key's requests: the sums of a
 *	spintune-outcomes report (docs/verification.md).
 * @requests: measured requests.
 * @cpu_ns: sum of their cpu_ns.
 * @latency_ns: sum of their latency_ns.
 * @cpu_ns_sq: sum of cpu_ns squared.
 * @latency_ns_sq: sum of latency_ns squared.
 * @cpu_latency_ns: sum of cpu_ns * latency_ns.
 *
 * Requests are added whole or not at all (spintune_outcome_add()), so the
 * sums always describe the same requests. The squares overflow first: at
 * 2^64 / v^2 requests of v ns (18 million of 1 ms, 1.8 billion of 100 us);
 * from then on the sums keep the requests before.
 */
struct spintune_outcome {
	u64 requests;
	u64 cpu_ns;
	u64 latency_ns;
	u64 cpu_ns_sq;
	u64 latency_ns_sq;
	u64 cpu_latency_ns;
};

/**
 * struct spintune_key_stats - one key's wait counters on one CPU.
 * @waits: finished waits.
 * @spin_hits: waits that completed while polling.
 * @irq_fallbacks: waits handed to the interrupt.
 * @timeouts: waits that gave up.
 * @sleeps: timer sleeps.
 * @polls: condition evaluations.
 * @atomic_downgrades: atomic waits that could not do what the entry asked
 *	(struct spintune_wait_stats).
 * @outcome_gen: the device's outcome generation @outcome belongs to; an
 *	older one is stale and restarts from zero at the next request.
 * @outcome: measured cost since the table in force was put in force (or
 *	since the last reset), if @outcome_gen is current.
 */
struct spintune_key_stats {
	u64 waits;
	u64 spin_hits;
	u64 irq_fallbacks;
	u64 timeouts;
	u64 sleeps;
	u64 polls;
	u64 atomic_downgrades;
	u32 outcome_gen;
	struct spintune_outcome outcome;
};

/**
 * struct spintune_dev - a registered device.
 * @kobj: /sys/kernel/spintune/<name>; its release frees the device.
 * @node: in spintune_devices.
 * @name: the device name.
 * @dev: the driver's device, or NULL.
 * @default_table: compiled-in default, or NULL.
 * @rule: built-in default when @default_table is NULL.
 * @atomic: every wait runs in atomic context: tables must respect
 *	spintune_table_atomic_why().
 * @installed: the table from a blob in force, NULL while the default is.
 * @lock: serializes installs, @last_error and @gone.
 * @gone: unregistered; an open file of /dev/spintune/<name> may still hold
 *	the device, whose writes are refused. Under @lock.
 * @source: where the table in force came from; under @lock.
 * @last_error: why the last refused blob was refused; under @lock.
 * @misc: /dev/spintune/<name>.
 * @misc_name: its name, "spintune!<name>" ('!' is a '/' in /dev).
 * @fw_name: the firmware file requested, "spintune/<stable name>.bin", or
 *	NULL (no @dev).
 * @fw_work: requests @fw_name after registration, off the caller's locks.
 * @downgrade_gen: the outcome generation whose first atomic downgrade was
 *	logged (one message per table put in force).
 * @keys: statistics slot i holds key + 1 (0: free); slot 0 is overflow.
 * @stats: per-CPU array of SPINTUNE_SLOTS + 1 counters.
 * @outcome_gen: bumped (under @lock) when a table is put in force or the
 *	outcomes are reset: per-CPU outcomes of an older generation are stale.
 * @outcome_version: the version the current generation's requests waited
 *	by (0: the default); under @lock.
 * @debugfs: the device's debugfs directory.
 * @ctx: the context state of the device's commands (spintune/table.h).
 */
struct spintune_dev {
	struct kobject kobj;
	struct list_head node;
	char name[SPINTUNE_DEVICE_NAME_BYTES];
	struct device *dev;
	const struct spintune_table *default_table;
	spintune_rule_fn rule;
	bool atomic;
	struct spintune_installed __rcu *installed;
	struct mutex lock;
	bool gone;
	const char *source;
	char last_error[160];
	struct miscdevice misc;
	char misc_name[sizeof("spintune!") + SPINTUNE_DEVICE_NAME_BYTES];
	char *fw_name;
	struct work_struct fw_work;
	atomic_t downgrade_gen;
	atomic64_t keys[SPINTUNE_SLOTS + 1];
	struct spintune_key_stats __percpu *stats;
	u32 outcome_gen;
	u64 outcome_version;
	struct dentry *debugfs;
	struct spintune_ctx ctx;
};

static struct kobject *spintune_root;
static struct dentry *spintune_debugfs_root;
static LIST_HEAD(spintune_devices);
static DEFINE_MUTEX(spintune_devices_lock);

#define spintune_log(sd, level, fmt, ...)                                      \
	do {                                                                   \
		if ((sd)->dev)                                                 \
			dev_##level((sd)->dev, "spintune %s: " fmt, (sd)->name, \
				    ##__VA_ARGS__);                            \
		else                                                           \
			pr_##level("%s: " fmt, (sd)->name, ##__VA_ARGS__);     \
	} while (0)

static const char *spintune_strategy_name(u8 strategy)
{
	switch (strategy) {
	case SPINTUNE_IRQ:
		return "irq";
	case SPINTUNE_SPIN:
		return "spin";
	case SPINTUNE_SPIN_THEN_IRQ:
		return "spin_then_irq";
	case SPINTUNE_SLEEP_THEN_SPIN:
		return "sleep_then_spin";
	case SPINTUNE_POLL_SLEEP:
		return "poll_sleep";
	default:
		return "driver"; /* no table, no rule: the driver's own way */
	}
}

/* The table in force, or NULL (rule or the driver's own way). Caller holds
 * rcu_read_lock().
 */
static const struct spintune_table *spintune_table_in_force(struct spintune_dev *sd)
{
	const struct spintune_installed *inst = rcu_dereference(sd->installed);

	return inst ? &inst->table : sd->default_table;
}

/*
 * The entry in force for a command with features @f (its context leaf);
 * false when the driver's own way is (no table, no rule). Sets *@write when
 * the table calls the opcode a write. Caller holds rcu_read_lock().
 */
static bool spintune_entry_for(struct spintune_dev *sd, u8 cpu_class, u32 opcode,
			       const struct spintune_features *f,
			       struct spintune_entry *out, bool *write)
{
	const struct spintune_table *table = spintune_table_in_force(sd);

	*write = false;
	if (table) {
		*out = *spintune_lookup_ctx(table, cpu_class, opcode, f);
		*write = spintune_is_write(table, opcode);
	} else if (sd->rule) {
		sd->rule(cpu_class, opcode, f->value[SPINTUNE_FEATURE_BYTES], out);
	} else {
		return false;
	}
	return true;
}

/* The statistics slot of a key: open addressing, claimed lock-free. */
static u16 spintune_slot(struct spintune_dev *sd, u64 key)
{
	const u64 tag = key + 1;
	const u32 home = hash_64(tag, SPINTUNE_SLOT_BITS);
	u32 i;

	for (i = 0; i < SPINTUNE_SLOT_PROBES; i++) {
		const u16 slot = 1 + ((home + i) & (SPINTUNE_SLOTS - 1));
		s64 cur = atomic64_read(&sd->keys[slot]);

		if (cur == 0)
			cur = atomic64_cmpxchg(&sd->keys[slot], 0, tag);
		if (cur == 0 || cur == tag)
			return slot;
	}
	return 0;
}

bool spintune_begin(struct spintune_dev *sd, u8 cpu_class, u32 opcode,
		    u64 bytes, struct spintune_wait *w)
{
	/* Without context leaves in force: the features of no history. */
	struct spintune_features f = { { 0, SPINTUNE_NO_WRITE_YET, 0, bytes } };
	const struct spintune_installed *inst;
	const struct spintune_table *table;
	bool found;

	memset(w, 0, sizeof(*w));
	if (IS_ERR_OR_NULL(sd))
		return false; /* not registered: the driver's own way */
	/* Pairs with spintune_new_outcome_gen(): seeing a generation means
	 * seeing the table put in force before it.
	 */
	w->outcome_gen = smp_load_acquire(&sd->outcome_gen);
	w->opcode = opcode;
	w->cpu_class = cpu_class;
	w->size_class = spintune_size_class(bytes);
	rcu_read_lock();
	inst = rcu_dereference(sd->installed);
	w->version = inst ? inst->table.version : 0;
	table = spintune_table_in_force(sd);
	if (table && table->node_count) {
		/* Only tables with context pay for the clock read and the state. */
		w->context = true;
		w->issue_ns = ktime_get_ns();
		spintune_ctx_issue(&sd->ctx, w->issue_ns, bytes, &f);
	} else if (trace_spintune_wait_enabled()) {
		w->issue_ns = ktime_get_ns(); /* a static branch while disabled */
	}
	found = spintune_entry_for(sd, cpu_class, opcode, &f, &w->entry, &w->write);
	rcu_read_unlock();
	w->slot = spintune_slot(sd, spintune__entry_key(cpu_class, opcode, w->size_class));
	return found;
}
EXPORT_SYMBOL_GPL(spintune_begin);

/* Adds @x to @sum, or leaves @sum as it is when a sum would overflow. */
static bool spintune_outcome_add(struct spintune_outcome *sum,
				 const struct spintune_outcome *x)
{
	struct spintune_outcome r;

	if (check_add_overflow(sum->requests, x->requests, &r.requests) ||
	    check_add_overflow(sum->cpu_ns, x->cpu_ns, &r.cpu_ns) ||
	    check_add_overflow(sum->latency_ns, x->latency_ns, &r.latency_ns) ||
	    check_add_overflow(sum->cpu_ns_sq, x->cpu_ns_sq, &r.cpu_ns_sq) ||
	    check_add_overflow(sum->latency_ns_sq, x->latency_ns_sq, &r.latency_ns_sq) ||
	    check_add_overflow(sum->cpu_latency_ns, x->cpu_latency_ns, &r.cpu_latency_ns))
		return false;
	*sum = r;
	return true;
}

/*
 * A measured request into this CPU's outcomes of its key. With interrupts
 * off: the stale check and the six sums must not interleave with a
 * spintune_end() from an interrupt handler on this CPU.
 */
static void spintune_count_outcome(struct spintune_key_stats __percpu *stats,
				   const struct spintune_wait *w)
{
	const u64 cpu = min_t(u64, w->cpu_ns, SPINTUNE_OUTCOME_MAX_NS);
	const u64 lat = min_t(u64, w->latency_ns, SPINTUNE_OUTCOME_MAX_NS);
	const struct spintune_outcome one = {
		1, cpu, lat, cpu * cpu, lat * lat, cpu * lat,
	};
	struct spintune_key_stats *s;
	unsigned long flags;

	local_irq_save(flags);
	s = this_cpu_ptr(stats);
	if (s->outcome_gen != w->outcome_gen) {
		memset(&s->outcome, 0, sizeof(s->outcome));
		WRITE_ONCE(s->outcome_gen, w->outcome_gen);
	}
	spintune_outcome_add(&s->outcome, &one);
	local_irq_restore(flags);
}

/*
 * The table asked an atomic wait for a sleep or a spin beyond the atomic
 * cap: the wait took the IRQ instead. Counted, and logged once per table
 * put in force (and per reset of the outcomes), from any context.
 */
static void spintune_downgraded(struct spintune_dev *sd,
				struct spintune_key_stats __percpu *s,
				const struct spintune_wait *w)
{
	this_cpu_add(s->atomic_downgrades, w->stats.atomic_downgrades);
	if (atomic_xchg(&sd->downgrade_gen, w->outcome_gen) == w->outcome_gen)
		return;
	spintune_log(sd, warn,
		     "table version %llu asks a wait in atomic context for more than it may do (opcode %u, size class %u: %s, spin %u ns, sleep %u ns, poll %u ns; the atomic cap is %u ns of spin, no sleep): it took the IRQ instead\n",
		     spintune_version(sd), w->entry.opcode, w->entry.size_class,
		     spintune_strategy_name(w->entry.strategy), w->entry.spin_ns,
		     w->entry.sleep_ns, w->entry.poll_interval_ns,
		     SPINTUNE_MAX_ATOMIC_SPIN_NS);
}

/* What a wait came to, from what its wait.h helper counted. */
static u8 spintune_result(const struct spintune_wait *w)
{
	if (w->stats.spin_hits)
		return SPINTUNE_RESULT_SPIN;
	if (w->stats.irq_fallbacks)
		return SPINTUNE_RESULT_IRQ;
	if (w->stats.timeouts)
		return SPINTUNE_RESULT_TIMEOUT;
	return SPINTUNE_RESULT_DRIVER;
}

void spintune_end(struct spintune_dev *sd, const struct spintune_wait *w)
{
	struct spintune_key_stats __percpu *s;

	if (IS_ERR_OR_NULL(sd))
		return;
	s = sd->stats + w->slot;
	if (w->context)
		spintune_ctx_done(&sd->ctx, w->issue_ns,
				  w->done_ns ? w->done_ns : ktime_get_ns(), w->write);
	if (trace_spintune_wait_enabled()) {
		const u64 done_ns = w->done_ns ? w->done_ns : ktime_get_ns();

		trace_spintune_wait(sd->name, w, w->issue_ns && done_ns > w->issue_ns ?
				    done_ns - w->issue_ns : 0, spintune_result(w));
	}

	this_cpu_inc(s->waits);
	this_cpu_add(s->spin_hits, w->stats.spin_hits);
	this_cpu_add(s->irq_fallbacks, w->stats.irq_fallbacks);
	this_cpu_add(s->timeouts, w->stats.timeouts);
	this_cpu_add(s->sleeps, w->stats.sleeps);
	this_cpu_add(s->polls, w->stats.polls);
	if (unlikely(w->stats.atomic_downgrades))
		spintune_downgraded(sd, s, w);
	/* Slot 0 mixes keys: it has no outcomes. A request that began under
	 * an older generation waited (partly) by another table: not counted.
	 */
	if (w->latency_ns && w->slot && w->outcome_gen == READ_ONCE(sd->outcome_gen))
		spintune_count_outcome(s, w);
}
EXPORT_SYMBOL_GPL(spintune_end);

u64 spintune_version(struct spintune_dev *sd)
{
	const struct spintune_installed *inst;
	u64 version;

	if (IS_ERR_OR_NULL(sd))
		return 0;
	rcu_read_lock();
	inst = rcu_dereference(sd->installed);
	version = inst ? inst->table.version : 0;
	rcu_read_unlock();
	return version;
}
EXPORT_SYMBOL_GPL(spintune_version);

/* Starts a new outcome generation: what was measured before is stale. */
static void spintune_new_outcome_gen(struct spintune_dev *sd, u64 version)
{
	lockdep_assert_held(&sd->lock);
	sd->outcome_version = version;
	/* Pairs with smp_load_acquire() in spintune_begin(): the table put in
	 * force is seen with the generation.
	 */
	smp_store_release(&sd->outcome_gen, sd->outcome_gen + 1);
}

/* Refuses a blob: keeps the table in force, records and logs why. */
static int spintune_refuse(struct spintune_dev *sd, const char *origin,
			   size_t len, int rc, const char *why)
{
	lockdep_assert_held(&sd->lock);
	trace_spintune_table_install(sd->name, origin, spintune_version(sd), 0, 0, len, rc);
	snprintf(sd->last_error, sizeof(sd->last_error), "%s: %s (%d)", origin,
		 why, rc);
	spintune_log(sd, err,
		     "refused a %zu-byte table from %s: %s (%d); version %llu stays in force\n",
		     len, origin, why, rc, spintune_version(sd));
	return rc;
}

void spintune_last_error(struct spintune_dev *sd, char *buf, size_t len)
{
	if (IS_ERR_OR_NULL(sd)) {
		strscpy(buf, "", len);
		return;
	}
	mutex_lock(&sd->lock);
	strscpy(buf, sd->last_error, len);
	mutex_unlock(&sd->lock);
}
EXPORT_SYMBOL_GPL(spintune_last_error);

static void spintune_free_installed(struct spintune_installed *inst)
{
	kvfree(inst);
}

static int spintune_install_locked(struct spintune_dev *sd, const u8 *blob,
				   size_t len, const char *origin)
{
	struct spintune_installed *inst, *old;
	const char *why = "";
	size_t storage, total;
	int rc;

	lockdep_assert_held(&sd->lock);
	if (sd->gone)
		return -ENODEV; /* unregistered: an open file outlived it */
	/* Before anything is allocated for it, whatever its origin. */
	if (len > SPINTUNE_MAX_BLOB_BYTES)
		return spintune_refuse(sd, origin, len, -EFBIG, "larger than any valid table");
	/* Sized by the counts the blob declares, within the limits; the
	 * parser checks them.
	 */
	storage = spintune_blob_storage_bytes(blob, len);
	inst = kvzalloc(sizeof(*inst) + storage + len, GFP_KERNEL);
	if (!inst)
		return spintune_refuse(sd, origin, len, -ENOMEM, "out of memory");
	rc = spintune_table_parse(blob, len, inst->storage, storage, &inst->table, &why);
	if (rc)
		goto refuse;
	total = get_unaligned_le32(blob + 8);
	if (len != total) {
		rc = -EINVAL;
		why = "bytes after the declared end";
		goto refuse;
	}
	if (strncmp(inst->table.device, sd->name, sizeof(sd->name))) {
		rc = -ENODEV;
		why = "fitted for another device";
		goto refuse;
	}
	if (sd->atomic) {
		rc = spintune_table_atomic_why(&inst->table, &why);
		if (rc)
			goto refuse;
	}
	inst->blob = (const u8 *)inst->storage + storage;
	memcpy((u8 *)inst->blob, blob, len);
	inst->blob_bytes = len;

	old = rcu_dereference_protected(sd->installed, lockdep_is_held(&sd->lock));
	rcu_assign_pointer(sd->installed, inst);
	spintune_new_outcome_gen(sd, inst->table.version);
	sd->source = origin;
	if (old)
		kvfree_rcu(old, rcu);
	trace_spintune_table_install(sd->name, origin, inst->table.version,
				     inst->table.count, inst->table.node_count, len, 0);
	spintune_log(sd, info,
		     "table version %llu (%u entries, %u context nodes) from %s in force\n",
		     inst->table.version, inst->table.count, inst->table.node_count, origin);
	return 0;

refuse:
	spintune_free_installed(inst);
	return spintune_refuse(sd, origin, len, rc, why);
}

int spintune_install_blob(struct spintune_dev *sd, const void *blob, size_t len,
			  const char *origin)
{
	int rc;

	if (IS_ERR_OR_NULL(sd))
		return -ENODEV;
	mutex_lock(&sd->lock);
	rc = spintune_install_locked(sd, blob, len, origin);
	mutex_unlock(&sd->lock);
	return rc;
}
EXPORT_SYMBOL_GPL(spintune_install_blob);

static inline struct spintune_dev *to_spintune_dev(struct kobject *kobj)
{
	return container_of(kobj, struct spintune_dev, kobj);
}

/*
 * A blob through sysfs is one write() from offset 0. kernfs hands a binary
 * attribute at most a page per call, and has no release hook to tell a
 * writer's last page: a blob that does not fit in one page is refused here
 * (a writer that loops would otherwise leave a half-staged blob behind, or
 * interleave with another writer); it goes to /dev/spintune/<name>, which
 * stages per open file.
 */
static ssize_t table_write(struct file *file, struct kobject *kobj,
			   struct bin_attribute *attr, char *buf, loff_t off,
			   size_t count)
{
	struct spintune_dev *sd = to_spintune_dev(kobj);
	int rc;

	mutex_lock(&sd->lock);
	if (off != 0)
		rc = spintune_refuse(sd, SPINTUNE_ORIGIN_SYSFS, count, -EINVAL,
				     "a blob through sysfs is one write from offset 0");
	else if (count == PAGE_SIZE && get_unaligned_le32(buf + 8) > count)
		rc = spintune_refuse(sd, SPINTUNE_ORIGIN_SYSFS,
				     get_unaligned_le32(buf + 8), -EFBIG,
				     "longer than one write to sysfs takes: write it to /dev/spintune/<name>");
	else
		rc = spintune_install_locked(sd, buf, count, SPINTUNE_ORIGIN_SYSFS);
	mutex_unlock(&sd->lock);
	return rc ? rc : count;
}

static ssize_t table_read(struct file *file, struct kobject *kobj,
			  struct bin_attribute *attr, char *buf, loff_t off,
			  size_t count)
{
	struct spintune_dev *sd = to_spintune_dev(kobj);
	const struct spintune_installed *inst;
	ssize_t n = 0;

	rcu_read_lock();
	inst = rcu_dereference(sd->installed);
	if (inst && off < inst->blob_bytes) {
		n = min_t(size_t, count, inst->blob_bytes - off);
		memcpy(buf, inst->blob + off, n);
	}
	rcu_read_unlock();
	return n;
}

static BIN_ATTR_RW(table, 0);

static ssize_t version_show(struct kobject *kobj, struct kobj_attribute *attr,
			    char *buf)
{
	return sysfs_emit(buf, "%llu\n", spintune_version(to_spintune_dev(kobj)));
}

static ssize_t source_show(struct kobject *kobj, struct kobj_attribute *attr,
			   char *buf)
{
	struct spintune_dev *sd = to_spintune_dev(kobj);
	ssize_t n;

	mutex_lock(&sd->lock);
	n = sysfs_emit(buf, "%s\n", sd->source);
	mutex_unlock(&sd->lock);
	return n;
}

static ssize_t last_error_show(struct kobject *kobj, struct kobj_attribute *attr,
			       char *buf)
{
	char why[sizeof(((struct spintune_dev *)0)->last_error)];

	spintune_last_error(to_spintune_dev(kobj), why, sizeof(why));
	return sysfs_emit(buf, "%s\n", why);
}

static ssize_t firmware_show(struct kobject *kobj, struct kobj_attribute *attr,
			     char *buf)
{
	const struct spintune_dev *sd = to_spintune_dev(kobj);

	return sysfs_emit(buf, "%s\n", sd->fw_name ? sd->fw_name : "");
}

/* Any write requests the firmware file again, e.g. once the root file
 * system holding it is mounted (a built-in driver registers before).
 */
static ssize_t firmware_store(struct kobject *kobj, struct kobj_attribute *attr,
			      const char *buf, size_t count)
{
	struct spintune_dev *sd = to_spintune_dev(kobj);

	if (!sd->fw_name)
		return -ENODEV;
	queue_work(system_unbound_wq, &sd->fw_work);
	return count;
}

static struct kobj_attribute version_attr = __ATTR_RO(version);
static struct kobj_attribute source_attr = __ATTR_RO(source);
static struct kobj_attribute last_error_attr = __ATTR_RO(last_error);
static struct kobj_attribute firmware_attr = __ATTR_RW_MODE(firmware, 0644);

static struct attribute *spintune_attrs[] = {
	&version_attr.attr,
	&source_attr.attr,
	&last_error_attr.attr,
	&firmware_attr.attr,
	NULL,
};

static struct bin_attribute *spintune_bin_attrs[] = {
	&bin_attr_table,
	NULL,
};

static const struct attribute_group spintune_group = {
	.attrs = spintune_attrs,
	.bin_attrs = spintune_bin_attrs,
};

static const struct attribute_group *spintune_groups[] = {
	&spintune_group,
	NULL,
};

static void spintune_release(struct kobject *kobj)
{
	struct spintune_dev *sd = to_spintune_dev(kobj);

	free_percpu(sd->stats);
	kfree(sd->fw_name);
	kfree(sd);
}

static struct kobj_type spintune_ktype = {
	.release = spintune_release,
	.sysfs_ops = &kobj_sysfs_ops,
	.default_groups = spintune_groups,
};

/* The key of a statistics slot's tag (key + 1, spintune__entry_key()). */
static void spintune_tag_key(u64 tag, u8 *cpu_class, u32 *opcode, u8 *size_class)
{
	*cpu_class = (tag - 1) >> 40;
	*opcode = (u32)((tag - 1) >> 8);
	*size_class = (u8)(tag - 1);
}

static int stats_show(struct seq_file *m, void *unused)
{
	struct spintune_dev *sd = m->private;
	u32 slot;

	seq_printf(m, "# version %llu\n", spintune_version(sd));
	seq_puts(m, "cpu opcode size_class strategy spin_ns sleep_ns poll_interval_ns waits spin_hits irq_fallbacks timeouts sleeps polls atomic_downgrades\n");
	for (slot = 0; slot <= SPINTUNE_SLOTS; slot++) {
		const u64 tag = atomic64_read(&sd->keys[slot]);
		struct spintune_key_stats sum = {};
		struct spintune_entry e = {};
		u8 cpu_class, size_class;
		u32 opcode;
		int cpu;

		for_each_possible_cpu(cpu) {
			const struct spintune_key_stats *s =
				per_cpu_ptr(sd->stats + slot, cpu);

			sum.waits += s->waits;
			sum.spin_hits += s->spin_hits;
			sum.irq_fallbacks += s->irq_fallbacks;
			sum.timeouts += s->timeouts;
			sum.sleeps += s->sleeps;
			sum.polls += s->polls;
			sum.atomic_downgrades += s->atomic_downgrades;
		}
		if (!sum.waits)
			continue;
		if (!tag) { /* slot 0: keys beyond the slots */
			seq_printf(m, "* * * - - - - %llu %llu %llu %llu %llu %llu %llu\n",
				   sum.waits, sum.spin_hits, sum.irq_fallbacks,
				   sum.timeouts, sum.sleeps, sum.polls,
				   sum.atomic_downgrades);
			continue;
		}
		spintune_tag_key(tag, &cpu_class, &opcode, &size_class);
		rcu_read_lock();
		{
			/* A key's entry for a device with no history (its first
			 * leaf's, for keys with context).
			 */
			const struct spintune_features f = { {
				0, SPINTUNE_NO_WRITE_YET, 0,
				size_class ? 1ull << (size_class - 1) : 0 } };
			bool write;

			spintune_entry_for(sd, cpu_class, opcode, &f, &e, &write);
		}
		rcu_read_unlock();
		seq_printf(m, "%u %u %u %s %u %u %u %llu %llu %llu %llu %llu %llu %llu\n",
			   cpu_class, opcode, size_class,
			   spintune_strategy_name(e.strategy), e.spin_ns, e.sleep_ns,
			   e.poll_interval_ns, sum.waits, sum.spin_hits,
			   sum.irq_fallbacks, sum.timeouts, sum.sleeps, sum.polls,
			   sum.atomic_downgrades);
	}
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(stats);

/*
 * The outcomes of the current generation as a spintune-outcomes version 1
 * document (docs/verification.md): per key seen, the sums over the CPUs
 * (a CPU whose sums would overflow the total is left out whole).
 */
void spintune_outcomes_show(struct spintune_dev *sd, struct seq_file *m)
{
	const char *sep = "";
	u32 slot, gen;

	if (IS_ERR_OR_NULL(sd))
		return;
	mutex_lock(&sd->lock); /* no install, no reset meanwhile */
	gen = sd->outcome_gen;
	seq_printf(m, "{\"format\": \"spintune-outcomes\", \"format_version\": 1, \"device\": \"%s\",\n"
		   " \"mode\": \"table\", \"policy_version\": %llu, \"keys\": [",
		   sd->name, sd->outcome_version);
	for (slot = 1; slot <= SPINTUNE_SLOTS; slot++) {
		const u64 tag = atomic64_read(&sd->keys[slot]);
		struct spintune_outcome sum = {};
		u8 cpu_class, size_class;
		u32 opcode;
		int cpu;

		if (!tag)
			continue;
		for_each_possible_cpu(cpu) {
			const struct spintune_key_stats *s =
				per_cpu_ptr(sd->stats + slot, cpu);

			/* A racing spintune_end() on that CPU may be mid-way:
			 * debugfs, read it between runs.
			 */
			if (READ_ONCE(s->outcome_gen) == gen)
				spintune_outcome_add(&sum, &s->outcome);
		}
		if (!sum.requests)
			continue;
		spintune_tag_key(tag, &cpu_class, &opcode, &size_class);
		/* Class 0 is the tuner's "default"; others by index. */
		seq_printf(m, "%s\n  {\"cpu_class\": ", sep);
		if (cpu_class)
			seq_printf(m, "\"class%u\"", cpu_class);
		else
			seq_puts(m, "\"default\"");
		seq_printf(m, ", \"opcode\": %u, \"bytes\": %llu, \"size_class\": %u, \"requests\": %llu,\n"
			   "   \"cpu_ns_sum\": %llu, \"latency_ns_sum\": %llu, \"cpu_ns_sq_sum\": %llu,\n"
			   "   \"latency_ns_sq_sum\": %llu, \"cpu_latency_ns_sum\": %llu}",
			   opcode, size_class ? 1ull << (size_class - 1) : 0, size_class,
			   sum.requests, sum.cpu_ns, sum.latency_ns, sum.cpu_ns_sq,
			   sum.latency_ns_sq, sum.cpu_latency_ns);
		sep = ",";
	}
	seq_puts(m, "]}\n");
	mutex_unlock(&sd->lock);
}
EXPORT_SYMBOL_GPL(spintune_outcomes_show);

void spintune_outcomes_reset(struct spintune_dev *sd)
{
	if (IS_ERR_OR_NULL(sd))
		return;
	mutex_lock(&sd->lock);
	spintune_new_outcome_gen(sd, sd->outcome_version);
	mutex_unlock(&sd->lock);
}
EXPORT_SYMBOL_GPL(spintune_outcomes_reset);

static int outcomes_show(struct seq_file *m, void *unused)
{
	spintune_outcomes_show(m->private, m);
	return 0;
}

static int outcomes_open(struct inode *inode, struct file *file)
{
	return single_open(file, outcomes_show, inode->i_private);
}

/* Any write starts a new generation: the outcomes restart from zero. */
static ssize_t outcomes_write(struct file *file, const char __user *buf,
			      size_t len, loff_t *ppos)
{
	spintune_outcomes_reset(((struct seq_file *)file->private_data)->private);
	return len;
}

static const struct file_operations outcomes_fops = {
	.owner = THIS_MODULE,
	.open = outcomes_open,
	.read = seq_read,
	.write = outcomes_write,
	.llseek = seq_lseek,
	.release = single_release,
};

/* A name is a path component and a JSON string as it is (outcomes). */
static bool spintune_info_valid(const struct spintune_dev_info *info)
{
	size_t len, i;

	if (!info || !info->name)
		return false;
	len = strnlen(info->name, SPINTUNE_DEVICE_NAME_BYTES);
	if (len == 0 || len >= SPINTUNE_DEVICE_NAME_BYTES)
		return false;
	for (i = 0; i < len; i++) {
		const unsigned char c = info->name[i];

		if (c < 0x20 || c == '/' || c == '"' || c == '\\')
			return false;
	}
	return true;
}

/**
 * struct spintune_file - one open file of /dev/spintune/<name>.
 * @sd: the device (a reference on its kobject).
 * @lock: serializes this file's writes, flush and reads.
 * @buf: the blob being written, SPINTUNE_MAX_BLOB_BYTES, or NULL.
 * @staged: bytes of it written so far.
 *
 * Each open file stages its own blob: two writers never see each other's
 * bytes. The blob is put in force by the write that completes it (its
 * header declares its length); a file closed before that reports the
 * blob cut short (close() fails, last_error and the log say so).
 */
struct spintune_file {
	struct spintune_dev *sd;
	struct mutex lock;
	u8 *buf;
	size_t staged;
};

static int spintune_cdev_open(struct inode *inode, struct file *file)
{
	/* misc_open() set private_data to the miscdevice, under misc_mtx:
	 * spintune_unregister() cannot have freed the device yet.
	 */
	struct spintune_dev *sd = container_of(file->private_data,
					       struct spintune_dev, misc);
	struct spintune_file *f;

	f = kzalloc(sizeof(*f), GFP_KERNEL);
	if (!f)
		return -ENOMEM;
	kobject_get(&sd->kobj);
	f->sd = sd;
	mutex_init(&f->lock);
	file->private_data = f;
	return 0;
}

/* The bytes a staged blob declares, or 0 while its header is incomplete. */
static size_t spintune_file_declared(const struct spintune_file *f)
{
	return f->staged >= 12 ? get_unaligned_le32(f->buf + 8) : 0;
}

static void spintune_file_drop(struct spintune_file *f)
{
	kvfree(f->buf);
	f->buf = NULL;
	f->staged = 0;
}

/*
 * Appends to this file's blob (whatever the file position); the write that
 * completes it puts it in force and returns the parser's verdict. Bytes
 * beyond the blob's declared end start no new blob: they are refused, as
 * the blob would be with them.
 */
static ssize_t spintune_cdev_write(struct file *file, const char __user *ubuf,
				   size_t count, loff_t *ppos)
{
	struct spintune_file *f = file->private_data;
	struct spintune_dev *sd = f->sd;
	size_t declared;
	ssize_t rc = count;

	if (!count)
		return 0;
	if (READ_ONCE(sd->gone))
		return -ENODEV; /* the driver unregistered the device */
	mutex_lock(&f->lock);
	if (count > SPINTUNE_MAX_BLOB_BYTES - f->staged) {
		mutex_lock(&sd->lock);
		rc = spintune_refuse(sd, SPINTUNE_ORIGIN_CDEV, f->staged + count, -EFBIG,
				     "larger than any valid table");
		mutex_unlock(&sd->lock);
		spintune_file_drop(f);
		goto out;
	}
	if (!f->buf) {
		f->buf = kvmalloc(SPINTUNE_MAX_BLOB_BYTES, GFP_KERNEL);
		if (!f->buf) {
			rc = -ENOMEM;
			goto out;
		}
	}
	if (copy_from_user(f->buf + f->staged, ubuf, count)) {
		rc = -EFAULT;
		goto out;
	}
	f->staged += count;
	if (f->staged < 12)
		goto out; /* the length is not in yet */
	declared = spintune_file_declared(f);
	mutex_lock(&sd->lock);
	if (declared > SPINTUNE_MAX_BLOB_BYTES) {
		rc = spintune_refuse(sd, SPINTUNE_ORIGIN_CDEV, declared, -EFBIG,
				     "declares more bytes than any valid table");
	} else if (f->staged < declared) {
		mutex_unlock(&sd->lock);
		goto out; /* more to come */
	} else {
		rc = spintune_install_locked(sd, f->buf, f->staged, SPINTUNE_ORIGIN_CDEV);
	}
	mutex_unlock(&sd->lock);
	spintune_file_drop(f);
	if (!rc)
		rc = count;
out:
	if (rc > 0)
		*ppos += rc;
	mutex_unlock(&f->lock);
	return rc;
}

/* Reads the blob in force from the file position, as the sysfs table. */
static ssize_t spintune_cdev_read(struct file *file, char __user *ubuf,
				  size_t count, loff_t *ppos)
{
	struct spintune_file *f = file->private_data;
	const struct spintune_installed *inst;
	ssize_t rc;
	u8 *copy;
	size_t n;

	copy = kvmalloc(SPINTUNE_MAX_BLOB_BYTES, GFP_KERNEL);
	if (!copy)
		return -ENOMEM;
	rcu_read_lock();
	inst = rcu_dereference(f->sd->installed);
	n = inst ? inst->blob_bytes : 0;
	if (n)
		memcpy(copy, inst->blob, n);
	rcu_read_unlock();
	rc = simple_read_from_buffer(ubuf, count, ppos, copy, n);
	kvfree(copy);
	return rc;
}

/* Reports and drops a blob begun on @f and not finished. */
static int spintune_file_cut_short(struct spintune_file *f)
{
	struct spintune_dev *sd = f->sd;
	char why[80];
	int rc;

	snprintf(why, sizeof(why), "cut short: %zu of %zu bytes written",
		 f->staged, spintune_file_declared(f));
	mutex_lock(&sd->lock);
	rc = spintune_refuse(sd, SPINTUNE_ORIGIN_CDEV, f->staged, -EMSGSIZE, why);
	mutex_unlock(&sd->lock);
	spintune_file_drop(f);
	return rc;
}

/*
 * close(): the last descriptor of the file ends its blob, and close()
 * fails when the blob is incomplete. A descriptor of the same file that
 * a child process closes (a shell's "cmd >&3") ends nothing.
 */
static int spintune_cdev_flush(struct file *file, fl_owner_t id)
{
	struct spintune_file *f = file->private_data;
	int rc = 0;

	if (file_count(file) > 1)
		return 0;
	mutex_lock(&f->lock);
	if (f->staged)
		rc = spintune_file_cut_short(f);
	mutex_unlock(&f->lock);
	return rc;
}

/* The file is gone: a blob flush() did not see end (a race of closes). */
static int spintune_cdev_release(struct inode *inode, struct file *file)
{
	struct spintune_file *f = file->private_data;

	if (f->staged)
		spintune_file_cut_short(f);
	kvfree(f->buf);
	kobject_put(&f->sd->kobj);
	kfree(f);
	return 0;
}

static const struct file_operations spintune_cdev_fops = {
	.owner = THIS_MODULE,
	.open = spintune_cdev_open,
	.read = spintune_cdev_read,
	.write = spintune_cdev_write,
	.flush = spintune_cdev_flush,
	.release = spintune_cdev_release,
	.llseek = default_llseek,
};

/*
 * The firmware file of a device: named after what identifies it across
 * boots, its device-tree node ("spintune/soc/mmc@80010000.bin"), else its
 * bus id ("spintune/0000:00:04.0.bin"), never after the numbers the
 * kernel hands out in probe order (mmc0, spi0.0).
 */
static char *spintune_fw_name(struct device *dev)
{
	if (dev_of_node(dev))
		return kasprintf(GFP_KERNEL, "spintune%pOF.bin", dev_of_node(dev));
	return kasprintf(GFP_KERNEL, "spintune/%s.bin", dev_name(dev));
}

/*
 * Requests the firmware file from a work item, not from the driver's
 * probe or ->setup (which may hold the SPI controller's io_mutex). Quiet
 * when there is none: 6.1's request_firmware_nowait() warns about every
 * missing file and, without an uevent, waits up to 60 s for a user-space
 * helper (CONFIG_FW_LOADER_USER_HELPER=y in Debian), so the work item
 * calls firmware_request_nowarn() itself. The size is checked (in
 * spintune_install_locked()) before spintune allocates anything for it.
 */
static void spintune_fw_work(struct work_struct *work)
{
	struct spintune_dev *sd = container_of(work, struct spintune_dev, fw_work);
	const struct firmware *fw;
	int rc;

	rc = firmware_request_nowarn(&fw, sd->fw_name, sd->dev);
	if (rc) { /* no file: the default stays */
		dev_dbg(sd->dev, "spintune %s: no %s (%d)\n", sd->name, sd->fw_name, rc);
		return;
	}
	spintune_install_blob(sd, fw->data, fw->size, SPINTUNE_ORIGIN_FIRMWARE);
	release_firmware(fw);
}

void spintune_firmware_wait(struct spintune_dev *sd)
{
	if (!IS_ERR_OR_NULL(sd) && sd->fw_name)
		flush_work(&sd->fw_work);
}
EXPORT_SYMBOL_GPL(spintune_firmware_wait);

struct spintune_dev *spintune_register(const struct spintune_dev_info *info)
{
	struct spintune_dev *sd, *other;
	const char *why = NULL;
	int rc;

	might_sleep();
	if (!spintune_info_valid(info))
		return ERR_PTR(-EINVAL);
	if (info->atomic && info->table &&
	    spintune_table_atomic_why(info->table, &why)) {
		pr_err("%s: the compiled-in table cannot be waited by in atomic context: %s\n",
		       info->name, why);
		return ERR_PTR(-EINVAL);
	}
	sd = kzalloc(sizeof(*sd), GFP_KERNEL);
	if (!sd)
		return ERR_PTR(-ENOMEM);
	strscpy(sd->name, info->name, sizeof(sd->name));
	sd->dev = info->dev;
	sd->default_table = info->table;
	sd->rule = info->rule;
	sd->atomic = info->atomic;
	sd->source = info->table ? "header" : info->rule ? "rule" : "driver";
	mutex_init(&sd->lock);
	INIT_LIST_HEAD(&sd->node);
	INIT_WORK(&sd->fw_work, spintune_fw_work);
	atomic_set(&sd->downgrade_gen, -1);
	kobject_init(&sd->kobj, &spintune_ktype);
	sd->stats = __alloc_percpu(sizeof(*sd->stats) * (SPINTUNE_SLOTS + 1),
				   __alignof__(*sd->stats));
	if (sd->dev)
		sd->fw_name = spintune_fw_name(sd->dev);
	if (!sd->stats || (sd->dev && !sd->fw_name)) {
		kobject_put(&sd->kobj);
		return ERR_PTR(-ENOMEM);
	}

	mutex_lock(&spintune_devices_lock);
	list_for_each_entry(other, &spintune_devices, node) {
		if (!strcmp(other->name, sd->name)) {
			mutex_unlock(&spintune_devices_lock);
			kobject_put(&sd->kobj);
			return ERR_PTR(-EEXIST);
		}
	}
	rc = kobject_add(&sd->kobj, spintune_root, "%s", sd->name);
	if (rc)
		goto unlock;
	snprintf(sd->misc_name, sizeof(sd->misc_name), "spintune!%s", sd->name);
	sd->misc.minor = MISC_DYNAMIC_MINOR;
	sd->misc.name = sd->misc_name;
	sd->misc.fops = &spintune_cdev_fops;
	sd->misc.mode = 0600;
	rc = misc_register(&sd->misc);
	if (rc) {
		kobject_del(&sd->kobj);
		goto unlock;
	}
	list_add_tail(&sd->node, &spintune_devices);
	mutex_unlock(&spintune_devices_lock);

	sd->debugfs = debugfs_create_dir(sd->name, spintune_debugfs_root);
	debugfs_create_file("stats", 0444, sd->debugfs, sd, &stats_fops);
	debugfs_create_file("outcomes", 0644, sd->debugfs, sd, &outcomes_fops);
	if (sd->fw_name)
		queue_work(system_unbound_wq, &sd->fw_work);
	spintune_log(sd, info, "registered; default: %s; firmware file %s\n",
		     info->table ? "compiled-in table" :
		     info->rule ? "built-in rule" : "the driver's own waits",
		     sd->fw_name ? sd->fw_name : "none (no device)");
	return sd;

unlock:
	mutex_unlock(&spintune_devices_lock);
	kobject_put(&sd->kobj);
	return ERR_PTR(rc);
}
EXPORT_SYMBOL_GPL(spintune_register);

void spintune_unregister(struct spintune_dev *sd)
{
	struct spintune_installed *inst;

	if (IS_ERR_OR_NULL(sd))
		return;
	/* No new open of /dev/spintune/<name>; open ones hold the kobject. */
	misc_deregister(&sd->misc);
	debugfs_remove_recursive(sd->debugfs);
	mutex_lock(&spintune_devices_lock);
	list_del(&sd->node);
	mutex_unlock(&spintune_devices_lock);
	kobject_del(&sd->kobj); /* waits for sysfs readers and writers */
	/* After sysfs: a write to 'firmware' can no longer queue it again. */
	cancel_work_sync(&sd->fw_work);
	mutex_lock(&sd->lock);
	WRITE_ONCE(sd->gone, true); /* an open file's later writes are refused */
	sd->dev = NULL; /* the driver's device may go now: log by name */
	inst = rcu_replace_pointer(sd->installed, NULL, lockdep_is_held(&sd->lock));
	mutex_unlock(&sd->lock);
	if (inst)
		kvfree_rcu(inst, rcu);
	kobject_put(&sd->kobj);
}
EXPORT_SYMBOL_GPL(spintune_unregister);

static int __init spintune_init(void)
{
	spintune_root = kobject_create_and_add("spintune", kernel_kobj);
	if (!spintune_root)
		return -ENOMEM;
	spintune_debugfs_root = debugfs_create_dir("spintune", NULL);
	return 0;
}

static void __exit spintune_exit(void)
{
	debugfs_remove_recursive(spintune_debugfs_root);
	kobject_put(spintune_root);
}

module_init(spintune_init);
module_exit(spintune_exit);

MODULE_DESCRIPTION("spintune: per-command wait policy tables for device drivers");
MODULE_AUTHOR("spintune developers");
MODULE_LICENSE("GPL");
