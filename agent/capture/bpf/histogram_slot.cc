#include "agent/capture/bpf/histogram_slot.h"

namespace spintune {
namespace {

// The program writes these words while they are read: loads the compiler
// must do once each, as they are (plain moves on x86-64 and arm64).
template <typename T>
T Load(const T& word) {
  return __atomic_load_n(&word, __ATOMIC_RELAXED);
}

}  // namespace

HistogramSlot::HistogramSlot(size_t cpus) : cpus_(cpus) {
  for (Cpu& c : cpus_) c.buckets.assign(STC_BUCKET_COUNT, 0);
}

HistogramSlot::Totals HistogramSlot::Read(const stc_hist* hists, std::vector<uint64_t>* deltas,
                                          bool* moved) {
  Totals t;
  *moved = false;
  scanned_ = 0;
  for (size_t c = 0; c < cpus_.size(); ++c) {
    const stc_hist& h = hists[c];
    Cpu& seen = cpus_[c];
    // `count` first (the program adds to it last), then the rest.
    const uint64_t count = __atomic_load_n(&h.count, __ATOMIC_ACQUIRE);
    t.sum_ns += Load(h.sum_ns);
    t.irq_path += Load(h.irq_path);
    t.spin_path += Load(h.spin_path);
    t.errors += Load(h.errors);
    const bool counted = count != seen.count;
    if (!counted && !seen.recheck) continue;
    ++scanned_;
    seen.count = count;
    bool changed = false;
    for (size_t b = 0; b < STC_BUCKET_COUNT; ++b) {
      const uint32_t now = Load(h.buckets[b]);
      if (now == seen.buckets[b]) continue;
      (*deltas)[b] += static_cast<uint32_t>(now - seen.buckets[b]);  // modulo 2^32
      seen.buckets[b] = now;
      changed = true;
    }
    // Once more after a move: its last bucket may show only after `count`.
    seen.recheck = counted || changed;
    *moved |= changed;
  }
  return t;
}

}  // namespace spintune
