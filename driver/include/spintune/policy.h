/* SPDX-License-Identifier: (GPL-2.0 OR MIT) */
/*
 * spintune policy: the one include for a driver that wants it all.
 *
 *	table.h  the table's types, the O(1) lookup, the context state
 *	ab.h     A/B trials: which arm a command waits by
 *	blob.h   the validating parser of the blob the agent writes
 *
 * Shared by kernel drivers (through <linux/spintune.h>), user-space drivers
 * and the spintune tools; docs/policy-format.md describes the blob.
 */
#ifndef SPINTUNE_POLICY_H
#define SPINTUNE_POLICY_H

#include "spintune/table.h"
#include "spintune/ab.h"
#include "spintune/blob.h"

#endif /* SPINTUNE_POLICY_H */
