// libFuzzer target: arbitrary bytes as what an agent sends, through the
// tuner's boundary: protobuf parsing of an AgentMessage, then DecodeHello or
// DecodeBatch (against a valid hello) — every field check of the tuner —
// and DecodeBatchForStaging, which must refuse what DecodeBatch refuses and
// stage what it decodes.
#include <cstdint>

#include "proto/sample_batch_util.h"
#include "spintune/v1/spintune.pb.h"
#include "storage/delta_codec.h"
#include "tuner/batch_decoder.h"

namespace {

spintune::v1::Hello ValidHello() {
  spintune::v1::Hello h;
  h.set_agent_id("fuzz");
  h.mutable_target()->set_board("board");
  for (const char* name : {"little", "big"}) {
    auto* c = h.mutable_target()->add_cpu_classes();
    c->set_name(name);
    c->set_cpu_khz(1'000'000);
    c->mutable_costs()->set_irq_cpu_ns(20'000);
    c->mutable_costs()->set_irq_wake_ns(30'000);
  }
  h.add_devices()->set_name("mmc0");
  h.add_devices()->set_name("spi0");
  return h;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const spintune::v1::Hello hello = ValidHello();
  spintune::v1::AgentMessage m;
  if (m.ParseFromArray(data, static_cast<int>(size))) {
    if (m.has_hello()) (void)spintune::DecodeHello(m.hello());
    if (m.has_batch()) {
      auto delta = spintune::DecodeBatch(m.batch(), hello);
      if (delta.ok() &&
          delta->completion_samples != spintune::CompletionSamples(m.batch())) {
        __builtin_trap();
      }
      auto staged = spintune::DecodeBatchForStaging(m.batch(), hello);
      if (staged.status() != delta.status()) __builtin_trap();
      if (staged.ok()) {
        auto restored = spintune::DecodeBatchDelta(staged->staged);
        if (!restored.ok() || restored->keys.size() != delta->keys.size() ||
            restored->completion_samples != delta->completion_samples ||
            restored->dispatch_samples != delta->dispatch_samples) {
          __builtin_trap();
        }
      }
    }
  }
  spintune::v1::SampleBatch b;
  if (b.ParseFromArray(data, static_cast<int>(size))) (void)spintune::DecodeBatch(b, hello);
  return 0;
}
