// OnlinePolicy: a wait policy that decides request by request and may learn
// from what it observed, as the peers' mechanisms do (blk-mq hybrid poll,
// io_uring hybrid IOPOLL, KVM halt polling, ...). Used by the benchmark to
// run every mechanism on the same stream, in order.
//
// Thread-safety: one policy per thread.
#ifndef SPINTUNE_BENCH_ONLINE_POLICY_H_
#define SPINTUNE_BENCH_ONLINE_POLICY_H_

#include <cstdint>
#include <string>

#include "models/cost_model.h"

namespace spintune {

class OnlinePolicy {
 public:
  virtual ~OnlinePolicy() = default;
  virtual std::string name() const = 0;
  // True when the policy changes its decisions from what it observes.
  virtual bool adaptive() const { return false; }
  // How to wait for the next request (its opcode and length are known, its
  // completion time is not).
  virtual WaitParams Decide(uint32_t opcode, uint64_t bytes) = 0;
  // What happened: completion time `x_ns`, the wait `used`, and the cost
  // that wait had. `now_ns` is stream time after the request.
  virtual void Observe(double x_ns, const WaitParams& used, const RequestCost& cost,
                       double now_ns) {}
};

// A policy that always waits the same way.
class StaticPolicy : public OnlinePolicy {
 public:
  StaticPolicy(std::string name, WaitParams wait) : name_(std::move(name)), wait_(wait) {}
  std::string name() const override { return name_; }
  WaitParams Decide(uint32_t, uint64_t) override { return wait_; }

 private:
  std::string name_;
  WaitParams wait_;
};

}  // namespace spintune

#endif  // SPINTUNE_BENCH_ONLINE_POLICY_H_
