// SimDriver: what a simulated board's driver pays for one request when it
// waits by a given wait (the cost model of models/cost_model.h, drawn with
// the board's true costs instead of their expectations): CPU ns, latency ns,
// the path it took, and the oversleep of every timer sleep it took. The
// true timer oversleep may differ from what the board declares
// (timer_wake_factor), to simulate a platform model that is wrong.
//
// Thread-compatible.
#ifndef SPINTUNE_AGENT_SIM_DRIVER_H_
#define SPINTUNE_AGENT_SIM_DRIVER_H_

#include <random>
#include <vector>

#include "agent/board_model.h"
#include "models/cost_model.h"

namespace spintune {

struct SimWait {
  double cpu_ns = 0;
  double latency_ns = 0;
  bool irq = false;                // the IRQ path took the completion
  double handler_ns = 0;           // its handler and wake, when irq
  double wake_ns = 0;
  std::vector<double> oversleep_ns;  // one per timer sleep
};

class SimDriver {
 public:
  // `board` must outlive the driver. The board's mean timer oversleep times
  // `timer_wake_factor` is the true one (exponentially distributed).
  SimDriver(const BoardModel& board, double timer_wake_factor, uint64_t seed);

  // One request that completes `x_ns` after issue, waited for by `wait`.
  SimWait Wait(const WaitParams& wait, double x_ns);

 private:
  double Oversleep();
  double Noisy(double mean_ns);

  const BoardModel& board_;
  const double timer_wake_ns_;
  std::mt19937_64 rng_;
};

}  // namespace spintune

#endif  // SPINTUNE_AGENT_SIM_DRIVER_H_
