/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * What the BPF capture program and its loader (bpf_capture.cc) share: map
 * keys and values, the samples of the ring buffer and the counters. Fixed
 * sizes, no padding holes (map keys are compared bytewise).
 *
 * The including file defines __u8, __u16, __u32, __s32 and __u64.
 */
#ifndef SPINTUNE_AGENT_CAPTURE_BPF_CAPTURE_ABI_H_
#define SPINTUNE_AGENT_CAPTURE_BPF_CAPTURE_ABI_H_

#include "agent/capture/bpf/histogram_bits.h"

#define STC_MAX_DEVICES 64
#define STC_MAX_IRQS 8192
#define STC_IRQ_NAME_LEN 32
#define STC_DIRECT_SLOTS 4096	/* the direct-mapped table of pending starts (a power of two) */

/* Measured devices: (kind, id) -> index into the loader's device list. */
enum stc_device_kind {
	STC_DEV_BLOCK = 1,	/* id: the kernel's dev_t of the disk (major << 20 | minor) */
	STC_DEV_MMC = 2,	/* id: the host's index (mmc<N>) */
	STC_DEV_SPI = 3,	/* id: bus number << 16 | chip select (spi<B>.<C>) */
};

struct stc_device_key {
	__u32 kind;
	__u32 id;
};

/* How a completion was waited for (TracePath). */
enum stc_path {
	STC_PATH_UNKNOWN = 0,
	STC_PATH_SPIN = 1,
	STC_PATH_IRQ = 2,
};

/*
 * Histograms live in slots: an array of slot_count x CPUs histograms
 * (STC_SLOTS_PER_DEVICE slots per measured device: about 18 KiB each per
 * CPU; indexed by slot and CPU, no hash at the update), and a hash from each
 * key to its slot that the program fills on a key's first use and the loader
 * reads to name the slots. A key is a completion key (device, opcode, size
 * class, CPU class) or a dispatch key (device, CPU class; handler or wake
 * time).
 */
#define STC_SLOTS_PER_DEVICE 128	/* the loader sizes the maps: this many per measured device */
#define STC_NO_SLOT 0xFFFFFFFFu		/* a key without a slot (every slot taken) */

enum stc_family {
	STC_FAMILY_WAIT = 0,		/* completion times */
	STC_FAMILY_HANDLER = 1,		/* IRQ handler times */
	STC_FAMILY_WAKE = 2,		/* IRQ entry -> the issuer running again */
};

struct stc_slot_key {
	__u32 device;
	__u32 opcode;		/* 0 for dispatch keys */
	__u16 size_class;	/* 0 for dispatch keys */
	__u16 cpu_class;
	__u32 family;
};

/*
 * One slot's histogram on one CPU, written only by programs on that CPU.
 * The loader maps the array and reads it in place.
 *
 * The program adds to a bucket, then to sum_ns and the path counts, and to
 * `count` last; the loader reads `count` first and the rest only when it
 * moved since its last read, or when the read before found a move (on
 * arm64 and riscv a BPF atomic add is not ordered with the others: a bucket
 * may become visible after `count`, never a read later). The header reads
 * before the buckets never see more path counts than bucket counts on x86;
 * the loader caps them at the buckets' delta anyway. Buckets are 32 bits
 * (memory: 4,608 of them): the loader takes deltas modulo 2^32, per CPU.
 * The header is one cache line, the whole a whole number of them.
 */
struct stc_hist {
	__u64 sum_ns;
	__u64 irq_path;		/* completions only */
	__u64 spin_path;
	__u64 errors;
	__u64 count;		/* values added; the last word written */
	__u64 pad[3];
	__u32 buckets[STC_BUCKET_COUNT];
};

/* The index in the histogram array of @slot's histogram of @cpu. */
static inline __u32 stc_hist_index(__u32 slot, __u32 cpu, __u32 cpus)
{
	return slot * cpus + cpu;
}

/* One completion sent through the ring buffer (sampled mode). */
struct stc_sample {
	__u64 wait_ns;
	__u64 bytes;
	__u64 end_ns;	/* bpf_ktime_get_ns() of the event that ended it */
	__u32 device;
	__u32 opcode;
	__u16 cpu_class;
	__u8 path;
	__u8 error;
	__s32 cpu;	/* the CPU that issued */
};

/*
 * The contexts block completions ran in, as bits (the program's
 * completion_contexts_* words): the kernel does not run stc_rq_complete
 * while it runs on the CPU, and only a completion from a higher context
 * (a hard IRQ over a softirq or a task, a softirq over a task) can
 * interrupt it. The loader attaches stc_rq_complete_nested once that can
 * happen to a measured device's completion.
 */
enum stc_context {
	STC_CTX_TASK = 1,
	STC_CTX_SOFTIRQ = 2,
	STC_CTX_HARDIRQ = 4,
};

/* Per-CPU counters (the counters map). */
enum stc_counter {
	STC_COMPLETIONS,
	STC_UNPAIRED_ENDS,	/* an end without its start */
	STC_PARTIAL,		/* partial block completions (the request goes on) */
	STC_REQUEUED,
	STC_RETRIED,		/* MMC re-issues before the done */
	STC_RING_LOST,		/* samples the full ring buffer refused */
	STC_MAP_FULL,		/* histogram buckets a full map refused */
	STC_DISPATCHES,
	STC_WAKES,
	STC_UNENDED,		/* a start found its key's previous start never ended */
	STC_NESTED,		/* completions stc_rq_complete_nested took (it was interrupted) */
	STC_COUNTER_COUNT,
};

#endif /* SPINTUNE_AGENT_CAPTURE_BPF_CAPTURE_ABI_H_ */
