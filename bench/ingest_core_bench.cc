// spintune-ingest-core-bench: the tuner's own cost per ingested sample,
// without gRPC and without simulated boards competing for the CPU.
//
// Batches are generated and serialized before the clock starts (raw sample
// columns from the simulated boards, or with --histograms one batch of
// --keys histogram deltas per agent and interval). The timed part does what
// the tuner does with each received batch: parse the bytes, decode and
// check it (TunerCore::OnBatch, on the calling thread as on a gRPC thread),
// store it in the core's group commits, acknowledge it, and finally fold
// everything staged into the per-key histograms (Store::Compact). Reported:
// wall time and the process's CPU time (getrusage: every thread: the caller,
// the core's worker, compactor and fitter), so "samples per CPU second" is
// the rate one core would sustain; run under `taskset -c 0` for the
// one-core wall figure. The final fold is also reported alone: the batches
// it folded and its CPU per folded batch (the core's own compactor may have
// folded some before: it starts at 64 batches or 30 s staged per target),
// from the CPU time of the thread that runs it.
//
//   build/bench/spintune-ingest-core-bench --agents 8 --batch-size 4096 --samples 4000000
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "agent/board_model.h"
#include "agent/sample_source.h"
#include "bench/sim_histograms.h"
#include "common/cpu_clock.h"
#include "nlohmann/json.hpp"
#include "proto/sample_batch_util.h"
#include "storage/store.h"
#include "tuner/tuner_core.h"

namespace spintune {
namespace {

// A stream that never closes; counts acknowledgements.
class CountingSession : public SessionHandle {
 public:
  void Send(v1::TunerMessage message) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (message.has_batch_ack()) ++acked_;
    if (message.has_rejected()) ++rejected_;
    if (message.has_hello_ack()) hello_acked_ = true;
    cv_.notify_all();
  }
  void Fail(absl::Status status) override {
    std::cerr << "stream failed: " << status << "\n";
    std::exit(1);
  }
  bool open() const override { return true; }
  void ResumeReading() override {}

  // Waits until fewer than `window` of `sent` batches are unanswered.
  void WaitWindow(uint64_t sent, uint64_t window) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return sent - acked_ - rejected_ < window; });
  }
  void WaitHello() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return hello_acked_; });
  }
  uint64_t rejected() {
    std::lock_guard<std::mutex> lock(mu_);
    return rejected_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t acked_ = 0;
  uint64_t rejected_ = 0;
  bool hello_acked_ = false;
};

double CpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

int Main(int argc, char** argv) {
  CLI::App app{"The tuner's ingest path in one process: samples per CPU second"};
  int agents = 8;
  uint64_t samples = 4'000'000;
  size_t batch_size = 4096;
  bool histograms = false;
  uint32_t keys = 64;
  uint32_t samples_per_key = 100;
  uint64_t window = 16;
  std::string dir = "/tmp/spintune-ingest-core-bench";
  std::string format = "table";
  app.add_option("--agents", agents)->check(CLI::Range(1, 100000))->capture_default_str();
  app.add_option("--samples", samples, "Completion samples in all (raw mode)")
      ->capture_default_str();
  app.add_option("--batch-size", batch_size)->check(CLI::Range(1, 65536))->capture_default_str();
  app.add_flag("--histograms", histograms, "Histogram batches (--keys x --samples-per-key)");
  app.add_option("--keys", keys)->check(CLI::Range(1, 4096))->capture_default_str();
  app.add_option("--samples-per-key", samples_per_key)->capture_default_str();
  app.add_option("--window", window, "Unacknowledged batches per agent")->capture_default_str();
  app.add_option("--dir", dir, "Directory for the database (emptied)")->capture_default_str();
  app.add_option("--format", format)->check(CLI::IsMember({"table", "json"}));
  CLI11_PARSE(app, argc, argv);

  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  TunerOptions options;
  options.db_path = dir + "/spintune.db";
  options.min_refit_interval = absl::Seconds(1);  // the tuner's default
  auto core = TunerCore::Create(options);
  if (!core.ok()) {
    std::cerr << core.status() << "\n";
    return 1;
  }

  // Agents, their hellos and their batches, serialized as on the wire.
  const auto& boards = BoardCatalog();
  std::vector<std::shared_ptr<CountingSession>> sessions;
  std::vector<v1::Hello> hellos;
  std::vector<std::vector<std::string>> wire(agents);
  const uint64_t per_agent_batches =
      histograms ? std::max<uint64_t>(1, samples / (uint64_t{keys} * samples_per_key) / agents)
                 : std::max<uint64_t>(1, samples / batch_size / agents);
  uint64_t total_samples = 0;
  for (int a = 0; a < agents; ++a) {
    auto source = MakeSampleSource("sim:" + boards[a % boards.size()].name, a + 1);
    if (!source.ok()) {
      std::cerr << source.status() << "\n";
      return 1;
    }
    v1::Hello hello;
    (*source)->Describe(&hello);
    hello.set_agent_id(absl::StrCat("bench-", a));
    std::mt19937_64 rng(a + 1);
    for (uint64_t s = 1; s <= per_agent_batches; ++s) {
      v1::SampleBatch batch;
      if (histograms) {
        AppendSimHistograms(hello, keys, samples_per_key, rng, &batch);
      } else {
        while (static_cast<size_t>(batch.completions().wait_ns_size()) < batch_size) {
          const size_t want = batch_size - batch.completions().wait_ns_size();
          auto n = (*source)->Fill(want, &batch);
          if (!n.ok() || *n == 0) break;
        }
      }
      batch.set_seq(s);
      total_samples += CompletionSamples(batch);
      wire[a].push_back(batch.SerializeAsString());
    }
    auto session = std::make_shared<CountingSession>();
    (*core)->OnOpen(session);
    (*core)->OnHello(session, hello, nullptr);
    session->WaitHello();
    sessions.push_back(std::move(session));
    hellos.push_back(std::move(hello));
  }

  // Timed: every agent's batches, round robin, each agent's window kept.
  const double cpu0 = CpuSeconds();
  const absl::Time t0 = absl::Now();
  uint64_t bytes = 0;
  std::vector<v1::SampleBatch> read_buffers(agents);
  for (uint64_t s = 0; s < per_agent_batches; ++s) {
    for (int a = 0; a < agents; ++a) {
      sessions[a]->WaitWindow(s, window);
      // Each stream's read buffer is reused, as in the gRPC reactor.
      v1::SampleBatch& batch = read_buffers[a];
      batch.ParseFromString(wire[a][s]);
      bytes += wire[a][s].size();
      (*core)->OnBatch(sessions[a], hellos[a], batch, "", nullptr);
    }
  }
  for (int a = 0; a < agents; ++a) sessions[a]->WaitWindow(per_agent_batches, 1);
  const absl::Duration acked = absl::Now() - t0;
  const double cpu_acked = CpuSeconds() - cpu0;
  // Fold what is still staged (the compactor's share of the work).
  auto store = Store::Open(options.db_path, options.store);
  if (!store.ok()) {
    std::cerr << store.status() << "\n";
    return 1;
  }
  const absl::Time compact_t0 = absl::Now();
  // (This thread's CPU: the final fold runs on it, while the core's fitter
  // may still be fitting on its own.)
  const uint64_t compact_cpu0_ns = ThreadCpuNs();
  uint64_t folded = 0;
  auto targets = (*store)->TargetsToCompact(1, absl::InfiniteDuration());
  if (!targets.ok()) {
    std::cerr << targets.status() << "\n";
    return 1;
  }
  for (int64_t t : *targets) {
    auto n = (*store)->Compact(t);
    if (!n.ok()) {
      std::cerr << "compaction of target " << t << ": " << n.status() << "\n";
      return 1;
    }
    folded += *n;
  }
  const absl::Duration wall = absl::Now() - t0;
  const double cpu = CpuSeconds() - cpu0;
  const double compact_cpu = static_cast<double>(ThreadCpuNs() - compact_cpu0_ns) * 1e-9;
  const absl::Duration compact_wall = absl::Now() - compact_t0;
  uint64_t rejected = 0;
  for (auto& s : sessions) rejected += s->rejected();
  (*core)->Stop();

  const double wall_s = absl::ToDoubleSeconds(wall);
  nlohmann::json r = {{"agents", agents},
                      {"mode", histograms ? "histograms" : "samples"},
                      {"batch_size", histograms ? keys * samples_per_key : batch_size},
                      {"batches", per_agent_batches * agents},
                      {"samples", total_samples},
                      {"rejected", rejected},
                      {"wire_bytes", bytes},
                      {"acked_seconds", absl::ToDoubleSeconds(acked)},
                      {"cpu_seconds_acked", cpu_acked},
                      {"seconds", wall_s},
                      {"cpu_seconds", cpu},
                      {"compacted_batches", folded},
                      {"compact_seconds", absl::ToDoubleSeconds(compact_wall)},
                      {"compact_cpu_us_per_batch", folded ? compact_cpu * 1e6 / folded : 0.0},
                      {"samples_per_second", total_samples / wall_s},
                      {"samples_per_cpu_second", total_samples / cpu},
                      {"batches_per_cpu_second", per_agent_batches * agents / cpu},
                      {"cpu_ns_per_sample", cpu * 1e9 / total_samples}};
  if (format == "json") {
    std::cout << r.dump() << "\n";
  } else {
    std::cout << r.dump(2) << "\n";
  }
  return rejected == 0 ? 0 : 1;
}

}  // namespace
}  // namespace spintune

int main(int argc, char** argv) { return spintune::Main(argc, argv); }
