#include "agent/capture/histogram_batch.h"

#include "models/histogram_encoding.h"

namespace spintune {

void BucketCountsToProto(const BucketCounts& b, v1::HistogramDelta* out) {
  int previous = 0;
  for (const auto& [index, n] : b.buckets) {
    out->add_bucket_index(static_cast<uint32_t>(index - previous));
    out->add_bucket_count(n);
    previous = index;
  }
  out->set_count(b.count);
  out->set_sum_ns(b.sum_ns);
}

namespace {

void PackDelta(v1::HistogramDelta* h) {
  if (h->bucket_index_size() == 0) return;
  std::string* bytes = h->mutable_buckets();
  bytes->clear();
  {
    HistogramEncoder encoder(bytes);
    int index = 0;  // the first entry is an index, the others distances
    for (int i = 0; i < h->bucket_index_size(); ++i) {
      index += static_cast<int>(h->bucket_index(i));
      encoder.Add(index, h->bucket_count(i));
    }
  }
  h->clear_bucket_index();
  h->clear_bucket_count();
}

}  // namespace

void PackBuckets(v1::SampleBatch* batch) {
  for (auto& k : *batch->mutable_histograms()) PackDelta(k.mutable_wait());
  for (auto& d : *batch->mutable_dispatch_histograms()) {
    PackDelta(d.mutable_handler());
    PackDelta(d.mutable_wake());
  }
}

uint64_t AppendHistograms(const std::vector<KeyHistogramDelta>& keys,
                          const std::vector<DispatchHistogramDelta>& dispatch,
                          const std::map<std::string, uint32_t>& device_index,
                          v1::SampleBatch* batch, uint64_t* dropped) {
  uint64_t completions = 0;
  for (const auto& k : keys) {
    auto it = device_index.find(k.device);
    if (it == device_index.end() || k.wait.count == 0) {
      *dropped += k.wait.count;
      continue;
    }
    v1::KeyHistogram* h = batch->add_histograms();
    h->set_device_index(it->second);
    h->set_cpu_class_index(k.cpu_class);
    h->set_opcode(k.opcode);
    h->set_size_class(k.size_class);
    BucketCountsToProto(k.wait, h->mutable_wait());
    h->set_irq_path(k.irq_path);
    h->set_spin_path(k.spin_path);
    h->set_errors(k.errors);
    completions += k.wait.count;
  }
  for (const auto& d : dispatch) {
    auto it = device_index.find(d.device);
    if (it == device_index.end() || d.handler.count + d.wake.count == 0) continue;
    v1::DispatchHistogram* h = batch->add_dispatch_histograms();
    h->set_device_index(it->second);
    h->set_cpu_class_index(d.cpu_class);
    BucketCountsToProto(d.handler, h->mutable_handler());
    BucketCountsToProto(d.wake, h->mutable_wake());
  }
  return completions;
}

}  // namespace spintune
