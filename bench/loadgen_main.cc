// spintune-loadgen: N simulated agents in one process against a running
// tuner, each a real Agent (its own channel, Session stream, acks, pushed
// tables); reports ingest throughput and batch ack latency.
//
//   spintune-loadgen --tuner 127.0.0.1:50051 --agents 200 --samples-per-agent 20000
//
// With --histograms each agent sends what an agent with the BPF capture
// sends: one batch per interval carrying K keys of histogram deltas.
//
//   spintune-loadgen --tuner 127.0.0.1:50051 --agents 1000 --histograms --keys 64
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <iostream>
#include <random>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "agent/agent.h"
#include "bench/fleet_streams.h"
#include "bench/sim_histograms.h"
#include "agent/board_model.h"
#include "agent/policy_sink.h"
#include "models/latency_histogram.h"
#include "common/logging.h"
#include "common/process_setup.h"
#include "common/signal_waiter.h"
#include "common/version.h"
#include "nlohmann/json.hpp"
#include "proto/channel_security.h"

namespace {

// A simulated board with in-kernel aggregation: every Fill is one interval
// of `keys` keys (opcodes 0..keys-1 of the board's device), each with
// `samples_per_key` log-normal completion times around a per-key median,
// sent as histogram deltas.
class HistogramSimSource : public spintune::SampleSource {
 public:
  HistogramSimSource(std::unique_ptr<spintune::SampleSource> sim, uint32_t keys,
                     uint32_t samples_per_key, uint64_t seed)
      : sim_(std::move(sim)), keys_(keys), samples_per_key_(samples_per_key), rng_(seed) {
    sim_->Describe(&hello_);
  }
  void Describe(spintune::v1::Hello* hello) const override { *hello = hello_; }
  absl::StatusOr<size_t> Fill(size_t, spintune::v1::SampleBatch* batch) override {
    return spintune::AppendSimHistograms(hello_, keys_, samples_per_key_, rng_, batch);
  }
  bool exhausted() const override { return false; }

 private:
  std::unique_ptr<spintune::SampleSource> sim_;
  spintune::v1::Hello hello_;
  uint32_t keys_;
  uint32_t samples_per_key_;
  std::mt19937_64 rng_;
};

}  // namespace

int main(int argc, char** argv) {
  spintune::SetUpProcess();  // before any thread starts
  std::string tuner = "127.0.0.1:50051";
  int agents = 10;
  uint64_t samples = 20000;
  size_t batch_size = 512;
  std::string prefix = "load";
  std::string format = "table";
  std::string token_file;
  double give_up_s = 30;
  spintune::ClientSecurity security;
  bool histograms = false;
  uint32_t keys = 64;
  uint32_t samples_per_key = 100;
  double interval_s = 1;
  bool fleet_mode = false;
  bool fleet_raw = false;
  std::string histogram_wire = "arrays";
  size_t window = 0;
  int channels = 32;
  double duration_s = 20;
  CLI::App app{"spintune-loadgen: many simulated agents in one process against a tuner; "
               "measures ingest throughput and batch ack latency."};
  app.footer(
      "Examples:\n"
      "  spintune-loadgen --tuner 127.0.0.1:50051 --agents 200 --samples-per-agent 20000\n"
      "  spintune-loadgen --tuner 127.0.0.1:50051 --agents 50 --batch-size 4096 --format json\n"
      "Agents are named PREFIX-0..N-1 and cycle through the simulated boards.\n"
      "Exit codes: 0 ok, 1 an agent failed, 2 usage.");
  app.set_version_flag("--version", spintune::Version());
  app.add_option("--tuner", tuner, "Tuner address")->capture_default_str();
  app.add_option("--agents", agents, "Agents to simulate (up to 5000; with --fleet 100000)")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  app.add_option("--samples-per-agent", samples, "Completion samples each agent sends")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 32))
      ->capture_default_str();
  app.add_option("--batch-size", batch_size, "Samples per batch")
      ->check(CLI::Range(1, 65536))
      ->capture_default_str();
  app.add_option("--prefix", prefix, "Agent id prefix")->capture_default_str();
  app.add_option("--format", format, "table | json")
      ->check(CLI::IsMember({"table", "json"}))
      ->capture_default_str();
  app.add_option("--token-file", token_file, "Bearer token (an admin token works for all)");
  app.add_option("--tls-ca", security.ca, "CA certificate of the tuner (TLS)");
  app.add_option("--give-up-after", give_up_s, "Seconds an agent waits for a tuner")
      ->capture_default_str();
  app.add_flag("--histograms", histograms,
               "Send histogram deltas (as the BPF capture does) instead of samples: one batch "
               "of --keys keys per --interval");
  app.add_option("--keys", keys, "--histograms: keys per batch")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  app.add_option("--samples-per-key", samples_per_key,
                 "--histograms: completions per key and interval")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  app.add_option("--histogram-wire", histogram_wire,
                 "--histograms, --fleet: histogram deltas as arrays or bytes "
                 "(HistogramDelta.buckets, as spintune-agent --histogram-wire bytes sends them)")
      ->check(CLI::IsMember({"arrays", "bytes"}))
      ->capture_default_str();
  app.add_flag("--fleet", fleet_mode,
               "Raw Session streams (gRPC callback API over --channels connections) instead of "
               "Agent objects, for thousands of agents: Hello, then one histogram batch per "
               "--interval for --duration seconds (bench/fleet_streams.h)");
  app.add_flag("--raw", fleet_raw,
               "--fleet: batches of --batch-size raw sample columns instead of histograms");
  app.add_option("--window", window,
                 "--fleet: a stream skips its turn while this many batches are unacknowledged "
                 "(0: never)")
      ->capture_default_str();
  app.add_option("--channels", channels, "--fleet: connections the streams share")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  app.add_option("--duration", duration_s, "--fleet: seconds of sending, after every Hello")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--interval", interval_s, "--histograms: seconds between an agent's batches")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (!fleet_mode && agents > 5000) {  // a thread and a channel each
    std::cerr << "spintune-loadgen: --agents above 5000 needs --fleet\n";
    return 2;
  }
  if (absl::Status s = spintune::LoadTokenFile(token_file, &security); !s.ok()) {
    std::cerr << "spintune-loadgen: " << s.message() << "\n";
    return 2;
  }
  spintune::InitLogging("loadgen", "error").IgnoreError();
  if (fleet_mode) {
    spintune::FleetOptions fo;
    fo.tuner = tuner;
    fo.security = security;
    fo.prefix = prefix;
    fo.agents = agents;
    fo.channels = channels;
    fo.keys = keys;
    fo.samples_per_key = samples_per_key;
    fo.raw_samples = fleet_raw ? static_cast<uint32_t>(batch_size) : 0;
    fo.histogram_bytes = histogram_wire == "bytes";
    fo.max_unacked = window;
    fo.interval = absl::Seconds(interval_s);
    fo.duration = absl::Seconds(duration_s);
    auto r = spintune::RunFleetStreams(fo);
    if (!r.ok()) {
      std::cerr << "spintune-loadgen: " << r.status().message() << "\n";
      return 1;
    }
    const double rate = static_cast<double>(r->batches_acked) / r->seconds;
    if (format == "json") {
      std::cout << nlohmann::json{{"agents", r->agents},
                                  {"keys", keys},
                                  {"hello_seconds", r->hello_seconds},
                                  {"batches_sent", r->batches_sent},
                                  {"batches_acked", r->batches_acked},
                                  {"samples_acked", r->samples_acked},
                                  {"refused", r->refused},
                                  {"seconds", r->seconds},
                                  {"batches_per_second", rate},
                                  {"samples_per_second", r->samples_acked / r->seconds},
                                  {"ack_p50_ms", r->ack_p50_ms},
                                  {"ack_p99_ms", r->ack_p99_ms},
                                  {"ack_max_ms", r->ack_max_ms}}
                       .dump(2)
                << "\n";
    } else {
      std::cout << absl::StrFormat(
          "%d agents (hellos in %.1f s), %d keys each: %d of %d batches acked in %.1f s = %.0f "
          "batches/s (%.0f key deltas/s); ack p50 %.1f ms, p99 %.1f ms, max %.1f ms; %d refused\n",
          r->agents, r->hello_seconds, keys, r->batches_acked, r->batches_sent, r->seconds, rate,
          rate * keys, r->ack_p50_ms, r->ack_p99_ms, r->ack_max_ms, r->refused);
    }
    return r->batches_acked == r->batches_sent && r->refused == 0 ? 0 : 1;
  }

  const auto& boards = spintune::BoardCatalog();
  std::vector<std::unique_ptr<spintune::Agent>> fleet;
  for (int i = 0; i < agents; ++i) {
    const auto& board = boards[static_cast<size_t>(i) % boards.size()];
    auto source = spintune::MakeSampleSource("sim:" + board.name, static_cast<uint64_t>(i) + 1);
    if (histograms && source.ok()) {
      source = std::unique_ptr<spintune::SampleSource>(new HistogramSimSource(
          std::move(*source), keys, samples_per_key, static_cast<uint64_t>(i) + 1));
    }
    auto sink = spintune::MakePolicySink("none", {board.device_name});
    if (!source.ok() || !sink.ok()) {
      std::cerr << "spintune-loadgen: cannot build agent " << i << "\n";
      return 1;
    }
    spintune::AgentOptions o;
    o.tuner_address = tuner;
    o.agent_id = absl::StrCat(prefix, "-", i);
    o.max_samples = samples;
    o.batch_size = batch_size;
    o.security = security;
    o.give_up_after = absl::Seconds(give_up_s);
    o.drain_timeout = absl::Seconds(60);
    o.histogram_bytes = histogram_wire == "bytes";
    if (histograms) {
      // One batch per interval, each agent starting at its own phase.
      o.samples_per_second = static_cast<double>(keys) * samples_per_key / interval_s;
    }
    fleet.push_back(
        std::make_unique<spintune::Agent>(o, std::move(*source), std::move(*sink)));
  }
  spintune::SignalWaiter signals([&fleet](int) {
    for (auto& a : fleet) a->Stop();
  });
  std::atomic<int> failed{0};
  const absl::Time start = absl::Now();
  std::vector<std::thread> threads;
  for (auto& a : fleet) {
    threads.emplace_back([&failed, agent = a.get()] {
      absl::Status s = agent->Run();
      if (!s.ok()) {
        ++failed;
        std::cerr << "spintune-loadgen: " << s.message() << "\n";
      }
    });
  }
  const bool tty = isatty(2) && std::getenv("NO_COLOR") == nullptr;
  std::atomic<bool> done{false};
  std::thread progress([&] {
    while (tty && !done) {
      uint64_t sent = 0;
      for (auto& a : fleet) sent += a->stats().samples_generated;
      std::cerr << absl::StrFormat("\r%d / %d samples", sent, samples * fleet.size())
                << std::flush;
      absl::SleepFor(absl::Milliseconds(500));
    }
  });
  for (auto& t : threads) t.join();
  done = true;
  progress.join();
  if (tty) std::cerr << "\r\033[K";
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);

  spintune::LatencyHistogram ack;
  uint64_t total = 0, acked = 0, batches = 0;
  for (auto& a : fleet) {
    const auto st = a->stats();
    ack.Merge(st.ack_latency);
    total += st.samples_generated;
    acked += st.tuner_total_samples;
    batches += st.batches_acked;
  }
  const double p50_ms = static_cast<double>(ack.QuantileNs(0.5)) / 1e6;
  const double p99_ms = static_cast<double>(ack.QuantileNs(0.99)) / 1e6;
  if (format == "json") {
    std::cout << nlohmann::json{{"agents", agents},
                                {"batch_size", batch_size},
                                {"samples", total},
                                {"samples_stored", acked},
                                {"batches", batches},
                                {"seconds", seconds},
                                {"samples_per_second", static_cast<double>(total) / seconds},
                                {"ack_p50_ms", p50_ms},
                                {"ack_p99_ms", p99_ms},
                                {"failed_agents", failed.load()}}
                     .dump(2)
              << "\n";
  } else {
    std::cout << absl::StrFormat(
        "%d agents, batch %d: %d samples (%d stored) in %.2f s = %.0f samples/s, %.0f batches/s; "
        "ack p50 %.2f ms, p99 %.2f ms; %d agents failed\n",
        agents, batch_size, total, acked, seconds, static_cast<double>(total) / seconds,
        static_cast<double>(batches) / seconds, p50_ms, p99_ms, failed.load());
  }
  return failed == 0 ? 0 : 1;
}
