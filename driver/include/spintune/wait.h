/* SPDX-License-Identifier: (GPL-2.0 OR MIT) */
/*
 * spintune wait helpers: wait for a device condition the way a policy
 * entry (spintune/table.h) says, in the idiom of include/linux/iopoll.h.
 *
 *	ret = spintune_wait_atomic(entry, readl, val, val & DONE, &stats, reg);
 *	if (ret == SPINTUNE_ARM_IRQ) {
 *		enable_irq_and_wait_for_completion();
 *		val = readl(reg);        // one read, no polling
 *	} else if (ret) {
 *		return ret;              // -ETIMEDOUT
 *	}
 *
 * Every helper evaluates `op(args)` into `val`, then `cond`, re-checks both
 * once more after its deadline (so preemption past the deadline does not
 * cause a false miss), and yields:
 *   0                  the condition became true while polling;
 *   SPINTUNE_ARM_IRQ   the policy says: arm the interrupt and sleep now;
 *   -ETIMEDOUT         a SPIN or POLL_SLEEP wait gave up.
 * `stats` (may be NULL) counts what happened, for the driver to report.
 * The macros are GNU statement expressions (gnu11, as the kernel).
 */
#ifndef SPINTUNE_WAIT_H
#define SPINTUNE_WAIT_H

#include "spintune/compat.h"
#include "spintune/policy.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Returned when the caller should arm its IRQ and sleep. Positive: never
 * confused with a negative errno. */
#define SPINTUNE_ARM_IRQ 1

/**
 * struct spintune_wait_stats - counters a driver may report (debugfs...).
 * @spin_hits: waits that completed while spinning.
 * @irq_fallbacks: waits handed to the IRQ path (SPINTUNE_ARM_IRQ).
 * @timeouts: waits that gave up (-ETIMEDOUT).
 * @sleeps: timer sleeps taken.
 * @polls: condition evaluations.
 *
 * Updated with plain increments: give each CPU (or queue) its own copy.
 */
struct spintune_wait_stats {
	__u64 spin_hits;
	__u64 irq_fallbacks;
	__u64 timeouts;
	__u64 sleeps;
	__u64 polls;
};

/* Through a function so a literal &stats does not trip -Waddress. */
static inline struct spintune_wait_stats *spintune__stats(struct spintune_wait_stats *stats)
{
	return stats;
}

#define spintune__count(stats, field)                                        \
	do {                                                                 \
		struct spintune_wait_stats *__spintune_s = spintune__stats(stats); \
		if (__spintune_s)                                            \
			__spintune_s->field++;                               \
	} while (0)

/**
 * spintune_spin_ns_atomic() - busy-poll a condition for at most @spin_ns.
 * @op: accessor called as op(args...), e.g. readl.
 * @val: lvalue receiving each result of @op.
 * @cond: condition on @val to wait for.
 * @spin_ns: spin budget in ns (0: one check).
 * @stats: struct spintune_wait_stats pointer or NULL.
 * @args: arguments of @op.
 *
 * One clock read to start, then one per poll that fails: a condition that
 * is already true costs one clock read and one @op. The deadline is noticed
 * after a failed poll and the condition checked once more before giving up.
 * Never sleeps; safe in atomic context.
 *
 * Returns: 0 when @cond became true, else SPINTUNE_ARM_IRQ.
 */
#define spintune_spin_ns_atomic(op, val, cond, spin_ns, stats, args...)           \
	({                                                                         \
		const __u64 __spintune_budget = (spin_ns);                     \
		const __u64 __spintune_start = SPINTUNE_NOW_NS();             \
		int __spintune_late = __spintune_budget == 0;                      \
		int __spintune_ret;                                                \
		for (;;) {                                                         \
			(val) = op(args);                                          \
			spintune__count(stats, polls);                             \
			if (cond) {                                                \
				__spintune_ret = 0;                                \
				break;                                             \
			}                                                          \
			if (__spintune_late) {                                     \
				__spintune_ret = SPINTUNE_ARM_IRQ;                 \
				break;                                             \
			}                                                          \
			SPINTUNE_CPU_RELAX();                                      \
			__spintune_late =                                          \
				SPINTUNE_NOW_NS() - __spintune_start >= __spintune_budget; \
		}                                                                  \
		__spintune_ret;                                                    \
	})

/**
 * spintune_wait_atomic() - wait as @entry says, without ever sleeping.
 * @entry: the policy entry (from spintune_lookup() or spintune_lookup_ctx()).
 * @op, @val, @cond, @stats, @args: as for spintune_spin_ns_atomic().
 *
 * IRQ: arm at once. SPIN_THEN_IRQ: spin up to @entry->spin_ns, then arm.
 * SPIN: spin up to @entry->spin_ns, then -ETIMEDOUT. The sleeping strategies
 * (SLEEP_THEN_SPIN, POLL_SLEEP) cannot run in atomic context and arm the
 * IRQ at once. Safe in atomic context.
 *
 * Returns: 0, SPINTUNE_ARM_IRQ or -ETIMEDOUT.
 */
#define spintune_wait_atomic(entry, op, val, cond, stats, args...)                 \
	({                                                                         \
		const struct spintune_entry *__spintune_e = (entry);              \
		int __spintune_rc = SPINTUNE_ARM_IRQ;                              \
		if (__spintune_e->strategy == SPINTUNE_SPIN ||                     \
		    __spintune_e->strategy == SPINTUNE_SPIN_THEN_IRQ) {            \
			__spintune_rc = spintune_spin_ns_atomic(op, val, cond,     \
				__spintune_e->spin_ns, stats, args);               \
			if (__spintune_rc == SPINTUNE_ARM_IRQ &&                   \
			    __spintune_e->strategy == SPINTUNE_SPIN)               \
				__spintune_rc = -ETIMEDOUT;                        \
		}                                                                  \
		if (__spintune_rc == 0)                                            \
			spintune__count(stats, spin_hits);                         \
		else if (__spintune_rc == SPINTUNE_ARM_IRQ)                        \
			spintune__count(stats, irq_fallbacks);                     \
		else                                                               \
			spintune__count(stats, timeouts);                          \
		__spintune_rc;                                                     \
	})

/**
 * spintune_wait() - wait as @entry says; may sleep.
 * @entry: the policy entry (from spintune_lookup()).
 * @op, @val, @cond, @stats, @args: as for spintune_spin_ns_atomic().
 * @timeout_ns: the driver's overall limit for POLL_SLEEP (its old
 *	readx_poll_timeout() timeout).
 *
 * Adds to spintune_wait_atomic(): SLEEP_THEN_SPIN sleeps @entry->sleep_ns,
 * then spins up to @entry->spin_ns and arms the IRQ; POLL_SLEEP checks,
 * then sleeps @entry->poll_interval_ns between checks until @timeout_ns.
 * Must not be called from atomic context.
 *
 * Returns: 0, SPINTUNE_ARM_IRQ or -ETIMEDOUT.
 */
#define spintune_wait(entry, op, val, cond, timeout_ns, stats, args...)            \
	({                                                                         \
		const struct spintune_entry *__spintune_w = (entry);              \
		int __spintune_r;                                                  \
		if (__spintune_w->strategy == SPINTUNE_SLEEP_THEN_SPIN) {          \
			SPINTUNE_SLEEP_NS(__spintune_w->sleep_ns);                 \
			spintune__count(stats, sleeps);                            \
			__spintune_r = spintune_spin_ns_atomic(op, val, cond,      \
				__spintune_w->spin_ns, stats, args);               \
			if (__spintune_r == 0)                                     \
				spintune__count(stats, spin_hits);                 \
			else                                                       \
				spintune__count(stats, irq_fallbacks);             \
		} else if (__spintune_w->strategy == SPINTUNE_POLL_SLEEP) {        \
			const __u64 __spintune_t0 = SPINTUNE_NOW_NS();         \
			for (;;) {                                                 \
				const int __spintune_over = SPINTUNE_NOW_NS() -    \
					__spintune_t0 >= (__u64)(timeout_ns);   \
				(val) = op(args);                                  \
				spintune__count(stats, polls);                     \
				if (cond) {                                        \
					__spintune_r = 0;                          \
					spintune__count(stats, spin_hits);         \
					break;                                     \
				}                                                  \
				if (__spintune_over) {                             \
					__spintune_r = -ETIMEDOUT;                 \
					spintune__count(stats, timeouts);          \
					break;                                     \
				}                                                  \
				SPINTUNE_SLEEP_NS(__spintune_w->poll_interval_ns); \
				spintune__count(stats, sleeps);                    \
			}                                                          \
		} else {                                                           \
			__spintune_r = spintune_wait_atomic(__spintune_w, op, val, \
				cond, stats, args);                                \
		}                                                                  \
		__spintune_r;                                                      \
	})

#ifdef __cplusplus
}
#endif

#endif /* SPINTUNE_WAIT_H */
