// SPDX-License-Identifier: GPL-2.0
/*
 * spintune_vboard.ko - the virtual board's demo driver.
 *
 * An MMC card driver (in place of mmc_block) that issues real single- and
 * multi-block reads and writes to the SD card of a QEMU sdhci-pci
 * controller and waits for each completion the way spintune says:
 * SPINTUNE_ARM_IRQ means sleep on the completion that the request's done
 * callback (run from the sdhci interrupt) signals; spinning means polling
 * the flag the same callback sets; the sleeping strategies are wait.h's.
 * It measures, per request, the latency (issue to the waiter running again)
 * and the CPU time (that interval minus the CPU's idle time in it), and
 * hands both to spintune_end() in table mode: spintune.ko's outcomes file
 * (/sys/kernel/debug/spintune/mmc0/outcomes) reports them per key.
 *
 * QEMU 7.2's SD card finishes every command inside the register write that
 * starts it: the interrupt is already pending when sdhci_request() returns,
 * so there would be nothing to wait for. The board therefore gives the
 * card a latency of its own: every data command is held for a seeded,
 * per-opcode random time (struct vb_card_profile) on an hrtimer before it
 * reaches sdhci, the way a card's busy time would hold it. The mmc
 * tracepoints see that time as the command's completion time, as on a
 * real board.
 *
 * Control (debugfs, as root):
 *   echo "MODE COUNT SEED" > /sys/kernel/debug/spintune_vboard/run
 *	MODE: table (spintune's table, or the default rule before a push),
 *	irq (always sleep), spin (always poll), sleep (a timer sleep longer
 *	than any command, then poll: what a timer sleep costs); COUNT requests
 *	cycling through the four kinds of command; SEED picks the latencies.
 *   cat /sys/kernel/debug/spintune_vboard/results    per key, last run
 *   cat /sys/kernel/debug/spintune_vboard/platform   platform costs JSON
 *
 * The default rule is the mxs-mmc vendor rule: spin for transfers of at
 * most 1 KiB, take the interrupt above.
 */
#define pr_fmt(fmt) "spintune_vboard: " fmt

#include <linux/completion.h>
#include <linux/debugfs.h>
#include <linux/hrtimer.h>
#include <linux/kernel_stat.h>
#include <linux/ktime.h>
#include <linux/mmc/card.h>
#include <linux/mmc/core.h>
#include <linux/mmc/host.h>
#include <linux/mmc/mmc.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/prandom.h>
#include <linux/scatterlist.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/tick.h>

#include <linux/spintune.h>
#include "spintune/wait.h"

/*
 * From drivers/mmc/core/bus.h, core.h and card.h of 6.1: exported by
 * mmc_core.ko (mmc_block uses them) but declared in headers private to
 * drivers/mmc/core.
 */
struct mmc_driver {
	struct device_driver drv;
	int (*probe)(struct mmc_card *card);
	void (*remove)(struct mmc_card *card);
	void (*shutdown)(struct mmc_card *card);
};

int mmc_register_driver(struct mmc_driver *drv);
void mmc_unregister_driver(struct mmc_driver *drv);
int mmc_start_request(struct mmc_host *host, struct mmc_request *mrq);
int __mmc_claim_host(struct mmc_host *host, struct mmc_ctx *ctx, atomic_t *abort);
void mmc_release_host(struct mmc_host *host);
#define VB_MMC_STATE_BLOCKADDR (1 << 2)

#define VB_BLOCK_BYTES 512u
#define VB_BUFFER_BYTES (64u * VB_BLOCK_BYTES)
#define VB_AREA_BLOCKS 8192u /* the first 4 MiB of the card */
#define VB_WAIT_TIMEOUT_NS (100ull * NSEC_PER_MSEC)
#define VB_ALWAYS_SPIN_NS SPINTUNE_MAX_SPIN_NS
#define VB_KINDS 4
#define VB_SLEEP_NS (2ull * NSEC_PER_MSEC) /* longer than any command */

/**
 * struct vb_card_profile - the virtual card's latency for one kind of command.
 * @opcode: MMC command index.
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
};

/**
 * struct vb_board - the one card this driver drives.
 * @card: the card.
 * @host: its host.
 * @st: the spintune device (named after the host: mmc0).
 * @orig_ops: the host's own operations.
 * @ops: a copy of them whose request holds data commands for the card's latency.
 * @hold: the hrtimer that releases a held command.
 * @held: the command being held.
 * @hold_ns: how long the next data command is held.
 * @done: signalled by the done callback.
 * @done_flag: set by the done callback; what spinning polls.
 * @done_at_ns: when the done callback ran.
 * @buf: the data buffer.
 * @lock: serializes runs and reads of the results.
 * @mode: the last run's mode.
 * @results: the last run's results per kind.
 * @irq_run: the last irq run's results (platform costs).
 * @spin_run: the last spin run's results (platform costs).
 * @sleep_run: the last sleep run's results (platform costs).
 * @debugfs: the control directory.
 */
struct vb_board {
	struct mmc_card *card;
	struct mmc_host *host;
	struct spintune_dev *st;
	const struct mmc_host_ops *orig_ops;
	struct mmc_host_ops ops;
	struct hrtimer hold;
	struct mmc_request *held;
	u64 hold_ns;
	struct completion done;
	int done_flag;
	u64 done_at_ns;
	u8 *buf;
	struct mutex lock;
	char mode[8];
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

static enum hrtimer_restart vb_release_held(struct hrtimer *t)
{
	struct vb_board *vb = container_of(t, struct vb_board, hold);
	struct mmc_request *mrq = vb->held;

	vb->held = NULL;
	vb->orig_ops->request(vb->host, mrq);
	return HRTIMER_NORESTART;
}

/* The host's request, with the card's latency in front of data commands. */
static void vb_request(struct mmc_host *host, struct mmc_request *mrq)
{
	struct vb_board *vb = vb_the_board;

	if (!mrq->data || !vb->hold_ns) {
		vb->orig_ops->request(host, mrq);
		return;
	}
	vb->held = mrq;
	hrtimer_start(&vb->hold, ns_to_ktime(vb->hold_ns), HRTIMER_MODE_REL_HARD);
	vb->hold_ns = 0;
}

static void vb_done(struct mmc_request *mrq)
{
	struct vb_board *vb = vb_the_board;

	vb->done_at_ns = ktime_get_ns();
	smp_store_release(&vb->done_flag, 1);
	complete(&vb->done);
}

static int vb_done_read(struct vb_board *vb)
{
	return smp_load_acquire(&vb->done_flag);
}

/* This CPU's idle time so far, in ns (microsecond resolution). */
static u64 vb_idle_ns(void)
{
	const u64 us = get_cpu_idle_time_us(raw_smp_processor_id(), NULL);

	return us == (u64)-1 ? 0 : us * NSEC_PER_USEC;
}

static u32 vb_card_ns(const struct vb_card_profile *k, struct rnd_state *rnd)
{
	if (k->slow_permille && prandom_u32_state(rnd) % 1000 < k->slow_permille)
		return k->slow_ns;
	return k->base_ns + prandom_u32_state(rnd) % (k->jitter_ns + 1);
}

/**
 * vb_one() - issue one command and wait for it as @entry says.
 * @vb: the board.
 * @k: the kind of command.
 * @block: first block.
 * @hold_ns: the card's latency for this command.
 * @w: how to wait (@w->entry); receives the wait's counters (@w->stats) and
 *	what the request cost (@w->cpu_ns, @w->latency_ns; 0 if it was refused).
 * @r: the kind's results, updated.
 *
 * REQUIRES: the host is claimed.
 */
static void vb_one(struct vb_board *vb, const struct vb_card_profile *k, u32 block,
		   u32 hold_ns, struct spintune_wait *w, struct vb_key_result *r)
{
	struct spintune_wait_stats *stats = &w->stats;
	struct mmc_command cmd = {}, stop = {};
	struct mmc_request mrq = {};
	struct mmc_data data = {};
	struct scatterlist sg;
	u64 t0, idle0, t1, idle1;
	bool slept = false;
	int done, rc;

	sg_init_one(&sg, vb->buf, k->blocks * VB_BLOCK_BYTES);
	cmd.opcode = k->opcode;
	cmd.arg = vb->card->state & VB_MMC_STATE_BLOCKADDR ? block : block * VB_BLOCK_BYTES;
	cmd.flags = MMC_RSP_SPI_R1 | MMC_RSP_R1 | MMC_CMD_ADTC;
	data.blksz = VB_BLOCK_BYTES;
	data.blocks = k->blocks;
	data.flags = k->write ? MMC_DATA_WRITE : MMC_DATA_READ;
	data.sg = &sg;
	data.sg_len = 1;
	mmc_set_data_timeout(&data, vb->card);
	mrq.cmd = &cmd;
	mrq.data = &data;
	if (k->blocks > 1) {
		stop.opcode = MMC_STOP_TRANSMISSION;
		stop.flags = MMC_RSP_SPI_R1B | MMC_RSP_R1B | MMC_CMD_AC;
		mrq.stop = &stop;
	}
	mrq.done = vb_done;
	/* Map the buffer before the clock starts, as mmc_block does. */
	if (vb->orig_ops->pre_req)
		vb->orig_ops->pre_req(vb->host, &mrq);
	reinit_completion(&vb->done);
	WRITE_ONCE(vb->done_flag, 0);
	vb->hold_ns = hold_ns;

	t0 = ktime_get_ns();
	idle0 = vb_idle_ns();
	if (mmc_start_request(vb->host, &mrq)) { /* refused: no done callback */
		if (vb->orig_ops->post_req)
			vb->orig_ops->post_req(vb->host, &mrq, -EIO);
		r->errors++;
		return;
	}
	rc = spintune_wait(&w->entry, vb_done_read, done, done, VB_WAIT_TIMEOUT_NS, stats, vb);
	if (rc) { /* SPINTUNE_ARM_IRQ, or a spin or poll that gave up */
		wait_for_completion(&vb->done);
		slept = true;
	}
	t1 = ktime_get_ns();
	idle1 = vb_idle_ns();

	if (vb->orig_ops->post_req)
		vb->orig_ops->post_req(vb->host, &mrq, 0);
	w->latency_ns = t1 - t0;
	w->cpu_ns = (t1 - t0) - min(t1 - t0, idle1 - idle0);
	r->n++;
	r->latency_ns += w->latency_ns;
	r->cpu_ns += w->cpu_ns;
	r->card_ns += vb->done_at_ns - t0;
	if (slept) {
		r->slept++;
		r->wake_ns += t1 - vb->done_at_ns;
	}
	r->stats.spin_hits += stats->spin_hits;
	r->stats.irq_fallbacks += stats->irq_fallbacks;
	r->stats.timeouts += stats->timeouts;
	r->stats.sleeps += stats->sleeps;
	r->stats.polls += stats->polls;
	if (cmd.error || data.error || stop.error)
		r->errors++;
}

static void vb_run(struct vb_board *vb, const char *mode, u32 count, u32 seed)
{
	static const struct spintune_entry irq = { .strategy = SPINTUNE_IRQ };
	static const struct spintune_entry spin = {
		.strategy = SPINTUNE_SPIN, .spin_ns = VB_ALWAYS_SPIN_NS,
	};
	static const struct spintune_entry sleep = {
		.strategy = SPINTUNE_SLEEP_THEN_SPIN, .sleep_ns = VB_SLEEP_NS,
		.spin_ns = VB_ALWAYS_SPIN_NS,
	};
	const bool table = !strcmp(mode, "table");
	struct rnd_state rnd;
	u32 i;

	prandom_seed_state(&rnd, seed);
	memset(vb->results, 0, sizeof(vb->results));
	strscpy(vb->mode, mode, sizeof(vb->mode));
	__mmc_claim_host(vb->host, NULL, NULL);
	for (i = 0; i < count; i++) {
		const struct vb_card_profile *k = &vb_kinds[i % VB_KINDS];
		const u32 hold_ns = vb_card_ns(k, &rnd);
		const u32 block = prandom_u32_state(&rnd) % (VB_AREA_BLOCKS - k->blocks);
		struct spintune_wait w;

		if (table) {
			spintune_begin(vb->st, 0, k->opcode, k->blocks * VB_BLOCK_BYTES, &w);
		} else {
			memset(&w, 0, sizeof(w));
			w.entry = mode[0] == 'i' ? irq : mode[1] == 'p' ? spin : sleep;
		}
		vb_one(vb, k, block, hold_ns, &w, &vb->results[i % VB_KINDS]);
		if (table)
			spintune_end(vb->st, &w);
		if (i % 64 == 63)
			cond_resched();
	}
	mmc_release_host(vb->host);
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
	seq_puts(m, "opcode bytes n cpu_ns lat_ns card_ns slept spin_hits irq_fallbacks timeouts sleeps polls errors\n");
	for (i = 0; i < VB_KINDS; i++) {
		const struct vb_key_result *r = &vb->results[i];

		if (!r->n)
			continue;
		seq_printf(m, "%u %u %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu\n",
			   vb_kinds[i].opcode, vb_kinds[i].blocks * VB_BLOCK_BYTES, r->n,
			   r->cpu_ns / r->n, r->latency_ns / r->n, r->card_ns / r->n,
			   r->slept, r->stats.spin_hits, r->stats.irq_fallbacks,
			   r->stats.timeouts, r->stats.sleeps, r->stats.polls, r->errors);
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
 * work whatever the wait (issuing it, the card's interrupt handler): a
 * spinning request shows it as CPU beyond its completion time X, which
 * the model does not charge SPIN. The same amount is taken off the IRQ
 * path's and the timer sleep's CPU, so all three are priced alike.
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

static int vb_probe(struct mmc_card *card)
{
	/* The controller (the sdhci-pci device), not the card: its bus id
	 * names the firmware file across boots (spintune/0000:00:04.0.bin). */
	struct spintune_dev_info info = {
		.name = mmc_hostname(card->host), .dev = mmc_dev(card->host),
		.rule = vb_default_rule,
	};
	struct vb_board *vb;

	if (vb_the_board || !card->host->ops->request)
		return -EBUSY;
	vb = kzalloc(sizeof(*vb), GFP_KERNEL);
	if (!vb)
		return -ENOMEM;
	vb->buf = kmalloc(VB_BUFFER_BYTES, GFP_KERNEL);
	if (!vb->buf) {
		kfree(vb);
		return -ENOMEM;
	}
	vb->card = card;
	vb->host = card->host;
	mutex_init(&vb->lock);
	init_completion(&vb->done);
	hrtimer_init(&vb->hold, CLOCK_MONOTONIC, HRTIMER_MODE_REL_HARD);
	vb->hold.function = vb_release_held;
	vb->st = spintune_register(&info);
	if (IS_ERR(vb->st)) {
		int rc = PTR_ERR(vb->st);

		kfree(vb->buf);
		kfree(vb);
		return rc;
	}
	vb_the_board = vb;
	vb->orig_ops = card->host->ops;
	vb->ops = *vb->orig_ops;
	vb->ops.request = vb_request;
	card->host->ops = &vb->ops;
	vb->debugfs = debugfs_create_dir("spintune_vboard", NULL);
	debugfs_create_file("run", 0200, vb->debugfs, vb, &run_fops);
	debugfs_create_file("results", 0444, vb->debugfs, vb, &results_fops);
	debugfs_create_file("platform", 0444, vb->debugfs, vb, &platform_fops);
	dev_info(&card->dev, "spintune virtual board on %s: %llu MiB card\n",
		 mmc_hostname(card->host), (u64)card->csd.capacity <<
		 card->csd.read_blkbits >> 20);
	return 0;
}

static void vb_remove(struct mmc_card *card)
{
	struct vb_board *vb = vb_the_board;

	if (!vb || vb->card != card)
		return;
	debugfs_remove_recursive(vb->debugfs);
	__mmc_claim_host(vb->host, NULL, NULL); /* no request in flight */
	card->host->ops = vb->orig_ops;
	mmc_release_host(vb->host);
	hrtimer_cancel(&vb->hold);
	spintune_unregister(vb->st);
	vb_the_board = NULL;
	kfree(vb->buf);
	kfree(vb);
}

static struct mmc_driver vb_driver = {
	.drv = { .name = "spintune_vboard" },
	.probe = vb_probe,
	.remove = vb_remove,
};

static int __init vb_init(void)
{
	return mmc_register_driver(&vb_driver);
}

static void __exit vb_exit(void)
{
	mmc_unregister_driver(&vb_driver);
}

module_init(vb_init);
module_exit(vb_exit);

MODULE_DESCRIPTION("spintune virtual board: a demo MMC driver that waits by the table");
MODULE_LICENSE("GPL");
