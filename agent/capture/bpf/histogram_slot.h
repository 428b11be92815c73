// HistogramSlot: what the loader has read of one histogram slot of the BPF
// capture (capture_abi.h), one stc_hist per CPU, and the deltas since.
//
// The slot's histograms are read in place, in the array the program writes
// (mapped by the loader): a CPU's header always (one cache line), its
// buckets only when its `count` moved since the last read or the last read
// found it moved. The second read covers a bucket add that became visible
// after its `count` (BPF atomic adds are unordered on arm64 and riscv).
//
// Thread-safety: none; one reader per slot. The program writes concurrently.
#ifndef SPINTUNE_AGENT_CAPTURE_BPF_HISTOGRAM_SLOT_H_
#define SPINTUNE_AGENT_CAPTURE_BPF_HISTOGRAM_SLOT_H_

#include <linux/types.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "agent/capture/bpf/capture_abi.h"

namespace spintune {

class HistogramSlot {
 public:
  // The header words summed over the CPUs, as read.
  struct Totals {
    uint64_t sum_ns = 0, irq_path = 0, spin_path = 0, errors = 0;
  };

  // REQUIRES: cpus >= 1.
  explicit HistogramSlot(size_t cpus);

  // Reads `hists` (the slot's `cpus` histograms, side by side) and adds
  // each bucket's gain since the last call to deltas[bucket] (modulo 2^32
  // per CPU). Returns the header totals; *moved says whether a bucket
  // changed. REQUIRES: deltas has STC_BUCKET_COUNT entries.
  Totals Read(const stc_hist* hists, std::vector<uint64_t>* deltas, bool* moved);

  // CPUs whose buckets the last Read scanned (for tests).
  size_t scanned() const { return scanned_; }

 private:
  struct Cpu {
    uint64_t count = 0;     // `count` when last read
    bool recheck = true;    // scan the buckets at the next read however `count` is
    std::vector<uint32_t> buckets;  // as last read (32-bit, wrapping)
  };
  std::vector<Cpu> cpus_;
  size_t scanned_ = 0;
};

}  // namespace spintune

#endif  // SPINTUNE_AGENT_CAPTURE_BPF_HISTOGRAM_SLOT_H_
