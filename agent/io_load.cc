#include "agent/io_load.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"

namespace spintune {
namespace {

constexpr uint64_t kAlign = 4096;

absl::Status Errno(const std::string& what) {
  return absl::UnavailableError(absl::StrCat(what, ": ", std::strerror(errno)));
}

// Fills the file with real blocks (so reads reach the disk, not holes).
absl::Status Prepare(const IoLoadOptions& o) {
  struct stat st;
  if (::stat(o.path.c_str(), &st) == 0 && static_cast<uint64_t>(st.st_size) >= o.file_bytes) {
    return absl::OkStatus();
  }
  const int fd = ::open(o.path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return Errno(o.path);
  std::vector<char> chunk(1 << 20);
  std::mt19937_64 rng(o.seed);
  for (auto& c : chunk) c = static_cast<char>(rng());
  for (uint64_t done = 0; done < o.file_bytes; done += chunk.size()) {
    const size_t n = std::min<uint64_t>(chunk.size(), o.file_bytes - done);
    if (::write(fd, chunk.data(), n) != static_cast<ssize_t>(n)) {
      absl::Status s = Errno(o.path);
      ::close(fd);
      return s;
    }
  }
  const bool ok = ::fsync(fd) == 0;
  ::close(fd);
  return ok ? absl::OkStatus() : Errno(o.path + ": fsync");
}

}  // namespace

absl::StatusOr<IoLoadResult> RunIoLoad(const IoLoadOptions& o, const std::atomic<bool>* stop) {
  if (o.sizes.empty() || o.threads < 1 || o.threads > 64 || o.write_share < 0 ||
      o.write_share > 1 || o.requests_per_second < 0 || o.file_bytes < (1u << 20)) {
    return absl::InvalidArgumentError(
        "io load: need sizes, 1..64 threads, write share 0..1, a rate >= 0, a file >= 1 MiB");
  }
  uint32_t largest = 0;
  for (uint32_t s : o.sizes) {
    if (s == 0 || s % kAlign != 0 || s > (8u << 20)) {
      return absl::InvalidArgumentError(
          absl::StrCat("io load: size ", s, " is not a multiple of 4096 up to 8 MiB"));
    }
    largest = std::max(largest, s);
  }
  if (largest > o.file_bytes) return absl::InvalidArgumentError("io load: file smaller than a request");
  if (absl::Status s = Prepare(o); !s.ok()) return s;
  const int fd = ::open(o.path.c_str(), O_RDWR | O_DIRECT | O_CLOEXEC);
  if (fd < 0) {
    return absl::UnavailableError(absl::StrCat(
        o.path, ": O_DIRECT open: ", std::strerror(errno),
        " (the file system must support O_DIRECT; tmpfs does not)"));
  }
  std::mutex mu;
  IoLoadResult total;
  absl::Status failure;
  const absl::Time start = absl::Now();
  const absl::Time end = start + o.duration;
  auto worker = [&](int index) {
    void* raw = nullptr;
    if (::posix_memalign(&raw, kAlign, largest) != 0) return;
    std::unique_ptr<void, decltype(&std::free)> buf(raw, &std::free);
    std::memset(raw, 0x5a, largest);
    std::mt19937_64 rng(o.seed * 7919 + static_cast<uint64_t>(index));
    std::uniform_int_distribution<size_t> pick_size(0, o.sizes.size() - 1);
    std::uniform_real_distribution<double> unit(0, 1);
    IoLoadResult mine;
    uint32_t writes_since_sync = 0;
    const double per_thread_rate = o.requests_per_second / o.threads;
    absl::Status error;
    for (uint64_t i = 0;; ++i) {
      const absl::Time now = absl::Now();
      if (now >= end || (stop != nullptr && stop->load())) break;
      if (per_thread_rate > 0) {
        const absl::Time due = start + absl::Seconds(static_cast<double>(i) / per_thread_rate);
        if (due > now) absl::SleepFor(due - now);
      }
      const uint32_t size = o.sizes[pick_size(rng)];
      const uint64_t blocks = (o.file_bytes - size) / kAlign + 1;
      const off_t offset = static_cast<off_t>((rng() % blocks) * kAlign);
      if (unit(rng) < o.write_share) {
        if (::pwrite(fd, raw, size, offset) != static_cast<ssize_t>(size)) {
          error = Errno(o.path + ": pwrite");
          break;
        }
        ++mine.writes;
        if (o.fsync_every > 0 && ++writes_since_sync >= o.fsync_every) {
          if (::fdatasync(fd) != 0) {
            error = Errno(o.path + ": fdatasync");
            break;
          }
          ++mine.fsyncs;
          writes_since_sync = 0;
        }
      } else {
        if (::pread(fd, raw, size, offset) != static_cast<ssize_t>(size)) {
          error = Errno(o.path + ": pread");
          break;
        }
        ++mine.reads;
      }
      mine.bytes += size;
    }
    std::lock_guard<std::mutex> lock(mu);
    total.reads += mine.reads;
    total.writes += mine.writes;
    total.fsyncs += mine.fsyncs;
    total.bytes += mine.bytes;
    if (!error.ok() && failure.ok()) failure = error;
  };
  std::vector<std::thread> threads;
  for (int i = 0; i < o.threads; ++i) threads.emplace_back(worker, i);
  for (auto& t : threads) t.join();
  total.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  ::close(fd);
  if (!o.keep_file) ::unlink(o.path.c_str());
  if (!failure.ok()) return failure;
  return total;
}

}  // namespace spintune
