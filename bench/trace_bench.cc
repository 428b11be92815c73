// Replay speed on a trace of this machine: lines per second of the trace
// parser alone and of the whole replay path (parser + correlator), beside
// `wc -l` and a bare getline loop on the same file, in one run.
//
//   trace_bench --record-seconds 15   (root: capture a fresh trace under load)
//   trace_bench --trace FILE          (any capture)
// Without either, the checked-in fixture of this machine is tiled (with its
// timestamps shifted) to --lines lines.
#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <thread>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "agent/io_load.h"
#include "agent/live_trace.h"
#include "agent/trace/trace_reader.h"
#include "agent/tracefs_instance.h"
#include "common/cpu_clock.h"

namespace spintune {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

// Captures `seconds` of this machine's trace (the agent's events for the
// root disk) under the bundled load into `path`.
absl::Status Record(const std::string& path, double seconds) {
  const std::string disk = DiskOf("/var/tmp/");
  auto options = CaptureOptions({disk}, {});
  if (!options.ok()) return options.status();
  options->buffer_size_kb = 16384;
  auto instance = TracefsInstance::Open(*options);
  if (!instance.ok()) return instance.status();
  std::atomic<bool> stop{false};
  std::thread load([&] {
    IoLoadOptions o;
    o.path = "/var/tmp/spintune-bench-load.bin";
    o.threads = 2;
    o.duration = absl::Seconds(seconds);
    auto r = RunIoLoad(o, &stop);
    if (!r.ok()) std::cerr << "load: " << r.status().message() << "\n";
    stop = true;
  });
  std::ofstream out(path, std::ios::binary);
  std::vector<char> buffer(1 << 20);
  // Other tasks keep the trace busy: stop 0.5 s after the load has ended.
  absl::Time until = absl::InfiniteFuture();
  while (absl::Now() < until) {
    auto n = (*instance)->Read(buffer.data(), buffer.size(), absl::ZeroDuration());
    if (!n.ok()) return n.status();
    out.write(buffer.data(), static_cast<std::streamsize>(*n));
    if (*n == 0) absl::SleepFor(absl::Milliseconds(50));  // drained; see LiveTrace::ReadLoop
    if (stop && until == absl::InfiniteFuture()) until = absl::Now() + absl::Milliseconds(500);
  }
  load.join();
  return out ? absl::OkStatus() : absl::UnavailableError(path + ": write failed");
}

// Appends copies of `source`'s lines to `path`, shifting every timestamp so
// that each copy follows the previous one, until `lines` lines are written.
absl::Status Tile(const std::string& source, const std::string& path, uint64_t lines) {
  std::vector<std::string> in;
  {
    std::ifstream f(source);
    std::string line;
    while (std::getline(f, line)) {
      TraceRecord r;
      if (ParseTraceLine(line, &r) == LineKind::kEvent) in.push_back(line);
    }
  }
  if (in.empty()) return absl::FailedPreconditionError(source + ": no events to tile");
  TraceRecord first, last;
  ParseTraceLine(in.front(), &first);
  ParseTraceLine(in.back(), &last);
  const uint64_t span_ns = last.ts_ns - first.ts_ns + 1'000'000;
  std::ofstream out(path);
  uint64_t written = 0;
  for (uint64_t copy = 0; written < lines; ++copy) {
    for (const auto& line : in) {
      TraceRecord r;
      ParseTraceLine(line, &r);
      // The timestamp ends two characters before the event name.
      const size_t ts_end = static_cast<size_t>(r.event.data() - line.data());
      size_t colon = line.rfind(": ", ts_end);
      size_t ts_begin = colon;
      while (ts_begin > 0 && (isdigit(line[ts_begin - 1]) || line[ts_begin - 1] == '.')) --ts_begin;
      const uint64_t ts = r.ts_ns + copy * span_ns;
      out << line.substr(0, ts_begin)
          << absl::StrFormat("%d.%06d", ts / 1'000'000'000, (ts % 1'000'000'000) / 1000)
          << line.substr(colon) << '\n';
      if (++written >= lines) break;
    }
  }
  return out ? absl::OkStatus() : absl::UnavailableError(path + ": write failed");
}

double ThreadCpuSeconds() { return static_cast<double>(ThreadCpuNs()) / 1e9; }

enum class ReaderMode { kTextRead, kTextParse, kRawRead };

struct ReaderCost {
  double cpu_percent = 0;   // of one core, user + system, the reader thread only
  double mib_per_s = 0;
  uint64_t completions = 0;
  uint64_t requests = 0;
};

// Captures the root disk under `rate` requests/s of 4 KiB O_DIRECT load for
// `seconds` and measures what reading the capture costs the reader thread:
// trace_pipe text read and discarded, read and parsed + correlated (what the
// agent does), or the binary per-CPU trace_pipe_raw pages read and discarded
// (the floor of a libtracefs reader, before decoding).
absl::StatusOr<ReaderCost> MeasureReader(ReaderMode mode, double rate, double seconds) {
  const std::string disk = DiskOf("/var/tmp/");
  auto options = CaptureOptions({disk}, {});
  if (!options.ok()) return options.status();
  auto instance = TracefsInstance::Open(*options);
  if (!instance.ok()) return instance.status();
  std::atomic<bool> stop{false};
  IoLoadResult load_result;
  std::thread load([&] {
    IoLoadOptions o;
    o.path = "/var/tmp/spintune-bench-load.bin";
    o.threads = 4;
    o.sizes = {4096};
    o.write_share = 0.2;
    o.fsync_every = 0;
    o.requests_per_second = rate;
    o.duration = absl::Seconds(seconds);
    auto r = RunIoLoad(o, &stop);
    if (r.ok()) load_result = *r;
    stop = true;
  });
  ReaderCost cost;
  std::vector<char> buffer(1 << 18);
  uint64_t bytes = 0;
  TraceCorrelator correlator({});
  std::string partial;
  std::vector<int> raw_fds;
  if (mode == ReaderMode::kRawRead) {
    for (unsigned cpu = 0; cpu < std::thread::hardware_concurrency(); ++cpu) {
      const std::string path =
          absl::StrCat((*instance)->path(), "/per_cpu/cpu", cpu, "/trace_pipe_raw");
      const int fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
      if (fd >= 0) raw_fds.push_back(fd);
    }
  }
  const double cpu0 = ThreadCpuSeconds();
  const auto wall0 = Clock::now();
  while (!stop) {
    if (mode == ReaderMode::kRawRead) {
      for (int fd : raw_fds) {
        ssize_t n;
        while ((n = read(fd, buffer.data(), 4096)) > 0) bytes += static_cast<uint64_t>(n);
      }
    } else {
      absl::Duration wait = absl::Milliseconds(100);
      while (true) {
        auto n = (*instance)->Read(buffer.data(), buffer.size(), wait);
        if (!n.ok() || *n == 0) break;
        bytes += *n;
        wait = absl::ZeroDuration();
        if (mode != ReaderMode::kTextParse) continue;
        absl::string_view text(buffer.data(), *n);
        while (!text.empty()) {
          const size_t nl = text.find('\n');
          if (nl == absl::string_view::npos) {
            partial.append(text.data(), text.size());
            break;
          }
          partial.append(text.data(), nl);
          TraceRecord r;
          if (ParseTraceLine(partial, &r) == LineKind::kEvent) correlator.Process(r);
          partial.clear();
          text.remove_prefix(nl + 1);
        }
        cost.completions += correlator.completions().size();
        correlator.completions().clear();
        correlator.dispatches().clear();
      }
    }
    absl::SleepFor(absl::Milliseconds(50));  // LiveTrace::kGatherMs
  }
  const double cpu = ThreadCpuSeconds() - cpu0;
  const double wall = Seconds(wall0);
  load.join();
  for (int fd : raw_fds) close(fd);
  cost.cpu_percent = 100.0 * cpu / wall;
  cost.mib_per_s = static_cast<double>(bytes) / (1 << 20) / wall;
  cost.requests = load_result.reads + load_result.writes;
  return cost;
}

double TimeWc(const std::string& path) {
  const auto start = Clock::now();
  const pid_t pid = fork();
  if (pid == 0) {
    freopen("/dev/null", "w", stdout);
    execlp("wc", "wc", "-l", path.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return Seconds(start);
}

struct Pass {
  double seconds;
  uint64_t lines;
  uint64_t completions;
};

Pass GetlineOnly(const std::string& path) {
  const auto start = Clock::now();
  FILE* f = fopen(path.c_str(), "r");
  char* buf = nullptr;
  size_t cap = 0;
  uint64_t lines = 0;
  while (getline(&buf, &cap, f) >= 0) ++lines;
  free(buf);
  fclose(f);
  return {Seconds(start), lines, 0};
}

Pass ParseOnly(const std::string& path) {
  const auto start = Clock::now();
  FILE* f = fopen(path.c_str(), "r");
  char* buf = nullptr;
  size_t cap = 0;
  uint64_t lines = 0, events = 0;
  ssize_t n;
  while ((n = getline(&buf, &cap, f)) >= 0) {
    ++lines;
    TraceRecord r;
    if (ParseTraceLine(absl::string_view(buf, static_cast<size_t>(n)), &r) == LineKind::kEvent) {
      ++events;
    }
  }
  free(buf);
  fclose(f);
  return {Seconds(start), lines, events};
}

Pass Replay(const std::string& path) {
  const auto start = Clock::now();
  auto reader = TraceReader::Open(path, {});
  uint64_t completions = 0;
  while (true) {
    auto more = (*reader)->ReadMore(4096);
    completions += (*reader)->correlator().completions().size();
    (*reader)->correlator().completions().clear();
    (*reader)->correlator().dispatches().clear();
    if (!more.ok() || !*more) break;
  }
  return {Seconds(start), (*reader)->lines(), completions};
}

}  // namespace
}  // namespace spintune

int main(int argc, char** argv) {
  std::string trace;
  std::string out = "/var/tmp/spintune-bench-trace.txt";
  double record_seconds = 0;
  uint64_t lines = 2'000'000;
  int repeat = 3;
  double reader_seconds = 0;
  double rate = 10000;
  CLI::App app{"trace_bench: replay speed (lines/s) on a trace of this machine, beside wc -l."};
  app.footer("Examples:\n  trace_bench --record-seconds 15\n  trace_bench --trace capture.txt");
  app.add_option("--trace", trace, "An existing capture to measure");
  app.add_option("--record-seconds", record_seconds,
                 "Root: capture this many seconds of this machine under load first");
  app.add_option("--out", out, "Where the recorded or tiled trace goes")->capture_default_str();
  app.add_option("--lines", lines, "Tile the capture up to this many lines")->capture_default_str();
  app.add_option("--repeat", repeat, "Passes per measurement (best is kept)")->capture_default_str();
  app.add_option("--reader-cost", reader_seconds,
                 "Root: instead, measure the live reader's CPU (text vs binary) for this many "
                 "seconds per mode");
  app.add_option("--rate", rate, "Requests/s of the load for --reader-cost")->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }

  if (reader_seconds > 0) {
    std::cout << absl::StrFormat(
        "live reader cost at %.0f requests/s of 4 KiB O_DIRECT I/O, %.0f s per mode\n", rate,
        reader_seconds);
    std::cout << absl::StrFormat("%-44s %12s %10s %12s\n", "reader", "CPU % 1 core", "MiB/s",
                                 "requests/s");
    const std::pair<spintune::ReaderMode, const char*> modes[] = {
        {spintune::ReaderMode::kTextRead, "trace_pipe text, read only"},
        {spintune::ReaderMode::kTextParse, "trace_pipe text, parsed + correlated (agent)"},
        {spintune::ReaderMode::kRawRead, "trace_pipe_raw binary pages, read only"}};
    for (const auto& [mode, name] : modes) {
      auto c = spintune::MeasureReader(mode, rate, reader_seconds);
      if (!c.ok()) {
        std::cerr << "trace_bench: " << c.status().message() << "\n";
        return 1;
      }
      std::cout << absl::StrFormat("%-44s %12.1f %10.2f %12.0f\n", name, c->cpu_percent,
                                   c->mib_per_s, static_cast<double>(c->requests) / reader_seconds);
    }
    return 0;
  }

  std::string source = trace;
  if (record_seconds > 0) {
    const std::string raw = out + ".raw";
    std::cerr << "recording " << record_seconds << " s of this machine's trace...\n";
    absl::Status s = spintune::Record(raw, record_seconds);
    if (!s.ok()) {
      std::cerr << "trace_bench: " << s.message() << "\n";
      return 1;
    }
    source = raw;
  }
  if (source.empty()) source = std::string(SPINTUNE_SOURCE_DIR) + "/tests/fixtures/trace/virtio-6.18-trace.txt";
  std::string file = source;
  if (trace.empty()) {
    absl::Status s = spintune::Tile(source, out, lines);
    if (!s.ok()) {
      std::cerr << "trace_bench: " << s.message() << "\n";
      return 1;
    }
    file = out;
  }
  std::ifstream sizer(file, std::ios::ate | std::ios::binary);
  const double mb = static_cast<double>(sizer.tellg()) / (1 << 20);
  double wc = 1e9;
  spintune::Pass get{1e9, 0, 0}, parse{1e9, 0, 0}, replay{1e9, 0, 0};
  for (int i = 0; i < repeat; ++i) {
    wc = std::min(wc, spintune::TimeWc(file));
    auto g = spintune::GetlineOnly(file);
    if (g.seconds < get.seconds) get = g;
    auto p = spintune::ParseOnly(file);
    if (p.seconds < parse.seconds) parse = p;
    auto r = spintune::Replay(file);
    if (r.seconds < replay.seconds) replay = r;
  }
  const double n = static_cast<double>(get.lines);
  std::cout << absl::StrFormat("trace: %s (%.1f MiB, %d lines, source %s)\n", file, mb, get.lines,
                               source);
  std::cout << absl::StrFormat("%-34s %10s %14s %10s\n", "pass (best of " + std::to_string(repeat) + ")",
                               "seconds", "lines/s", "vs wc -l");
  auto row = [&](const std::string& name, double s) {
    std::cout << absl::StrFormat("%-34s %10.3f %14.0f %9.2fx\n", name, s, n / s, s / wc);
  };
  row("wc -l", wc);
  row("getline only", get.seconds);
  row("parse lines (ParseTraceLine)", parse.seconds);
  row("replay (parse + correlate)", replay.seconds);
  std::cout << absl::StrFormat("events %d, completions %d\n", parse.completions, replay.completions);
  return 0;
}
