#include "agent/trace/trace_batcher.h"

#include <algorithm>

namespace spintune {

v1::WaitPath ToWaitPath(TracePath path) {
  switch (path) {
    case TracePath::kIrq:
      return v1::WAIT_PATH_IRQ;
    case TracePath::kSpin:
      return v1::WAIT_PATH_SPIN;
    case TracePath::kUnknown:
      break;
  }
  return v1::WAIT_PATH_UNKNOWN;
}

TraceBatcher::TraceBatcher(const std::vector<std::string>& devices) {
  for (const auto& d : devices) index_.emplace(d, static_cast<uint32_t>(index_.size()));
}

size_t TraceBatcher::Drain(std::deque<CompletionEvent>* completions,
                           std::deque<DispatchEvent>* dispatches, size_t max_completions,
                           v1::SampleBatch* batch) {
  auto* c = batch->mutable_completions();
  // Each column sized once (growing eight columns by doubling was a tenth
  // of the raw agent's main thread).
  const int want = static_cast<int>(std::min(max_completions, completions->size()));
  auto reserve = [want](auto* column) { column->Reserve(column->size() + want); };
  reserve(c->mutable_device_index());
  reserve(c->mutable_cpu_class_index());
  reserve(c->mutable_opcode());
  reserve(c->mutable_bytes());
  reserve(c->mutable_wait_ns());
  reserve(c->mutable_path());
  reserve(c->mutable_flags());
  reserve(c->mutable_issue_ns());
  size_t n = 0;
  while (n < max_completions && !completions->empty()) {
    const CompletionEvent& e = completions->front();
    auto it = index_.find(e.device);
    if (it == index_.end()) {
      ++dropped_completions_;
    } else {
      c->add_device_index(it->second);
      c->add_cpu_class_index(0);
      c->add_opcode(e.opcode);
      c->add_bytes(e.bytes);
      c->add_wait_ns(e.wait_ns);
      c->add_path(ToWaitPath(e.path));
      c->add_flags(e.error ? 1u : 0u);
      c->add_issue_ns(e.issue_ns);
      ++n;
    }
    completions->pop_front();
  }
  auto* d = batch->mutable_dispatches();
  while (!dispatches->empty()) {
    const DispatchEvent& e = dispatches->front();
    auto it = index_.find(e.device);
    if (it == index_.end()) {
      ++dropped_dispatches_;
    } else {
      d->add_cpu_class_index(0);
      d->add_device_index(it->second);
      d->add_handler_ns(e.handler_ns);
      d->add_wake_ns(e.wake_ns.value_or(0));
    }
    dispatches->pop_front();
  }
  return n;
}

}  // namespace spintune
