#include "policy/policy_blob.h"

#include "gtest/gtest.h"
#include "tests/testing/policy_fixtures.h"

namespace spintune {
namespace {

using testing::SampleTable;

TEST(PolicyBlob, RoundTripsThroughTheDriverParser) {
  const PolicyTable t = SampleTable();
  auto blob = EncodePolicyBlob(t, "mmc0");
  ASSERT_TRUE(blob.ok()) << blob.status();
  EXPECT_EQ(blob->size(), SPINTUNE_BLOB_HEADER_BYTES + 5 * SPINTUNE_BLOB_ENTRY_BYTES);
  auto decoded = DecodePolicyBlob(*blob);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  const spintune_table& table = (*decoded)->table;
  EXPECT_EQ(table.count, 5u);
  EXPECT_EQ(table.version, 7u);
  EXPECT_STREQ(table.device, "mmc0");
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
}

TEST(PolicyBlob, SizeClassIsTheBitWidth) {
  EXPECT_EQ(spintune_size_class(0), 0);
  EXPECT_EQ(spintune_size_class(1), 1);
  EXPECT_EQ(spintune_size_class(512), 10);
  EXPECT_EQ(spintune_size_class(1023), 10);
  EXPECT_EQ(spintune_size_class(4096), 13);
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
}

// Every rejection path of spintune_blob_parse(), each on a corrupted copy of
// a valid blob with the CRC fixed up where the test is about another field.
class BlobCorruption : public ::testing::Test {
 protected:
  void SetUp() override {
    auto b = EncodePolicyBlob(SampleTable(), "mmc0");
    ASSERT_TRUE(b.ok());
    blob_ = *b;
  }
  void FixCrc() {
    const uint32_t crc = spintune_crc32(
        0, reinterpret_cast<const uint8_t*>(blob_.data()) + 16, blob_.size() - 16);
    for (int i = 0; i < 4; ++i) blob_[12 + i] = static_cast<char>((crc >> (8 * i)) & 0xFF);
  }
  int Parse() {
    spintune_entry storage[SPINTUNE_MAX_ENTRIES];
    spintune_table table{};
    table.count = 0xDEAD;
    const int rc = spintune_blob_parse(blob_.data(), blob_.size(), storage,
                                       SPINTUNE_MAX_ENTRIES, &table);
    if (rc != 0) {
      EXPECT_EQ(table.count, 0xDEADu) << "partial state written on failure";
    }
    return rc;
  }
  std::string blob_;
};

TEST_F(BlobCorruption, ValidBlobParses) { EXPECT_EQ(Parse(), 0); }

TEST_F(BlobCorruption, WrongMagic) {
  blob_[0] ^= 1;
  EXPECT_EQ(Parse(), -EINVAL);
}

TEST_F(BlobCorruption, WrongVersion) {
  blob_[4] = 2;
  EXPECT_EQ(Parse(), -EPROTONOSUPPORT);
}

TEST_F(BlobCorruption, ShortBuffer) {
  blob_.resize(blob_.size() - 1);
  EXPECT_EQ(Parse(), -EMSGSIZE);
  blob_.resize(10);
  EXPECT_EQ(Parse(), -EINVAL);
}

TEST_F(BlobCorruption, CountOverflow) {
  blob_[24] = static_cast<char>(0xFF);
  blob_[25] = static_cast<char>(0xFF);
  blob_[26] = static_cast<char>(0xFF);
  blob_[27] = static_cast<char>(0x7F);
  EXPECT_EQ(Parse(), -E2BIG);
}

TEST_F(BlobCorruption, CrcMismatch) {
  blob_[SPINTUNE_BLOB_HEADER_BYTES + 8] ^= 1;
  EXPECT_EQ(Parse(), -EBADMSG);
}

TEST_F(BlobCorruption, BadStrategyEnum) {
  blob_[SPINTUNE_BLOB_HEADER_BYTES + 2] = 9;
  FixCrc();
  EXPECT_EQ(Parse(), -EINVAL);
}

TEST_F(BlobCorruption, SpinAboveTheCompileTimeCap) {
  // Entry 2 is SPIN_THEN_IRQ(12 us) (big, opcode 23); give it 4 s.
  const size_t at = SPINTUNE_BLOB_HEADER_BYTES + 2 * SPINTUNE_BLOB_ENTRY_BYTES + 8;
  ASSERT_EQ(blob_[at - 6], SPINTUNE_SPIN_THEN_IRQ);
  blob_[at + 3] = static_cast<char>(0xEE);
  FixCrc();
  EXPECT_EQ(Parse(), -EINVAL);
}

TEST_F(BlobCorruption, UnsortedKeys) {
  // Swap entries 0 and 1.
  std::string a = blob_.substr(SPINTUNE_BLOB_HEADER_BYTES, SPINTUNE_BLOB_ENTRY_BYTES);
  std::string b = blob_.substr(SPINTUNE_BLOB_HEADER_BYTES + SPINTUNE_BLOB_ENTRY_BYTES,
                               SPINTUNE_BLOB_ENTRY_BYTES);
  blob_.replace(SPINTUNE_BLOB_HEADER_BYTES, SPINTUNE_BLOB_ENTRY_BYTES, b);
  blob_.replace(SPINTUNE_BLOB_HEADER_BYTES + SPINTUNE_BLOB_ENTRY_BYTES,
                SPINTUNE_BLOB_ENTRY_BYTES, a);
  FixCrc();
  EXPECT_EQ(Parse(), -EINVAL);
}

TEST_F(BlobCorruption, UnterminatedDeviceName) {
  blob_[32 + SPINTUNE_DEVICE_NAME_BYTES - 1] = 'x';
  FixCrc();
  EXPECT_EQ(Parse(), -EINVAL);
}

TEST_F(BlobCorruption, CapacityTooSmall) {
  spintune_entry storage[2];
  spintune_table table{};
  EXPECT_EQ(spintune_blob_parse(blob_.data(), blob_.size(), storage, 2, &table), -E2BIG);
}

}  // namespace
}  // namespace spintune
