/* SPDX-License-Identifier: GPL-2.0 */
/*
 * spintune.ko's tracepoints: the outcome of every wait and every table put
 * in force. Disabled, each costs a static branch (a NOP patched in at the
 * call site); spintune_begin() reads the clock for them only while
 * spintune_wait is enabled.
 *
 *   echo 1 > /sys/kernel/tracing/events/spintune/enable
 *   cat /sys/kernel/tracing/trace_pipe
 */
#undef TRACE_SYSTEM
#define TRACE_SYSTEM spintune

#if !defined(_SPINTUNE_TRACE_H) || defined(TRACE_HEADER_MULTI_READ)
#define _SPINTUNE_TRACE_H

#include <linux/spintune.h>
#include <linux/tracepoint.h>

/* Results of a wait, from what its wait.h helper counted. */
#define SPINTUNE_RESULT_SPIN 0    /* completed while polling */
#define SPINTUNE_RESULT_IRQ 1     /* handed to the interrupt */
#define SPINTUNE_RESULT_TIMEOUT 2 /* gave up */
#define SPINTUNE_RESULT_DRIVER 3  /* no table, no rule: the driver's own wait */

#define spintune_show_result(r)						\
	__print_symbolic(r, { SPINTUNE_RESULT_SPIN, "spin" },		\
			 { SPINTUNE_RESULT_IRQ, "irq" },		\
			 { SPINTUNE_RESULT_TIMEOUT, "timeout" },	\
			 { SPINTUNE_RESULT_DRIVER, "driver" })

/* The strategies are enum values: user-space tools read them by name. */
TRACE_DEFINE_ENUM(SPINTUNE_IRQ);
TRACE_DEFINE_ENUM(SPINTUNE_SPIN);
TRACE_DEFINE_ENUM(SPINTUNE_SPIN_THEN_IRQ);
TRACE_DEFINE_ENUM(SPINTUNE_SLEEP_THEN_SPIN);
TRACE_DEFINE_ENUM(SPINTUNE_POLL_SLEEP);

#define spintune_show_strategy(s)					\
	__print_symbolic(s, { 0, "driver" },				\
			 { SPINTUNE_IRQ, "irq" },			\
			 { SPINTUNE_SPIN, "spin" },			\
			 { SPINTUNE_SPIN_THEN_IRQ, "spin_then_irq" },	\
			 { SPINTUNE_SLEEP_THEN_SPIN, "sleep_then_spin" }, \
			 { SPINTUNE_POLL_SLEEP, "poll_sleep" })

/**
 * spintune_wait - one wait ended (spintune_end()).
 * @device: the registered name.
 * @w: the wait: its key, entry, table version (0: the default), counters
 *	and the driver's measurements.
 * @wait_ns: the completion time, issue (spintune_begin()) to the hardware's
 *	completion (@w->done_ns, else spintune_end()).
 * @result: SPINTUNE_RESULT_*.
 */
TRACE_EVENT(spintune_wait,
	TP_PROTO(const char *device, const struct spintune_wait *w, u64 wait_ns, u8 result),
	TP_ARGS(device, w, wait_ns, result),
	TP_STRUCT__entry(
		__string(device, device)
		__field(u32, opcode)
		__field(u8, cpu_class)
		__field(u8, size_class)
		__field(u8, strategy)
		__field(u8, result)
		__field(bool, incumbent)
		__field(u32, spin_ns)
		__field(u32, sleep_ns)
		__field(u32, poll_interval_ns)
		__field(u32, polls)
		__field(u64, wait_ns)
		__field(u64, latency_ns)
		__field(u64, cpu_ns)
		__field(u64, version)
	),
	TP_fast_assign(
		__assign_str(device, device);
		__entry->opcode = w->opcode;
		__entry->cpu_class = w->cpu_class;
		__entry->size_class = w->size_class;
		__entry->strategy = w->entry.strategy;
		__entry->result = result;
		__entry->incumbent = spintune_entry_is_incumbent(&w->entry);
		__entry->spin_ns = w->entry.spin_ns;
		__entry->sleep_ns = w->entry.sleep_ns;
		__entry->poll_interval_ns = w->entry.poll_interval_ns;
		__entry->polls = min_t(u64, w->stats.polls, U32_MAX);
		__entry->wait_ns = wait_ns;
		__entry->latency_ns = w->latency_ns;
		__entry->cpu_ns = w->cpu_ns;
		__entry->version = w->version;
	),
	TP_printk("device=%s cpu_class=%u opcode=%u size_class=%u strategy=%s spin_ns=%u sleep_ns=%u poll_interval_ns=%u result=%s polls=%u wait_ns=%llu latency_ns=%llu cpu_ns=%llu version=%llu arm=%s",
		  __get_str(device), __entry->cpu_class, __entry->opcode,
		  __entry->size_class, spintune_show_strategy(__entry->strategy),
		  __entry->spin_ns, __entry->sleep_ns, __entry->poll_interval_ns,
		  spintune_show_result(__entry->result), __entry->polls,
		  __entry->wait_ns, __entry->latency_ns, __entry->cpu_ns,
		  __entry->version, __entry->incumbent ? "incumbent" : "table")
);

/**
 * spintune_table_install - a table was put in force, or refused.
 * @device: the registered name.
 * @origin: "sysfs", "dev", "firmware" or the caller's.
 * @version: the new table's version (refused: the one that stays).
 * @entries: its entries (refused: 0).
 * @nodes: its context nodes (refused: 0).
 * @bytes: the blob's length.
 * @rc: 0, or the -errno it was refused with.
 */
TRACE_EVENT(spintune_table_install,
	TP_PROTO(const char *device, const char *origin, u64 version, u32 entries,
		 u32 nodes, size_t bytes, int rc),
	TP_ARGS(device, origin, version, entries, nodes, bytes, rc),
	TP_STRUCT__entry(
		__string(device, device)
		__string(origin, origin)
		__field(u64, version)
		__field(u32, entries)
		__field(u32, nodes)
		__field(u32, bytes)
		__field(int, rc)
	),
	TP_fast_assign(
		__assign_str(device, device);
		__assign_str(origin, origin);
		__entry->version = version;
		__entry->entries = entries;
		__entry->nodes = nodes;
		__entry->bytes = min_t(size_t, bytes, U32_MAX);
		__entry->rc = rc;
	),
	TP_printk("device=%s origin=%s version=%llu entries=%u nodes=%u bytes=%u rc=%d",
		  __get_str(device), __get_str(origin), __entry->version,
		  __entry->entries, __entry->nodes, __entry->bytes, __entry->rc)
);

#endif /* _SPINTUNE_TRACE_H */

/* This part must be outside the include guard. */
#undef TRACE_INCLUDE_PATH
#define TRACE_INCLUDE_PATH .
#undef TRACE_INCLUDE_FILE
#define TRACE_INCLUDE_FILE spintune_trace
#include <trace/define_trace.h>
