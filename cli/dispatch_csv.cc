#include "cli/dispatch_csv.h"

#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/csv_reader.h"
#include "common/status_macros.h"

namespace spintune {

absl::StatusOr<std::vector<DispatchRecord>> ReadDispatchCsv(const std::string& path) {
  SPINTUNE_ASSIGN_OR_RETURN(auto csv, CsvReader::Open(path));
  SPINTUNE_RETURN_IF_ERROR(csv->RequireColumns({"device", "handler_ns", "wake_ns"}));
  const int c_device = csv->ColumnIndex("device");
  const int c_handler = csv->ColumnIndex("handler_ns");
  const int c_wake = csv->ColumnIndex("wake_ns");
  const int c_class = csv->ColumnIndex("cpu_class");
  std::map<std::pair<std::string, std::string>, DispatchRecord> records;
  std::vector<std::string> f;
  while (true) {
    SPINTUNE_ASSIGN_OR_RETURN(bool more, csv->Next(&f));
    if (!more) break;
    SPINTUNE_ASSIGN_OR_RETURN(uint64_t handler, csv->ParseUint(f[c_handler], "handler_ns"));
    uint64_t wake = 0;
    if (!f[c_wake].empty()) {
      SPINTUNE_ASSIGN_OR_RETURN(wake, csv->ParseUint(f[c_wake], "wake_ns"));
    }
    if (handler > LatencyHistogram::kMaxValueNs || wake > LatencyHistogram::kMaxValueNs) {
      return csv->ErrorAt(absl::StrCat("beyond ", LatencyHistogram::kMaxValueNs, " ns"));
    }
    if (f[c_device].empty()) continue;
    const std::string cpu_class = c_class >= 0 && !f[c_class].empty() ? f[c_class] : "default";
    DispatchRecord& r = records[{cpu_class, f[c_device]}];
    r.cpu_class = cpu_class;
    r.device = f[c_device];
    r.handler.Record(handler);
    if (wake > 0) r.wake.Record(wake);
  }
  std::vector<DispatchRecord> out;
  for (auto& [key, r] : records) out.push_back(std::move(r));
  return out;
}

}  // namespace spintune
