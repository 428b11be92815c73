// libFuzzer target: arbitrary bytes as trace text through the line parser
// and the correlator (with a user-defined pair and a tiny pending limit, so
// eviction runs too). Nothing may crash, hang or leak; CTest runs it for a
// bounded time on the corpus (agent/fuzz/corpus + tests/fixtures/trace).
#include <cstddef>
#include <cstdint>

#include "agent/trace/trace_correlator.h"
#include "agent/trace/trace_line.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const auto* pairs = new std::vector<spintune::EventPair>(*spintune::ParseEventPairs(
      R"([{"name": "v0", "start_event": "my_start", "end_event": "my_end",
           "match_fields": ["tag"], "opcode_field": "op", "size_field": "n",
           "size_unit_bytes": 512}])"));
  spintune::CorrelatorOptions options;
  options.pairs = *pairs;
  options.irq_device["mmc0"] = "mmc0";
  options.max_pending = 8;
  spintune::TraceCorrelator correlator(options);
  absl::string_view text(reinterpret_cast<const char*>(data), size);
  while (!text.empty()) {
    size_t nl = text.find('\n');
    if (nl == absl::string_view::npos) nl = text.size();
    spintune::TraceRecord record;
    if (spintune::ParseTraceLine(text.substr(0, nl), &record) == spintune::LineKind::kEvent) {
      correlator.Process(record);
      uint64_t v;
      spintune::ParseNumber(spintune::FindField(record.payload, "irq"), &v);
    }
    text.remove_prefix(nl == text.size() ? nl : nl + 1);
  }
  correlator.Finish();
  return 0;
}
