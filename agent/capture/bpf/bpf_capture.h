// BpfCapture: loads capture.bpf.c (through its bpftool skeleton), tells it
// which devices to measure, attaches its programs to the tracepoints this
// kernel has (reporting the others by name), and turns the per-CPU
// histograms (mapped read-only: HistogramSlot) into per-interval deltas;
// with sample_every it also drains the ring buffer of individual samples.
//
// Nothing is pinned: the programs stay attached only while this object's
// links (file descriptors) live, so even a `kill -9` of the agent detaches
// them.
//
// Thread-safety: as Capture.
#ifndef SPINTUNE_AGENT_CAPTURE_BPF_BPF_CAPTURE_H_
#define SPINTUNE_AGENT_CAPTURE_BPF_BPF_CAPTURE_H_

#include <cstdint>
#include <memory>
#include <set>
#include <string>

#include "agent/capture/capture.h"

namespace spintune {

// FailedPrecondition when the program cannot be loaded or attached here
// (the message says why), Unimplemented when this agent was built without
// it, InvalidArgument for devices or options the program cannot measure.
absl::StatusOr<std::unique_ptr<Capture>> OpenBpfCapture(const CaptureConfig& options);

// What tests may force on a bpf capture.
struct BpfCaptureTestOptions {
  // Entries in the program's direct-mapped table of pending starts (0: the
  // 4,096 of OpenBpfCapture), so that starts collide and spill into its LRU
  // hash. REQUIRES: 0 or a power of two, 1..2^24.
  uint32_t direct_slots = 0;
  // Contexts (STC_CTX_* bits of capture_abi.h) taken as seen for measured
  // devices' completions, as if the program had seen them.
  uint32_t measured_contexts = 0;
};

// As OpenBpfCapture, with `test`'s settings. Unimplemented where
// !BpfCaptureBuilt(), as OpenBpfCapture.
absl::StatusOr<std::unique_ptr<Capture>> OpenBpfCaptureForTest(const CaptureConfig& options,
                                                               const BpfCaptureTestOptions& test);

// The kernel does not run the completion program while it runs on the CPU.
// True when a completion of a measured device may interrupt it there: one
// ran in a context (STC_CTX_* bit of `measured_contexts`) above one that
// any block completion ran in (`all_contexts`). Then a second copy of the
// program must follow those completions, or they are lost.
inline bool NestedCompletionsPossible(uint32_t all_contexts, uint32_t measured_contexts) {
  const uint32_t lowest = all_contexts & (~all_contexts + 1);  // 0 when none
  return lowest != 0 && (measured_contexts & ~((lowest << 1) - 1)) != 0;
}

// True when the agent was built with the BPF program (clang, libbpf,
// bpftool were there at build time).
bool BpfCaptureBuilt();

// Of `events` ("block_rq_issue"), those this kernel has no BTF trace type
// for (in vmlinux or a loaded module): a tp_btf program cannot attach there.
std::set<std::string> MissingBtfTracepoints(const std::set<std::string>& events);

}  // namespace spintune

#endif  // SPINTUNE_AGENT_CAPTURE_BPF_BPF_CAPTURE_H_
