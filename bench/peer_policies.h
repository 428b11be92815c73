// The peers' wait mechanisms as baselines (docs/benchmarks.md "Decision quality"), each
// following its source; constants are cited at their definition in
// peer_policies.cc, with the facts in ../shared/reference/peers.md.
//
//   always-irq, always-spin (SD_SLEEP_US 0), poll-5us (litex SD_SLEEP_US 5),
//   spin-150us-then-irq (LiteX thread proposal), karlin-det (T = B),
//   karlin-rand (e/(e-1)), blk-mq-hybrid, io_uring-hybrid, kvm-halt-poll,
//   cpuidle-haltpoll, dpas-pas, litex-upstream, mxs-mmc-vendor.
//
// Thread-safety: one policy per thread.
#ifndef SPINTUNE_BENCH_PEER_POLICIES_H_
#define SPINTUNE_BENCH_PEER_POLICIES_H_

#include <memory>
#include <vector>

#include "bench/online_policy.h"

namespace spintune {

struct PeerContext {
  PlatformCosts costs;
  double latency_weight = 1;  // for Karlin's B = irq_cpu + lambda * irq_wake
  uint64_t seed = 1;          // for the randomized strategy
};

// Every peer, fresh (no history), in the order listed above.
std::vector<std::unique_ptr<OnlinePolicy>> MakePeerPolicies(const PeerContext& context);

}  // namespace spintune

#endif  // SPINTUNE_BENCH_PEER_POLICIES_H_
