// spintune-tuner: the tuning server. Receives samples from agents over gRPC,
// keeps per-key histograms in SQLite, fits policy tables and pushes them.
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>
#include <malloc.h>

#include <cerrno>
#include <condition_variable>

#include <iostream>
#include <mutex>

#include "CLI/CLI.hpp"
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include "absl/strings/str_cat.h"
#include "common/cli_checks.h"
#include "common/logging.h"
#include "common/process_setup.h"
#include "common/signal_waiter.h"
#include "proto/channel_security.h"
#include "common/version.h"
#include "models/cost_model.h"
#include "policy/fit_flags.h"
#include "tuner/tuner_server.h"

namespace {

// InvalidArgument "FLAG ADDRESS: address already in use" when another
// process listens on HOST:PORT (gRPC would otherwise fail with a dump of its
// internal error tree). Port 0, a unix: address and anything this check
// cannot resolve are left to the server, which reports them itself.
absl::Status CheckAddressFree(const std::string& flag, const std::string& address) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos || address.rfind("unix:", 0) == 0) return absl::OkStatus();
  std::string host = address.substr(0, colon);
  const std::string port = address.substr(colon + 1);
  if (port == "0") return absl::OkStatus();
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.empty() ? nullptr : host.c_str(), port.c_str(), &hints, &found) != 0) {
    return absl::OkStatus();
  }
  bool in_use = false;
  for (addrinfo* a = found; a != nullptr && !in_use; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    const int one = 1;  // as a server sets it: a port in TIME_WAIT is free
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    in_use = ::bind(fd, a->ai_addr, a->ai_addrlen) != 0 && errno == EADDRINUSE;
    ::close(fd);
  }
  freeaddrinfo(found);
  if (!in_use) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(flag, " ", address, ": address already in use (another process listens there)"));
}

}  // namespace

int main(int argc, char** argv) {
  // Batches are large, short-lived allocations made on gRPC's threads and
  // freed on the worker: with glibc's adaptive mmap threshold they end up in
  // arenas that never shrink. A fixed threshold returns them to the system,
  // so the tuner's memory follows --max-queued-mb.
  mallopt(M_MMAP_THRESHOLD, 256 * 1024);
  spintune::SetUpProcess();  // before any thread starts
  // Server reflection (grpc.reflection.v1alpha) on every server built here,
  // so grpcurl and other generic clients can list and call the services.
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  std::string listen = "127.0.0.1:50051";
  std::string db = "spintune.db";
  spintune::FitFlags fit;
  uint64_t refit_samples = 4096;
  uint64_t window_samples = 8192;
  double shutdown_deadline_s = 5;
  uint64_t max_keys = 4096;
  double min_refit_interval_s = 1.0;
  double max_fit_cpu_share = 0.25;
  double max_agent_rate = 0;
  int max_message_mb = 16;
  uint64_t max_queued_mb = 64;
  uint64_t grpc_memory_mb = 0;
  uint64_t disk_reserve_mb = 2;
  double ledger_days = 7;
  uint64_t verify_requests = 1000;
  uint32_t ab_share = 128;
  size_t stream_window = 32;
  double hello_timeout_s = 10;
  bool require_tokens = false;
  spintune::ServerTls tls;
  std::string log_level = "info";
  std::string log_format = "text";

  CLI::App app{"spintune-tuner: fit wait policies from agents' samples and push them back."};
  app.footer(
      "Examples:\n"
      "  spintune-tuner --listen 127.0.0.1:0 --db /tmp/spintune.db\n"
      "  spintune-tuner --listen 0.0.0.0:50051 --objective latency --max-spin-ns 200000\n"
      "  spintune-tuner --listen 0.0.0.0:50051 --tls-cert tuner.pem --tls-key tuner.key \\\n"
      "      --tls-client-ca agents-ca.pem --require-tokens\n"
      "  spintune-tuner --config /etc/spintune/tuner.toml --metrics-listen 127.0.0.1:9464\n"
      "Exit codes: 0 ok, 1 runtime failure, 2 usage or bad input.");
  app.set_version_flag("--version", spintune::Version());
  // Any long option may come from a TOML file (docs/configuration.md);
  // the command line overrides it.
  app.set_config("--config", "", "Read options from this TOML file (flags override it)")
      ->check(spintune::NotADirectory());
  app.allow_config_extras(CLI::config_extras_mode::error);  // a typo is an error
  app.add_option("--listen", listen, "Address to listen on (port 0: any free port)")
      ->capture_default_str();
  app.add_option("--db", db,
                 "Database: an SQLite file (created if missing; or sqlite:PATH), or "
                 "postgresql://USER@HOST/DB, an existing PostgreSQL database several tuners "
                 "share (docs/deploy.md)")
      ->check(spintune::NotADirectory())
      ->capture_default_str();
  spintune::AddFitFlags(&app, &fit);
  app.add_option("--window-samples", window_samples,
                 "Samples per drift-detection window of a target")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--refit-samples", refit_samples, "Refit a target after this many new samples")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--min-refit-interval", min_refit_interval_s,
                 "Seconds between two refits of one target (a drain refits at once)")
      ->check(CLI::Range(0.0, 3600.0))
      ->capture_default_str();
  app.add_option("--max-fit-cpu-share", max_fit_cpu_share,
                 "Most of one core refits and cold-start predictions may take when more are "
                 "asked for than that runs (a drain's refit never waits)")
      ->check(CLI::Range(0.01, 1.0))
      ->capture_default_str();
  app.add_option("--max-keys-per-target", max_keys,
                 "Most keys (cpu class, device, opcode, size class) one target may have")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 20))
      ->capture_default_str();
  app.add_option("--max-agent-samples-per-second", max_agent_rate,
                 "Completion samples per second one agent may send (0: no limit)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--max-message-mb", max_message_mb, "Largest message accepted, MiB")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  app.add_option("--max-queued-mb", max_queued_mb,
                 "Batches waiting to be stored, MiB over all agents; reading pauses above it "
                 "(the tuner's memory: about this plus, per open stream, one message and what "
                 "gRPC buffers for it, up to about 0.4 MiB while storage lags, which "
                 "--grpc-memory-mb bounds: docs/reliability.md)")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 20))
      ->capture_default_str();
  app.add_option("--grpc-memory-mb", grpc_memory_mb,
                 "Memory gRPC may use for connections and calls, MiB (0: no limit); near it "
                 "flow-control windows shrink, so batches wait in the agents, and new "
                 "connections wait (docs/reliability.md)")
      ->check(CLI::Range(uint64_t{0}, uint64_t{1} << 20))
      ->capture_default_str();
  app.add_option("--verify-requests", verify_requests,
                 "Measured requests of a key under a pushed version before it is compared with "
                 "its incumbent (a key measured worse is rolled back; docs/verification.md)")
      ->check(CLI::Range(uint64_t{10}, uint64_t{1} << 30))
      ->capture_default_str();
  app.add_option("--ab-share", ab_share,
                 "A/B trials: commands per 256 of each changed key that keep the incumbent's wait "
                 "while the key is verified (1..255; 0: off, before/after with a drift check). "
                 "Only for agents whose hello says their drivers read format 3 blobs; others are "
                 "verified before/after (docs/verification.md)")
      ->check(CLI::Range(0, 255))
      ->capture_default_str();
  app.add_option("--disk-reserve-mb", disk_reserve_mb,
                 "MiB kept allocated beside the database (DB-reserve) and given up to "
                 "recover from a full disk (0: none)")
      ->check(CLI::Range(uint64_t{0}, uint64_t{1} << 16))
      ->capture_default_str();
  app.add_option("--ledger-days", ledger_days,
                 "Keep each batch's exactly-once ledger row this many days (0: forever); a "
                 "resend of an older seq is taken at its word (storage/SCHEMA.md)")
      ->check(CLI::Range(0.0, 36500.0))
      ->capture_default_str();
  app.add_option("--stream-window", stream_window,
                 "Messages of one agent stream in the tuner at once; more wait in the agent "
                 "(gRPC flow control), so one agent cannot crowd out the others")
      ->check(CLI::Range(size_t{1}, size_t{4096}))
      ->capture_default_str();
  app.add_option("--hello-timeout", hello_timeout_s,
                 "Seconds a new stream has to send its Hello before it is closed")
      ->check(CLI::Range(0.1, 3600.0))
      ->capture_default_str();
  app.add_option("--tls-cert", tls.cert, "Server certificate (PEM; enables TLS)")
      ->check(spintune::NotADirectory());
  app.add_option("--tls-key", tls.key, "Server private key (PEM)")->check(spintune::NotADirectory());
  app.add_option("--tls-client-ca", tls.client_ca,
                 "Require client certificates signed by this CA (mutual TLS)")
      ->check(spintune::NotADirectory());
  app.add_flag("--require-tokens", require_tokens,
               "Every call needs a bearer token from `spintune tokens add` (agents: their "
               "target's; admin RPCs: an admin token)");
  app.add_option("--shutdown-deadline", shutdown_deadline_s,
                 "Seconds open streams get to finish on SIGINT/SIGTERM")
      ->capture_default_str();
  std::string metrics_listen;
  app.add_option("--metrics-listen", metrics_listen,
                 "Serve Prometheus metrics at http://ADDR/metrics (e.g. 127.0.0.1:9464; "
                 "port 0: any free port)");
  app.add_option("--log-format", log_format, "text | json (one object per line)")
      ->capture_default_str();
  app.add_option("--log-level", log_level, "trace|debug|info|warn|error|off")
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return spintune::ExitForParseError(app, e, "spintune-tuner");
  }
  absl::Status s = spintune::InitLogging("tuner", log_level, log_format);
  if (!s.ok()) {
    std::cerr << "spintune-tuner: " << s.message() << "\n";
    return 2;
  }
  for (const auto& [flag, address] : {std::make_pair("--listen", listen),
                                      std::make_pair("--metrics-listen", metrics_listen)}) {
    if (address.empty()) continue;
    if (absl::Status s = CheckAddressFree(flag, address); !s.ok()) {
      std::cerr << "spintune-tuner: " << s.message() << "\n";
      return 2;
    }
  }
  spintune::TunerOptions options;
  options.db_path = db;
  auto fit_config = spintune::FitConfigFromFlags(fit);
  if (!fit_config.ok()) {
    std::cerr << "spintune-tuner: " << fit_config.status().message() << "\n";
    return 2;
  }
  options.fit = *fit_config;
  options.store.window_samples = window_samples;
  options.store.reserve_bytes = disk_reserve_mb << 20;
  options.store.ledger_retention = absl::Hours(24 * ledger_days);
  options.verify.min_requests = verify_requests;
  options.verify.max_requests = 8 * verify_requests;
  options.verify.ab_share = ab_share;
  options.refit_samples = refit_samples;
  options.max_keys_per_target = max_keys;
  options.min_refit_interval = absl::Seconds(min_refit_interval_s);
  options.max_fit_cpu_share = max_fit_cpu_share;
  options.max_agent_samples_per_second = max_agent_rate;
  options.max_message_bytes = max_message_mb << 20;
  options.max_queued_bytes = max_queued_mb << 20;
  options.grpc_memory_bytes = grpc_memory_mb << 20;
  options.stream_window = stream_window;
  options.hello_timeout = absl::Seconds(hello_timeout_s);
  options.require_tokens = require_tokens;
  options.tls = tls;
  if (!spintune::IsLoopbackAddress(listen) && tls.cert.empty()) {
    spintune::Logger().warn("listening on {} without TLS: samples and tables travel in clear "
                            "text (--tls-cert/--tls-key)", listen);
  }
  if (!require_tokens) {
    spintune::Logger().warn(
        "no --require-tokens: any {} that reaches {} can report samples for any agent id (they "
        "count as that agent's) and read every table; use tokens (spintune tokens add) unless "
        "every client is trusted",
        spintune::IsLoopbackAddress(listen) ? "local process" : "client", listen);
  }

  // Block signals before gRPC starts its threads.
  std::unique_ptr<spintune::TunerServer> server;
  std::mutex mu;
  std::condition_variable cv;
  bool stop = false;
  spintune::SignalWaiter signals([&](int sig) {
    spintune::Logger().info("signal {}: shutting down", sig);
    std::lock_guard<std::mutex> lock(mu);
    stop = true;
    cv.notify_all();
  });
  auto started = spintune::TunerServer::Start(listen, options);
  if (!started.ok()) {
    std::cerr << "spintune-tuner: " << started.status().message() << "\n";
    return 1;
  }
  server = std::move(*started);
  // The bound addresses on stdout, each alone on its line, for scripts.
  std::cout << "listening on " << server->address() << std::endl;
  if (!metrics_listen.empty()) {
    auto metrics = server->StartMetrics(metrics_listen);
    if (!metrics.ok()) {
      std::cerr << "spintune-tuner: " << metrics.status().message() << "\n";
      server->Shutdown(absl::Seconds(1));
      return absl::IsInvalidArgument(metrics.status()) ? 2 : 1;
    }
    std::cout << "metrics on http://" << *metrics << "/metrics" << std::endl;
    spintune::Logger().info("metrics on http://{}/metrics", *metrics);
  }
  spintune::Logger().info("listening on {} db={} objective={} max_spin_ns={}", server->address(),
                          db, options.fit.objective_name, options.fit.max_spin_ns);
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return stop; });
  }
  // The counters after the shutdown: what was stored until the end.
  spintune::TunerCounters c;
  server->Shutdown(absl::Seconds(shutdown_deadline_s), &c);
  spintune::Logger().info(
      "stopped sessions={} batches={} duplicates={} rejected={} deferred={} over_limit={} "
      "samples={} refits={} versions={} pushes={} changes={}",
      c.sessions, c.batches_ingested, c.batches_duplicate, c.batches_rejected,
      c.batches_deferred, c.batches_over_limit,
      c.samples_ingested, c.refits, c.policy_versions, c.pushes, c.changes_detected);
  return 0;
}
