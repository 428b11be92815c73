#include "policy/policy_blob.h"

#include <random>
#include <set>

#include "gtest/gtest.h"
#include "tests/testing/policy_fixtures.h"

namespace spintune {
namespace {

using testing::ContextTable;
using testing::SampleTable;

constexpr size_t kHeader = SPINTUNE_BLOB_HEADER_V2_BYTES;

spintune_features Features(uint64_t prev_wait_ns, uint64_t since_write_ns, uint64_t inflight,
                           uint64_t bytes) {
  return {{prev_wait_ns, since_write_ns, inflight, bytes}};
}

TEST(PolicyBlob, RoundTripsThroughTheDriverParser) {
  const PolicyTable t = SampleTable();
  auto blob = EncodePolicyBlob(t, "mmc0");
  ASSERT_TRUE(blob.ok()) << blob.status();
  EXPECT_EQ(blob->size(), kHeader + 5 * SPINTUNE_BLOB_ENTRY_BYTES);
  EXPECT_EQ((*blob)[4], static_cast<char>(SPINTUNE_BLOB_VERSION));
  auto decoded = DecodePolicyBlob(*blob);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  const spintune_table& table = (*decoded)->table;
  EXPECT_EQ(table.count, 5u);
  EXPECT_EQ(table.version, 7u);
  EXPECT_STREQ(table.device, "mmc0");
  EXPECT_EQ(table.node_count, 0u);
  // The default write opcodes: REQ_OP_WRITE, CMD24, CMD25.
  ASSERT_EQ(table.write_opcode_count, 3u);
  EXPECT_EQ(table.write_opcodes[2], 25u);
  EXPECT_TRUE(spintune_is_write(&table, 25));
  EXPECT_FALSE(spintune_is_write(&table, 18));
  EXPECT_NE(table.index.multiplier, 0u);
  // Entries are in key order: (cpu class index, opcode, size class).
  EXPECT_EQ(table.entries[0].opcode, 13u);
  EXPECT_EQ(table.entries[0].strategy, SPINTUNE_SPIN);
  EXPECT_EQ(table.entries[4].flags, SPINTUNE_ENTRY_FALLBACK);
}

TEST(PolicyBlob, LookupFindsExactEntriesAndFallsBack) {
  auto blob = EncodePolicyBlob(SampleTable(), "mmc0");
  ASSERT_TRUE(blob.ok());
  auto decoded = DecodePolicyBlob(*blob);
  ASSERT_TRUE(decoded.ok());
  const spintune_table* t = &(*decoded)->table;
  // CMD23 without data on the big class (index 0).
  const spintune_entry* e = spintune_lookup(t, 0, 23, 0);
  EXPECT_EQ(e->strategy, SPINTUNE_SPIN_THEN_IRQ);
  EXPECT_EQ(e->spin_ns, 12'000u);
  // CMD18 of 4096 bytes (size class 13) on the little class (index 1).
  e = spintune_lookup(t, 1, 18, 4096);
  EXPECT_EQ(e->strategy, SPINTUNE_SLEEP_THEN_SPIN);
  EXPECT_EQ(e->sleep_ns, 150'000u);
  // 8 KiB is size class 14: not in the table, so the fallback answers.
  e = spintune_lookup(t, 1, 18, 8192);
  EXPECT_EQ(e->flags, SPINTUNE_ENTRY_FALLBACK);
  EXPECT_EQ(spintune_lookup(t, 0, 99, 0)->flags, SPINTUNE_ENTRY_FALLBACK);
  // Without the index (a table of an older generated header) the binary
  // search finds the same entries.
  spintune_table plain = *t;
  plain.index = {};
  for (uint32_t op : {13u, 18u, 23u, 99u}) {
    for (uint8_t cpu : {0, 1, 7}) {
      for (uint64_t bytes : {0u, 4096u, 8192u}) {
        EXPECT_EQ(spintune_lookup(&plain, cpu, op, bytes), spintune_lookup(t, cpu, op, bytes));
      }
    }
  }
}

TEST(PolicyBlob, SizeClassIsTheBitWidth) {
  EXPECT_EQ(spintune_size_class(0), 0);
  EXPECT_EQ(spintune_size_class(1), 1);
  EXPECT_EQ(spintune_size_class(512), 10);
  EXPECT_EQ(spintune_size_class(1023), 10);
  EXPECT_EQ(spintune_size_class(4096), 13);
  EXPECT_EQ(spintune_size_class(~uint64_t{0}), 64);
  EXPECT_EQ(SizeClassOf(4096), 13u);
  EXPECT_EQ(SizeClassLowerBytes(13), 4096u);
}

TEST(PolicyBlob, CrcMatchesZlibCheckValue) {
  // The standard CRC-32 check value of "123456789".
  const char* s = "123456789";
  EXPECT_EQ(spintune_crc32(0, reinterpret_cast<const uint8_t*>(s), 9), 0xCBF43926u);
}

TEST(PolicyBlob, RefusesTablesADriverWouldRefuse) {
  PolicyTable t = SampleTable();
  t.entries[0].wait.spin_ns = uint64_t{SPINTUNE_MAX_SPIN_NS} + 1;
  EXPECT_FALSE(EncodePolicyBlob(t, t.entries[0].key.device).ok());
  EXPECT_FALSE(EncodePolicyBlob(SampleTable(), "nosuchdevice").ok());
  PolicyTable long_name = SampleTable();
  for (auto& e : long_name.entries) e.key.device = std::string(40, 'd');
  EXPECT_FALSE(EncodePolicyBlob(long_name, std::string(40, 'd')).ok());
  PolicyTable writes = SampleTable();
  writes.devices[0].write_opcodes = {1, 2, 3, 4, 5};
  EXPECT_FALSE(EncodePolicyBlob(writes, "mmc0").ok());
}

// SampleTable() with an A/B trial on CMD23 of the big class.
PolicyTable TrialTable(Trial trial) {
  PolicyTable t = SampleTable();
  for (auto& e : t.entries) {
    if (!e.fallback && e.key.opcode == 23) e.trial = trial;
  }
  return t;
}

TEST(PolicyBlob, TrialsMakeAFormat3BlobWhoseArmsTheDriverPicks) {
  auto blob = EncodePolicyBlob(TrialTable({WaitParams::Irq(), 128}), "mmc0");
  ASSERT_TRUE(blob.ok()) << blob.status();
  EXPECT_EQ((*blob)[4], static_cast<char>(SPINTUNE_BLOB_VERSION_3));
  EXPECT_EQ(blob->size(), kHeader + 5 * SPINTUNE_BLOB_ENTRY_BYTES + SPINTUNE_BLOB_TRIAL_BYTES);
  auto decoded = DecodePolicyBlob(*blob);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  const spintune_table* t = &(*decoded)->table;
  ASSERT_EQ(spintune_trial_count(t), 1u);
  const spintune_entry* e = spintune_lookup(t, 0, 23, 0);
  EXPECT_EQ(e->strategy, SPINTUNE_SPIN_THEN_IRQ);
  ASSERT_EQ(e->trial, 1u);
  const spintune_entry* incumbent = &t->entries[t->count];
  EXPECT_EQ(incumbent->strategy, SPINTUNE_IRQ);
  EXPECT_EQ(incumbent->trial, 128u);
  EXPECT_EQ(incumbent->flags, SPINTUNE_ENTRY_TRIAL);
  spintune_ab ab;
  spintune_ab_init(&ab, t);
  int incumbent_arm = 0;
  for (int i = 0; i < 2560; ++i) incumbent_arm += spintune_ab_pick(t, e, &ab) == incumbent;
  EXPECT_NEAR(incumbent_arm, 1280, 5 * 25.3) << "128/256, binomial sd 25.3";
  EXPECT_EQ(spintune_ab_pick(t, spintune_lookup(t, 1, 18, 4096), &ab)->flags, 0u)
      << "no trial: the entry itself";
  // The other device has no trial: format 2, readable by older drivers.
  auto spi = EncodePolicyBlob(TrialTable({WaitParams::Irq(), 128}), "spi0");
  ASSERT_TRUE(spi.ok());
  EXPECT_EQ((*spi)[4], static_cast<char>(SPINTUNE_BLOB_VERSION));
}

TEST(PolicyBlob, RefusesTrialsADriverWouldRefuse) {
  EXPECT_FALSE(EncodePolicyBlob(TrialTable({WaitParams::Irq(), 0}), "mmc0").ok()) << "share 0";
  EXPECT_FALSE(EncodePolicyBlob(TrialTable({WaitParams::Irq(), 256}), "mmc0").ok()) << "share 256";
  EXPECT_TRUE(EncodePolicyBlob(TrialTable({WaitParams::Irq(), 255}), "mmc0").ok());
  WaitParams too_long = WaitParams::SpinThenIrq(uint64_t{SPINTUNE_MAX_SPIN_NS} + 1);
  EXPECT_FALSE(EncodePolicyBlob(TrialTable({too_long, 64}), "mmc0").ok());
  WaitParams no_timeout = WaitParams::Spin(0);
  auto refused = EncodePolicyBlob(TrialTable({no_timeout, 64}), "mmc0");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("trial's wait"), std::string::npos)
      << refused.status();
  PolicyTable fallback = SampleTable();
  for (auto& e : fallback.entries) {
    if (e.fallback && e.key.device == "mmc0") e.trial = Trial{WaitParams::Spin(5'000), 64};
  }
  EXPECT_FALSE(EncodePolicyBlob(fallback, "mmc0").ok());
  PolicyTable leaf = ContextTable();
  for (auto& e : leaf.entries) {
    if (!e.context.empty()) e.trial = Trial{WaitParams::Irq(), 64};
  }
  EXPECT_FALSE(EncodePolicyBlob(leaf, "mmc0").ok());
}

TEST(PolicyBlob, ContextLeavesBecomeATreeTheDriverWalks) {
  auto blob = EncodePolicyBlob(ContextTable(), "mmc0");
  ASSERT_TRUE(blob.ok()) << blob.status();
  EXPECT_EQ(blob->size(), kHeader + 8 * SPINTUNE_BLOB_ENTRY_BYTES + 2 * SPINTUNE_BLOB_NODE_BYTES);
  auto decoded = DecodePolicyBlob(*blob);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  const spintune_table* t = &(*decoded)->table;
  ASSERT_EQ(t->node_count, 2u);
  EXPECT_EQ(t->entries[3].tree, 1u);
  EXPECT_EQ(t->entries[5].tree, 1u);
  EXPECT_EQ(t->nodes[0].feature, SPINTUNE_FEATURE_PREV_WAIT_NS);
  EXPECT_EQ(t->nodes[0].left, SPINTUNE_CHILD_LEAF | 3u);
  EXPECT_EQ(t->nodes[0].right, 1u);
  auto leaf = [&](uint64_t prev, uint64_t inflight) {
    const spintune_features f = Features(prev, SPINTUNE_NO_WRITE_YET, inflight, 4096);
    return spintune_lookup_ctx(t, 0, 25, &f);
  };
  EXPECT_EQ(leaf(999'999, 5)->strategy, SPINTUNE_SPIN_THEN_IRQ);
  EXPECT_EQ(leaf(1'000'000, 1)->strategy, SPINTUNE_IRQ);
  EXPECT_EQ(leaf(1'000'000, 2)->strategy, SPINTUNE_SLEEP_THEN_SPIN);
  EXPECT_EQ(leaf(1'000'000, 2)->sleep_ns, 2'000'000u);
  // Keys without context ignore the features; unknown keys get the fallback.
  const spintune_features f = Features(5'000'000, 0, 9, 0);
  EXPECT_EQ(spintune_lookup_ctx(t, 0, 23, &f)->spin_ns, 12'000u);
  EXPECT_EQ(spintune_lookup_ctx(t, 0, 99, &f)->flags, SPINTUNE_ENTRY_FALLBACK);
  // Without context: the leaf of a device with no history.
  EXPECT_EQ(spintune_lookup(t, 0, 25, 4096)->strategy, SPINTUNE_SPIN_THEN_IRQ);
  // The old entry-only interface has no room for the tree.
  std::vector<spintune_entry> storage(SPINTUNE_MAX_ENTRIES);
  spintune_table old{};
  EXPECT_EQ(spintune_blob_parse(blob->data(), blob->size(), storage.data(), SPINTUNE_MAX_ENTRIES,
                                &old),
            -E2BIG);
}

TEST(PolicyBlob, RefusesContextsThatAreNotATree) {
  PolicyTable t = ContextTable();
  // A single entry with a context.
  PolicyTable single = SampleTable();
  single.entries[0].context = {{ContextFeature::kInflight, 2, std::nullopt}};
  EXPECT_FALSE(EncodePolicyBlob(single, "mmc0").ok());
  // Leaves that overlap.
  for (auto& e : t.entries) {
    if (e.key.opcode == 25 && e.context.size() == 2) e.context[1].min = 1;
  }
  EXPECT_FALSE(EncodePolicyBlob(t, "mmc0").ok());
  // The fallback cannot have one.
  PolicyTable fallback = SampleTable();
  for (auto& e : fallback.entries) {
    if (e.fallback) e.context = {{ContextFeature::kBytes, std::nullopt, 512}};
  }
  EXPECT_FALSE(EncodePolicyBlob(fallback, "mmc0").ok());
}

// A format 1 blob, as the tools wrote before context: still accepted, by
// both interfaces, and looked up alike.
std::string Version1Blob() {
  auto v2 = EncodePolicyBlob(SampleTable(), "mmc0");
  const size_t count = 5;
  std::string b(SPINTUNE_BLOB_HEADER_BYTES + count * SPINTUNE_BLOB_ENTRY_BYTES, '\0');
  b.replace(0, SPINTUNE_BLOB_HEADER_BYTES, v2->substr(0, SPINTUNE_BLOB_HEADER_BYTES));
  b.replace(SPINTUNE_BLOB_HEADER_BYTES, count * SPINTUNE_BLOB_ENTRY_BYTES,
            v2->substr(kHeader, count * SPINTUNE_BLOB_ENTRY_BYTES));
  b[4] = 1;
  b[6] = static_cast<char>(SPINTUNE_BLOB_HEADER_BYTES);
  b[8] = static_cast<char>(b.size());
  b[9] = 0;
  const uint32_t crc = spintune_crc32(0, reinterpret_cast<const uint8_t*>(b.data()) + 16,
                                      b.size() - 16);
  for (int i = 0; i < 4; ++i) b[12 + i] = static_cast<char>((crc >> (8 * i)) & 0xFF);
  return b;
}

TEST(PolicyBlob, Version1BlobsAreStillAccepted) {
  const std::string b = Version1Blob();
  auto decoded = DecodePolicyBlob(b);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  const spintune_table* t = &(*decoded)->table;
  EXPECT_EQ(t->count, 5u);
  EXPECT_EQ(t->write_opcode_count, 0u);  // format 1 names no writes
  EXPECT_EQ(spintune_lookup(t, 0, 23, 0)->spin_ns, 12'000u);
  EXPECT_EQ(spintune_lookup(t, 1, 18, 4096)->sleep_ns, 150'000u);
  std::vector<spintune_entry> storage(8);
  spintune_table old{};
  ASSERT_EQ(spintune_blob_parse(b.data(), b.size(), storage.data(), 8, &old), 0);
  EXPECT_EQ(old.index.multiplier, 0u);  // no index: binary search
  EXPECT_EQ(spintune_lookup(&old, 0, 23, 0)->spin_ns, 12'000u);
}

// The key index is a perfect hash for any key set: every key finds its own
// entry in one probe, everything else the fallback.
TEST(PolicyBlob, KeyIndexFindsEveryKeyOfRandomTables) {
  std::mt19937_64 rng(7);
  for (int round = 0; round < 200; ++round) {
    const size_t keys = 1 + rng() % (round < 100 ? 64 : SPINTUNE_MAX_ENTRIES - 1);
    std::set<uint64_t> used;
    std::vector<spintune_entry> entries;
    while (used.size() < keys) {
      spintune_entry e{};
      e.cpu_class = static_cast<uint8_t>(rng() % 4);
      e.opcode = round % 2 ? static_cast<uint32_t>(rng() % 64)
                           : static_cast<uint32_t>(rng() % 0xFFFFFFFEu);
      e.size_class = static_cast<uint8_t>(rng() % 65);
      e.strategy = SPINTUNE_IRQ;
      if (used.insert(spintune__key_of(&e)).second) entries.push_back(e);
    }
    std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
      return spintune__key_of(&a) < spintune__key_of(&b);
    });
    spintune_entry fallback{};
    fallback.cpu_class = SPINTUNE_ANY_CPU_CLASS;
    fallback.size_class = SPINTUNE_ANY_SIZE_CLASS;
    fallback.opcode = SPINTUNE_ANY_OPCODE;
    fallback.flags = SPINTUNE_ENTRY_FALLBACK;
    fallback.strategy = SPINTUNE_IRQ;
    entries.push_back(fallback);
    spintune_table t{};
    t.entries = entries.data();
    t.count = static_cast<uint32_t>(entries.size());
    const uint32_t slot_bits = spintune__slot_bits(t.count);
    std::vector<uint16_t> buckets(size_t{1} << spintune__bucket_bits(slot_bits));
    std::vector<uint16_t> slots(size_t{1} << slot_bits);
    ASSERT_EQ(spintune__index_build(&t, buckets.data(), slots.data()), 0) << keys << " keys";
    for (const auto& e : entries) {
      if (e.flags) continue;
      const uint64_t bytes = e.size_class ? uint64_t{1} << (e.size_class - 1) : 0;
      ASSERT_EQ(spintune_lookup(&t, e.cpu_class, e.opcode, bytes), &e);
    }
    for (int miss = 0; miss < 100; ++miss) {
      const uint8_t cpu = static_cast<uint8_t>(rng() % 5);
      const uint32_t op = static_cast<uint32_t>(rng() % 70);
      const uint64_t bytes = rng() >> (rng() % 64);
      const spintune_entry* e = spintune_lookup(&t, cpu, op, bytes);
      const bool present = used.count(spintune__entry_key(cpu, op, spintune_size_class(bytes)));
      ASSERT_EQ(e->flags == SPINTUNE_ENTRY_FALLBACK, !present);
    }
  }
}

// Every rejection path of the parser, each on a corrupted copy of a valid
// blob (format 2, with a context tree) with the CRC fixed up where the test
// is about another field.
class BlobCorruption : public ::testing::Test {
 protected:
  void SetUp() override {
    auto b = EncodePolicyBlob(ContextTable(), "mmc0");
    ASSERT_TRUE(b.ok()) << b.status();
    blob_ = *b;
  }
  static constexpr size_t kEntries = 8;
  static size_t EntryAt(size_t i) { return kHeader + i * SPINTUNE_BLOB_ENTRY_BYTES; }
  static size_t NodeAt(size_t i) {
    return kHeader + kEntries * SPINTUNE_BLOB_ENTRY_BYTES + i * SPINTUNE_BLOB_NODE_BYTES;
  }
  void Put16(size_t at, uint32_t v) {
    blob_[at] = static_cast<char>(v & 0xFF);
    blob_[at + 1] = static_cast<char>((v >> 8) & 0xFF);
  }
  void Put32(size_t at, uint32_t v) {
    for (int i = 0; i < 4; ++i) blob_[at + i] = static_cast<char>((v >> (8 * i)) & 0xFF);
  }
  void Put64(size_t at, uint64_t v) {
    Put32(at, static_cast<uint32_t>(v));
    Put32(at + 4, static_cast<uint32_t>(v >> 32));
  }
  void PutNode(size_t i, uint8_t feature, uint32_t left, uint32_t right, uint64_t threshold) {
    blob_[NodeAt(i)] = static_cast<char>(feature);
    Put16(NodeAt(i) + 2, left);
    Put16(NodeAt(i) + 4, right);
    Put64(NodeAt(i) + 8, threshold);
  }
  void FixCrc() {
    const uint32_t crc = spintune_crc32(
        0, reinterpret_cast<const uint8_t*>(blob_.data()) + 16, blob_.size() - 16);
    Put32(12, crc);
  }
  // The parser's return value; on failure, its reason in why_.
  int Parse() {
    std::vector<uint64_t> storage(SPINTUNE_TABLE_STORAGE_WORDS);
    spintune_table table{};
    table.count = 0xDEAD;
    why_ = "";
    const int rc = spintune_table_parse(blob_.data(), blob_.size(), storage.data(),
                                        storage.size() * 8, &table, &why_);
    if (rc != 0) {
      EXPECT_EQ(table.count, 0xDEADu) << "partial state written on failure";
    }
    return rc;
  }
  std::string blob_;
  const char* why_ = "";
};

TEST_F(BlobCorruption, ValidBlobParses) { EXPECT_EQ(Parse(), 0); }

TEST_F(BlobCorruption, WrongMagic) {
  blob_[0] ^= 1;
  EXPECT_EQ(Parse(), -EINVAL);
}

TEST_F(BlobCorruption, WrongVersion) {
  blob_[4] = 4;  // 3 is the format with A/B trials
  EXPECT_EQ(Parse(), -EPROTONOSUPPORT);
}

TEST_F(BlobCorruption, HeaderSizeOfTheOtherVersion) {
  blob_[6] = static_cast<char>(SPINTUNE_BLOB_HEADER_BYTES);
  EXPECT_EQ(Parse(), -EINVAL);
  EXPECT_STREQ(why_, "bad header size");
}

TEST_F(BlobCorruption, ShortBuffer) {
  blob_.resize(blob_.size() - 1);
  EXPECT_EQ(Parse(), -EMSGSIZE);
  blob_.resize(80);  // a format 1 header's worth, not format 2's
  EXPECT_EQ(Parse(), -EINVAL);
  blob_.resize(10);
  EXPECT_EQ(Parse(), -EINVAL);
}

TEST_F(BlobCorruption, CountOverflow) {
  Put32(24, 0x7FFFFFFF);
  EXPECT_EQ(Parse(), -E2BIG);
}

TEST_F(BlobCorruption, CrcMismatch) {
  blob_[EntryAt(0) + 8] ^= 1;
  EXPECT_EQ(Parse(), -EBADMSG);
}

TEST_F(BlobCorruption, BadStrategyEnum) {
  blob_[EntryAt(0) + 2] = 9;
  FixCrc();
  EXPECT_EQ(Parse(), -EINVAL);
}

TEST_F(BlobCorruption, SpinAboveTheCompileTimeCap) {
  // Entry 2 is SPIN_THEN_IRQ(12 us) (big, opcode 23); give it 4 s.
  ASSERT_EQ(blob_[EntryAt(2) + 2], SPINTUNE_SPIN_THEN_IRQ);
  blob_[EntryAt(2) + 11] = static_cast<char>(0xEE);
  FixCrc();
  EXPECT_EQ(Parse(), -EINVAL);
}

TEST_F(BlobCorruption, UnsortedKeys) {
  // Swap entries 0 and 1.
  std::string a = blob_.substr(EntryAt(0), SPINTUNE_BLOB_ENTRY_BYTES);
  std::string b = blob_.substr(EntryAt(1), SPINTUNE_BLOB_ENTRY_BYTES);
  blob_.replace(EntryAt(0), SPINTUNE_BLOB_ENTRY_BYTES, b);
  blob_.replace(EntryAt(1), SPINTUNE_BLOB_ENTRY_BYTES, a);
  FixCrc();
  EXPECT_EQ(Parse(), -EINVAL);
}

TEST_F(BlobCorruption, UnterminatedDeviceName) {
  blob_[32 + SPINTUNE_DEVICE_NAME_BYTES - 1] = 'x';
  FixCrc();
  EXPECT_EQ(Parse(), -EINVAL);
}

TEST_F(BlobCorruption, CapacityTooSmall) {
  std::vector<uint64_t> storage(4);
  spintune_table table{};
  EXPECT_EQ(spintune_table_parse(blob_.data(), blob_.size(), storage.data(), 32, &table, nullptr),
            -E2BIG);
  spintune_entry entries[2];
  EXPECT_EQ(spintune_blob_parse(blob_.data(), blob_.size(), entries, 2, &table), -E2BIG);
}

// ---- Format 2's new fields, one rejection each ----

TEST_F(BlobCorruption, BadNodeSize) {
  Put16(68, 12);
  FixCrc();
  EXPECT_EQ(Parse(), -EINVAL);
  EXPECT_STREQ(why_, "bad node size");
}

TEST_F(BlobCorruption, ReservedHeaderBytesSet) {
  for (size_t at : {size_t{71}, size_t{88}, size_t{95}}) {
    SetUp();
    blob_[at] = 1;
    FixCrc();
    EXPECT_EQ(Parse(), -EINVAL) << at;
    EXPECT_STREQ(why_, "reserved header field set") << at;
  }
}

TEST_F(BlobCorruption, WriteOpcodes) {
  blob_[70] = 5;  // more than SPINTUNE_MAX_WRITE_OPCODES
  FixCrc();
  EXPECT_EQ(Parse(), -EINVAL);
  SetUp();
  Put32(76, 1);  // the second write opcode (24) below the first (1)... equal
  FixCrc();
  EXPECT_EQ(Parse(), -EINVAL);
  SetUp();
  Put32(84, 99);  // the unused fourth slot
  FixCrc();
  EXPECT_EQ(Parse(), -EINVAL);
}

TEST_F(BlobCorruption, NodeCountAboveTheLimit) {
  Put32(64, SPINTUNE_MAX_NODES + 1);
  EXPECT_EQ(Parse(), -E2BIG);
}

TEST_F(BlobCorruption, NodeCountWithoutStorage) {
  // The entry-only interface of format 1 cannot hold nodes.
  std::vector<spintune_entry> entries(SPINTUNE_MAX_ENTRIES);
  spintune_table table{};
  const char* why = "";
  EXPECT_EQ(spintune_blob_parse_why(blob_.data(), blob_.size(), entries.data(),
                                    SPINTUNE_MAX_ENTRIES, &table, &why),
            -E2BIG);
  EXPECT_NE(std::string(why).find("context nodes"), std::string::npos);
}

TEST_F(BlobCorruption, ReservedEntryHalfWordSet) {
  Put16(EntryAt(0) + 22, 1);
  FixCrc();
  EXPECT_EQ(Parse(), -EINVAL);
  EXPECT_STREQ(why_, "reserved entry field set");
}

TEST_F(BlobCorruption, TreeFieldInAFormat1Blob) {
  blob_ = Version1Blob();
  Put16(SPINTUNE_BLOB_HEADER_BYTES + 20, 1);
  FixCrc();
  EXPECT_EQ(Parse(), -EINVAL);
  EXPECT_STREQ(why_, "reserved entry field set");
}

TEST_F(BlobCorruption, TreeThatDoesNotStartAtTheNextNode) {
  for (size_t i = 3; i <= 5; ++i) Put16(EntryAt(i) + 20, 2);
  FixCrc();
  EXPECT_EQ(Parse(), -EINVAL);
  EXPECT_NE(std::string(why_).find("does not start"), std::string::npos);
}

TEST_F(BlobCorruption, LeavesOfOneKeyWithDifferentTrees) {
  Put16(EntryAt(5) + 20, 2);
  FixCrc();
  EXPECT_EQ(Parse(), -EINVAL);
}

TEST_F(BlobCorruption, TreeOnATreelessKey) {
  Put16(EntryAt(0) + 20, 1);  // CMD13: one entry cannot be a tree's leaves
  FixCrc();
  EXPECT_EQ(Parse(), -EINVAL);
}

TEST_F(BlobCorruption, FallbackWithATree) {
  Put16(EntryAt(kEntries - 1) + 20, 1);
  FixCrc();
  EXPECT_EQ(Parse(), -EINVAL);
}

TEST_F(BlobCorruption, MalformedNodes) {
  struct Case {
    const char* name;
    uint8_t feature;
    uint32_t left, right;
    uint64_t threshold;
  };
  const uint32_t leaf = SPINTUNE_CHILD_LEAF;
  // The valid tree: node 0 = (prev_wait < 1 ms ? leaf 3 : node 1),
  // node 1 = (inflight < 2 ? leaf 4 : leaf 5).
  const Case node0[] = {
      {"unknown feature", 4, leaf | 3, 1, 1'000'000},
      {"threshold 0", 0, leaf | 3, 1, 0},
      {"leaf out of order", 0, leaf | 4, 1, 1'000'000},
      {"leaf of another key", 0, leaf | 2, 1, 1'000'000},
      {"child node out of preorder", 0, leaf | 3, 0, 1'000'000},
      {"child node past the end", 0, leaf | 3, 7, 1'000'000},
  };
  for (const Case& c : node0) {
    SetUp();
    PutNode(0, c.feature, c.left, c.right, c.threshold);
    FixCrc();
    EXPECT_EQ(Parse(), -EINVAL) << c.name;
    EXPECT_NE(std::string(why_).find("context tree"), std::string::npos) << c.name;
  }
  // A leaf nobody can reach: node 1 sits where prev_wait >= 1 ms, so a
  // split of it on prev_wait below 1 ms leaves its left side empty.
  SetUp();
  PutNode(1, 0, leaf | 4, leaf | 5, 500'000);
  FixCrc();
  EXPECT_EQ(Parse(), -EINVAL);
  // Reserved node fields.
  for (size_t at : {size_t{1}, size_t{6}}) {
    SetUp();
    blob_[NodeAt(0) + at] = 1;
    FixCrc();
    EXPECT_EQ(Parse(), -EINVAL) << at;
  }
}

TEST_F(BlobCorruption, NodesNoTreeUses) {
  // One more node than the tree has: the declared sizes still agree.
  blob_.append(SPINTUNE_BLOB_NODE_BYTES, '\0');
  Put32(64, 3);
  Put32(8, static_cast<uint32_t>(blob_.size()));
  PutNode(2, 0, SPINTUNE_CHILD_LEAF | 3, SPINTUNE_CHILD_LEAF | 4, 5);
  FixCrc();
  EXPECT_EQ(Parse(), -EINVAL);
  EXPECT_STREQ(why_, "context nodes no tree uses");
}

TEST_F(BlobCorruption, TreeDeeperThanADriverWalks) {
  // Five leaves cut on bytes at 1..4: a balanced tree has depth 3 (valid);
  // rewritten as a comb its deepest path has four nodes.
  PolicyTable t = SampleTable();
  for (int i = 0; i < 5; ++i) {
    PolicyEntry e = testing::Entry("big", "mmc0", 25, 13, WaitParams::Irq());
    ContextCondition c{ContextFeature::kBytes, std::nullopt, std::nullopt};
    if (i > 0) c.min = 4096 + i;
    if (i < 4) c.max = 4097 + i;
    e.context = {c};
    t.entries.push_back(e);
  }
  SortEntries(&t.entries);
  auto b = EncodePolicyBlob(t, "mmc0");
  ASSERT_TRUE(b.ok()) << b.status();
  blob_ = *b;
  ASSERT_EQ(Parse(), 0);
  const size_t entries = 10, first_leaf = 3;
  auto node_at = [&](size_t i) {
    return kHeader + entries * SPINTUNE_BLOB_ENTRY_BYTES + i * SPINTUNE_BLOB_NODE_BYTES;
  };
  for (uint32_t i = 0; i < 4; ++i) {
    const size_t at = node_at(i);
    blob_[at] = SPINTUNE_FEATURE_BYTES;
    Put16(at + 2, SPINTUNE_CHILD_LEAF | (first_leaf + i));
    Put16(at + 4, i < 3 ? i + 1 : SPINTUNE_CHILD_LEAF | (first_leaf + 4));
    Put64(at + 8, 4097 + i);
  }
  FixCrc();
  EXPECT_EQ(Parse(), -EINVAL);
}

}  // namespace
}  // namespace spintune
