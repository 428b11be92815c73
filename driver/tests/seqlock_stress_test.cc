// Readers racing a writer through the shared-memory seqlock: every snapshot
// a reader takes parses (its CRC holds), so no table is ever torn.
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "spintune/shm.h"

namespace {

// Two valid blobs of different sizes and contents (tables A and B).
std::vector<uint8_t> Blob(uint32_t entries, uint32_t spin_base) {
  const uint32_t total = SPINTUNE_BLOB_HEADER_BYTES + entries * SPINTUNE_BLOB_ENTRY_BYTES;
  std::vector<uint8_t> b(total, 0);
  auto put32 = [&](size_t at, uint32_t v) {
    for (int i = 0; i < 4; ++i) b[at + i] = static_cast<uint8_t>(v >> (8 * i));
  };
  put32(0, SPINTUNE_BLOB_MAGIC);
  b[4] = 1;
  b[6] = SPINTUNE_BLOB_HEADER_BYTES;
  put32(8, total);
  put32(16, spin_base);
  put32(24, entries);
  b[28] = SPINTUNE_BLOB_ENTRY_BYTES;
  b[32] = 'd';
  for (uint32_t i = 0; i < entries; ++i) {
    const size_t at = SPINTUNE_BLOB_HEADER_BYTES + i * SPINTUNE_BLOB_ENTRY_BYTES;
    const bool last = i + 1 == entries;
    b[at + 0] = last ? 0xFF : 0;
    b[at + 1] = last ? 0xFF : 0;
    b[at + 2] = last ? SPINTUNE_IRQ : SPINTUNE_SPIN_THEN_IRQ;
    b[at + 3] = last ? SPINTUNE_ENTRY_FALLBACK : 0;
    put32(at + 4, last ? 0xFFFFFFFFu : i);
    put32(at + 8, last ? 0 : spin_base + i);
  }
  put32(12, spintune_crc32(0, b.data() + 16, total - 16));
  return b;
}

TEST(SeqlockStress, ReadersNeverSeeATornTable) {
  const std::vector<uint8_t> a = Blob(200, 1000), b = Blob(37, 90000);
  const uint32_t capacity = 8192;
  std::vector<uint64_t> region((SPINTUNE_SHM_HEADER_BYTES + capacity) / 8);
  auto* shm = reinterpret_cast<spintune_shm*>(region.data());
  spintune_shm_init(shm, capacity);
  ASSERT_EQ(spintune_shm_publish(shm, a.data(), static_cast<uint32_t>(a.size()), 1000), 0);

  std::atomic<bool> stop{false};
  std::atomic<long> good{0}, retries{0};
  std::atomic<long> bad{0};
  std::vector<std::thread> readers;
  for (int r = 0; r < 3; ++r) {
    readers.emplace_back([&] {
      std::vector<uint8_t> copy(capacity);
      std::vector<spintune_entry> storage(SPINTUNE_MAX_ENTRIES);
      while (!stop.load()) {
        uint32_t len = 0, seq = 0;
        const int rc = spintune_shm_snapshot(shm, copy.data(), capacity, &len, &seq, 1000);
        if (rc == -EAGAIN) {
          ++retries;
          continue;
        }
        spintune_table t;
        if (rc != 0 || spintune_blob_parse(copy.data(), len, storage.data(),
                                           SPINTUNE_MAX_ENTRIES, &t) != 0 ||
            (t.count != 200 && t.count != 37)) {
          ++bad;
        } else {
          ++good;
        }
      }
    });
  }
  // Publish at least 200,000 times, and until the readers have taken 2,000
  // snapshots (on a loaded machine the writer may starve them), within 20 s.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  long published = 0;
  while ((published < 200000 || good.load() < 2000) &&
         std::chrono::steady_clock::now() < deadline) {
    const auto& blob = published % 2 ? a : b;
    spintune_shm_publish(shm, blob.data(), static_cast<uint32_t>(blob.size()),
                         static_cast<uint64_t>(published));
    if (++published % 1000 == 0) std::this_thread::yield();
  }
  stop = true;
  for (auto& t : readers) t.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_GE(good.load(), 2000);
  EXPECT_GE(published, 200000);
}

}  // namespace
