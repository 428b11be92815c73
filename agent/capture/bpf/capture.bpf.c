// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * spintune's in-kernel capture: pairs command starts with their completions
 * at the tracepoints the text correlator uses (agent/trace/trace_correlator.h)
 * and adds each completion time to a per-CPU histogram of its key (device,
 * opcode, size class, CPU class) in the bucket layout of
 * models/latency_histogram.h; IRQ handler and wake times go to per-CPU
 * dispatch histograms. User space (bpf_capture.cc) reads the maps once per
 * interval and ships the deltas.
 *
 * The wait path follows docs/traces.md: a completion in interrupt context
 * (hard IRQ or softirq on a CPU within irq_window_ns of its last
 * irq_handler_entry, or in the threaded handler irq/N-name) went through the
 * IRQ path and ends at that irq_handler_entry; one in the issuer's own
 * process context was polled ("spin"); anything else is unknown. The wake
 * latency runs from the IRQ entry to the sched_switch into the issuer, when
 * the issuer was asleep at the completion and was woken after the IRQ.
 *
 * Histograms are slots of an array with one histogram per slot and CPU
 * (capture_abi.h): a start finds its key's slot (in a per-CPU cache of the
 * last keys, rarely by a hash lookup), and the completion adds to its
 * CPU's histogram of the slot by index.
 *
 * Bounded: pending starts live in a direct-mapped table, the few that
 * collide in an LRU hash (see `direct`); nothing is pinned, every
 * attachment is a link owned by the loader's file descriptors. The
 * tracepoints' arguments are read directly (BTF pointers); only pointers
 * kept across events (the issuing task) go through bpf_probe_read.
 */
#include "agent/capture/bpf/kernel_types.h"

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "agent/capture/bpf/capture_abi.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Set by the loader before load. */
const volatile __u64 irq_window_ns = 2000000;	/* completion at most this after its IRQ */
const volatile __u64 wake_window_ns = 20000000;	/* waiter running at most this after the IRQ */
const volatile __u32 sample_every = 0;		/* 0: no ring samples; N: every Nth completion per CPU */
const volatile __u64 ring_wakeup_bytes = 1 << 18;	/* wake the reader once this much waits */
const volatile bool have_declared_irqs = false;	/* irq_declared holds --irq names */
/* The measured devices, in the loader's order (a scan: cheaper than a hash for a few). */
const volatile __u32 device_count = 0;
const volatile __u32 slot_count = STC_SLOTS_PER_DEVICE;	/* histogram slots (the loader's) */
const volatile __u32 hist_cpus = 1;	/* possible CPUs: histograms per slot (the loader's) */
const volatile struct stc_device_key device_keys[STC_MAX_DEVICES] = {};
const volatile __u32 direct_mask = STC_DIRECT_SLOTS - 1;	/* direct's entries - 1 (the loader's) */

/* Pending starts. */
enum stc_start_kind {
	STC_START_RQ = 1,
	STC_START_MMC = 2,
	STC_START_MMC_CQE = 3,
	STC_START_SPI_XFER = 4,
	STC_START_SPI_MSG = 5,
};

struct start_key {
	__u64 id;	/* request, mmc_request, transfer or message pointer; cqe_id() */
	__u32 kind;
	__u32 pad;
};

struct start {
	__u64 ts_ns;	/* 0: ended (the entry waits for the key's next start) */
	__u64 bytes;
	__u64 task;	/* the issuing task_struct, read (never trusted) at completion */
	__u32 pid;
	__u32 device;
	__u32 opcode;
	__s32 cpu;
	__u32 slot;	/* its histogram; STC_NO_SLOT: none (every slot taken) */
	__u16 cpu_class;
	__u16 pad;
};

/*
 * Pending starts, in two tables. The common one is `direct`: an array
 * indexed by a hash of (kind, id), an array access where a hash map lookup
 * would hash, compare and touch LRU bookkeeping. A start claims its key's
 * entry by a compare-and-swap of the entry's id from 0 (free) to its own,
 * so two CPUs never write one entry; the end copies the start out and frees
 * the entry with an atomic exchange to 0 (fully ordered: the next owner,
 * maybe on another CPU, writes only after the copy). A start whose entry is
 * held by another key goes to the `pending` LRU hash ("spills"), as does
 * every start when the entry is held by a start that never ended (until
 * its id starts again: requests come from fixed pools).
 *
 * Invariants:
 * - an entry of `direct` whose id (and kind) is a key's holds that key's
 *   live start: an end frees it, a requeue too;
 * - a key has at most one live start, in one of the two tables: a start
 *   looks for a live one of its key in both before it claims or spills
 *   (UNENDED, RETRIED as before), and an end takes it from either;
 * - `spilled` is at least the number of live starts in `pending` (added to
 *   before an entry is made live, taken from after it is ended; an entry
 *   the LRU evicts stays counted), so while it is 0 neither starts nor ends
 *   look in `pending`. A key's start, end and next start are ordered by the
 *   driver (the request is handed over), so each sees the counts of the
 *   earlier ones.
 * Only the key's own start and end write an entry's other fields (a start
 * after its claim, or over its own unended start), so they need no atomics.
 */
struct direct_entry {
	__u64 id;	/* 0: free; else the owning start's direct_word() */
	__u32 kind;
	__u32 pad;
	struct start s;
};

__u64 spilled = 0;	/* live starts in `pending` (or more) */

/*
 * Set by the loader outside its wake windows (--wake-windows): no waiter is
 * recorded, and once the last one recorded is past wake_window_ns the
 * loader detaches stc_switch (the most frequent program) until the next
 * window, attaching it again before it clears this.
 */
__u32 wakes_paused = 0;

/*
 * Set by the loader outside its capture windows (--capture-windows): no
 * start is recorded; the completions of those already recorded are followed
 * until the loader detaches every program, and attaches them again before
 * it clears this. An end without a start is counted as unpaired only from
 * unpaired_from_ns on (the loader's: after a window's first requests, whose
 * starts came while the programs were detached, have ended).
 */
__u32 starts_paused = 0;
__u64 unpaired_from_ns = 0;

/*
 * The contexts (STC_CTX_* bits) block completions ran in: every one
 * stc_rq_complete saw, and those of measured devices' requests. The loader
 * reads them to attach stc_rq_complete_nested once a measured completion
 * can interrupt another (capture_abi.h).
 */
__u64 completion_contexts_all = 0;
__u64 completion_contexts_measured = 0;

/* The last irq_handler_entry of one CPU, and its interrupt context. */
struct irq_state {
	__u64 entry_ns;
	__u64 exit_ns;
	__u64 action;
	__s32 irq;
	__u32 device;		/* index + 1 of a device whose completion it delivered */
	__u32 declared;		/* index + 1 from --irq, 0 when not declared */
	__u8 woke;		/* it woke an issuer (one per IRQ) */
	__u8 pad[3];
	__u8 valid;
	__u8 exited;
	__u8 dispatched;	/* its handler time was recorded */
	__u8 learned;		/* device index + 1 irq_learned was checked for in it */
	__s32 in_softirq;	/* between a softirq_entry and its exit */
};

/*
 * An issuer asleep at its completion, until it runs again: a slot of a
 * direct-mapped table indexed by a hash of its task_struct's address, so
 * that sched_switch (the most frequent event) knows in one array access,
 * without a hash map lookup and without reading the task switched in, that
 * it waits for nothing. Two waiters of one slot at the same time keep the
 * later one.
 */
#define STC_WAITER_SLOTS 4096

struct waiter {
	__u64 irq_entry_ns;
	__u64 task;	/* 0: free */
	__u32 slot;	/* its device's wake histogram */
	__u32 pad;
};

static __always_inline __u32 waiter_slot(__u64 task)
{
	return (__u32)((task * 0x9E3779B97F4A7C15ULL) >> 52);	/* 12 bits: STC_WAITER_SLOTS */
}

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);	/* the loader sets the number of possible CPUs */
	__type(key, __u32);
	__type(value, __u32);
} cpu_class SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, STC_DIRECT_SLOTS);	/* the loader sets direct_mask + 1 */
	__type(key, __u32);
	__type(value, struct direct_entry);
} direct SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 8192);	/* requests in flight that collided in `direct` */
	__type(key, struct start_key);
	__type(value, struct start);
} pending SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);	/* possible CPUs */
	__type(key, __u32);
	__type(value, struct irq_state);
} irq_last SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, STC_MAX_IRQS);
	__type(key, __u32);
	__type(value, __u32);	/* CPU of the IRQ's last occurrence */
} irq_cpu SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1024);
	__type(key, __u64);	/* struct irqaction *: one per handler of a shared line */
	__type(value, __u32);	/* device index + 1 */
} irq_learned SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, STC_MAX_DEVICES);
	__type(key, char[STC_IRQ_NAME_LEN]);
	__type(value, __u32);	/* device index + 1 */
} irq_declared SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, STC_WAITER_SLOTS);
	__type(key, __u32);	/* waiter_slot() */
	__type(value, struct waiter);
} waiters SEC(".maps");

/*
 * The histograms: slot_count x hist_cpus of them, a slot's one per CPU
 * side by side (stc_hist_index()). A plain array, not a per-CPU one, so
 * that the loader maps it and reads a slot's count words in place instead
 * of copying every slot's buckets out of the kernel at each read; a CPU
 * still writes only its own (each a whole number of cache lines).
 */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, STC_SLOTS_PER_DEVICE);	/* the loader sets slot_count x hist_cpus */
	__type(key, __u32);
	__type(value, struct stc_hist);
} hists SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, STC_SLOTS_PER_DEVICE);	/* the loader sets slot_count */
	__type(key, struct stc_slot_key);
	__type(value, __u32);	/* its slot in hists */
} slot_of SEC(".maps");

/* Who owns each slot handed out (what the loader reads); claimed with BPF_NOEXIST. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, STC_SLOTS_PER_DEVICE);	/* the loader sets slot_count */
	__type(key, __u32);
	__type(value, struct stc_slot_key);
} slot_owner SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);	/* the next slot to try (a hint: slot_owner decides) */
} slots_used SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, STC_COUNTER_COUNT);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} sample_tick SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);	/* the loader sets 4 KiB when sampling is off */
} samples SEC(".maps");

static __always_inline void count(__u32 counter)
{
	__u64 *v = bpf_map_lookup_elem(&counters, &counter);

	if (v)
		__sync_fetch_and_add(v, 1);	/* a program in IRQ context may interrupt another */
}

static __always_inline __u16 class_of(__u32 cpu)
{
	__u32 *c = bpf_map_lookup_elem(&cpu_class, &cpu);

	return c ? (__u16)*c : 0;
}

static __always_inline int device_index(__u32 kind, __u32 id, __u32 *index)
{
	__u32 i;

#pragma clang loop unroll(disable)
	for (i = 0; i < STC_MAX_DEVICES && i < device_count; i++) {
		if (device_keys[i].kind == kind && device_keys[i].id == id) {
			*index = i;
			return 0;
		}
	}
	return -1;
}

/*
 * The slot of a histogram key, handed out on its first use; STC_NO_SLOT
 * when all are taken. A slot is claimed by creating its slot_owner entry
 * (an insert only one CPU can win: this BPF target has no atomic
 * fetch-and-add that returns the old value). Two CPUs giving one key a
 * slot at once leave one slot unused.
 */
static __noinline __u32 find_slot(const struct stc_slot_key *k)
{
	__u32 zero = 0, *slot = bpf_map_lookup_elem(&slot_of, k), *next, n, i;

	if (slot)
		return *slot;
	next = bpf_map_lookup_elem(&slots_used, &zero);
	if (!next)
		return STC_NO_SLOT;
	n = *next;
	for (i = 0; i < 8 && n < slot_count; i++, n++) {
		if (bpf_map_update_elem(&slot_owner, &n, k, BPF_NOEXIST) != 0)
			continue;	/* taken meanwhile */
		*next = n + 1;
		bpf_map_update_elem(&slot_of, k, &n, BPF_NOEXIST);
		slot = bpf_map_lookup_elem(&slot_of, k);
		return slot ? *slot : STC_NO_SLOT;
	}
	count(STC_MAP_FULL);
	return STC_NO_SLOT;
}

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u64);	/* packed key << 32 | its slot; 0: empty */
} slot_cache SEC(".maps");

/*
 * The slot of a key, usually from this CPU's direct-mapped cache of the
 * keys it used last (an array access instead of slot_of's hash lookup).
 * An entry is one 64-bit word, written at once: a program interrupting
 * this one on the CPU sees the old entry or the new, never half of each.
 */
static __always_inline __u32 slot_for(const struct stc_slot_key *k)
{
	__u64 packed, *c;
	__u32 i, slot;

	if (k->device >= 64 || k->opcode >= 256 || k->size_class >= 128 || k->cpu_class >= 128 ||
	    k->family >= 4)
		return find_slot(k);	/* does not fit in 31 bits */
	packed = 1 | (__u64)k->family << 1 | (__u64)k->device << 3 | (__u64)k->opcode << 9 |
		 (__u64)k->size_class << 17 | (__u64)k->cpu_class << 24;
	i = (__u32)((packed * 0x9E3779B97F4A7C15ULL) >> 58);	/* 6 bits: 64 entries */
	c = bpf_map_lookup_elem(&slot_cache, &i);
	if (c && *c >> 32 == packed)
		return (__u32)*c;
	slot = find_slot(k);
	if (c && slot != STC_NO_SLOT)
		*c = packed << 32 | slot;
	return slot;
}

/* @cpu's histogram in @slot; NULL when there is none (every slot taken: find_slot counted it). */
static __always_inline struct stc_hist *hist_of(__u32 slot, __u32 cpu)
{
	__u32 i;

	if (slot >= slot_count || cpu >= hist_cpus)
		return NULL;
	i = stc_hist_index(slot, cpu, hist_cpus);
	return bpf_map_lookup_elem(&hists, &i);
}

/*
 * Adds @ns, its wait @path and @error to the histogram in @slot of @cpu (the
 * CPU this runs on; dispatch and wake times: STC_PATH_UNKNOWN, no error).
 * `count` last: the loader reads the rest only when it moved (capture_abi.h).
 */
static __always_inline void add_to_slot(__u32 slot, __u32 cpu, __u64 ns, __u8 path, bool error)
{
	struct stc_hist *h = hist_of(slot, cpu);
	__u64 b = stc_bucket_index(ns);	/* 64 bits: the bound below is on the register indexed with */

	if (!h)
		return;
	/* Never true, but the verifier must see the bound (clang would drop it). */
	asm volatile("" : "+r"(b));
	if (b >= STC_BUCKET_COUNT)
		b = STC_BUCKET_COUNT - 1;
	/* Atomic: a program in IRQ context may interrupt another on this CPU. */
	__sync_fetch_and_add(&h->buckets[b], 1);
	__sync_fetch_and_add(&h->sum_ns, ns);
	if (path == STC_PATH_IRQ)
		__sync_fetch_and_add(&h->irq_path, 1);
	else if (path == STC_PATH_SPIN)
		__sync_fetch_and_add(&h->spin_path, 1);
	if (error)
		__sync_fetch_and_add(&h->errors, 1);
	__sync_fetch_and_add(&h->count, 1);
}

static __always_inline __u32 dispatch_slot(__u32 device, __u16 cls, __u32 family)
{
	struct stc_slot_key k = { .device = device, .cpu_class = cls, .family = family };

	return slot_for(&k);
}

static __always_inline void record_completion(const struct start *s, __u64 wait_ns, __u8 path,
					      bool error, __u64 now, __u32 cpu)
{
	__u32 zero = 0;

	count(STC_COMPLETIONS);
	if (sample_every) {
		__u64 *tick = bpf_map_lookup_elem(&sample_tick, &zero);

		if (tick && ++*tick >= sample_every) {
			struct stc_sample smp = {
				.wait_ns = wait_ns, .bytes = s->bytes, .end_ns = now,
				.device = s->device, .opcode = s->opcode, .cpu_class = s->cpu_class,
				.path = path, .error = error, .cpu = s->cpu,
			};

			*tick = 0;
			/*
			 * A sampled completion goes to user space instead of the
			 * histogram. The reader polls with a timeout and is woken
			 * only when the ring fills up: a wakeup per sample costs
			 * microseconds in the I/O path, more than the whole
			 * capture, and delays the event's other probes.
			 */
			if (bpf_ringbuf_output(&samples, &smp, sizeof(smp),
					       bpf_ringbuf_query(&samples, BPF_RB_AVAIL_DATA) >=
							       ring_wakeup_bytes ?
						       BPF_RB_FORCE_WAKEUP :
						       BPF_RB_NO_WAKEUP) == 0)
				return;
			count(STC_RING_LOST);
		}
	}
	add_to_slot(s->slot, cpu, wait_ns, path, error);
}

/* The IRQ number of a threaded handler task ("irq/36-virtio1-r"), else -1. */
static __always_inline int threaded_irq(struct task_struct *t)
{
	int irq = 0, i;

	if (!(t->flags & PF_KTHREAD))	/* IRQ threads are kernel threads */
		return -1;
	/* The name read in place (the idle task is a kernel thread too: no helper call). */
	if (t->comm[0] != 'i' || t->comm[1] != 'r' || t->comm[2] != 'q' || t->comm[3] != '/')
		return -1;
#pragma unroll
	for (i = 4; i < 11; i++) {
		char c = t->comm[i];

		if (c == '-')
			return i > 4 ? irq : -1;
		if (c < '0' || c > '9')
			return -1;
		irq = irq * 10 + (c - '0');
	}
	return -1;
}

/*
 * The issuer is asleep: switched out waiting, not on a CPU, and not queued
 * to run again. A task preempted just after it set a sleeping state stays
 * queued (on_rq): a wakeup now only sets it running, and its next switch
 * in ends a wait in the run queue, not a wake (the correlator sees it
 * switch out preempted, R+, and does not count it either). Since 6.12 a
 * task that went to sleep may also stay queued for a while (a delayed
 * dequeue, se.sched_delayed): that one is asleep.
 */
static __always_inline bool task_asleep(__u64 task)
{
	struct task_struct *t = (struct task_struct *)task;
	long state;
	int on_cpu = 0, on_rq = 0;

	if (!t)
		return false;
	if (bpf_core_field_exists(t->__state) && bpf_core_field_exists(t->on_cpu) &&
	    bpf_core_field_exists(t->on_rq)) {
		/* (Offsets only where the fields exist: libbpf poisons the others.) */
		__u32 from = bpf_core_field_offset(t->__state);
		__u32 cpu_at = bpf_core_field_offset(t->on_cpu), rq_at = bpf_core_field_offset(t->on_rq);

		if (cpu_at > from && rq_at > cpu_at && rq_at - from <= 124) {
			/* All three in one read: a helper call costs more than the bytes between them. */
			__u32 words[32];

			if (bpf_probe_read_kernel(words, rq_at + 4 - from, (void *)t + from) != 0)
				return false;
			state = words[0];
			on_cpu = (int)words[((cpu_at - from) / 4) & 31];
			on_rq = (int)words[((rq_at - from) / 4) & 31];
		} else {
			state = BPF_CORE_READ(t, __state);
			on_cpu = BPF_CORE_READ(t, on_cpu);
			on_rq = BPF_CORE_READ(t, on_rq);
		}
	} else {
		if (bpf_core_field_exists(t->__state)) {
			state = BPF_CORE_READ(t, __state);
		} else {
			struct task_struct___old *o = (void *)t;

			state = BPF_CORE_READ(o, state);
		}
		if (bpf_core_field_exists(t->on_cpu))
			on_cpu = BPF_CORE_READ(t, on_cpu);
		if (bpf_core_field_exists(t->on_rq))
			on_rq = BPF_CORE_READ(t, on_rq);
	}
	if ((state & 3) == 0)	/* TASK_INTERRUPTIBLE | TASK_UNINTERRUPTIBLE */
		return false;
	/*
	 * TASK_IDLE (uninterruptible | TASK_NOLOAD, 0x400 since 4.2): an idle
	 * kernel thread. A kworker that dispatched a request on the issuer's
	 * behalf (kblockd running the queue under load) and went idle waits
	 * for work, not for this request; its next switch in is no wake (the
	 * correlator's "I" state).
	 */
	if (state & 0x400)
		return false;
	/*
	 * Still on a CPU: it set its state to sleep but has not switched out
	 * (and may never: a wakeup now sets it running before its schedule()),
	 * so its next switch in is no wake from this IRQ.
	 */
	if (on_cpu)
		return false;
	if (!on_rq)
		return true;
	if (bpf_core_field_exists(t->se.sched_delayed))
		return BPF_CORE_READ(t, se.sched_delayed) != 0;
	return false;
}

/* The slot of the completion histogram of @s's key. */
static __always_inline __u32 wait_slot(const struct start *s)
{
	struct stc_slot_key k = {
		.device = s->device,
		.opcode = s->opcode,
		.size_class = (__u16)stc_size_class(s->bytes),
		.cpu_class = s->cpu_class,
		.family = STC_FAMILY_WAIT,
	};

	return slot_for(&k);
}

/*
 * What `direct` holds of (kind, id): the id, a pointer except for CQE
 * requests, as its distance from a fixed address (a pointer minus a pointer
 * is the one number a program may compute from a pointer: it can neither
 * hash nor mask one). Never 0 (no object sits at `spilled`; cqe_id()).
 */
static __always_inline __u64 direct_word(__u32 kind, __u64 id)
{
	if (kind == STC_START_MMC_CQE)
		return id;
	asm volatile("%0 -= %1" : "+r"(id) : "r"(&spilled));
	return id;
}

/* The entry of `direct` where the key of @word belongs. */
static __always_inline struct direct_entry *direct_entry_of(__u32 kind, __u64 word)
{
	__u32 i = (__u32)(((word ^ kind) * 0x9E3779B97F4A7C15ULL) >> 40) & direct_mask;

	return bpf_map_lookup_elem(&direct, &i);
}

/* The live start of @k in `pending`: looked for only while there may be one. */
static __always_inline struct start *spilled_start(const struct start_key *k)
{
	struct start *p;

	if (!spilled)
		return NULL;
	p = bpf_map_lookup_elem(&pending, k);
	return p && p->ts_ns ? p : NULL;
}

/* The live start of @k: in `direct` (*@d its entry) or `pending` (*@d NULL); NULL: none. */
static __always_inline struct start *find_live(const struct start_key *k, struct direct_entry **d)
{
	__u64 word = direct_word(k->kind, k->id);
	struct direct_entry *e = direct_entry_of(k->kind, word);

	if (e && e->id == word && e->kind == k->kind) {
		*d = e;
		return &e->s;
	}
	*d = NULL;
	return spilled_start(k);
}

/* Ends the live start @p found by find_live (its end, or it was dropped). */
static __always_inline void end_live(struct direct_entry *d, struct start *p)
{
	if (d) {
		__sync_lock_test_and_set(&d->id, 0);	/* an exchange, fully ordered: after the caller's copy */
		return;
	}
	p->ts_ns = 0;	/* the entry stays for the key's next start that spills */
	__sync_fetch_and_add(&spilled, -1);
}

/* `ts_ns` is read first thing in the program: the lookups before it are not the device's time. */
static __always_inline void start_request(__u64 ts_ns, __u32 kind, __u64 id, __u32 device,
					  __u32 opcode, __u64 bytes, __u64 flags)
{
	struct start_key k = { .id = id, .kind = kind };
	__u32 cpu = bpf_get_smp_processor_id();
	struct task_struct *task = bpf_get_current_task_btf();	/* one helper for both */
	struct start s = {
		.ts_ns = ts_ns,
		.bytes = bytes,
		.task = (__u64)task,
		.pid = (__u32)task->pid,
		.device = device,
		.opcode = opcode,
		.cpu = (__s32)cpu,
		.slot = STC_NO_SLOT,
		.cpu_class = class_of(cpu),
	};
	__u64 word = direct_word(kind, id);
	struct direct_entry *d = direct_entry_of(kind, word);
	struct start *p;

	if (starts_paused)
		return;
	if (d && d->id == word && d->kind == kind)
		p = &d->s;
	else
		p = spilled_start(&k);
	if (p) {
		if (flags == BPF_NOEXIST) {
			count(STC_RETRIED);
			return;
		}
		count(STC_UNENDED);	/* its end was never seen */
	}
	if (kind != STC_START_SPI_MSG)	/* (a message's size is known at its end) */
		s.slot = wait_slot(&s);
	if (p) {
		*p = s;	/* over the unended start, in its table */
		return;
	}
	if (d && __sync_val_compare_and_swap(&d->id, 0, word) == 0) {
		d->kind = kind;
		d->s = s;
		return;
	}
	/*
	 * The entry is another key's: spill. Requests, MMC requests and SPI
	 * transfers come from pools: the key usually has an ended entry in
	 * `pending` from an earlier spill, overwritten in place (no insert).
	 */
	__sync_fetch_and_add(&spilled, 1);
	p = bpf_map_lookup_elem(&pending, &k);
	if (p)
		*p = s;
	else
		bpf_map_update_elem(&pending, &k, &s, BPF_NOEXIST);
}

/* The context a program runs in, as an STC_CTX_* bit, from its CPU's irq_state. */
static __always_inline __u32 context_of(const struct irq_state *here)
{
	if (!here)
		return STC_CTX_TASK;
	if (here->valid && !here->exited)
		return STC_CTX_HARDIRQ;
	return here->in_softirq ? STC_CTX_SOFTIRQ : STC_CTX_TASK;
}

/*
 * Classifies and records the completion of `s` (docs/traces.md, "How it
 * waited") on `cpu`, whose irq_state is `here`.
 */
static __always_inline void complete_on(__u64 now, const struct start *s, bool error, __u32 cpu,
					struct irq_state *here)
{
	struct task_struct *current = bpf_get_current_task_btf();
	__u32 pid = (__u32)current->pid;
	struct irq_state *occ = NULL;
	bool in_irq = context_of(here) != STC_CTX_TASK;
	__u64 wait_ns = now > s->ts_ns ? now - s->ts_ns : 0;
	__u8 path = STC_PATH_UNKNOWN;
	int threaded = threaded_irq(current);

	if (threaded >= 0) {
		__u32 irq = (__u32)threaded;
		__u32 *on = bpf_map_lookup_elem(&irq_cpu, &irq);

		if (on) {
			__u32 other = *on;

			occ = bpf_map_lookup_elem(&irq_last, &other);
		}
	} else if (here && here->valid && in_irq && now <= here->entry_ns + irq_window_ns) {
		occ = here;
	}
	if (occ && occ->valid && occ->entry_ns >= s->ts_ns) {
		__u32 dev1 = s->device + 1;

		if (!occ->declared || occ->declared == dev1) {
			__u16 cls = class_of(cpu);

			path = STC_PATH_IRQ;
			wait_ns = occ->entry_ns - s->ts_ns;	/* hardware completion = the IRQ */
			if (!occ->declared && occ->learned != dev1) {
				/* Once per IRQ and device: it may deliver several completions. */
				__u32 *known = bpf_map_lookup_elem(&irq_learned, &occ->action);

				if (!known || *known != dev1)
					bpf_map_update_elem(&irq_learned, &occ->action, &dev1, BPF_ANY);
				occ->learned = (__u8)dev1;
			}
			if (!occ->exited) {
				occ->device = dev1;	/* its exit records the handler time */
			} else if (!occ->dispatched) {
				occ->dispatched = 1;
				add_to_slot(dispatch_slot(s->device, cls, STC_FAMILY_HANDLER), cpu,
					    occ->exit_ns - occ->entry_ns, STC_PATH_UNKNOWN, false);
				count(STC_DISPATCHES);
			}
			/* (The issuer's state is read only while the IRQ woke none.) */
			if (!wakes_paused && !occ->woke && s->pid > 0 && task_asleep(s->task)) {
				__u32 slot = waiter_slot(s->task);
				struct waiter *w = bpf_map_lookup_elem(&waiters, &slot);

				occ->woke = 1;
				if (w) {
					/* The task last: sched_switch matches on it. */
					w->task = 0;
					w->irq_entry_ns = occ->entry_ns;
					w->slot = dispatch_slot(s->device, cls, STC_FAMILY_WAKE);
					asm volatile("" ::: "memory");
					w->task = s->task;
				}
			}
		}
	} else if (pid == s->pid && !in_irq) {
		path = STC_PATH_SPIN;	/* completed in the issuer's own context: polled */
	}
	record_completion(s, wait_ns, path, error, now, cpu);
}

static __always_inline void complete(__u64 now, const struct start *s, bool error)
{
	__u32 cpu = bpf_get_smp_processor_id();

	complete_on(now, s, error, cpu, bpf_map_lookup_elem(&irq_last, &cpu));
}

/* Takes the pending start of (kind, id); false when there is none. */
static __always_inline bool take(__u64 now, __u32 kind, __u64 id, struct start *out)
{
	struct start_key k = { .id = id, .kind = kind };
	struct direct_entry *d;
	struct start *p = find_live(&k, &d);

	if (!p) {
		if (now >= unpaired_from_ns)
			count(STC_UNPAIRED_ENDS);
		return false;
	}
	*out = *p;
	end_live(d, p);
	return true;
}

/* ---- block ---- */

static __always_inline __u32 block_dev(struct request *rq)
{
	struct gendisk *disk;

	if (bpf_core_field_exists(rq->q->disk)) {
		disk = rq->q->disk;
	} else {
		struct request___old *o = (void *)rq;

		disk = BPF_CORE_READ(o, rq_disk);
	}
	if (!disk)
		return 0;
	return ((__u32)disk->major << 20) | (__u32)disk->first_minor;
}

/* REQ_OP_* as the text path names it from rwbs (OpcodeFromRwbs). */
static __always_inline __u32 block_opcode(unsigned int cmd_flags)
{
	__u32 op = cmd_flags & 0xff;	/* REQ_OP_MASK */

	switch (op) {
	case 0: case 1: case 2: case 3: case 5: case 7: case 9:
	case 10: case 11: case 12: case 13: case 15:
		return op;
	default:
		return 34;	/* driver-private (N) */
	}
}

SEC("tp_btf/block_rq_issue")
int BPF_PROG(stc_rq_issue, struct request *rq)
{
	__u64 now = bpf_ktime_get_ns();
	__u32 device;

	if (device_index(STC_DEV_BLOCK, block_dev(rq), &device))
		return 0;
	start_request(now, STC_START_RQ, (__u64)rq, device, block_opcode(rq->cmd_flags),
		      rq->__data_len, BPF_ANY);
	return 0;
}

/*
 * The kernel does not run a program that is already running on the CPU: a
 * completion in hard IRQ context (blk-mq completes there when the queue's
 * CPU took the interrupt) that interrupts the program handling another one
 * would be lost. A second copy of the program, attached after the first,
 * handles exactly those: the first marks the CPU busy while it runs. The
 * copy costs a program run at every completion, so the loader attaches it
 * only once a measured device's completion came from a context above one
 * any completion came from (completion_contexts_*), or the kernel skipped
 * the first: a disk that completes all in softirq never needs it.
 */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} completing SEC(".maps");

/* Sets `bit` in a word all CPUs read, writing only the first time. */
static __always_inline void note_context(__u64 *word, __u32 bit)
{
	if (!(*word & bit))
		__sync_fetch_and_or(word, bit);
}

/* A block completion on `cpu`, whose irq_state is `here`. */
static __always_inline void rq_complete(__u64 now, struct request *rq, __u8 error,
					unsigned int nr_bytes, __u32 cpu, struct irq_state *here)
{
	struct start_key k = { .id = (__u64)rq, .kind = STC_START_RQ };
	struct direct_entry *d;
	struct start s, *p = find_live(&k, &d);

	if (!p) {
		__u32 device;

		/* (Only measured devices' requests have starts.) */
		if (now >= unpaired_from_ns && device_index(STC_DEV_BLOCK, block_dev(rq), &device) == 0)
			count(STC_UNPAIRED_ENDS);
		return;
	}
	note_context(&completion_contexts_measured, context_of(here));
	if (nr_bytes == 0 && p->bytes != 0) {
		/*
		 * A data-less end of a request that carried data: the block
		 * layer ending a preflush write through its flush sequence. The
		 * driver never saw it (the text path counts it apart, as a
		 * flush-sequence end); the start it finds is stale.
		 */
		end_live(d, p);
		count(STC_UNPAIRED_ENDS);
		return;
	}
	if (nr_bytes < rq->__data_len) {
		count(STC_PARTIAL);	/* the rest completes later */
		return;
	}
	s = *p;
	end_live(d, p);
	complete_on(now, &s, error != 0, cpu, here);
}

/*
 * The flag is set first thing and cleared last: an interrupt between the
 * kernel marking the program running and the flag (or between the flag and
 * the program's return) finds neither program taking its completion. The
 * loader counts those as lost: the kernel's count of stc_rq_complete's
 * skipped runs less STC_NESTED.
 */
SEC("tp_btf/block_rq_complete")
int BPF_PROG(stc_rq_complete, struct request *rq, __u8 error, unsigned int nr_bytes)
{
	__u32 zero = 0, *busy = bpf_map_lookup_elem(&completing, &zero);
	__u32 cpu = bpf_get_smp_processor_id();
	struct irq_state *here = bpf_map_lookup_elem(&irq_last, &cpu);

	if (!busy)
		return 0;
	*busy = 1;
	note_context(&completion_contexts_all, context_of(here));
	rq_complete(bpf_ktime_get_ns(), rq, error, nr_bytes, cpu, here);
	*busy = 0;
	return 0;
}

SEC("tp_btf/block_rq_complete")
int BPF_PROG(stc_rq_complete_nested, struct request *rq, __u8 error, unsigned int nr_bytes)
{
	__u32 zero = 0, *busy = bpf_map_lookup_elem(&completing, &zero);

	/* Runs at every completion: the clock only for the rare one that is ours. */
	if (busy && *busy) {	/* stc_rq_complete is interrupted: this one is ours */
		__u32 cpu = bpf_get_smp_processor_id();

		count(STC_NESTED);
		rq_complete(bpf_ktime_get_ns(), rq, error, nr_bytes, cpu,
			    bpf_map_lookup_elem(&irq_last, &cpu));
	}
	return 0;
}

SEC("tp_btf/block_rq_requeue")
int BPF_PROG(stc_rq_requeue, struct request *rq)
{
	struct start_key k = { .id = (__u64)rq, .kind = STC_START_RQ };
	struct direct_entry *d;
	struct start *p = find_live(&k, &d);

	if (p) {
		end_live(d, p);
		count(STC_REQUEUED);
	}
	return 0;
}

/* ---- IRQ and scheduler ---- */

SEC("tp_btf/irq_handler_entry")
int BPF_PROG(stc_irq_entry, int irq, struct irqaction *action)
{
	__u64 now = bpf_ktime_get_ns();
	__u32 cpu = bpf_get_smp_processor_id();
	struct irq_state *o = bpf_map_lookup_elem(&irq_last, &cpu);
	__u32 uirq = (__u32)irq;

	if (!o)
		return 0;
	o->entry_ns = now;
	o->exit_ns = 0;
	o->action = (__u64)action;
	o->irq = irq;
	o->device = 0;
	o->declared = 0;
	o->woke = 0;
	o->valid = 1;
	o->exited = 0;
	o->dispatched = 0;
	o->learned = 0;
	if (uirq < STC_MAX_IRQS) {
		__u32 *on = bpf_map_lookup_elem(&irq_cpu, &uirq);

		if (on && *on != cpu)
			*on = cpu;	/* (a store only when it moves: the line stays shared) */
	}
	if (have_declared_irqs) {
		char name[STC_IRQ_NAME_LEN] = {};
		__u32 *dev1;

		bpf_probe_read_kernel_str(name, sizeof(name), action->name);
		dev1 = bpf_map_lookup_elem(&irq_declared, name);
		if (dev1)
			o->declared = *dev1;
	}
	return 0;
}

SEC("tp_btf/irq_handler_exit")
int BPF_PROG(stc_irq_exit, int irq, struct irqaction *action, int ret)
{
	__u64 now = bpf_ktime_get_ns();
	__u32 cpu = bpf_get_smp_processor_id();
	struct irq_state *o = bpf_map_lookup_elem(&irq_last, &cpu);
	__u32 device;

	if (!o || !o->valid || o->irq != irq || o->exited)
		return 0;
	o->exited = 1;
	o->exit_ns = now;
	device = o->device;
	if (!device)
		device = o->declared;
	if (!device) {
		__u32 *learned = bpf_map_lookup_elem(&irq_learned, &o->action);

		if (learned)
			device = *learned;
	}
	/* An IRQ of no device known yet waits for a completion to claim it. */
	if (device) {
		o->dispatched = 1;
		add_to_slot(dispatch_slot(device - 1, class_of(cpu), STC_FAMILY_HANDLER), cpu,
			    o->exit_ns - o->entry_ns, STC_PATH_UNKNOWN, false);
		count(STC_DISPATCHES);
	}
	return 0;
}

/*
 * Softirqs do not nest on a CPU (one runs its vectors one after another,
 * each between an entry and an exit), so a flag, not a depth: an exit
 * missed (a program attached between the two) is mended by the CPU's next
 * softirq instead of leaving it "in softirq" for good.
 */
SEC("tp_btf/softirq_entry")
int BPF_PROG(stc_softirq_entry, unsigned int vec)
{
	__u32 cpu = bpf_get_smp_processor_id();
	struct irq_state *o = bpf_map_lookup_elem(&irq_last, &cpu);

	if (o)
		o->in_softirq = 1;
	return 0;
}

SEC("tp_btf/softirq_exit")
int BPF_PROG(stc_softirq_exit, unsigned int vec)
{
	__u32 cpu = bpf_get_smp_processor_id();
	struct irq_state *o = bpf_map_lookup_elem(&irq_last, &cpu);

	if (o)
		o->in_softirq = 0;
	return 0;
}

/*
 * The issuer runs again: its wake latency, when within the window. A waiter
 * is recorded only when the issuer was asleep at its completion, after the
 * IRQ entry, so this first switch into it follows a wakeup after the IRQ:
 * no sched_waking program is needed to tell.
 */
SEC("raw_tp/sched_switch")	/* (not tp_btf: the task switched in is only hashed, never read) */
int BPF_PROG(stc_switch, bool preempt, __u64 prev, __u64 next)
{
	__u64 task = next, now;
	__u32 slot = waiter_slot(task);
	struct waiter *w = bpf_map_lookup_elem(&waiters, &slot);

	if (!w || w->task != task)
		return 0;
	now = bpf_ktime_get_ns();
	if (now <= w->irq_entry_ns + wake_window_ns) {
		add_to_slot(w->slot, bpf_get_smp_processor_id(), now - w->irq_entry_ns,
			    STC_PATH_UNKNOWN, false);
		count(STC_WAKES);
	}
	w->task = 0;
	return 0;
}

/* ---- MMC ---- */

/* A CQE request's id: host and tag (a tag is >= 0; bit 31 set: no id is 0). */
static __always_inline __u64 cqe_id(__u32 index, int tag)
{
	return (__u64)index << 32 | 1u << 31 | (__u32)tag;
}

SEC("tp_btf/mmc_request_start")
int BPF_PROG(stc_mmc_start, struct mmc_host *host, struct mmc_request *mrq)
{
	__u64 now = bpf_ktime_get_ns();
	struct mmc_command *cmd = BPF_CORE_READ(mrq, cmd);
	struct mmc_data *data = BPF_CORE_READ(mrq, data);
	__u32 opcode = cmd ? BPF_CORE_READ(cmd, opcode) : 0;
	int tag = BPF_CORE_READ(mrq, tag);
	__u32 index = (__u32)BPF_CORE_READ(host, index), device;
	__u64 bytes = 0;

	if (device_index(STC_DEV_MMC, index, &device))
		return 0;
	if (data)
		bytes = (__u64)BPF_CORE_READ(data, blocks) * BPF_CORE_READ(data, blksz);
	if (opcode == 0 && tag >= 0) {	/* CQE: no command, a tag */
		__u32 write = data && (BPF_CORE_READ(data, flags) & 0x100);	/* MMC_DATA_WRITE */

		start_request(now, STC_START_MMC_CQE, cqe_id(index, tag), device,
			      write ? 47 : 46, bytes, BPF_ANY);
		return 0;
	}
	/* A second start before the done is a retry: the wait runs from the first. */
	start_request(now, STC_START_MMC, (__u64)mrq, device, opcode, bytes, BPF_NOEXIST);
	return 0;
}

static __always_inline bool mmc_cmd_error(struct mmc_command *c)
{
	return c && BPF_CORE_READ(c, error) != 0;
}

SEC("tp_btf/mmc_request_done")
int BPF_PROG(stc_mmc_done, struct mmc_host *host, struct mmc_request *mrq)
{
	__u64 now = bpf_ktime_get_ns();
	struct mmc_command *cmd = BPF_CORE_READ(mrq, cmd);
	struct mmc_data *data = BPF_CORE_READ(mrq, data);
	__u32 opcode = cmd ? BPF_CORE_READ(cmd, opcode) : 0;
	int tag = BPF_CORE_READ(mrq, tag);
	__u32 index = (__u32)BPF_CORE_READ(host, index), device;
	struct start s;
	bool error;

	if (device_index(STC_DEV_MMC, index, &device))
		return 0;
	if (opcode == 0 && tag >= 0) {
		if (!take(now, STC_START_MMC_CQE, cqe_id(index, tag), &s))
			return 0;
	} else if (!take(now, STC_START_MMC, (__u64)mrq, &s)) {
		return 0;
	}
	error = mmc_cmd_error(cmd) || mmc_cmd_error(BPF_CORE_READ(mrq, sbc)) ||
		mmc_cmd_error(BPF_CORE_READ(mrq, stop)) ||
		(data && BPF_CORE_READ(data, error) != 0);
	complete(now, &s, error);
	return 0;
}

/* ---- SPI ---- */

static __always_inline int spi_device(struct spi_message *msg, __u32 *device)
{
	struct spi_device *spi = BPF_CORE_READ(msg, spi);
	__u32 bus = (__u32)(__u16)BPF_CORE_READ(spi, controller, bus_num);
	__u8 cs;

	if (bpf_core_field_exists(((struct spi_device___cs_array *)0)->chip_select)) {
		struct spi_device___cs_array *a = (void *)spi;

		cs = BPF_CORE_READ(a, chip_select[0]);
	} else {
		struct spi_device___cs_byte *b = (void *)spi;

		cs = BPF_CORE_READ(b, chip_select);
	}
	return device_index(STC_DEV_SPI, (bus << 16) | cs, device);
}

SEC("tp_btf/spi_transfer_start")
int BPF_PROG(stc_spi_xfer_start, struct spi_message *msg, struct spi_transfer *xfer)
{
	__u64 now = bpf_ktime_get_ns();
	__u32 device;

	if (spi_device(msg, &device))
		return 0;
	start_request(now, STC_START_SPI_XFER, (__u64)xfer, device, 0, BPF_CORE_READ(xfer, len), BPF_ANY);
	return 0;
}

SEC("tp_btf/spi_transfer_stop")
int BPF_PROG(stc_spi_xfer_stop, struct spi_message *msg, struct spi_transfer *xfer)
{
	__u64 now = bpf_ktime_get_ns();
	struct start s;

	if (take(now, STC_START_SPI_XFER, (__u64)xfer, &s))
		complete(now, &s, false);
	return 0;
}

SEC("tp_btf/spi_message_start")
int BPF_PROG(stc_spi_msg_start, struct spi_message *msg)
{
	__u64 now = bpf_ktime_get_ns();
	__u32 device;

	if (spi_device(msg, &device))
		return 0;
	start_request(now, STC_START_SPI_MSG, (__u64)msg, device, 1, 0, BPF_ANY);
	return 0;
}

SEC("tp_btf/spi_message_done")
int BPF_PROG(stc_spi_msg_done, struct spi_message *msg)
{
	__u64 now = bpf_ktime_get_ns();
	struct start s;

	if (!take(now, STC_START_SPI_MSG, (__u64)msg, &s))
		return 0;
	s.bytes = BPF_CORE_READ(msg, actual_length);	/* the actual length */
	s.slot = wait_slot(&s);
	complete(now, &s, false);
	return 0;
}
