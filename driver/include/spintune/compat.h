/* SPDX-License-Identifier: (GPL-2.0 OR MIT) */
/*
 * spintune compat layer: the time, relax, delay and sleep primitives the
 * wait helpers (wait.h) use, mapped to the kernel's or to POSIX's.
 *
 * A driver (or a test) may define any of these macros before including
 * wait.h to supply its own, e.g. a fake clock:
 *   SPINTUNE_NOW_NS()        monotonic time in ns (uint64_t)
 *   SPINTUNE_CPU_RELAX()     pause inside a busy loop
 *   SPINTUNE_SLEEP_NS(ns)    sleep about ns; may sleep (not atomic-safe)
 *   SPINTUNE_DELAY_NS(ns)    busy-wait about ns without reading the clock
 *                            the time-keeping code keeps (atomic-safe)
 *   SPINTUNE_MIGHT_SLEEP()   a helper that may sleep starts here
 *
 * Kernel: ktime_get_ns(), cpu_relax(), and an hrtimer sleep without slack
 * (schedule_hrtimeout_range(), as usleep_range() does inside): fsleep()
 * would busy-wait below 10 us and sleep up to twice as long above, which
 * is not the sleep the cost model prices. The delay is ndelay(): the
 * kernel's calibrated delay loop (or the architecture's delay timer), which
 * keeps counting where ktime_get_ns() may stand still (time-keeping
 * suspended with interrupts off), the reason read_poll_timeout_atomic()
 * stopped reading the clock in 6.5. might_sleep() warns in a kernel with
 * CONFIG_DEBUG_ATOMIC_SLEEP when a helper that may sleep is called from
 * atomic context, whatever the table in force asks for that command.
 * POSIX: clock_gettime(CLOCK_MONOTONIC), the architecture's pause/yield
 * hint, nanosleep(), a delay that spins on that clock (it does not stand
 * still in user space) and no might_sleep(). The POSIX part is the only
 * place the headers use libc.
 */
#ifndef SPINTUNE_COMPAT_H
#define SPINTUNE_COMPAT_H

#ifdef __KERNEL__
#include <linux/delay.h>
#include <linux/hrtimer.h>
#include <linux/ktime.h>
#include <linux/processor.h>
#include <linux/sched.h>

#ifndef SPINTUNE_NOW_NS
#define SPINTUNE_NOW_NS() ktime_get_ns()
#endif
#ifndef SPINTUNE_CPU_RELAX
#define SPINTUNE_CPU_RELAX() cpu_relax()
#endif
#ifndef SPINTUNE_SLEEP_NS
static inline void spintune__kernel_sleep_ns(u64 ns)
{
	ktime_t expires = ns_to_ktime(ns);

	__set_current_state(TASK_UNINTERRUPTIBLE);
	schedule_hrtimeout_range(&expires, 0, HRTIMER_MODE_REL);
}
#define SPINTUNE_SLEEP_NS(ns) spintune__kernel_sleep_ns(ns)
#endif
#ifndef SPINTUNE_DELAY_NS
#define SPINTUNE_DELAY_NS(ns) ndelay(ns)
#endif
#ifndef SPINTUNE_MIGHT_SLEEP
#define SPINTUNE_MIGHT_SLEEP() might_sleep()
#endif

#else /* user space */
#include <stdint.h>
#include <time.h>

#ifndef SPINTUNE_NOW_NS
static inline uint64_t spintune__posix_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
#define SPINTUNE_NOW_NS() spintune__posix_now_ns()
#endif

/* SPINTUNE_CPU_RELAX(): the architecture's pause/yield hint (uspace.h). */
#include "spintune/uspace.h"

#ifndef SPINTUNE_SLEEP_NS
static inline void spintune__posix_sleep_ns(uint64_t ns)
{
	struct timespec ts;

	ts.tv_sec = (time_t)(ns / 1000000000u);
	ts.tv_nsec = (long)(ns % 1000000000u);
	/* interrupted: sleep the rest */
	while (nanosleep(&ts, &ts) != 0)
		continue;
}
#define SPINTUNE_SLEEP_NS(ns) spintune__posix_sleep_ns(ns)
#endif

#ifndef SPINTUNE_DELAY_NS
static inline void spintune__posix_delay_ns(uint64_t ns)
{
	const uint64_t t0 = SPINTUNE_NOW_NS();

	while (SPINTUNE_NOW_NS() - t0 < ns)
		SPINTUNE_CPU_RELAX();
}
#define SPINTUNE_DELAY_NS(ns) spintune__posix_delay_ns(ns)
#endif

#ifndef SPINTUNE_MIGHT_SLEEP
#define SPINTUNE_MIGHT_SLEEP() ((void)0)
#endif

#endif /* __KERNEL__ */

#endif /* SPINTUNE_COMPAT_H */
