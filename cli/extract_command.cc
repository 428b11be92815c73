#include "cli/extract_command.h"

#include "nlohmann/json.hpp"

#include <fstream>
#include <map>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "agent/trace/trace_reader.h"
#include "cli/dispatch_csv.h"
#include "cli/table_format.h"
#include "common/file_util.h"
#include "common/status_macros.h"
#include "models/latency_histogram.h"
#include "policy/default_rule.h"
#include "policy/samples_csv.h"

namespace spintune {
namespace {

const char* PathName(TracePath p) {
  return p == TracePath::kIrq ? "irq" : p == TracePath::kSpin ? "spin" : "unknown";
}

}  // namespace

absl::Status RunExtract(const ExtractFlags& flags, std::ostream& out, std::ostream& err) {
  if (flags.trace.empty()) return absl::InvalidArgumentError("--trace is required");
  if (flags.format != "table" && flags.format != "json") {
    return absl::InvalidArgumentError("--format: table or json");
  }
  if (flags.completions_csv.empty() && flags.dispatch_csv.empty() && !flags.summary) {
    return absl::InvalidArgumentError(
        "nothing to do: give --completions OUT.csv, --dispatch OUT.csv and/or --summary");
  }
  SPINTUNE_ASSIGN_OR_RETURN(CorrelatorOptions options,
                            CorrelatorOptionsFromFlags(flags.pairs, flags.irq, flags.block_dev));
  SPINTUNE_ASSIGN_OR_RETURN(auto reader, TraceReader::Open(flags.trace, options));

  std::unique_ptr<CompletionsCsvWriter> completions;
  if (!flags.completions_csv.empty()) {
    SPINTUNE_ASSIGN_OR_RETURN(completions,
                              CompletionsCsvWriter::Open(flags.completions_csv,
                                                         {/*issue_ns=*/true, /*cpu=*/true}));
  }
  std::ofstream dispatch;
  if (!flags.dispatch_csv.empty()) {
    dispatch.open(flags.dispatch_csv);
    if (!dispatch) return absl::NotFoundError(absl::StrCat(flags.dispatch_csv, ": cannot create"));
    dispatch << kDispatchCsvHeader << '\n';
  }
  using Key = std::tuple<std::string, uint32_t, uint32_t>;
  std::map<Key, LatencyHistogram> keys;
  std::map<std::string, std::pair<LatencyHistogram, LatencyHistogram>> irqs;
  uint64_t next_progress = 1'000'000;
  CompletionRow row;  // cpu_class "default", as a replay sends it
  while (true) {
    SPINTUNE_ASSIGN_OR_RETURN(bool more, reader->ReadMore(4096));
    auto& cs = reader->correlator().completions();
    for (const auto& c : cs) {
      if (completions) {
        row.device = c.device;
        row.opcode = c.opcode;
        row.bytes = c.bytes;
        row.wait_ns = c.wait_ns;
        row.path = PathName(c.path);
        row.error = c.error;
        row.issue_ns = c.issue_ns;
        row.cpu.reset();
        if (c.cpu >= 0) row.cpu = static_cast<uint64_t>(c.cpu);
        completions->Write(row);
      }
      if (flags.summary) keys[{c.device, c.opcode, SizeClassOf(c.bytes)}].Record(c.wait_ns);
    }
    cs.clear();
    auto& ds = reader->correlator().dispatches();
    for (const auto& d : ds) {
      if (dispatch.is_open()) {
        dispatch << d.cpu << ',' << d.irq << ',' << d.device << ',' << d.handler_ns << ',';
        if (d.wake_ns) dispatch << *d.wake_ns;
        dispatch << '\n';
      }
      if (flags.summary) {
        auto& h = irqs[absl::StrCat(d.irq_name, " (irq ", d.irq, ") -> ", d.device)];
        h.first.Record(d.handler_ns);
        if (d.wake_ns) h.second.Record(*d.wake_ns);
      }
    }
    ds.clear();
    if (flags.progress && reader->lines() >= next_progress) {
      err << "\r" << reader->lines() << " lines, " << reader->correlator().stats().completions
          << " completions" << std::flush;
      next_progress += 1'000'000;
    }
    if (!more) break;
  }
  if (flags.progress) err << "\r\033[K";
  if (completions) SPINTUNE_RETURN_IF_ERROR(completions->Flush());
  if (dispatch.is_open() && !dispatch.flush()) {
    return absl::UnavailableError(absl::StrCat(flags.dispatch_csv, ": write failed"));
  }
  const auto& st = reader->correlator().stats();
  err << absl::StrFormat(
      "%s: %d lines, %d events, %d completions, %d dispatch samples; %d ends without a start, "
      "%d starts evicted, %d requeued\n",
      flags.trace, reader->lines(), reader->events(), st.completions, st.dispatches,
      st.unpaired_ends, st.evicted, st.requeued);
  if (!reader->skipped().counts.empty()) {
    err << "lines not used:\n" << reader->skipped().Summary();
  }
  SPINTUNE_RETURN_IF_ERROR(reader->CheckUsable());
  if (flags.summary && flags.format == "json") {
    nlohmann::json k = nlohmann::json::array(), q = nlohmann::json::array();
    for (const auto& [key, h] : keys) {
      k.push_back({{"device", std::get<0>(key)}, {"opcode", std::get<1>(key)},
                   {"size_class", std::get<2>(key)}, {"count", h.total_count()},
                   {"p50_ns", h.QuantileNs(0.5)}, {"p99_ns", h.QuantileNs(0.99)}});
    }
    for (const auto& [name, h] : irqs) {
      nlohmann::json line = {{"irq", name}, {"count", h.first.total_count()},
                             {"handler_p50_ns", h.first.QuantileNs(0.5)},
                             {"handler_p99_ns", h.first.QuantileNs(0.99)},
                             {"wakes", h.second.total_count()}};
      if (!h.second.empty()) {
        line["wake_p50_ns"] = h.second.QuantileNs(0.5);
        line["wake_p99_ns"] = h.second.QuantileNs(0.99);
      }
      q.push_back(std::move(line));
    }
    out << nlohmann::json{{"keys", k}, {"irq_lines", q}}.dump(2) << "\n";
  } else if (flags.summary) {
    std::vector<std::vector<std::string>> rows = {{"DEVICE", "OPCODE", "SIZE", "COUNT", "P50", "P99"}};
    for (const auto& [k, h] : keys) {
      rows.push_back({std::get<0>(k), absl::StrCat(std::get<1>(k)), FormatSizeClass(std::get<2>(k)),
                      absl::StrCat(h.total_count()), FormatDurationNs(h.QuantileNs(0.5)),
                      FormatDurationNs(h.QuantileNs(0.99))});
    }
    out << RenderColumns(rows) << "\n";
    std::vector<std::vector<std::string>> irq_rows = {
        {"IRQ LINE", "COUNT", "HANDLER P50", "HANDLER P99", "WAKES", "WAKE P50", "WAKE P99"}};
    for (const auto& [name, h] : irqs) {
      irq_rows.push_back({name, absl::StrCat(h.first.total_count()),
                          FormatDurationNs(h.first.QuantileNs(0.5)),
                          FormatDurationNs(h.first.QuantileNs(0.99)),
                          absl::StrCat(h.second.total_count()),
                          h.second.empty() ? "-" : FormatDurationNs(h.second.QuantileNs(0.5)),
                          h.second.empty() ? "-" : FormatDurationNs(h.second.QuantileNs(0.99))});
    }
    out << RenderColumns(irq_rows);
  }
  return absl::OkStatus();
}

}  // namespace spintune
