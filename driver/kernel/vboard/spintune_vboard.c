// SPDX-License-Identifier: GPL-2.0
/*
 * spintune_vboard.ko - the virtual board's demo driver.
 *
 * The SD card of a QEMU sdhci-pci controller stays mmc_block's
 * (/dev/mmcblk0); this module stands where a host driver's completion wait
 * stands. It interposes on the host's ->request (the mmc_host_ops of
 * <linux/mmc/host.h>) for data commands and waits for each the way
 * spintune says, on the controller's own status: spinning reads the
 * interrupt-status register (SDHCI_INT_STATUS, SD Host Controller
 * Simplified Specification 3.00, 2.2.18) with the controller's interrupt
 * line masked, as a polling driver masks its interrupt; SPINTUNE_ARM_IRQ
 * unmasks it and sleeps on a completion the request's done callback
 * (sdhci's interrupt handler, through mmc_request_done()) signals. After a
 * spin that saw the command complete, the unmasked interrupt runs sdhci's
 * handler at once, which finishes the request; the waiter does not sleep.
 * It measures, per request, the latency (issue to the waiter running
 * again) and the CPU time (that interval minus the CPU's idle time in it),
 * and hands both to spintune_end() in table mode: spintune.ko's outcomes
 * file (/sys/kernel/debug/spintune/mmc0/outcomes) reports them per key.
 *
 * Its load generator issues reads and writes to the card through the block
 * layer (bios on /dev/mmcblk0), one at a time, in four kinds (struct
 * vb_card_profile), writes random data and keeps each block's CRC-32, and
 * checks every block it reads back against the CRC of what it wrote last:
 * a mismatch is data loss, counted and logged.
 *
 * QEMU 7.2's SD card finishes every command inside the register write that
 * starts it. The board therefore gives the card a latency of its own: a
 * data command reaches sdhci a seeded, per-kind random time after it was
 * issued, as a card's busy time would hold it. An hrtimer (hard-IRQ
 * context) only wakes a real-time kernel thread, which hands the command
 * to sdhci's ->request (which may sleep) in process context; the guest
 * runs with preempt=full, so the thread preempts a spinning waiter as a
 * card finishing would not need to. The mmc tracepoints see the hold as
 * the command's completion time, as on a real board.
 *
 * Control (debugfs, as root):
 *   echo "MODE COUNT SEED" > /sys/kernel/debug/spintune_vboard/run
 *	MODE: table (spintune's table, or the default rule before a push),
 *	irq (always sleep), spin (always poll), sleep (a timer sleep longer
 *	than any command, then poll: what a timer sleep costs); COUNT requests
 *	cycling through the four kinds of command; SEED picks the latencies,
 *	the blocks and the data.
 *   cat /sys/kernel/debug/spintune_vboard/results    per key, last run
 *   cat /sys/kernel/debug/spintune_vboard/platform   platform costs JSON
 *
 * The default rule is the mxs-mmc vendor rule: spin for transfers of at
 * most 1 KiB, take the interrupt above.
 */
#define pr_fmt(fmt) "spintune_vboard: " fmt

#include <linux/bio.h>
#include <linux/blk-mq.h>
#include <linux/blkdev.h>
#include <linux/completion.h>
#include <linux/crc32.h>
#include <linux/debugfs.h>
#include <linux/hrtimer.h>
#include <linux/interrupt.h>
#include <linux/io.h>
#include <linux/kernel_stat.h>
#include <linux/kthread.h>
#include <linux/ktime.h>
#include <linux/mmc/card.h>
#include <linux/mmc/core.h>
#include <linux/mmc/host.h>
#include <linux/mmc/mmc.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/pci.h>
#include <linux/prandom.h>
#include <linux/sched.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/tick.h>
#include <linux/vmalloc.h>

#include <linux/spintune.h>
#include "spintune/wait.h"

static char *disk = "/dev/mmcblk0";
module_param(disk, charp, 0444);
MODULE_PARM_DESC(disk, "the SD card's block device (mmc_block on sdhci-pci)");

/* SD Host Controller registers (Simplified Specification 3.00, 2.2). */
#define VB_SDHCI_REGS_BYTES 0x100
#define VB_SDHCI_INT_STATUS 0x30
#define VB_SDHCI_INT_DATA_END BIT(1)
#define VB_SDHCI_INT_ERROR BIT(15)

#define VB_BLOCK_BYTES 512u
#define VB_BUFFER_ORDER 3 /* 32 KiB */
#define VB_AREA_BLOCKS 8192u /* the first 4 MiB of the card */
#define VB_WAIT_TIMEOUT_NS (100ull * NSEC_PER_MSEC)
#define VB_ALWAYS_SPIN_NS SPINTUNE_MAX_SPIN_NS
#define VB_KINDS 4
#define VB_SLEEP_NS (2ull * NSEC_PER_MSEC) /* longer than any command */

/**
 * struct vb_card_profile - the virtual card's latency for one kind of command.
 * @opcode: the MMC command mmc_block issues for it.
 * @blocks: 512-byte blocks transferred.
 * @write: true for a write.
 * @base_ns: fixed part of the latency.
 * @jitter_ns: uniform random part added to it.
 * @slow_permille: how often (per thousand) the card is slow instead.
 * @slow_ns: the slow latency (a write the card must program first).
 */
struct vb_card_profile {
	u32 opcode;
	u32 blocks;
	bool write;
	u32 base_ns;
	u32 jitter_ns;
	u32 slow_permille;
	u32 slow_ns;
};

static const struct vb_card_profile vb_kinds[VB_KINDS] = {
	{ MMC_READ_SINGLE_BLOCK, 1, false, 15000, 10000, 0, 0 },
	{ MMC_READ_MULTIPLE_BLOCK, 8, false, 250000, 100000, 0, 0 },
	{ MMC_WRITE_BLOCK, 1, true, 20000, 10000, 150, 1500000 },
	{ MMC_WRITE_MULTIPLE_BLOCK, 64, true, 900000, 200000, 0, 0 },
};

/**
 * struct vb_key_result - what one run measured for one kind of command.
 * @n: requests.
 * @cpu_ns: sum of the CPU time per request.
 * @latency_ns: sum of the latency per request.
 * @card_ns: sum of the issue-to-done time per request.
 * @wake_ns: sum of done-to-running for waits that slept.
 * @slept: waits that slept on the completion.
 * @stats: the wait.h counters summed.
 * @errors: requests that failed.
 * @verified: blocks read back and checked against what was written.
 * @data_loss: blocks read back that differ from what was written.
 */
struct vb_key_result {
	u64 n;
	u64 cpu_ns;
	u64 latency_ns;
	u64 card_ns;
	u64 wake_ns;
	u64 slept;
	struct spintune_wait_stats stats;
	u64 errors;
	u64 verified;
	u64 data_loss;
};

/**
 * struct vb_board - the card, its host and the run in progress.
 * @bdev: the card's block device (held exclusively).
 * @host: its host.
 * @regs: the controller's registers (BAR 0 of the sdhci-pci device).
 * @irq: the controller's interrupt line.
 * @st: the spintune device (named after the host: mmc0).
 * @orig_ops: the host's own operations.
 * @ops: a copy of them whose ->request waits for data commands.
 * @hold: the hrtimer that ends a held command's latency.
 * @releaser: hands a held command to sdhci, in process context.
 * @held: the command being held, or NULL.
 * @release: the command whose latency has passed, for @releaser.
 * @hold_ns: how long the next data command is held.
 * @kind: the kind of the next data command.
 * @mode: the run's mode ("table", "irq", "spin", "sleep").
 * @done: signalled by the done callback.
 * @orig_done: the done callback mmc_block gave the request.
 * @done_at_ns: when the done callback ran.
 * @buf: the data buffer (1 << VB_BUFFER_ORDER pages).
 * @crc: CRC-32 of what was last written to each block of the area.
 * @written: the blocks of the area written since the module loaded.
 * @lock: serializes runs and reads of the results.
 * @results: the last run's results per kind.
 * @irq_run: the last irq run's results (platform costs).
 * @spin_run: the last spin run's results (platform costs).
 * @sleep_run: the last sleep run's results (platform costs).
 * @debugfs: the control directory.
 */
struct vb_board {
	struct block_device *bdev;
	struct mmc_host *host;
	void __iomem *regs;
	int irq;
	struct spintune_dev *st;
	const struct mmc_host_ops *orig_ops;
	struct mmc_host_ops ops;
	struct hrtimer hold;
	struct task_struct *releaser;
	struct mmc_request *held;
	struct mmc_request *release;
	u64 hold_ns;
	int kind;
	char mode[8];
	struct completion done;
	void (*orig_done)(struct mmc_request *mrq);
	u64 done_at_ns;
	struct page *buf;
	u32 *crc;
	unsigned long *written;
	struct mutex lock;
	struct vb_key_result results[VB_KINDS];
	struct vb_key_result irq_run[VB_KINDS];
	struct vb_key_result spin_run[VB_KINDS];
	struct vb_key_result sleep_run[VB_KINDS];
	struct dentry *debugfs;
};

static struct vb_board *vb_the_board;

/* mxs-mmc's vendor rule: PIO (spin) up to 1 KiB, DMA and IRQ above. */
static void vb_default_rule(u8 cpu_class, u32 opcode, u64 bytes,
			    struct spintune_entry *out)
{
	*out = (struct spintune_entry){
		.cpu_class = cpu_class,
		.size_class = spintune_size_class(bytes),
		.opcode = opcode,
		.strategy = bytes <= 1024 ? SPINTUNE_SPIN : SPINTUNE_IRQ,
		.spin_ns = bytes <= 1024 ? VB_ALWAYS_SPIN_NS : 0,
	};
}

/* Hard-IRQ context: the card's latency has passed; nothing here sleeps. */
static enum hrtimer_restart vb_hold_done(struct hrtimer *t)
{
	struct vb_board *vb = container_of(t, struct vb_board, hold);

	/* Pairs with the xchg() in vb_releaser(): it sees the request whole. */
	smp_store_release(&vb->release, vb->held);
	wake_up_process(vb->releaser);
	return HRTIMER_NORESTART;
}

/* The card's side: hands each held command to sdhci, which may sleep. */
static int vb_releaser(void *arg)
{
	struct vb_board *vb = arg;
	struct mmc_request *mrq;

	while (!kthread_should_stop()) {
		set_current_state(TASK_INTERRUPTIBLE);
		mrq = xchg(&vb->release, NULL);
		if (!mrq) {
			schedule();
			continue;
		}
		__set_current_state(TASK_RUNNING);
		vb->orig_ops->request(vb->host, mrq);
	}
	__set_current_state(TASK_RUNNING);
	return 0;
}

/* sdhci's interrupt handler finished the request (hard-IRQ context). */
static void vb_done(struct mmc_request *mrq)
{
	struct vb_board *vb = vb_the_board;
	void (*orig)(struct mmc_request *mrq) = vb->orig_done;

	vb->done_at_ns = ktime_get_ns();
	mrq->done = orig;
	complete(&vb->done);
	orig(mrq);
}

/* What a waiter polls: the controller's interrupt status. */
static u32 vb_int_status(struct vb_board *vb)
{
	return readl(vb->regs + VB_SDHCI_INT_STATUS);
}

/*
 * This CPU's idle time so far, in ns (microsecond resolution): idle and
 * iowait, which is idle time while a task waits for I/O (the load
 * generator, in submit_bio_wait()).
 */
static u64 vb_idle_ns(void)
{
	const int cpu = raw_smp_processor_id();
	const u64 idle = get_cpu_idle_time_us(cpu, NULL);
	const u64 iowait = get_cpu_iowait_time_us(cpu, NULL);

	if (idle == (u64)-1 || iowait == (u64)-1)
		return 0;
	return (idle + iowait) * NSEC_PER_USEC;
}

/* The entry of a mode other than "table". */
static void vb_mode_entry(const char *mode, struct spintune_entry *e)
{
	memset(e, 0, sizeof(*e));
	if (mode[0] == 'i') {
		e->strategy = SPINTUNE_IRQ;
	} else if (mode[1] == 'p') {
		e->strategy = SPINTUNE_SPIN;
		e->spin_ns = VB_ALWAYS_SPIN_NS;
	} else {
		e->strategy = SPINTUNE_SLEEP_THEN_SPIN;
		e->sleep_ns = VB_SLEEP_NS;
		e->spin_ns = VB_ALWAYS_SPIN_NS;
	}
}

/*
 * The host's ->request, in mmc_block's issue context (process context, the
 * host claimed): other commands go to sdhci as they are; a data command of
 * the run is held for the card's latency and waited for as the table (or
 * the run's mode) says, then measured.
 */
static void vb_request(struct mmc_host *host, struct mmc_request *mrq)
{
	struct vb_board *vb = vb_the_board;
	const int kind = vb->kind;
	struct vb_key_result *r;
	struct spintune_wait w;
	u64 t0, idle0, t1, idle1;
	bool table, masked, slept = false;
	u32 status;
	int rc;

	if (!mrq->data || kind < 0) {
		vb->orig_ops->request(host, mrq);
		return;
	}
	vb->kind = -1; /* one data command per bio */
	r = &vb->results[kind];
	table = !strcmp(vb->mode, "table");
	if (table)
		spintune_begin(vb->st, 0, mrq->cmd->opcode,
			       mrq->data->blksz * mrq->data->blocks, &w);
	else
		memset(&w, 0, sizeof(w));
	if (!table || w.entry.strategy == 0)
		vb_mode_entry(table ? "irq" : vb->mode, &w.entry);
	/* Every wait but the IRQ's polls the status with the line masked. */
	masked = w.entry.strategy != SPINTUNE_IRQ;

	reinit_completion(&vb->done);
	vb->orig_done = mrq->done;
	mrq->done = vb_done;
	t0 = ktime_get_ns();
	idle0 = vb_idle_ns();
	if (masked)
		disable_irq(vb->irq);
	vb->held = mrq;
	hrtimer_start(&vb->hold, ns_to_ktime(vb->hold_ns), HRTIMER_MODE_REL_HARD);
	rc = spintune_wait(&w.entry, vb_int_status, status,
			   status & (VB_SDHCI_INT_DATA_END | VB_SDHCI_INT_ERROR),
			   VB_WAIT_TIMEOUT_NS, &w.stats, vb);
	if (masked)
		enable_irq(vb->irq); /* after a hit sdhci's handler runs now */
	if (rc)
		slept = true; /* SPINTUNE_ARM_IRQ, or a spin or poll that gave up */
	wait_for_completion(&vb->done);
	t1 = ktime_get_ns();
	idle1 = vb_idle_ns();

	w.latency_ns = t1 - t0;
	w.cpu_ns = (t1 - t0) - min(t1 - t0, idle1 - idle0);
	w.done_ns = vb->done_at_ns;
	r->n++;
	r->latency_ns += w.latency_ns;
	r->cpu_ns += w.cpu_ns;
	r->card_ns += vb->done_at_ns - t0;
	if (slept) {
		r->slept++;
		r->wake_ns += t1 - vb->done_at_ns;
	}
	r->stats.spin_hits += w.stats.spin_hits;
	r->stats.irq_fallbacks += w.stats.irq_fallbacks;
	r->stats.timeouts += w.stats.timeouts;
	r->stats.sleeps += w.stats.sleeps;
	r->stats.polls += w.stats.polls;
	if (table)
		spintune_end(vb->st, &w);
}

/* One bio of @k at @block, synchronously; 0 or a -errno. */
static int vb_io(struct vb_board *vb, const struct vb_card_profile *k, u32 block)
{
	struct bio *bio;
	u32 i;
	int rc;

	bio = bio_alloc(vb->bdev, k->blocks, k->write ? REQ_OP_WRITE : REQ_OP_READ,
			GFP_KERNEL);
	bio->bi_iter.bi_sector = (sector_t)block * (VB_BLOCK_BYTES >> SECTOR_SHIFT);
	for (i = 0; i < k->blocks * VB_BLOCK_BYTES; i += PAGE_SIZE)
		bio_add_page(bio, vb->buf + i / PAGE_SIZE,
			     min_t(u32, PAGE_SIZE, k->blocks * VB_BLOCK_BYTES - i), 0);
	rc = submit_bio_wait(bio);
	bio_put(bio);
	return rc;
}

static u8 *vb_block(struct vb_board *vb, u32 i)
{
	return (u8 *)page_address(vb->buf) + i * VB_BLOCK_BYTES;
}

/* Random data for a write; each block's CRC-32 is kept once it is written. */
static void vb_fill(struct vb_board *vb, const struct vb_card_profile *k,
		    struct rnd_state *rnd)
{
	prandom_bytes_state(rnd, page_address(vb->buf), k->blocks * VB_BLOCK_BYTES);
}

static void vb_written(struct vb_board *vb, const struct vb_card_profile *k, u32 block)
{
	u32 i;

	for (i = 0; i < k->blocks; i++) {
		vb->crc[block + i] = crc32_le(~0, vb_block(vb, i), VB_BLOCK_BYTES);
		set_bit(block + i, vb->written);
	}
}

/* Checks what was read against what was written; a mismatch is data loss. */
static void vb_verify(struct vb_board *vb, const struct vb_card_profile *k, u32 block,
		      struct vb_key_result *r)
{
	u32 i, crc;

	for (i = 0; i < k->blocks; i++) {
		if (!test_bit(block + i, vb->written))
			continue; /* not written since load: nothing to compare */
		crc = crc32_le(~0, vb_block(vb, i), VB_BLOCK_BYTES);
		r->verified++;
		if (crc != vb->crc[block + i]) {
			r->data_loss++;
			pr_err("data loss: block %u read back with CRC-32 %08x, %08x was written\n",
			       block + i, crc, vb->crc[block + i]);
		}
	}
}

static u32 vb_card_ns(const struct vb_card_profile *k, struct rnd_state *rnd)
{
	if (k->slow_permille && prandom_u32_state(rnd) % 1000 < k->slow_permille)
		return k->slow_ns;
	return k->base_ns + prandom_u32_state(rnd) % (k->jitter_ns + 1);
}

static void vb_run(struct vb_board *vb, const char *mode, u32 count, u32 seed)
{
	struct rnd_state rnd;
	u32 i;

	prandom_seed_state(&rnd, seed);
	memset(vb->results, 0, sizeof(vb->results));
	strscpy(vb->mode, mode, sizeof(vb->mode));
	for (i = 0; i < count; i++) {
		const int kind = i % VB_KINDS;
		const struct vb_card_profile *k = &vb_kinds[kind];
		const u32 hold_ns = vb_card_ns(k, &rnd);
		const u32 block = prandom_u32_state(&rnd) % (VB_AREA_BLOCKS - k->blocks);
		struct vb_key_result *r = &vb->results[kind];

		if (k->write)
			vb_fill(vb, k, &rnd);
		vb->hold_ns = hold_ns;
		WRITE_ONCE(vb->kind, kind);
		if (vb_io(vb, k, block))
			r->errors++;
		else if (k->write)
			vb_written(vb, k, block);
		else
			vb_verify(vb, k, block, r);
		WRITE_ONCE(vb->kind, -1);
		if (i % 64 == 63)
			cond_resched();
	}
	if (!strcmp(mode, "irq"))
		memcpy(vb->irq_run, vb->results, sizeof(vb->results));
	else if (!strcmp(mode, "spin"))
		memcpy(vb->spin_run, vb->results, sizeof(vb->results));
	else if (!strcmp(mode, "sleep"))
		memcpy(vb->sleep_run, vb->results, sizeof(vb->results));
}

static ssize_t run_write(struct file *file, const char __user *ubuf, size_t len,
			 loff_t *ppos)
{
	struct vb_board *vb = file->private_data;
	char line[64], mode[8];
	u32 count, seed;

	if (len >= sizeof(line))
		return -EINVAL;
	if (copy_from_user(line, ubuf, len))
		return -EFAULT;
	line[len] = 0;
	if (sscanf(line, "%7s %u %u", mode, &count, &seed) != 3 ||
	    (strcmp(mode, "table") && strcmp(mode, "irq") && strcmp(mode, "spin") &&
	     strcmp(mode, "sleep")) ||
	    !count)
		return -EINVAL;
	mutex_lock(&vb->lock);
	vb_run(vb, mode, count, seed);
	mutex_unlock(&vb->lock);
	return len;
}

static const struct file_operations run_fops = {
	.owner = THIS_MODULE,
	.open = simple_open,
	.write = run_write,
	.llseek = noop_llseek,
};

static int results_show(struct seq_file *m, void *unused)
{
	struct vb_board *vb = m->private;
	int i;

	mutex_lock(&vb->lock);
	seq_printf(m, "# mode %s, table version %llu\n", vb->mode, spintune_version(vb->st));
	seq_puts(m, "opcode bytes n cpu_ns lat_ns card_ns slept spin_hits irq_fallbacks timeouts sleeps polls errors verified data_loss\n");
	for (i = 0; i < VB_KINDS; i++) {
		const struct vb_key_result *r = &vb->results[i];

		if (!r->n)
			continue;
		seq_printf(m, "%u %u %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu\n",
			   vb_kinds[i].opcode, vb_kinds[i].blocks * VB_BLOCK_BYTES, r->n,
			   r->cpu_ns / r->n, r->latency_ns / r->n, r->card_ns / r->n,
			   r->slept, r->stats.spin_hits, r->stats.irq_fallbacks,
			   r->stats.timeouts, r->stats.sleeps, r->stats.polls, r->errors,
			   r->verified, r->data_loss);
	}
	mutex_unlock(&vb->lock);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(results);

/* Means over the kinds of a run: CPU, latency and card time per request. */
static void vb_run_means(const struct vb_key_result *run, u64 *cpu, u64 *lat, u64 *card)
{
	u64 n = 0;
	int i;

	*cpu = *lat = *card = 0;
	for (i = 0; i < VB_KINDS; i++) {
		n += run[i].n;
		*cpu += run[i].cpu_ns;
		*lat += run[i].latency_ns;
		*card += run[i].card_ns;
	}
	if (n) {
		*cpu /= n;
		*lat /= n;
		*card /= n;
	}
}

/*
 * Platform costs for the tuner (docs/csv-formats.md) from the last irq,
 * spin and sleep runs on one seed. Every request costs the CPU the same
 * work whatever the wait (issuing it, sdhci's handler): a spinning request
 * shows it as CPU beyond its completion time X, which the model does not
 * charge SPIN. The same amount is taken off the IRQ path's and the timer
 * sleep's CPU, so all three are priced alike.
 */
static int platform_show(struct seq_file *m, void *unused)
{
	struct vb_board *vb = m->private;
	u64 irq_cpu, irq_lat, irq_card, spin_cpu, spin_lat, spin_card;
	u64 sleep_cpu, sleep_lat, sleep_card, wake = 0, slept = 0, common;
	int i;

	mutex_lock(&vb->lock);
	vb_run_means(vb->irq_run, &irq_cpu, &irq_lat, &irq_card);
	vb_run_means(vb->spin_run, &spin_cpu, &spin_lat, &spin_card);
	vb_run_means(vb->sleep_run, &sleep_cpu, &sleep_lat, &sleep_card);
	for (i = 0; i < VB_KINDS; i++) {
		wake += vb->irq_run[i].wake_ns;
		slept += vb->irq_run[i].slept;
	}
	if (slept && spin_cpu && sleep_lat) {
		common = spin_cpu - min(spin_cpu, spin_card);
		seq_printf(m, "{\"irq_cpu_ns\": %llu, \"irq_wake_ns\": %llu, \"poll_read_ns\": %u, \"timer_cpu_ns\": %llu, \"timer_wake_ns\": %llu}\n",
			   irq_cpu - min(irq_cpu, common), wake / slept, 50,
			   sleep_cpu - min(sleep_cpu, common),
			   sleep_lat - min(sleep_lat, VB_SLEEP_NS));
	}
	mutex_unlock(&vb->lock);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(platform);

/* The card behind @bdev: mmc_block's disk is a child of the card's device. */
static struct mmc_card *vb_card_of(struct block_device *bdev)
{
	struct device *parent = disk_to_dev(bdev->bd_disk)->parent;

	if (!parent || !parent->bus || strcmp(parent->bus->name, "mmc"))
		return NULL;
	return container_of(parent, struct mmc_card, dev);
}

/* Swaps the host's operations with no block request in flight. */
static void vb_set_ops(struct vb_board *vb, const struct mmc_host_ops *ops)
{
	struct request_queue *q = bdev_get_queue(vb->bdev);

	blk_mq_freeze_queue(q);
	WRITE_ONCE(vb->host->ops, ops);
	blk_mq_unfreeze_queue(q);
}

static void vb_free(struct vb_board *vb)
{
	if (vb->releaser)
		kthread_stop(vb->releaser);
	if (vb->regs)
		iounmap(vb->regs);
	if (!IS_ERR_OR_NULL(vb->bdev))
		blkdev_put(vb->bdev, FMODE_READ | FMODE_WRITE | FMODE_EXCL);
	if (vb->buf)
		__free_pages(vb->buf, VB_BUFFER_ORDER);
	vfree(vb->crc);
	bitmap_free(vb->written);
	kfree(vb);
}

static int __init vb_init(void)
{
	struct spintune_dev_info info = { .rule = vb_default_rule };
	struct vb_board *vb;
	struct mmc_card *card;
	struct pci_dev *pdev;
	int rc;

	vb = kzalloc(sizeof(*vb), GFP_KERNEL);
	if (!vb)
		return -ENOMEM;
	vb->kind = -1;
	mutex_init(&vb->lock);
	init_completion(&vb->done);
	hrtimer_init(&vb->hold, CLOCK_MONOTONIC, HRTIMER_MODE_REL_HARD);
	vb->hold.function = vb_hold_done;
	vb->buf = alloc_pages(GFP_KERNEL, VB_BUFFER_ORDER);
	vb->crc = vzalloc(VB_AREA_BLOCKS * sizeof(*vb->crc));
	vb->written = bitmap_zalloc(VB_AREA_BLOCKS, GFP_KERNEL);
	rc = -ENOMEM;
	if (!vb->buf || !vb->crc || !vb->written)
		goto err;
	vb->bdev = blkdev_get_by_path(disk, FMODE_READ | FMODE_WRITE | FMODE_EXCL, vb);
	if (IS_ERR(vb->bdev)) {
		rc = PTR_ERR(vb->bdev);
		pr_err("cannot open %s: %d\n", disk, rc);
		goto err;
	}
	card = vb_card_of(vb->bdev);
	rc = -ENODEV;
	if (!card || !dev_is_pci(mmc_dev(card->host))) {
		pr_err("%s is not an SD card on a PCI host\n", disk);
		goto err;
	}
	vb->host = card->host;
	pdev = to_pci_dev(mmc_dev(vb->host));
	vb->irq = pdev->irq;
	/* Read the status only; sdhci-pci owns the BAR and writes to it. */
	vb->regs = ioremap(pci_resource_start(pdev, 0), VB_SDHCI_REGS_BYTES);
	if (!vb->regs)
		goto err;
	vb->releaser = kthread_run(vb_releaser, vb, "spintune_vboard");
	if (IS_ERR(vb->releaser)) {
		rc = PTR_ERR(vb->releaser);
		vb->releaser = NULL;
		goto err;
	}
	sched_set_fifo(vb->releaser);

	/* The controller (the sdhci-pci device), not the card: its bus id
	 * names the firmware file across boots (spintune/0000:00:02.0.bin).
	 */
	info.name = mmc_hostname(vb->host);
	info.dev = mmc_dev(vb->host);
	vb->st = spintune_register(&info);
	if (IS_ERR(vb->st))
		dev_warn(info.dev, "spintune: %pe; waiting the driver's own way\n", vb->st);

	vb_the_board = vb;
	vb->orig_ops = vb->host->ops;
	vb->ops = *vb->orig_ops;
	vb->ops.request = vb_request;
	vb_set_ops(vb, &vb->ops);
	vb->debugfs = debugfs_create_dir("spintune_vboard", NULL);
	debugfs_create_file("run", 0200, vb->debugfs, vb, &run_fops);
	debugfs_create_file("results", 0444, vb->debugfs, vb, &results_fops);
	debugfs_create_file("platform", 0444, vb->debugfs, vb, &platform_fops);
	dev_info(mmc_dev(vb->host), "spintune virtual board on %s (%s, IRQ %d): %llu MiB card\n",
		 mmc_hostname(vb->host), disk, vb->irq,
		 (u64)bdev_nr_sectors(vb->bdev) >> (20 - SECTOR_SHIFT));
	return 0;

err:
	vb_free(vb);
	return rc;
}

static void __exit vb_exit(void)
{
	struct vb_board *vb = vb_the_board;

	debugfs_remove_recursive(vb->debugfs); /* waits for a run in progress */
	vb_set_ops(vb, vb->orig_ops);
	hrtimer_cancel(&vb->hold);
	spintune_unregister(vb->st);
	vb_the_board = NULL;
	vb_free(vb);
}

module_init(vb_init);
module_exit(vb_exit);

MODULE_DESCRIPTION("spintune virtual board: waits for an SD card's commands by the table");
MODULE_LICENSE("GPL");
