#include "policy/samples_csv.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "common/csv_reader.h"
#include "common/status_macros.h"
#include "models/latency_histogram.h"
#include "policy/default_rule.h"

namespace spintune {

absl::StatusOr<SampleSet> ReadSamplesCsv(const std::string& path) {
  SPINTUNE_ASSIGN_OR_RETURN(auto csv, CsvReader::Open(path));
  SPINTUNE_RETURN_IF_ERROR(csv->RequireColumns({"device", "opcode", "bytes", "wait_ns"}));
  const int c_device = csv->ColumnIndex("device");
  const int c_opcode = csv->ColumnIndex("opcode");
  const int c_bytes = csv->ColumnIndex("bytes");
  const int c_wait = csv->ColumnIndex("wait_ns");
  const int c_cpu = csv->ColumnIndex("cpu_class");
  const int c_path = csv->ColumnIndex("path");
  const int c_error = csv->ColumnIndex("error");
  const int c_timeout = csv->ColumnIndex("timeout");
  const int c_issue = csv->ColumnIndex("issue_ns");

  SampleSet set;
  std::map<PolicyKey, KeyEvidence> keys;
  // With issue times: each row's key (map nodes are stable) until the keys
  // are numbered.
  std::vector<const KeyEvidence*> row_keys;
  std::vector<std::string> fields;
  while (true) {
    SPINTUNE_ASSIGN_OR_RETURN(bool more, csv->Next(&fields));
    if (!more) break;
    const std::string& device = fields[c_device];
    if (device.empty()) return csv->ErrorAt("column device: empty value");
    if (device.size() > 31) return csv->ErrorAt("column device: longer than 31 bytes");
    const std::string cpu = c_cpu >= 0 && !fields[c_cpu].empty() ? fields[c_cpu] : "default";
    if (cpu == "*") return csv->ErrorAt("column cpu_class: '*' is reserved");
    SPINTUNE_ASSIGN_OR_RETURN(uint64_t opcode, csv->ParseUint(fields[c_opcode], "opcode"));
    if (opcode >= 0xFFFFFFFFu) return csv->ErrorAt("column opcode: above 0xFFFFFFFE");
    SPINTUNE_ASSIGN_OR_RETURN(uint64_t bytes, csv->ParseUint(fields[c_bytes], "bytes"));
    SPINTUNE_ASSIGN_OR_RETURN(uint64_t wait_ns, csv->ParseUint(fields[c_wait], "wait_ns"));
    if (wait_ns > LatencyHistogram::kMaxValueNs) {
      return csv->ErrorAt(absl::StrCat("column wait_ns: ", wait_ns, " is beyond ",
                                       LatencyHistogram::kMaxValueNs, " ns"));
    }
    std::string path_value = c_path >= 0 ? fields[c_path] : "unknown";
    if (path_value.empty()) path_value = "unknown";
    if (path_value != "irq" && path_value != "spin" && path_value != "unknown") {
      return csv->ErrorAt(
          absl::StrCat("column path: expected irq, spin or unknown, got '", path_value, "'"));
    }
    uint64_t error = 0, timeout = 0;
    if (c_error >= 0 && !fields[c_error].empty()) {
      SPINTUNE_ASSIGN_OR_RETURN(error, csv->ParseUint(fields[c_error], "error"));
    }
    if (c_timeout >= 0 && !fields[c_timeout].empty()) {
      SPINTUNE_ASSIGN_OR_RETURN(timeout, csv->ParseUint(fields[c_timeout], "timeout"));
    }
    if (error > 1 || timeout > 1) return csv->ErrorAt("columns error/timeout must be 0 or 1");
    uint64_t issue_ns = 0;
    if (c_issue >= 0) {
      SPINTUNE_ASSIGN_OR_RETURN(issue_ns, csv->ParseUint(fields[c_issue], "issue_ns"));
    }

    PolicyKey key{cpu, device, static_cast<uint32_t>(opcode), SizeClassOf(bytes)};
    KeyEvidence& e = keys[key];
    e.key = key;
    e.histogram.Record(wait_ns);
    e.errors += error;
    if (path_value == "irq") {
      ++e.irq_path;
      e.irq_timeouts += timeout;
    } else if (path_value == "spin") {
      ++e.spin_path;
      e.spin_timeouts += timeout;
    }
    auto dev = std::find(set.devices.begin(), set.devices.end(), device);
    if (dev == set.devices.end()) dev = set.devices.insert(dev, device);
    if (c_issue >= 0) {
      TimedRequest r;
      r.device = static_cast<uint32_t>(dev - set.devices.begin());
      r.opcode = static_cast<uint32_t>(opcode);
      r.bytes = bytes;
      r.issue_ns = issue_ns;
      r.wait_ns = wait_ns;
      set.requests.push_back(r);
      row_keys.push_back(&e);
    }
    if (std::find(set.cpu_classes.begin(), set.cpu_classes.end(), cpu) ==
        set.cpu_classes.end()) {
      set.cpu_classes.push_back(cpu);
    }
    ++set.samples;
  }
  if (set.samples == 0) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": no samples after the header"));
  }
  std::map<const KeyEvidence*, uint32_t> number;
  for (const auto& [k, e] : keys) number.emplace(&e, static_cast<uint32_t>(number.size()));
  for (size_t i = 0; i < set.requests.size(); ++i) set.requests[i].key = number[row_keys[i]];
  for (auto& [k, e] : keys) set.keys.push_back(std::move(e));
  return set;
}

}  // namespace spintune
