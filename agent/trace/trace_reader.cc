#include "agent/trace/trace_reader.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/status_macros.h"

namespace spintune {
namespace {
constexpr size_t kExamples = 5;
}  // namespace

absl::StatusOr<CorrelatorOptions> CorrelatorOptionsFromFlags(
    const std::string& pairs_path, const std::vector<std::string>& irq,
    const std::vector<std::string>& block_names) {
  CorrelatorOptions options;
  if (!pairs_path.empty()) {
    SPINTUNE_ASSIGN_OR_RETURN(std::string text, ReadFileToString(pairs_path));
    auto pairs = ParseEventPairs(text);
    if (!pairs.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(pairs_path, ": ", pairs.status().message()));
    }
    options.pairs = std::move(*pairs);
  }
  for (const auto& m : irq) {
    const size_t eq = m.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == m.size()) {
      return absl::InvalidArgumentError(absl::StrCat("--irq '", m, "': expected DEVICE=IRQNAME"));
    }
    options.irq_device[m.substr(eq + 1)] = m.substr(0, eq);
  }
  std::map<std::pair<int, int>, std::string> names;
  for (const auto& m : block_names) {
    const size_t colon = m.find(':');
    const size_t eq = m.find('=');
    uint64_t major = 0, minor = 0;
    if (colon == std::string::npos || eq == std::string::npos || colon > eq || eq + 1 == m.size() ||
        !ParseNumber(absl::string_view(m).substr(0, colon), &major) ||
        !ParseNumber(absl::string_view(m).substr(colon + 1, eq - colon - 1), &minor) ||
        major > 4095 || minor > (1u << 20)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--block-dev '", m, "': expected MAJOR:MINOR=NAME, e.g. 254:0=vda"));
    }
    names[{static_cast<int>(major), static_cast<int>(minor)}] = m.substr(eq + 1);
  }
  if (!names.empty()) {
    options.block_device_name = [names](int major, int minor) {
      auto it = names.find({major, minor});
      return it != names.end() ? it->second : absl::StrCat(major, ":", minor);
    };
  }
  return options;
}

std::string SkipReport::Summary() const {
  std::vector<std::pair<uint64_t, std::string>> by_count;
  for (const auto& [reason, n] : counts) by_count.emplace_back(n, reason);
  std::sort(by_count.rbegin(), by_count.rend());
  std::string out;
  for (const auto& [n, reason] : by_count) absl::StrAppend(&out, "  ", n, " lines: ", reason, "\n");
  for (const auto& [line, text] : examples) absl::StrAppend(&out, "    line ", line, ": ", text, "\n");
  return out;
}

absl::StatusOr<std::unique_ptr<TraceReader>> TraceReader::Open(const std::string& path,
                                                               CorrelatorOptions options) {
  FILE* f = path == "-" ? stdin : std::fopen(path.c_str(), "r");
  if (f == nullptr) {
    return absl::NotFoundError(absl::StrCat(path, ": cannot open: ", std::strerror(errno)));
  }
  static thread_local char buffer[1 << 20];
  std::setvbuf(f, buffer, _IOFBF, sizeof(buffer));
  return std::unique_ptr<TraceReader>(new TraceReader(path, f, std::move(options)));
}

TraceReader::~TraceReader() {
  if (file_ != nullptr && file_ != stdin) std::fclose(file_);
  std::free(line_buf_);
}

void TraceReader::Skip(const char* reason, absl::string_view line) {
  ++skipped_.counts[reason];
  if (skipped_.examples.size() < kExamples) {
    std::string text(line.substr(0, 120));
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
    skipped_.examples.emplace_back(lines_, absl::StrCat(reason, ": ", text));
  }
}

absl::StatusOr<bool> TraceReader::ReadMore(size_t want) {
  if (done_) return false;
  while (correlator_.completions().size() < want) {
    const ssize_t n = ::getline(&line_buf_, &line_cap_, file_);
    if (n < 0) {
      if (std::ferror(file_)) {
        return absl::UnavailableError(absl::StrCat(path_, ": read error: ", std::strerror(errno)));
      }
      correlator_.Finish();
      done_ = true;
      return false;
    }
    ++lines_;
    bytes_read_ += static_cast<uint64_t>(n);
    const absl::string_view line(line_buf_, static_cast<size_t>(n));
    if (line.find('\0') != absl::string_view::npos) {
      Skip("binary data", "(NUL bytes)");
      continue;
    }
    TraceRecord record;
    switch (ParseTraceLine(line, &record)) {
      case LineKind::kEvent: {
        ++events_;
        const uint64_t before = correlator_.stats().other_events;
        if (!correlator_.Process(record)) {
          Skip("event payload did not parse", line);
        } else if (correlator_.stats().other_events != before) {
          ++skipped_.counts["event not used (" + std::string(record.event) + ")"];
        }
        break;
      }
      case LineKind::kEmpty:
      case LineKind::kComment:
        break;
      case LineKind::kLost:
        Skip("ring buffer lost events", line);
        break;
      case LineKind::kNotEvent:
        Skip("not a tracepoint (function tracer, printk, stack)", line);
        break;
      case LineKind::kMalformed:
        Skip("malformed line", line);
        break;
    }
  }
  return true;
}

absl::Status TraceReader::CheckUsable() const {
  const auto& s = correlator_.stats();
  if (s.completions == 0 && s.dispatches == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        path_, ": no usable events in ", lines_, " lines (need block_rq_issue/complete, "
        "mmc_request_start/done, spi_* or --pairs events)"));
  }
  return absl::OkStatus();
}

}  // namespace spintune
