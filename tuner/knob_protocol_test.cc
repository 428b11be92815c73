#include "tuner/knob_protocol.h"

#include <functional>

#include "gtest/gtest.h"

namespace spintune {
namespace {

v1::KnobsDeclared Declared() {
  v1::KnobsDeclared d;
  d.set_name("ahci0-dma");
  d.set_metric("write_mbps");
  v1::Knob* reg = d.add_knobs();
  reg->set_name("P0DMACR");
  reg->set_start_value(0x4465);
  for (auto [name, shift] : {std::pair<const char*, uint32_t>{"TXTS", 0}, {"RXTS", 4}}) {
    v1::KnobField* f = reg->add_fields();
    f->set_name(name);
    f->set_shift(shift);
    f->set_width(4);
    for (int v = 0; v < 4; ++v) f->add_values(v);
  }
  v1::Knob* sched = d.add_knobs();
  sched->set_name("scheduler");
  sched->add_labels("none");
  sched->add_labels("mq-deadline");
  sched->set_start_value(1);
  v1::KnobConstraint* c = d.add_constraints();
  c->set_metric("dma_errors");
  c->set_max(0);
  return d;
}

TEST(KnobProtocol, FieldsAreCoordinatesAndTheStartIsACandidate) {
  auto s = SpaceFromDeclaration(Declared());
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->space.coordinates.size(), 3u);
  EXPECT_EQ(s->space.coordinates[0].name, "P0DMACR.TXTS");
  EXPECT_EQ(s->space.coordinates[1].register_name, "P0DMACR");
  EXPECT_EQ(s->space.coordinates[1].shift, 4u);
  // The leftovers 5 and 6 were not declared: they join the candidates.
  EXPECT_EQ(s->space.coordinates[0].values.back(), 5);
  EXPECT_EQ(s->space.coordinates[1].values.back(), 6);
  EXPECT_EQ(s->start, (KnobSetting{5, 6, 1}));
  EXPECT_EQ(s->space.Format(s->start), "TXTS=5,RXTS=6,scheduler=mq-deadline");
  EXPECT_EQ(ConstraintsText(Declared()), "dma_errors <= 0");
}

TEST(KnobProtocol, TheFingerprintIgnoresTheStartValues) {
  v1::KnobsDeclared a = Declared(), b = Declared();
  b.mutable_knobs(0)->set_start_value(0x4433);
  EXPECT_EQ(DeclarationFingerprint(a), DeclarationFingerprint(b));
  b.mutable_knobs(0)->mutable_fields(0)->add_values(7);
  EXPECT_NE(DeclarationFingerprint(a), DeclarationFingerprint(b));
  EXPECT_LT(DeclarationFingerprint(a), uint64_t{1} << 63) << "stored as a signed integer";
}

TEST(KnobProtocol, BadDeclarationsNameTheField) {
  struct Case {
    std::function<void(v1::KnobsDeclared*)> edit;
    const char* where;
  } cases[] = {
      {[](v1::KnobsDeclared* d) { d->set_name("a b"); }, "knobs_declared.name"},
      {[](v1::KnobsDeclared* d) { d->mutable_knobs(1)->set_name("P0DMACR"); },
       "knobs_declared.knobs[1].name"},
      {[](v1::KnobsDeclared* d) { d->mutable_knobs(0)->mutable_fields(1)->set_shift(2); },
       "knobs_declared.knobs[0].fields[1]"},
      {[](v1::KnobsDeclared* d) { d->mutable_knobs(0)->mutable_fields(0)->add_values(16); },
       "knobs_declared.knobs[0].fields[0].values"},
      {[](v1::KnobsDeclared* d) { d->mutable_knobs(1)->add_values(3); },
       "knobs_declared.knobs[1]"},
      {[](v1::KnobsDeclared* d) { d->mutable_knobs(1)->set_start_value(2); },
       "knobs_declared.knobs[1].start_value"},
      {[](v1::KnobsDeclared* d) { d->clear_metric(); }, "knobs_declared.metric"},
  };
  for (const auto& c : cases) {
    v1::KnobsDeclared d = Declared();
    c.edit(&d);
    auto s = SpaceFromDeclaration(d);
    ASSERT_FALSE(s.ok()) << c.where;
    EXPECT_EQ(s.status().message().rfind(c.where, 0), 0u) << s.status().message();
  }
}

// A shift whose sum with the width wraps around in 32 bits is refused as
// out of range, not shifted by (found by Fuzz.knob_declared under UBSan).
TEST(KnobProtocol, AShiftThatWrapsAroundIsRefused) {
  v1::KnobsDeclared d = Declared();
  d.mutable_knobs(0)->mutable_fields(1)->set_shift(0xFFFFFFFFu);
  auto s = SpaceFromDeclaration(d);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().message(),
            "knobs_declared.knobs[0].fields[1]: needs width 1..32 and shift + width <= 64");
}

TEST(KnobProtocol, SettingsTravelAsCoordinatesAndAreKeptWithTheirEvidence) {
  auto s = SpaceFromDeclaration(Declared());
  ASSERT_TRUE(s.ok());
  google::protobuf::RepeatedPtrField<v1::KnobValue> wire;
  SettingToProto(s->space, {3, 3, 0}, &wire);
  ASSERT_EQ(wire.size(), 3);
  EXPECT_EQ(wire[1].coordinate(), "P0DMACR.RXTS");
  EXPECT_EQ(wire[2].value(), 0);
  const auto records = SettingRecords(s->space, {3, 3, 0}, "ahci0-dma", 7, "beats the start");
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(records[2].label, "none");
  EXPECT_EQ(records[0].width, 4u);
  EXPECT_EQ(records[0].experiment_id, 7);
}

}  // namespace
}  // namespace spintune
