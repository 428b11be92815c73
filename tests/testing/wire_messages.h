// Well-formed Hello and batch messages of the tuner's wire, for tests and
// for the benchmarks that drive Session streams by hand (no gtest here).
#ifndef SPINTUNE_TESTS_TESTING_WIRE_MESSAGES_H_
#define SPINTUNE_TESTS_TESTING_WIRE_MESSAGES_H_

#include <cstdint>
#include <string>

#include "spintune/v1/spintune.pb.h"

namespace spintune::testing {

inline v1::Hello GoodHello(const std::string& agent_id) {
  v1::Hello h;
  h.set_agent_id(agent_id);
  h.mutable_target()->set_board("test-board");
  auto* c = h.mutable_target()->add_cpu_classes();
  c->set_name("cpu");
  c->set_cpu_khz(1'000'000);
  c->mutable_costs()->set_irq_cpu_ns(20'000);
  c->mutable_costs()->set_irq_wake_ns(30'000);
  c->mutable_costs()->set_poll_read_ns(100);
  c->mutable_costs()->set_timer_cpu_ns(2'000);
  c->mutable_costs()->set_timer_wake_ns(50'000);
  auto* d = h.add_devices();
  d->set_name("mmc0");
  d->set_driver("litex-mmc");
  return h;
}

inline v1::SampleBatch GoodBatch(uint64_t seq, int n, uint32_t opcodes = 1) {
  v1::SampleBatch b;
  b.set_seq(seq);
  auto* c = b.mutable_completions();
  for (int i = 0; i < n; ++i) {
    c->add_device_index(0);
    c->add_cpu_class_index(0);
    c->add_opcode(17 + static_cast<uint32_t>(i) % opcodes);
    c->add_bytes(512);
    c->add_wait_ns(10'000 + static_cast<uint64_t>(i));
    c->add_path(v1::WAIT_PATH_SPIN);
    c->add_flags(0);
  }
  auto* d = b.mutable_dispatches();
  d->add_cpu_class_index(0);
  d->add_device_index(0);
  d->add_handler_ns(3'000);
  d->add_wake_ns(20'000);
  return b;
}

}  // namespace spintune::testing

#endif  // SPINTUNE_TESTS_TESTING_WIRE_MESSAGES_H_
