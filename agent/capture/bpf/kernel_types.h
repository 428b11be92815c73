/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The few kernel types the capture program reads, declared with only the
 * fields it uses. preserve_access_index makes every access a CO-RE
 * relocation: libbpf finds each field in the running kernel's BTF at load
 * time, so the object needs no vmlinux.h from the build machine. Flavours
 * (name___suffix) describe layouts of other kernel versions.
 */
#ifndef SPINTUNE_AGENT_CAPTURE_BPF_KERNEL_TYPES_H_
#define SPINTUNE_AGENT_CAPTURE_BPF_KERNEL_TYPES_H_

typedef unsigned char __u8;
typedef unsigned short __u16;
typedef unsigned int __u32;
typedef int __s32;
typedef short __s16;
typedef unsigned long long __u64;
typedef long long __s64;
typedef __u16 __be16;
typedef __u32 __be32;
typedef __u32 __wsum;
typedef _Bool bool;
#define true 1
#define false 0

/* Map types and flags the program uses (include/uapi/linux/bpf.h). */
enum bpf_map_type {
	BPF_MAP_TYPE_HASH = 1,
	BPF_MAP_TYPE_ARRAY = 2,
	BPF_MAP_TYPE_PERCPU_ARRAY = 6,
	BPF_MAP_TYPE_LRU_HASH = 9,
	BPF_MAP_TYPE_RINGBUF = 27,
};
enum {
	BPF_ANY = 0,
	BPF_NOEXIST = 1,
};
enum {
	BPF_F_NO_PREALLOC = 1,
	BPF_F_MMAPABLE = 1 << 10,
};
enum {
	BPF_RB_NO_WAKEUP = 1,
	BPF_RB_FORCE_WAKEUP = 2,
};
enum {
	BPF_RB_AVAIL_DATA = 0,
};

#define __preserve __attribute__((preserve_access_index))

struct gendisk {
	int major;
	int first_minor;
} __preserve;

struct request_queue {
	struct gendisk *disk;
} __preserve;

struct request {
	struct request_queue *q;
	unsigned int cmd_flags;
	unsigned int __data_len;
	__u64 __sector;
} __preserve;

/* Before 5.17 the disk hung off the request itself. */
struct request___old {
	struct gendisk *rq_disk;
} __preserve;

struct irqaction {
	const char *name;
} __preserve;

/* 6.12+: a task that went to sleep may stay queued until it is picked (delayed dequeue). */
struct sched_entity {
	unsigned char sched_delayed;
} __preserve;

struct task_struct {
	unsigned int __state;
	unsigned int flags;
	int pid;
	int on_cpu;	/* CONFIG_SMP */
	int on_rq;
	struct sched_entity se;
	char comm[16];
} __preserve;

#define PF_KTHREAD 0x00200000

/* Before 5.14 the task state was `long state`. */
struct task_struct___old {
	long state;
} __preserve;

struct mmc_command {
	unsigned int opcode;
	int error;
} __preserve;

struct mmc_data {
	unsigned int blksz;
	unsigned int blocks;
	int error;
	unsigned int flags;
} __preserve;

struct mmc_request {
	struct mmc_command *sbc;
	struct mmc_command *cmd;
	struct mmc_data *data;
	struct mmc_command *stop;
	int tag;
} __preserve;

struct mmc_host {
	int index;
} __preserve;

struct spi_controller {
	__s16 bus_num;
} __preserve;

struct spi_device {
	struct spi_controller *controller;
} __preserve;

/* The chip select: one byte up to 6.2, an array of them since 6.3. */
struct spi_device___cs_byte {
	__u8 chip_select;
} __preserve;

struct spi_device___cs_array {
	__u8 chip_select[4];
} __preserve;

struct spi_message {
	struct spi_device *spi;
	unsigned int actual_length;
} __preserve;

struct spi_transfer {
	unsigned int len;
} __preserve;

#endif /* SPINTUNE_AGENT_CAPTURE_BPF_KERNEL_TYPES_H_ */
