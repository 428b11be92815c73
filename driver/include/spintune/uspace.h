/* SPDX-License-Identifier: (GPL-2.0 OR MIT) */
/*
 * spintune's user-space primitives: what spintune/table.h and compat.h use
 * outside the kernel in place of the kernel's atomic_t, fls64(),
 * READ_ONCE(), __maybe_unused and cpu_relax(). Included only when __KERNEL__ is not defined: this file
 * is not kernel code (it is outside the set checkpatch checks).
 *
 * The counter uses the compiler's atomics, which on ARMv5 call libgcc's
 * kernel-helper routines: the kernel has no such routines, so kernel builds
 * must not use the builtins (table.h's kernel branch uses atomic_t).
 */
#ifndef SPINTUNE_USPACE_H
#define SPINTUNE_USPACE_H

#ifdef __KERNEL__
#error "spintune/uspace.h is for user space; the kernel has its own primitives"
#endif

#include <errno.h>
#include <linux/types.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef __u32 spintune_counter_t;
#define spintune__counter_fetch_inc(c) __atomic_fetch_add((c), 1, __ATOMIC_RELAXED)
#define spintune__counter_dec(c) ((void)__atomic_fetch_sub((c), 1, __ATOMIC_RELAXED))
#define spintune__counter_set(c, v) __atomic_store_n((c), (v), __ATOMIC_RELAXED)

static inline unsigned int spintune__fls64(__u64 x)
{
	return x ? 64 - (unsigned int)__builtin_clzll(x) : 0;
}

/* As the kernel's: one access, may tear a 64-bit value on a 32-bit CPU. */
#define SPINTUNE__READ_ONCE(x) (*(const volatile __typeof__(x) *)&(x))
#define SPINTUNE__WRITE_ONCE(x, v) (*(volatile __typeof__(x) *)&(x) = (v))

/* Marks generated tables that a translation unit may not use. */
#if defined(__GNUC__) || defined(__clang__)
#define SPINTUNE_MAYBE_UNUSED __attribute__((unused))
#else
#define SPINTUNE_MAYBE_UNUSED
#endif

/* Inside a busy loop (compat.h's SPINTUNE_CPU_RELAX() for wait.h). */
#ifndef SPINTUNE_CPU_RELAX
#if defined(__x86_64__) || defined(__i386__)
#define SPINTUNE_CPU_RELAX() __builtin_ia32_pause()
#elif defined(__aarch64__) || defined(__arm__)
#define SPINTUNE_CPU_RELAX() __asm__ __volatile__("yield" ::: "memory")
#else
#define SPINTUNE_CPU_RELAX() __asm__ __volatile__("" ::: "memory")
#endif
#endif

#endif /* SPINTUNE_USPACE_H */
