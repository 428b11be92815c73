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

#define STC_MAX_DEVICES 64
#define STC_MAX_IRQS 8192
#define STC_IRQ_NAME_LEN 32

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
 * A completion histogram key: (device, opcode, size class, CPU class) and
 * one bucket of it. The per-key totals use bucket 0 in key_stats.
 */
struct stc_key {
	__u32 device;
	__u32 opcode;
	__u16 size_class;
	__u16 cpu_class;
	__u32 bucket;
};

/* (The count is the sum of the key's buckets.) */
struct stc_key_stats {
	__u64 sum_ns;
	__u64 irq_path;
	__u64 spin_path;
	__u64 errors;
};

/* A dispatch histogram key: (device, CPU class, handler or wake, bucket). */
enum stc_dispatch_kind {
	STC_DISPATCH_HANDLER = 0,
	STC_DISPATCH_WAKE = 1,
};

struct stc_dispatch_key {
	__u32 device;
	__u16 cpu_class;
	__u16 kind;
	__u32 bucket;
};

struct stc_dispatch_stats {
	__u64 sum_ns;
};

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
	STC_COUNTER_COUNT,
};

#endif /* SPINTUNE_AGENT_CAPTURE_BPF_CAPTURE_ABI_H_ */
