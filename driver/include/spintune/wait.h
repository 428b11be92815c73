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
 * Every helper evaluates `op(args)` into `val`, then `cond`, checks both
 * once more after its budget is spent (so preemption or a late read does
 * not cause a false miss), and yields:
 *   0                  the condition became true while polling;
 *   SPINTUNE_ARM_IRQ   the policy says: arm the interrupt and sleep now;
 *   -ETIMEDOUT         a SPIN or POLL_SLEEP wait gave up.
 * `stats` (may be NULL) counts what happened, for the driver to report.
 *
 * Two contexts, two bounds. spintune_wait() may sleep (might_sleep(), so a
 * kernel with CONFIG_DEBUG_ATOMIC_SLEEP warns at any call from atomic
 * context, whatever the table in force says for the command) and spins by
 * the clock, up to SPINTUNE_MAX_SPIN_NS. spintune_wait_atomic() never
 * sleeps and never reads the clock: its spin is a count of polls, each
 * followed by a delay of SPINTUNE_ATOMIC_STEP_NS (ndelay(), the kernel's
 * calibrated delay loop or delay timer, which keeps counting where the
 * time-keeping clock may stand still), at most SPINTUNE_MAX_ATOMIC_SPIN_NS
 * of steps. What the table asks beyond that (a sleep, a longer spin) is
 * done as the IRQ instead and counted in @atomic_downgrades.
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
 * confused with a negative errno.
 */
#define SPINTUNE_ARM_IRQ 1

/*
 * The delay between two polls of an atomic spin, in ns: what each poll
 * takes off the spin budget. The spin lasts the budget plus the time of
 * its reads (polls x one read: with a 250 ns step and a 100 ns register
 * read, 40% longer than the budget); a driver whose reads are slow may
 * raise it. 32-bit ARM has no ndelay() finer than udelay(1): 1 us there.
 */
#ifndef SPINTUNE_ATOMIC_STEP_NS
#if defined(__KERNEL__) && defined(CONFIG_ARM)
#define SPINTUNE_ATOMIC_STEP_NS 1000u
#else
#define SPINTUNE_ATOMIC_STEP_NS 250u
#endif
#endif

/**
 * struct spintune_wait_stats - counters a driver may report (debugfs...).
 * @spin_hits: waits that completed while spinning.
 * @irq_fallbacks: waits handed to the IRQ path (SPINTUNE_ARM_IRQ).
 * @timeouts: waits that gave up (-ETIMEDOUT).
 * @sleeps: timer sleeps taken.
 * @polls: condition evaluations.
 * @atomic_downgrades: atomic waits whose entry asked for more than atomic
 *	context allows (a sleep, or a spin beyond SPINTUNE_MAX_ATOMIC_SPIN_NS),
 *	waited by the IRQ (after at most that spin) instead.
 *
 * Updated with plain increments: give each CPU (or queue) its own copy.
 */
struct spintune_wait_stats {
	__u64 spin_hits;
	__u64 irq_fallbacks;
	__u64 timeouts;
	__u64 sleeps;
	__u64 polls;
	__u64 atomic_downgrades;
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
 * spintune_spin_ns() - busy-poll a condition for at most @spin_ns by the clock.
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
 * Never sleeps, but measures its budget with SPINTUNE_NOW_NS(): for
 * process context, where the clock runs (spintune_wait() uses it). In
 * atomic context use spintune_spin_ns_atomic().
 *
 * Returns: 0 when @cond became true, else SPINTUNE_ARM_IRQ.
 */
#define spintune_spin_ns(op, val, cond, spin_ns, stats, args...)                  \
	({                                                                         \
		const __u64 __spintune_budget = (spin_ns);                         \
		const __u64 __spintune_start = SPINTUNE_NOW_NS();                  \
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
 * spintune_spin_ns_atomic() - busy-poll a condition for a budget of polls.
 * @op, @val, @cond, @stats, @args: as for spintune_spin_ns().
 * @spin_ns: spin budget in ns (0: one check), capped at
 *	SPINTUNE_MAX_ATOMIC_SPIN_NS.
 *
 * Polls, then delays SPINTUNE_ATOMIC_STEP_NS (SPINTUNE_DELAY_NS(): the
 * kernel's ndelay()) and takes that off the budget, until the condition
 * holds or the budget is spent; then polls once more. At most
 * @spin_ns / SPINTUNE_ATOMIC_STEP_NS + 2 polls, whatever the clock does:
 * no clock is read (a time-keeping clock that stands still, as with
 * time-keeping suspended and interrupts off, cannot make it spin forever).
 * Never sleeps; safe in atomic and hard-IRQ context.
 *
 * Returns: 0 when @cond became true, else SPINTUNE_ARM_IRQ.
 */
#define spintune_spin_ns_atomic(op, val, cond, spin_ns, stats, args...)           \
	({                                                                         \
		const __u64 __spintune_asked = (spin_ns);                          \
		__u64 __spintune_left = __spintune_asked < SPINTUNE_MAX_ATOMIC_SPIN_NS ? \
			__spintune_asked : SPINTUNE_MAX_ATOMIC_SPIN_NS;            \
		int __spintune_late = __spintune_left == 0;                        \
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
			if (__spintune_left > SPINTUNE_ATOMIC_STEP_NS) {           \
				SPINTUNE_DELAY_NS(SPINTUNE_ATOMIC_STEP_NS);        \
				__spintune_left -= SPINTUNE_ATOMIC_STEP_NS;        \
			} else {                                                   \
				SPINTUNE_DELAY_NS(__spintune_left);                \
				__spintune_left = 0;                               \
				__spintune_late = 1;                               \
			}                                                          \
		}                                                                  \
		__spintune_ret;                                                    \
	})

/**
 * spintune_wait_atomic() - wait as @entry says, without ever sleeping.
 * @entry: the policy entry (from spintune_lookup() or spintune_lookup_ctx()).
 * @op, @val, @cond, @stats, @args: as for spintune_spin_ns().
 *
 * IRQ: arm at once. SPIN_THEN_IRQ: spin up to @entry->spin_ns, then arm.
 * SPIN: spin up to @entry->spin_ns, then -ETIMEDOUT. Spins by
 * spintune_spin_ns_atomic(): by a budget of polls, at most
 * SPINTUNE_MAX_ATOMIC_SPIN_NS. Atomic context cannot do what the sleeping
 * strategies (SLEEP_THEN_SPIN, POLL_SLEEP) ask: they arm the IRQ at once;
 * a SPIN longer than the atomic cap spins the cap and then arms the IRQ
 * (its timeout is longer than atomic context may spin, so it does not time
 * out early). Both count in @stats->atomic_downgrades. Safe in atomic and
 * hard-IRQ context.
 *
 * Returns: 0, SPINTUNE_ARM_IRQ or -ETIMEDOUT.
 */
#define spintune_wait_atomic(entry, op, val, cond, stats, args...)                 \
	({                                                                         \
		const struct spintune_entry *__spintune_e = (entry);               \
		const __u8 __spintune_s = __spintune_e->strategy;                  \
		int __spintune_rc = SPINTUNE_ARM_IRQ;                              \
		if (__spintune_s == SPINTUNE_SLEEP_THEN_SPIN ||                    \
		    __spintune_s == SPINTUNE_POLL_SLEEP ||                         \
		    ((__spintune_s == SPINTUNE_SPIN ||                             \
		      __spintune_s == SPINTUNE_SPIN_THEN_IRQ) &&                   \
		     __spintune_e->spin_ns > SPINTUNE_MAX_ATOMIC_SPIN_NS))         \
			spintune__count(stats, atomic_downgrades);                 \
		if (__spintune_s == SPINTUNE_SPIN ||                               \
		    __spintune_s == SPINTUNE_SPIN_THEN_IRQ) {                      \
			__spintune_rc = spintune_spin_ns_atomic(op, val, cond,     \
				__spintune_e->spin_ns, stats, args);               \
			if (__spintune_rc == SPINTUNE_ARM_IRQ &&                   \
			    __spintune_s == SPINTUNE_SPIN &&                       \
			    __spintune_e->spin_ns <= SPINTUNE_MAX_ATOMIC_SPIN_NS)  \
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
 * @op, @val, @cond, @stats, @args: as for spintune_spin_ns().
 * @timeout_ns: the driver's overall limit for POLL_SLEEP (its old
 *	readx_poll_timeout() timeout).
 *
 * IRQ: arm at once. SPIN and SPIN_THEN_IRQ: as spintune_wait_atomic(), but
 * spinning by the clock (spintune_spin_ns()) up to @entry->spin_ns
 * (SPINTUNE_MAX_SPIN_NS at most). SLEEP_THEN_SPIN sleeps @entry->sleep_ns,
 * then spins up to @entry->spin_ns and arms the IRQ; POLL_SLEEP checks,
 * then sleeps @entry->poll_interval_ns between checks until @timeout_ns.
 * May sleep whatever the entry says (the table decides, not the call
 * site): must not be called from atomic context, and says so with
 * might_sleep() (SPINTUNE_MIGHT_SLEEP()) on every call.
 *
 * Returns: 0, SPINTUNE_ARM_IRQ or -ETIMEDOUT.
 */
#define spintune_wait(entry, op, val, cond, timeout_ns, stats, args...)            \
	({                                                                         \
		const struct spintune_entry *__spintune_w = (entry);              \
		int __spintune_r;                                                  \
		SPINTUNE_MIGHT_SLEEP();                                            \
		if (__spintune_w->strategy == SPINTUNE_SLEEP_THEN_SPIN) {          \
			SPINTUNE_SLEEP_NS(__spintune_w->sleep_ns);                 \
			spintune__count(stats, sleeps);                            \
			__spintune_r = spintune_spin_ns(op, val, cond,             \
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
		} else if (__spintune_w->strategy == SPINTUNE_SPIN ||              \
			   __spintune_w->strategy == SPINTUNE_SPIN_THEN_IRQ) {     \
			__spintune_r = spintune_spin_ns(op, val, cond,             \
				__spintune_w->spin_ns, stats, args);               \
			if (__spintune_r == 0) {                                   \
				spintune__count(stats, spin_hits);                 \
			} else if (__spintune_w->strategy == SPINTUNE_SPIN) {      \
				__spintune_r = -ETIMEDOUT;                         \
				spintune__count(stats, timeouts);                  \
			} else {                                                   \
				spintune__count(stats, irq_fallbacks);             \
			}                                                          \
		} else {                                                           \
			__spintune_r = SPINTUNE_ARM_IRQ;                           \
			spintune__count(stats, irq_fallbacks);                     \
		}                                                                  \
		__spintune_r;                                                      \
	})

#ifdef __cplusplus
}
#endif

#endif /* SPINTUNE_WAIT_H */
