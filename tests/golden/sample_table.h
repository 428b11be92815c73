/* SPDX-License-Identifier: (GPL-2.0 OR MIT) */
/*
 * spintune policy table -- generated, do not edit.
 * board:         litex-rocket-50mhz
 * table version: 7
 * fitted at:     2026-11-30T00:00:00Z
 * objective:     balanced (latency weight 1), max spin 1000000 ns
 * samples:       500
 * tool:          spintune 0.0.0-test
 * cpu class 0:   big (1200000 kHz)
 * cpu class 1:   little (600000 kHz)
 */
#ifndef SPINTUNE_TABLE_LITEX_ROCKET_50MHZ_H
#define SPINTUNE_TABLE_LITEX_ROCKET_50MHZ_H

#include "spintune/policy.h"

/* device mmc0 (driver litex-mmc, SanDisk Ultra) */
static const struct spintune_entry spintune_litex_rocket_50mhz_mmc0_entries[] SPINTUNE_MAYBE_UNUSED = {
	/* big opcode 13 size class 0: 100 samples, p50 1.0us, p99 5.0us */
	{ 0u, 0u, SPINTUNE_SPIN, 0u, 13u, 1000000u, 0u, 0u, 0u, 0u },
	/* big opcode 18 size class 13: 100 samples, p50 1.0us, p99 5.0us */
	{ 0u, 13u, SPINTUNE_IRQ, 0u, 18u, 0u, 0u, 0u, 0u, 0u },
	/* big opcode 23 size class 0: 100 samples, p50 1.0us, p99 5.0us */
	{ 0u, 0u, SPINTUNE_SPIN_THEN_IRQ, 0u, 23u, 12000u, 0u, 0u, 0u, 0u },
	/* little opcode 18 size class 13: 100 samples, p50 1.0us, p99 5.0us */
	{ 1u, 13u, SPINTUNE_SLEEP_THEN_SPIN, 0u, 18u, 1000000u, 150000u, 0u, 0u, 0u },
	/* fallback for keys not listed: 0 samples */
	{ 255u, 255u, SPINTUNE_IRQ, 1u, 4294967295u, 0u, 0u, 0u, 0u, 0u },
};

/* The O(1) key index (a perfect hash, see spintune_index). */
static const uint16_t spintune_litex_rocket_50mhz_mmc0_buckets[] SPINTUNE_MAYBE_UNUSED = {
	0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u,
};

static const uint16_t spintune_litex_rocket_50mhz_mmc0_slots[] SPINTUNE_MAYBE_UNUSED = {
	4u, 4u, 4u, 4u, 4u, 4u, 4u, 1u, 0u, 4u, 4u, 4u,
	3u, 2u, 4u, 4u,
};

static const struct spintune_table spintune_litex_rocket_50mhz_mmc0 SPINTUNE_MAYBE_UNUSED = {
	spintune_litex_rocket_50mhz_mmc0_entries,
	5u,
	7ull,
	"mmc0",
	NULL,
	0u,
	3u,
	{ 1u, 24u, 25u, 0u },
	{ 0x9e3779b97f4a7c15ull, spintune_litex_rocket_50mhz_mmc0_buckets, spintune_litex_rocket_50mhz_mmc0_slots, 3u, 4u },
};

/* device spi0 (driver spi-bcm2835, ks8851) */
static const struct spintune_entry spintune_litex_rocket_50mhz_spi0_entries[] SPINTUNE_MAYBE_UNUSED = {
	/* big opcode 0 size class 3: 100 samples, p50 1.0us, p99 5.0us */
	{ 0u, 3u, SPINTUNE_POLL_SLEEP, 0u, 0u, 0u, 0u, 5000u, 0u, 0u },
	/* fallback for keys not listed: 0 samples */
	{ 255u, 255u, SPINTUNE_SPIN_THEN_IRQ, 1u, 4294967295u, 30000u, 0u, 0u, 0u, 0u },
};

/* The O(1) key index (a perfect hash, see spintune_index). */
static const uint16_t spintune_litex_rocket_50mhz_spi0_buckets[] SPINTUNE_MAYBE_UNUSED = {
	0u, 0u,
};

static const uint16_t spintune_litex_rocket_50mhz_spi0_slots[] SPINTUNE_MAYBE_UNUSED = {
	1u, 1u, 0u, 1u,
};

static const struct spintune_table spintune_litex_rocket_50mhz_spi0 SPINTUNE_MAYBE_UNUSED = {
	spintune_litex_rocket_50mhz_spi0_entries,
	2u,
	7ull,
	"spi0",
	NULL,
	0u,
	3u,
	{ 1u, 24u, 25u, 0u },
	{ 0x9e3779b97f4a7c15ull, spintune_litex_rocket_50mhz_spi0_buckets, spintune_litex_rocket_50mhz_spi0_slots, 1u, 2u },
};

#endif /* SPINTUNE_TABLE_LITEX_ROCKET_50MHZ_H */
