#include "agent/capture/completion_histograms.h"

#include <algorithm>
#include <tuple>
#include <utility>

#include "models/latency_histogram.h"
#include "policy/default_rule.h"

namespace spintune {

void CompletionHistograms::Times::Add(uint64_t ns) {
  ns = std::min(ns, LatencyHistogram::kMaxValueNs);  // as the last bucket holds it
  if (buckets.empty()) buckets.assign(LatencyHistogram::kBucketCount, 0);
  ++buckets[static_cast<size_t>(LatencyHistogram::BucketIndex(ns))];  // < 2^32 per interval
  ++count;
  sum_ns += ns;
}

BucketCounts CompletionHistograms::Times::Take() {
  BucketCounts b = TakeBucketCounts(&buckets, count);
  b.sum_ns = sum_ns;
  count = 0;
  sum_ns = 0;
  return b;
}

void CompletionHistograms::Add(const CompletionEvent& e) {
  Waits& w = waits_[std::make_tuple(e.device, e.opcode, SizeClassOf(e.bytes))];
  w.times.Add(e.wait_ns);
  w.irq_path += e.path == TracePath::kIrq ? 1 : 0;
  w.spin_path += e.path == TracePath::kSpin ? 1 : 0;
  w.errors += e.error ? 1 : 0;
  ++completions_;
}

void CompletionHistograms::Add(const DispatchEvent& e) {
  Dispatch& d = dispatch_[e.device];
  d.handler.Add(e.handler_ns);
  if (e.wake_ns) d.wake.Add(*e.wake_ns);
}

void CompletionHistograms::Flush(std::vector<KeyHistogramDelta>* keys,
                                 std::vector<DispatchHistogramDelta>* dispatches) {
  const size_t first_key = keys->size(), first_dispatch = dispatches->size();
  for (auto it = waits_.begin(); it != waits_.end();) {
    Waits& w = it->second;
    if (w.times.count == 0) {
      waits_.erase(it++);
      continue;
    }
    KeyHistogramDelta d;
    std::tie(d.device, d.opcode, d.size_class) = it->first;
    d.wait = w.times.Take();
    d.irq_path = std::exchange(w.irq_path, 0);
    d.spin_path = std::exchange(w.spin_path, 0);
    d.errors = std::exchange(w.errors, 0);
    keys->push_back(std::move(d));
    ++it;
  }
  for (auto it = dispatch_.begin(); it != dispatch_.end();) {
    Dispatch& x = it->second;
    if (x.handler.count == 0 && x.wake.count == 0) {
      dispatch_.erase(it++);
      continue;
    }
    DispatchHistogramDelta d;
    d.device = it->first;
    d.handler = x.handler.Take();
    d.wake = x.wake.Take();
    dispatches->push_back(std::move(d));
    ++it;
  }
  std::sort(keys->begin() + first_key, keys->end(), [](const auto& a, const auto& b) {
    return std::tie(a.device, a.opcode, a.size_class) < std::tie(b.device, b.opcode, b.size_class);
  });
  std::sort(dispatches->begin() + first_dispatch, dispatches->end(),
            [](const auto& a, const auto& b) { return a.device < b.device; });
  completions_ = 0;
}

}  // namespace spintune
