/* SPDX-License-Identifier: (GPL-2.0 OR MIT) */
/*
 * spintune policy table -- generated, do not edit.
 * board:         evil_board *_ #error___t__ __/
 * table version: 7
 * fitted at:     2026-11-30T00:00:00Z
 * objective:     balanced (latency weight 1), max spin 1000000 ns
 * samples:       500
 * tool:          spintune 0.0.0-test
 * cpu class 0:   big *_ (1200000 kHz)
 * cpu class 1:   little (600000 kHz)
 */
#ifndef SPINTUNE_TABLE_EVIL_BOARD_ERROR_T_H
#define SPINTUNE_TABLE_EVIL_BOARD_ERROR_T_H

#include "spintune/policy.h"

/* device mmc0_*_x (driver litex-mmc, *_ int x; /_) */
static const struct spintune_entry spintune_evil_board_error_t_mmc0_x_entries[] SPINTUNE_MAYBE_UNUSED = {
	/* big *_ opcode 13 size class 0: 100 samples, p50 1.0us, p99 5.0us */
	{ 0u, 0u, SPINTUNE_SPIN, 0u, 13u, 1000000u, 0u, 0u, 0u, 0u },
	/* big *_ opcode 18 size class 13: 100 samples, p50 1.0us, p99 5.0us */
	{ 0u, 13u, SPINTUNE_IRQ, 0u, 18u, 0u, 0u, 0u, 0u, 0u },
	/* big *_ opcode 23 size class 0: 100 samples, p50 1.0us, p99 5.0us */
	{ 0u, 0u, SPINTUNE_SPIN_THEN_IRQ, 0u, 23u, 12000u, 0u, 0u, 0u, 0u },
	/* little opcode 18 size class 13: 100 samples, p50 1.0us, p99 5.0us */
	{ 1u, 13u, SPINTUNE_SLEEP_THEN_SPIN, 0u, 18u, 1000000u, 150000u, 0u, 0u, 0u },
	/* fallback for keys not listed: 0 samples */
	{ 255u, 255u, SPINTUNE_IRQ, 1u, 4294967295u, 0u, 0u, 0u, 0u, 0u },
};

/* The O(1) key index (a perfect hash, see spintune_index). */
static const uint16_t spintune_evil_board_error_t_mmc0_x_buckets[] SPINTUNE_MAYBE_UNUSED = {
	0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u,
};

static const uint16_t spintune_evil_board_error_t_mmc0_x_slots[] SPINTUNE_MAYBE_UNUSED = {
	4u, 4u, 4u, 4u, 4u, 4u, 4u, 1u, 0u, 4u, 4u, 4u,
	3u, 2u, 4u, 4u,
};

static const struct spintune_table spintune_evil_board_error_t_mmc0_x SPINTUNE_MAYBE_UNUSED = {
	spintune_evil_board_error_t_mmc0_x_entries,
	5u,
	7ull,
	"mmc0_*_x",
	NULL,
	0u,
	3u,
	{ 1u, 24u, 25u, 0u },
	{ 0x9e3779b97f4a7c15ull, spintune_evil_board_error_t_mmc0_x_buckets, spintune_evil_board_error_t_mmc0_x_slots, 3u, 4u },
};

/* device 9spi_n *_ (driver drv_#define X, ks8851) */
static const struct spintune_entry spintune_evil_board_error_t_n9spi_n_entries[] SPINTUNE_MAYBE_UNUSED = {
	/* big *_ opcode 0 size class 3: 100 samples, p50 1.0us, p99 5.0us */
	{ 0u, 3u, SPINTUNE_POLL_SLEEP, 0u, 0u, 0u, 0u, 5000u, 0u, 0u },
	/* fallback for keys not listed: 0 samples */
	{ 255u, 255u, SPINTUNE_SPIN_THEN_IRQ, 1u, 4294967295u, 30000u, 0u, 0u, 0u, 0u },
};

/* The O(1) key index (a perfect hash, see spintune_index). */
static const uint16_t spintune_evil_board_error_t_n9spi_n_buckets[] SPINTUNE_MAYBE_UNUSED = {
	0u, 0u,
};

static const uint16_t spintune_evil_board_error_t_n9spi_n_slots[] SPINTUNE_MAYBE_UNUSED = {
	1u, 1u, 0u, 1u,
};

static const struct spintune_table spintune_evil_board_error_t_n9spi_n SPINTUNE_MAYBE_UNUSED = {
	spintune_evil_board_error_t_n9spi_n_entries,
	2u,
	7ull,
	"9spi_n *_",
	NULL,
	0u,
	3u,
	{ 1u, 24u, 25u, 0u },
	{ 0x9e3779b97f4a7c15ull, spintune_evil_board_error_t_n9spi_n_buckets, spintune_evil_board_error_t_n9spi_n_slots, 1u, 2u },
};

#endif /* SPINTUNE_TABLE_EVIL_BOARD_ERROR_T_H */
