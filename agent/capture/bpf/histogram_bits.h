/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Bucket arithmetic of models/latency_histogram.h in plain C, shared by the
 * BPF capture program and its user-space tests: values 0..255 ns each have
 * their own bucket; above that every power of two [2^e, 2^(e+1)) is split
 * into 128 buckets, up to 2^42 - 1 ns (larger values go to the last bucket).
 * Shifts and compares only: no loops, no division (BPF-verifiable).
 *
 * The including file defines __u32 and __u64.
 */
#ifndef SPINTUNE_AGENT_CAPTURE_BPF_HISTOGRAM_BITS_H_
#define SPINTUNE_AGENT_CAPTURE_BPF_HISTOGRAM_BITS_H_

#define STC_LINEAR_BUCKETS 256
#define STC_SUB_BUCKETS 128
#define STC_MAX_EXPONENT 42
#define STC_MAX_VALUE_NS ((1ULL << STC_MAX_EXPONENT) - 1)
#define STC_BUCKET_COUNT (STC_LINEAR_BUCKETS + (STC_MAX_EXPONENT - 8) * STC_SUB_BUCKETS)

/* floor(log2(v)) for v >= 1 (0 for v == 0). */
static inline __u32 stc_log2(__u64 v)
{
	__u32 r = 0, shift;

	shift = (v > 0xFFFFFFFFULL) << 5; v >>= shift; r |= shift;
	shift = (v > 0xFFFFULL) << 4; v >>= shift; r |= shift;
	shift = (v > 0xFFULL) << 3; v >>= shift; r |= shift;
	shift = (v > 0xFULL) << 2; v >>= shift; r |= shift;
	shift = (v > 0x3ULL) << 1; v >>= shift; r |= shift;
	r |= (__u32)(v >> 1);
	return r;
}

/* Bucket index of @value_ns; equals LatencyHistogram::BucketIndex(). */
static inline __u32 stc_bucket_index(__u64 value_ns)
{
	__u32 exponent;

	if (value_ns > STC_MAX_VALUE_NS)
		value_ns = STC_MAX_VALUE_NS;
	if (value_ns < STC_LINEAR_BUCKETS)
		return (__u32)value_ns;
	exponent = stc_log2(value_ns);
	return STC_LINEAR_BUCKETS + (exponent - 8) * STC_SUB_BUCKETS +
	       (__u32)((value_ns >> (exponent - 7)) - STC_SUB_BUCKETS);
}

/* Size class of a transfer: its bit width (0 for no data); SizeClassOf(). */
static inline __u32 stc_size_class(__u64 bytes)
{
	return bytes ? stc_log2(bytes) + 1 : 0;
}

#endif /* SPINTUNE_AGENT_CAPTURE_BPF_HISTOGRAM_BITS_H_ */
