#include "agent/batch_spool.h"

#include <unistd.h>

#include <filesystem>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/file_util.h"
#include "common/logging.h"

namespace spintune {

namespace fs = std::filesystem;

absl::StatusOr<std::unique_ptr<BatchSpool>> BatchSpool::Open(const std::string& dir,
                                                             uint64_t max_bytes) {
  if (max_bytes == 0) return absl::InvalidArgumentError("spool size must be > 0");
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return absl::UnavailableError(absl::StrCat("spool ", dir, ": ", ec.message()));
  std::unique_ptr<BatchSpool> s(new BatchSpool(dir, max_bytes));
  if (auto d = ReadFileToString(dir + "/dropped"); d.ok()) {
    std::vector<std::string> parts = absl::StrSplit(*d, ' ');
    if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &s->dropped_.batches) ||
        !absl::SimpleAtoi(parts[1], &s->dropped_.samples)) {
      s->dropped_ = {};
    }
  }
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    uint64_t seq = 0;
    if (name.find(".tmp.") != std::string::npos) {
      fs::remove(e.path(), ec);  // an interrupted write
      continue;
    }
    if (name.size() != 26 || name.substr(20) != ".batch" || !absl::SimpleAtoi(name.substr(0, 20), &seq)) {
      continue;
    }
    auto bytes = ReadFileToString(e.path().string());
    v1::SampleBatch batch;
    if (!bytes.ok() || !batch.ParseFromString(*bytes) || batch.seq() != seq) {
      Logger().warn("spool: removing unreadable {}", e.path().string());
      fs::remove(e.path(), ec);
      ++s->dropped_.batches;
      continue;
    }
    s->index_[seq] = {bytes->size(), static_cast<uint64_t>(batch.completions().wait_ns_size())};
    s->bytes_ += bytes->size();
  }
  if (ec) return absl::UnavailableError(absl::StrCat("spool ", dir, ": ", ec.message()));
  return s;
}

std::string BatchSpool::PathOf(uint64_t seq) const {
  return absl::StrFormat("%s/%020d.batch", dir_, seq);
}

absl::StatusOr<std::vector<v1::SampleBatch>> BatchSpool::LoadAll() const {
  std::vector<v1::SampleBatch> out;
  for (const auto& [seq, entry] : index_) {
    auto bytes = ReadFileToString(PathOf(seq));
    if (!bytes.ok()) return bytes.status();
    out.emplace_back();
    if (!out.back().ParseFromString(*bytes)) {
      return absl::DataLossError(absl::StrCat(PathOf(seq), ": unreadable"));
    }
  }
  return out;
}

absl::StatusOr<std::vector<uint64_t>> BatchSpool::Append(const v1::SampleBatch& batch,
                                                         uint64_t droppable_from) {
  const std::string bytes = batch.SerializeAsString();
  std::vector<uint64_t> dropped;
  while (bytes_ + bytes.size() > max_bytes_) {
    const auto oldest = index_.lower_bound(droppable_from);
    if (oldest == index_.end()) break;
    ++dropped_.batches;
    dropped_.samples += oldest->second.samples;
    dropped.push_back(oldest->first);
    Erase(oldest->first);
  }
  if (!dropped.empty()) SaveDropped();
  absl::Status s = WriteFileAtomically(PathOf(batch.seq()), bytes);
  if (!s.ok()) return s;
  index_[batch.seq()] = {bytes.size(), static_cast<uint64_t>(batch.completions().wait_ns_size())};
  bytes_ += bytes.size();
  return dropped;
}

void BatchSpool::Erase(uint64_t seq) {
  auto it = index_.find(seq);
  if (it == index_.end()) return;
  bytes_ -= it->second.bytes;
  index_.erase(it);
  ::unlink(PathOf(seq).c_str());
}

void BatchSpool::AckThrough(uint64_t seq) {
  while (!index_.empty() && index_.begin()->first <= seq) Erase(index_.begin()->first);
}

void BatchSpool::Remove(uint64_t seq) { Erase(seq); }

void BatchSpool::SaveDropped() {
  absl::Status s = WriteFileAtomically(dir_ + "/dropped",
                                       absl::StrCat(dropped_.batches, " ", dropped_.samples));
  if (!s.ok()) Logger().warn("spool: cannot record dropped batches: {}", s.message());
}

void BatchSpool::ClearDropped() {
  if (dropped_.batches == 0 && dropped_.samples == 0) return;
  dropped_ = {};
  SaveDropped();
}

}  // namespace spintune
