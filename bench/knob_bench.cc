#include "bench/knob_bench.h"

#include <unistd.h>

#include <deque>
#include <filesystem>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "agent/knobs/ahci_sunxi_sim.h"
#include "agent/knobs/knob_controller.h"
#include "common/status_macros.h"
#include "storage/store.h"
#include "tuner/experiment_runner.h"

namespace spintune {
namespace {

// The tuner's view of the agent: what the runner sends, kept for the loop.
class LoopbackSession : public SessionHandle {
 public:
  void Send(v1::TunerMessage message) override {
    std::lock_guard<std::mutex> lock(mu_);
    outbox_.push_back(std::move(message));
  }
  void Fail(absl::Status status) override { failure_ = status; }
  bool open() const override { return failure_.ok(); }
  void ResumeReading() override {}
  bool Take(v1::TunerMessage* m) {
    std::lock_guard<std::mutex> lock(mu_);
    if (outbox_.empty()) return false;
    *m = std::move(outbox_.front());
    outbox_.pop_front();
    return true;
  }
  absl::Status failure_;

 private:
  std::mutex mu_;
  std::deque<v1::TunerMessage> outbox_;
};

absl::StatusOr<KnobBenchRun> RunOne(const AhciSunxiBoard& board, uint64_t seed,
                                    const std::string& scratch) {
  SPINTUNE_ASSIGN_OR_RETURN(KnobDeclaration declaration, SimKnobDeclaration(board.name));
  declaration.seed = seed;
  const uint64_t block_bytes = declaration.workload.block_bytes;
  SPINTUNE_ASSIGN_OR_RETURN(
      auto agent, KnobController::Create(declaration, scratch + "/" + board.name + ".json", seed));
  SPINTUNE_RETURN_IF_ERROR(agent->Recover());

  SPINTUNE_ASSIGN_OR_RETURN(auto store, Store::Open(":memory:"));
  TargetRecord target;
  target.agent_id = board.name;
  target.board = board.name;
  target.cpu_classes = {{"default", 1'000'000, {}, 0}};
  target.devices = {{"ata1", "ahci_sunxi", "", {}}};
  auto session = std::make_shared<LoopbackSession>();
  SPINTUNE_ASSIGN_OR_RETURN(session->target_id, store->UpsertTarget(target));
  session->hello.set_agent_id(board.name);
  ExperimentRunner tuner(store.get(), ExperimentRunnerOptions{});

  std::deque<v1::AgentMessage> from_agent;
  std::mutex from_agent_mu;
  agent->Attach([&](const v1::AgentMessage& m) {
    std::lock_guard<std::mutex> lock(from_agent_mu);
    from_agent.push_back(m);
    return true;
  });
  SPINTUNE_ASSIGN_OR_RETURN(v1::KnobsDeclared declared, agent->Declare());
  v1::AgentMessage hello;
  *hello.mutable_knobs_declared() = declared;
  tuner.OnMessage(session, hello);
  v1::TunerMessage command;
  while (session->Take(&command)) {
    if (!command.has_knob()) continue;
    agent->OnCommand(command.knob());
    agent->WaitIdle();
    std::lock_guard<std::mutex> lock(from_agent_mu);
    for (; !from_agent.empty(); from_agent.pop_front()) tuner.OnMessage(session, from_agent.front());
  }
  SPINTUNE_RETURN_IF_ERROR(session->failure_);
  if (agent->busy()) return absl::InternalError("the experiment did not end");
  SPINTUNE_ASSIGN_OR_RETURN(auto record, store->LatestExperiment(session->target_id, declared.name()));
  if (!record || record->state != "finished") return absl::InternalError("no finished experiment");

  KnobBenchRun run;
  run.board = board.name;
  run.start = record->space.Format(record->start);
  run.found = record->space.Format(record->applied);
  run.found_mbps = AhciSunxiWriteMbps(static_cast<uint32_t>(record->applied[0]),
                                      static_cast<uint32_t>(record->applied[1]), block_bytes);
  run.best_mbps = AhciSunxiWriteMbps(3, 3, block_bytes);
  run.share_of_best = run.found_mbps / run.best_mbps;
  run.trials = record->trials;
  run.verdict = record->verdict;
  run.statement = record->statement;
  return run;
}

}  // namespace

absl::StatusOr<std::vector<KnobBenchRun>> RunKnobBench(uint64_t seed) {
  // The agents' journals: in memory where there is a tmpfs (fsyncs of a
  // busy disk would dominate the run time).
  char shm[] = "/dev/shm/spintune-knob-bench-XXXXXX";
  char tmp[] = "/tmp/spintune-knob-bench-XXXXXX";
  const char* dir = ::mkdtemp(shm) ? shm : ::mkdtemp(tmp);
  if (dir == nullptr) return absl::UnavailableError("mkdtemp failed");
  std::vector<KnobBenchRun> runs;
  absl::Status status;
  for (const auto& board : AhciSunxiBoards()) {
    auto run = RunOne(board, seed, dir);
    if (!run.ok()) {
      status = absl::Status(run.status().code(),
                            absl::StrCat(board.name, ": ", run.status().message()));
      break;
    }
    runs.push_back(std::move(*run));
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  if (!status.ok()) return status;
  return runs;
}

nlohmann::json KnobBenchToJson(uint64_t seed, const std::vector<KnobBenchRun>& runs) {
  nlohmann::json arr = nlohmann::json::array();
  for (const auto& r : runs) {
    arr.push_back({{"board", r.board},
                   {"start", r.start},
                   {"found", r.found},
                   {"share_of_best", r.share_of_best},
                   {"trials", r.trials},
                   {"found_write_mbps", r.found_mbps},
                   {"best_write_mbps", r.best_mbps},
                   {"verdict", r.verdict},
                   {"statement", r.statement}});
  }
  return {{"seed", seed}, {"exhaustive_trials", 256}, {"runs", arr}};
}

std::string RenderKnobBench(const std::vector<KnobBenchRun>& runs) {
  std::string out = absl::StrFormat("%-28s %-14s %-14s %10s %7s %7s  %s\n", "BOARD", "START",
                                    "FOUND", "WRITE MB/s", "OF BEST", "TRIALS", "VERDICT");
  for (const auto& r : runs) {
    absl::StrAppend(&out, absl::StrFormat("%-28s %-14s %-14s %10.1f %6.1f%% %7d  %s\n", r.board,
                                          r.start, r.found, r.found_mbps,
                                          100 * r.share_of_best, r.trials, r.verdict));
  }
  for (const auto& r : runs) absl::StrAppend(&out, r.board, ": ", r.statement, "\n");
  absl::StrAppend(&out, "(an exhaustive search of TXTS x RXTS takes 256 trials; MB/s are the "
                        "model's expected values at 12 KiB blocks)\n");
  return out;
}

}  // namespace spintune
