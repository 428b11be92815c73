// spintune-fairness-bench: what one hostile client costs everyone else.
//
// Starts a real tuner (a child process, on loopback), lets hostile clients
// flood it — Drains, Hellos for new targets on a large database, or
// oversized batches never acknowledged — and meanwhile measures a bystander
// agent: Hello -> HelloAck and first batch -> BatchAck, each on a fresh
// stream, plus the tuner's peak resident memory and how long it takes to
// stop on SIGTERM with the flood's backlog.
//
//   spintune-fairness-bench --scenario all --format json
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/version.h"
#include "nlohmann/json.hpp"
#include "spintune/v1/spintune.grpc.pb.h"
#include "tests/testing/wire_messages.h"
#include "storage/store.h"
#include "tests/testing/subprocess.h"

namespace spintune {
namespace {

using Stream = grpc::ClientReaderWriter<v1::AgentMessage, v1::TunerMessage>;

// The tests' well-formed Hello, as this benchmark's board.
v1::Hello MakeHello(const std::string& agent_id) {
  v1::Hello h = testing::GoodHello(agent_id);
  h.mutable_target()->set_board("fairness-board");
  h.mutable_devices(0)->set_driver("litex-mmc");
  h.mutable_devices(0)->set_model("fairness-card");
  return h;
}

v1::AgentMessage Batch(uint64_t seq, int samples, uint32_t opcodes) {
  v1::AgentMessage m;
  v1::SampleBatch* b = m.mutable_batch();
  b->set_seq(seq);
  auto* c = b->mutable_completions();
  for (int i = 0; i < samples; ++i) {
    c->add_device_index(0);
    c->add_cpu_class_index(0);
    c->add_opcode(1 + static_cast<uint32_t>(i) % opcodes);
    c->add_bytes(4096);
    c->add_wait_ns(20'000 + static_cast<uint64_t>(i % 5000) * 13);
    c->add_path(v1::WAIT_PATH_IRQ);
    c->add_flags(0);
  }
  return m;
}

struct Client {
  explicit Client(const std::string& address)
      : stub(v1::Tuner::NewStub(grpc::CreateCustomChannel(
            address, grpc::InsecureChannelCredentials(), LocalPool()))) {
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::minutes(5));
    stream = stub->Session(&ctx);
  }
  static grpc::ChannelArguments LocalPool() {
    grpc::ChannelArguments a;
    a.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    a.SetMaxSendMessageSize(64 << 20);
    return a;
  }
  bool Hello(const std::string& id) {
    v1::AgentMessage m;
    *m.mutable_hello() = MakeHello(id);
    return stream->Write(m);
  }
  // The next message of `kind` (skipping pushed tables).
  bool ReadUntil(v1::TunerMessage::MsgCase kind) {
    v1::TunerMessage m;
    while (stream->Read(&m)) {
      if (m.msg_case() == kind) return true;
    }
    return false;
  }
  std::unique_ptr<v1::Tuner::Stub> stub;
  grpc::ClientContext ctx;
  std::unique_ptr<Stream> stream;
};

// Populates `db` with `targets` targets of `keys` keys each (evidence a
// cold-start prediction reads in full).
void Populate(const std::string& db, int targets, int keys) {
  auto store = Store::Open(db);
  if (!store.ok()) {
    std::cerr << "fairness-bench: " << store.status() << "\n";
    std::exit(1);
  }
  for (int t = 0; t < targets; ++t) {
    TargetRecord r;
    r.agent_id = absl::StrCat("stored-", t);
    r.board = "stored-board";
    CpuClassRecord c;
    c.name = "cpu";
    c.cpu_khz = 500'000 + 10'000 * static_cast<uint64_t>(t);
    c.declared = {20'000, 30'000, 100, 2'000, 50'000};
    r.cpu_classes.push_back(c);
    r.devices.push_back({"mmc0", "litex-mmc", "fairness-card", {}});
    auto id = (*store)->UpsertTarget(r);
    BatchDelta delta;
    delta.seq = 1;
    for (int k = 0; k < keys; ++k) {
      KeyEvidence e;
      e.key = {"cpu", "mmc0", static_cast<uint32_t>(k), 12};
      for (int i = 0; i < 20; ++i) e.histogram.Record(20'000 + 97 * static_cast<uint64_t>(i * k % 500));
      delta.completion_samples += e.histogram.total_count();
      delta.keys.push_back(std::move(e));
    }
    if (!id.ok() || !(*store)->IngestBatch(*id, delta).ok()) {
      std::cerr << "fairness-bench: populating failed\n";
      std::exit(1);
    }
  }
}

uint64_t StatusKb(pid_t pid, const std::string& field) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(field + ":", 0) == 0) return std::stoull(line.substr(field.size() + 1));
  }
  return 0;
}

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
}

}  // namespace
}  // namespace spintune

int main(int argc, char** argv) {
  using namespace spintune;
  std::string scenario = "all";
  std::string tuner_bin = SPINTUNE_TUNER_BIN;
  std::string format = "table";
  int bystanders = 40;
  int flood = 300;
  int stored_targets = 100;
  int stored_keys = 2048;
  int max_queued_mb = 256;
  int grpc_memory_mb = 0;
  CLI::App app{"spintune-fairness-bench: a bystander agent's Hello and first-ack latency and the "
               "tuner's memory while hostile clients flood it"};
  app.footer(
      "Scenarios: drains (one stream, a batch and a Drain, 300 times, never reading), hellos "
      "(300 streams saying Hello for new targets on a database of 100 targets x 2048 keys), "
      "oversized (300 batches of 65,536 samples, never acknowledged), all (the three at once).\n"
      "Examples:\n"
      "  spintune-fairness-bench --scenario all\n"
      "  spintune-fairness-bench --scenario hellos --stored-targets 10 --format json\n"
      "Exit codes: 0 ok, 1 the tuner failed, 2 usage.");
  app.set_version_flag("--version", Version());
  app.add_option("--scenario", scenario, "drains | hellos | oversized | all")
      ->check(CLI::IsMember({"drains", "hellos", "oversized", "all", "none"}))
      ->capture_default_str();
  app.add_option("--tuner-bin", tuner_bin, "spintune-tuner binary")->capture_default_str();
  app.add_option("--bystanders", bystanders, "Bystander round trips measured")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  app.add_option("--flood", flood, "Messages (or streams) per hostile client")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  app.add_option("--stored-targets", stored_targets, "Targets stored before (hellos)")
      ->check(CLI::Range(0, 100000))
      ->capture_default_str();
  app.add_option("--stored-keys", stored_keys, "Keys per stored target (hellos)")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  app.add_option("--max-queued-mb", max_queued_mb, "The tuner's --max-queued-mb")
      ->capture_default_str();
  app.add_option("--grpc-memory-mb", grpc_memory_mb, "The tuner's --grpc-memory-mb (0: no limit)")
      ->check(CLI::Range(0, 1 << 20))
      ->capture_default_str();
  app.add_option("--format", format, "table | json")
      ->check(CLI::IsMember({"table", "json"}))
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  const bool drains = scenario == "drains" || scenario == "all";
  const bool hellos = scenario == "hellos" || scenario == "all";
  const bool oversized = scenario == "oversized" || scenario == "all";
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / absl::StrCat("spintune-fairness-", getpid());
  std::filesystem::create_directories(dir);
  const std::string db = (dir / "tuner.db").string();
  const absl::Time populate_start = absl::Now();
  if (hellos && stored_targets > 0) Populate(db, stored_targets, stored_keys);
  const double populate_s = absl::ToDoubleSeconds(absl::Now() - populate_start);

  const pid_t tuner = testing::Spawn(
      {tuner_bin, "--listen", "127.0.0.1:0", "--db", db, "--log-level", "warn", "--refit-samples",
       "20000", "--max-queued-mb", std::to_string(max_queued_mb), "--grpc-memory-mb",
       std::to_string(grpc_memory_mb), "--shutdown-deadline", "5"},
      (dir / "tuner.out").string(), (dir / "tuner.err").string());
  const std::string address = testing::WaitForLine((dir / "tuner.out").string(), "listening on ");
  if (address.empty()) {
    std::cerr << "fairness-bench: the tuner did not start:\n"
              << testing::Slurp((dir / "tuner.err").string());
    return 1;
  }

  // The hostile clients.
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> hostile_messages{0};
  std::vector<std::unique_ptr<Client>> hostile;
  std::mutex hostile_mu;
  std::vector<std::thread> threads;
  auto keep = [&](std::unique_ptr<Client> c) {
    std::lock_guard<std::mutex> lock(hostile_mu);
    hostile.push_back(std::move(c));
    return hostile.back().get();
  };
  if (drains) {
    threads.emplace_back([&] {
      Client* c = keep(std::make_unique<Client>(address));
      if (!c->Hello("flood-drains")) return;
      if (!c->stream->Write(Batch(1, 4000, 200))) return;
      v1::AgentMessage drain;
      drain.mutable_drain();
      for (int i = 0; i < flood && !stop; ++i) {
        if (!c->stream->Write(Batch(2 + static_cast<uint64_t>(i), 50, 200))) return;
        if (!c->stream->Write(drain)) return;
        hostile_messages += 2;
      }
    });
  }
  if (hellos) {
    threads.emplace_back([&] {
      for (int i = 0; i < flood && !stop; ++i) {
        Client* c = keep(std::make_unique<Client>(address));
        if (c->Hello(absl::StrCat("flood-hello-", i))) ++hostile_messages;
      }
    });
  }
  if (oversized) {
    threads.emplace_back([&] {
      Client* c = keep(std::make_unique<Client>(address));
      if (!c->Hello("flood-oversized")) return;
      const v1::AgentMessage big = Batch(1, 65536, 64);
      for (int i = 0; i < flood && !stop; ++i) {
        v1::AgentMessage m = big;
        m.mutable_batch()->set_seq(1 + static_cast<uint64_t>(i));
        if (!c->stream->Write(m)) return;
        ++hostile_messages;
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(scenario == "none" ? 0 : 500));

  // The bystander: a fresh stream each time, as a (re)connecting agent.
  std::vector<double> hello_ms, ack_ms;
  uint64_t peak_rss_kb = 0;
  int failures = 0;
  for (int i = 0; i < bystanders; ++i) {
    Client c(address);
    const absl::Time t0 = absl::Now();
    const bool hello_ok =
        c.Hello(absl::StrCat("bystander-", i)) && c.ReadUntil(v1::TunerMessage::kHelloAck);
    const absl::Time t1 = absl::Now();
    const bool ack_ok = hello_ok && c.stream->Write(Batch(1, 100, 4)) &&
                        c.ReadUntil(v1::TunerMessage::kBatchAck);
    const absl::Time t2 = absl::Now();
    if (!ack_ok) ++failures;
    hello_ms.push_back(absl::ToDoubleMilliseconds(t1 - t0));
    ack_ms.push_back(absl::ToDoubleMilliseconds(t2 - t1));
    c.ctx.TryCancel();
    peak_rss_kb = std::max(peak_rss_kb, StatusKb(tuner, "VmRSS"));
  }
  peak_rss_kb = std::max(peak_rss_kb, StatusKb(tuner, "VmHWM"));

  // SIGTERM with the flood's backlog still queued.
  const absl::Time term = absl::Now();
  kill(tuner, SIGTERM);
  int status = 0;
  waitpid(tuner, &status, 0);
  const double shutdown_s = absl::ToDoubleSeconds(absl::Now() - term);
  stop = true;
  {
    std::lock_guard<std::mutex> lock(hostile_mu);
    for (auto& c : hostile) c->ctx.TryCancel();
  }
  for (auto& t : threads) t.join();
  const std::string tuner_err = testing::Slurp((dir / "tuner.err").string());
  std::filesystem::remove_all(dir);

  nlohmann::json out = {
      {"scenario", scenario},
      {"bystanders", bystanders},
      {"failures", failures},
      {"hostile_messages", hostile_messages.load()},
      {"hello_ms", {{"p50", Percentile(hello_ms, 0.5)}, {"p99", Percentile(hello_ms, 0.99)},
                    {"max", Percentile(hello_ms, 1)}}},
      {"first_ack_ms", {{"p50", Percentile(ack_ms, 0.5)}, {"p99", Percentile(ack_ms, 0.99)},
                        {"max", Percentile(ack_ms, 1)}}},
      {"tuner_peak_rss_mb", static_cast<double>(peak_rss_kb) / 1024},
      {"max_queued_mb", max_queued_mb},
      {"grpc_memory_mb", grpc_memory_mb},
      {"shutdown_s", shutdown_s},
      {"tuner_exit_code", WIFEXITED(status) ? WEXITSTATUS(status) : -1},
      {"populate_s", populate_s}};
  if (format == "json") {
    std::cout << out.dump(2) << "\n";
  } else {
    std::cout << absl::StrFormat(
        "scenario %s: %d bystanders (%d failed) during %d hostile messages\n"
        "  Hello -> HelloAck    p50 %7.1f ms  p99 %7.1f ms  max %7.1f ms\n"
        "  batch -> BatchAck    p50 %7.1f ms  p99 %7.1f ms  max %7.1f ms\n"
        "  tuner peak RSS %.0f MiB (--max-queued-mb %d); SIGTERM to exit %.2f s\n",
        scenario, bystanders, failures, hostile_messages.load(), Percentile(hello_ms, 0.5),
        Percentile(hello_ms, 0.99), Percentile(hello_ms, 1), Percentile(ack_ms, 0.5),
        Percentile(ack_ms, 0.99), Percentile(ack_ms, 1),
        static_cast<double>(peak_rss_kb) / 1024, max_queued_mb, shutdown_s);
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::cerr << "fairness-bench: the tuner exited badly:\n" << tuner_err;
    return 1;
  }
  return 0;
}
