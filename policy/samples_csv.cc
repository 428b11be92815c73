#include "policy/samples_csv.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "models/latency_histogram.h"
#include "policy/default_rule.h"

namespace spintune {
namespace {

// RFC 4180: a field with a separator, quote or line end goes in quotes.
std::string CsvField(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string HeaderOf(CompletionsCsvColumns columns) {
  std::string h = "device,opcode,bytes,wait_ns,cpu_class,path,error,timeout";
  if (columns.issue_ns) h += ",issue_ns";
  if (columns.cpu) h += ",cpu";
  return h;
}

}  // namespace

CompletionsCsvReader::CompletionsCsvReader(std::unique_ptr<CsvReader> csv)
    : csv_(std::move(csv)),
      c_device_(csv_->ColumnIndex("device")),
      c_opcode_(csv_->ColumnIndex("opcode")),
      c_bytes_(csv_->ColumnIndex("bytes")),
      c_wait_(csv_->ColumnIndex("wait_ns")),
      c_cpu_class_(csv_->ColumnIndex("cpu_class")),
      c_path_(csv_->ColumnIndex("path")),
      c_error_(csv_->ColumnIndex("error")),
      c_timeout_(csv_->ColumnIndex("timeout")),
      c_issue_(csv_->ColumnIndex("issue_ns")),
      c_cpu_(csv_->ColumnIndex("cpu")) {}

absl::StatusOr<std::unique_ptr<CompletionsCsvReader>> CompletionsCsvReader::Open(
    const std::string& path) {
  SPINTUNE_ASSIGN_OR_RETURN(auto csv, CsvReader::Open(path));
  SPINTUNE_RETURN_IF_ERROR(csv->RequireColumns({"device", "opcode", "bytes", "wait_ns"}));
  return std::unique_ptr<CompletionsCsvReader>(new CompletionsCsvReader(std::move(csv)));
}

absl::StatusOr<bool> CompletionsCsvReader::Next(CompletionRow* row) {
  SPINTUNE_ASSIGN_OR_RETURN(bool more, csv_->Next(&fields_));
  if (!more) return false;
  const auto& f = fields_;
  row->device = f[c_device_];
  if (row->device.empty()) return csv_->ErrorAt("column device: empty value");
  if (row->device.size() > 31) return csv_->ErrorAt("column device: longer than 31 bytes");
  row->cpu_class = c_cpu_class_ >= 0 && !f[c_cpu_class_].empty() ? f[c_cpu_class_] : "default";
  if (row->cpu_class == "*") return csv_->ErrorAt("column cpu_class: '*' is reserved");
  SPINTUNE_ASSIGN_OR_RETURN(uint64_t opcode, csv_->ParseUint(f[c_opcode_], "opcode"));
  if (opcode >= 0xFFFFFFFFu) return csv_->ErrorAt("column opcode: above 0xFFFFFFFE");
  row->opcode = static_cast<uint32_t>(opcode);
  SPINTUNE_ASSIGN_OR_RETURN(row->bytes, csv_->ParseUint(f[c_bytes_], "bytes"));
  SPINTUNE_ASSIGN_OR_RETURN(row->wait_ns, csv_->ParseUint(f[c_wait_], "wait_ns"));
  if (row->wait_ns > LatencyHistogram::kMaxValueNs) {
    return csv_->ErrorAt(absl::StrCat("column wait_ns: ", row->wait_ns, " is beyond ",
                                      LatencyHistogram::kMaxValueNs, " ns"));
  }
  row->path = c_path_ >= 0 && !f[c_path_].empty() ? f[c_path_] : "unknown";
  if (row->path != "irq" && row->path != "spin" && row->path != "unknown") {
    return csv_->ErrorAt(
        absl::StrCat("column path: expected irq, spin or unknown, got '", row->path, "'"));
  }
  uint64_t error = 0, timeout = 0;
  if (c_error_ >= 0 && !f[c_error_].empty()) {
    SPINTUNE_ASSIGN_OR_RETURN(error, csv_->ParseUint(f[c_error_], "error"));
  }
  if (c_timeout_ >= 0 && !f[c_timeout_].empty()) {
    SPINTUNE_ASSIGN_OR_RETURN(timeout, csv_->ParseUint(f[c_timeout_], "timeout"));
  }
  if (error > 1 || timeout > 1) return csv_->ErrorAt("columns error/timeout must be 0 or 1");
  row->error = error == 1;
  row->timeout = timeout == 1;
  row->issue_ns.reset();
  if (c_issue_ >= 0) {
    SPINTUNE_ASSIGN_OR_RETURN(row->issue_ns, csv_->ParseUint(f[c_issue_], "issue_ns"));
  }
  row->cpu.reset();
  if (c_cpu_ >= 0 && !f[c_cpu_].empty()) {
    SPINTUNE_ASSIGN_OR_RETURN(row->cpu, csv_->ParseUint(f[c_cpu_], "cpu"));
  }
  return true;
}

absl::StatusOr<std::unique_ptr<CompletionsCsvWriter>> CompletionsCsvWriter::Open(
    const std::string& path, CompletionsCsvColumns columns, bool append) {
  const std::string header = HeaderOf(columns);
  bool has_header = false;
  if (append) {
    std::ifstream existing(path);
    std::string first;
    if (existing && std::getline(existing, first)) {
      if (!first.empty() && first.back() == '\r') first.pop_back();
      if (first != header) {
        return absl::FailedPreconditionError(absl::StrCat(
            path, ": has the header '", first, "', this run writes '", header,
            "': record to a new file"));
      }
      has_header = true;
    }
  }
  std::unique_ptr<CompletionsCsvWriter> w(new CompletionsCsvWriter());
  w->path_ = path;
  w->columns_ = columns;
  w->out_.open(path, append ? std::ios::app : std::ios::trunc);
  if (!w->out_) return absl::NotFoundError(absl::StrCat(path, ": cannot create"));
  if (!has_header) w->out_ << header << '\n';
  SPINTUNE_RETURN_IF_ERROR(w->Flush());
  return w;
}

void CompletionsCsvWriter::Write(const CompletionRow& r) {
  out_ << CsvField(r.device) << ',' << r.opcode << ',' << r.bytes << ',' << r.wait_ns << ','
       << CsvField(r.cpu_class) << ',' << r.path << ',' << (r.error ? 1 : 0) << ','
       << (r.timeout ? 1 : 0);
  if (columns_.issue_ns) out_ << ',' << r.issue_ns.value_or(0);
  if (columns_.cpu) {
    out_ << ',';
    if (r.cpu) out_ << *r.cpu;  // empty: unknown
  }
  out_ << '\n';
}

absl::Status CompletionsCsvWriter::Flush() {
  out_.flush();
  if (!out_) return absl::UnavailableError(absl::StrCat(path_, ": write failed"));
  return absl::OkStatus();
}

absl::StatusOr<SampleSet> ReadSamplesCsv(const std::string& path) {
  SPINTUNE_ASSIGN_OR_RETURN(auto csv, CompletionsCsvReader::Open(path));
  SampleSet set;
  std::map<PolicyKey, KeyEvidence> keys;
  // With issue times: each row's key (map nodes are stable) until the keys
  // are numbered.
  std::vector<const KeyEvidence*> row_keys;
  CompletionRow row;
  while (true) {
    SPINTUNE_ASSIGN_OR_RETURN(bool more, csv->Next(&row));
    if (!more) break;
    PolicyKey key{row.cpu_class, row.device, row.opcode, SizeClassOf(row.bytes)};
    KeyEvidence& e = keys[key];
    e.key = key;
    e.histogram.Record(row.wait_ns);
    e.errors += row.error;
    if (row.path == "irq") {
      ++e.irq_path;
      e.irq_timeouts += row.timeout;
    } else if (row.path == "spin") {
      ++e.spin_path;
      e.spin_timeouts += row.timeout;
    }
    auto dev = std::find(set.devices.begin(), set.devices.end(), row.device);
    if (dev == set.devices.end()) dev = set.devices.insert(dev, row.device);
    if (row.issue_ns) {
      TimedRequest r;
      r.device = static_cast<uint32_t>(dev - set.devices.begin());
      r.opcode = row.opcode;
      r.bytes = row.bytes;
      r.issue_ns = *row.issue_ns;
      r.wait_ns = row.wait_ns;
      set.requests.push_back(r);
      row_keys.push_back(&e);
    }
    if (std::find(set.cpu_classes.begin(), set.cpu_classes.end(), row.cpu_class) ==
        set.cpu_classes.end()) {
      set.cpu_classes.push_back(row.cpu_class);
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
