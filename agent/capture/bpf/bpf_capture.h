// BpfCapture: loads capture.bpf.c (through its bpftool skeleton), tells it
// which devices to measure, attaches its programs to the tracepoints this
// kernel has (reporting the others by name), and turns the per-CPU
// histogram maps into per-interval deltas; with sample_every it also drains
// the ring buffer of individual samples.
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

// As OpenBpfCapture, with `direct_slots` entries in the program's
// direct-mapped table of pending starts (4,096 otherwise), so that tests can
// force starts to collide and spill into its LRU hash. Unimplemented where
// !BpfCaptureBuilt(), as OpenBpfCapture.
// REQUIRES: direct_slots is a power of two, 1..2^24.
absl::StatusOr<std::unique_ptr<Capture>> OpenBpfCaptureWithDirectSlots(const CaptureConfig& options,
                                                                       uint32_t direct_slots);

// True when the agent was built with the BPF program (clang, libbpf,
// bpftool were there at build time).
bool BpfCaptureBuilt();

// Of `events` ("block_rq_issue"), those this kernel has no BTF trace type
// for (in vmlinux or a loaded module): a tp_btf program cannot attach there.
std::set<std::string> MissingBtfTracepoints(const std::set<std::string>& events);

}  // namespace spintune

#endif  // SPINTUNE_AGENT_CAPTURE_BPF_BPF_CAPTURE_H_
