#include "agent/knobs/knob_access.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "agent/io_load.h"
#include "common/file_util.h"

namespace spintune {
namespace {

// 'text' for /bin/sh.
std::string ShellQuote(const std::string& text) {
  return "'" + absl::StrReplaceAll(text, {{"'", "'\\''"}}) + "'";
}

// Runs `command` with /bin/sh under coreutils' timeout; its stdout.
absl::StatusOr<std::string> RunShell(const std::string& command, double timeout_seconds) {
  const std::string wrapped = absl::StrCat("timeout -k 5 ", timeout_seconds, " /bin/sh -c ",
                                           ShellQuote(command), " </dev/null");
  FILE* pipe = ::popen(wrapped.c_str(), "r");
  if (pipe == nullptr) {
    return absl::UnavailableError(absl::StrCat("cannot run '", command, "': ", std::strerror(errno)));
  }
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), pipe)) > 0 && out.size() < (1 << 20)) out.append(buf, n);
  const int status = ::pclose(pipe);
  if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return absl::UnavailableError(absl::StrCat(
        "'", command, "' failed", code == 124 ? " (timed out)" : absl::StrCat(" (exit ", code, ")")));
  }
  return out;
}

std::string Trim(absl::string_view text) { return std::string(absl::StripAsciiWhitespace(text)); }

class FileAccessor : public KnobAccessor {
 public:
  explicit FileAccessor(std::string path) : path_(std::move(path)) {}
  absl::StatusOr<std::string> Read() override {
    auto text = ReadFileToString(path_, 1 << 16);
    if (!text.ok()) return absl::UnavailableError(absl::StrCat(path_, ": cannot read"));
    // "none [mq-deadline] kyber": the entry in force.
    const size_t open = text->find('['), close = text->find(']');
    if (open != std::string::npos && close != std::string::npos && close > open) {
      return text->substr(open + 1, close - open - 1);
    }
    return Trim(*text);
  }
  absl::Status Write(const std::string& raw) override {
    const int fd = ::open(path_.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
    if (fd < 0) return absl::UnavailableError(absl::StrCat(path_, ": ", std::strerror(errno)));
    const ssize_t n = ::write(fd, raw.data(), raw.size());
    const int err = errno;
    ::close(fd);
    if (n != static_cast<ssize_t>(raw.size())) {
      return absl::UnavailableError(
          absl::StrCat("writing '", raw, "' to ", path_, ": ", n < 0 ? std::strerror(err) : "short write"));
    }
    return absl::OkStatus();
  }

 private:
  std::string path_;
};

class CommandAccessor : public KnobAccessor {
 public:
  CommandAccessor(std::string read, std::string write)
      : read_(std::move(read)), write_(std::move(write)) {}
  absl::StatusOr<std::string> Read() override {
    auto out = RunShell(read_, 30);
    if (!out.ok()) return out.status();
    return Trim(*out);
  }
  absl::Status Write(const std::string& raw) override {
    return RunShell(absl::StrReplaceAll(write_, {{"{value}", raw}}), 30).status();
  }

 private:
  std::string read_, write_;
};

// The simulated board's P0DMACR, as "0x%08x" (a devmem helper's form).
class SimRegisterAccessor : public KnobAccessor {
 public:
  explicit SimRegisterAccessor(std::shared_ptr<AhciSunxiSim> sim) : sim_(std::move(sim)) {}
  absl::StatusOr<std::string> Read() override {
    char buf[16];
    std::snprintf(buf, sizeof(buf), "0x%08x", sim_->ReadP0dmacr());
    return std::string(buf);
  }
  absl::Status Write(const std::string& raw) override {
    uint32_t v = 0;
    if (!absl::SimpleHexAtoi(raw, &v) && !absl::SimpleAtoi(raw, &v)) {
      return absl::InvalidArgumentError(absl::StrCat("P0DMACR: '", raw, "' is not a number"));
    }
    sim_->WriteP0dmacr(v);
    return absl::OkStatus();
  }

 private:
  std::shared_ptr<AhciSunxiSim> sim_;
};

class IoLoadWorkload : public KnobWorkload {
 public:
  explicit IoLoadWorkload(IoLoadOptions options) : options_(std::move(options)) {
    options_.keep_file = true;  // prepared once, reused by every trial
  }
  ~IoLoadWorkload() override { ::unlink(options_.path.c_str()); }
  absl::StatusOr<std::map<std::string, double>> Run() override {
    options_.seed += 1;  // other offsets each trial
    auto r = RunIoLoad(options_);
    if (!r.ok()) return r.status();
    const double seconds = std::max(r->seconds, 1e-9);
    return std::map<std::string, double>{
        {"mib_per_s", static_cast<double>(r->bytes) / (1 << 20) / seconds},
        {"requests_per_s", static_cast<double>(r->reads + r->writes + r->fsyncs) / seconds},
        {"errors", 0}};
  }

 private:
  IoLoadOptions options_;
};

class CommandWorkload : public KnobWorkload {
 public:
  CommandWorkload(std::string command, double timeout_seconds)
      : command_(std::move(command)), timeout_seconds_(timeout_seconds) {}
  absl::StatusOr<std::map<std::string, double>> Run() override {
    const absl::Time start = absl::Now();
    auto out = RunShell(command_, timeout_seconds_);
    if (!out.ok()) return out.status();
    std::map<std::string, double> metrics;
    for (absl::string_view token : absl::StrSplit(*out, absl::ByAnyChar(" \t\n,;"), absl::SkipEmpty())) {
      const size_t eq = token.find('=');
      double v;
      if (eq == absl::string_view::npos || eq == 0) continue;
      if (absl::SimpleAtod(token.substr(eq + 1), &v)) metrics[std::string(token.substr(0, eq))] = v;
    }
    metrics["seconds"] = absl::ToDoubleSeconds(absl::Now() - start);
    return metrics;
  }

 private:
  std::string command_;
  double timeout_seconds_;
};

class SimWorkload : public KnobWorkload {
 public:
  SimWorkload(std::shared_ptr<AhciSunxiSim> sim, uint64_t block_bytes)
      : sim_(std::move(sim)), block_bytes_(block_bytes) {}
  absl::StatusOr<std::map<std::string, double>> Run() override {
    const AhciSunxiSim::Run r = sim_->Measure(block_bytes_);
    return std::map<std::string, double>{{"write_mbps", r.write_mbps},
                                         {"read_mbps", r.read_mbps},
                                         {"dma_errors", static_cast<double>(r.errors)}};
  }

 private:
  std::shared_ptr<AhciSunxiSim> sim_;
  uint64_t block_bytes_;
};

}  // namespace

absl::StatusOr<std::shared_ptr<AhciSunxiSim>> MakeAhciSunxiSim(const std::string& board,
                                                               uint64_t seed) {
  const AhciSunxiBoard* b = FindAhciSunxiBoard(board);
  if (b == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("unknown simulated knob board '", board, "'"));
  }
  return std::make_shared<AhciSunxiSim>(*b, seed);
}

std::unique_ptr<KnobAccessor> MakeKnobAccessor(const KnobAccess& access,
                                               std::shared_ptr<AhciSunxiSim> sim) {
  switch (access.kind) {
    case KnobAccess::Kind::kFile:
      return std::make_unique<FileAccessor>(access.path);
    case KnobAccess::Kind::kCommand:
      return std::make_unique<CommandAccessor>(access.read_command, access.write_command);
    case KnobAccess::Kind::kSim:
      return std::make_unique<SimRegisterAccessor>(std::move(sim));
  }
  return nullptr;
}

std::unique_ptr<KnobWorkload> MakeKnobWorkload(const WorkloadSpec& spec,
                                               std::shared_ptr<AhciSunxiSim> sim) {
  switch (spec.kind) {
    case WorkloadSpec::Kind::kIoLoad:
      return std::make_unique<IoLoadWorkload>(spec.ioload);
    case WorkloadSpec::Kind::kCommand:
      return std::make_unique<CommandWorkload>(spec.command, spec.timeout_seconds);
    case WorkloadSpec::Kind::kSim:
      return std::make_unique<SimWorkload>(std::move(sim), spec.block_bytes);
  }
  return nullptr;
}

}  // namespace spintune
