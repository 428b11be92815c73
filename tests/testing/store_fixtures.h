// Hand-built targets shared by the storage and tuner tests.
#ifndef SPINTUNE_TESTS_TESTING_STORE_FIXTURES_H_
#define SPINTUNE_TESTS_TESTING_STORE_FIXTURES_H_

#include <string>

#include "storage/store.h"

namespace spintune::testing {

// A LiteX Rocket at 50 MHz with one SD card, mmc0, whose driver sleeps
// 5 us between polls (its SD_SLEEP_US default rule). Its CPU class is
// "rocket".
inline TargetRecord RocketBoard(const std::string& agent_id) {
  TargetRecord r;
  r.agent_id = agent_id;
  r.board = "litex-rocket-50mhz";
  r.cpu_model = "Rocket";
  r.cpu_classes = {{"rocket", 50'000, {1000, 2000, 30, 400, 5000}, 600}};
  DefaultRule rule;
  rule.wait = WaitParams::PollSleep(5000);
  rule.note = "SD_SLEEP_US";
  r.devices = {{"mmc0", "litex-mmc", "card", {rule}}};
  return r;
}

}  // namespace spintune::testing

#endif  // SPINTUNE_TESTS_TESTING_STORE_FIXTURES_H_
