#include "agent/batch_spool.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/file_util.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "proto/sample_batch_util.h"

namespace spintune {

namespace fs = std::filesystem;

namespace {

v1::SampleBatch Placeholder(uint64_t seq, uint64_t last_seq, uint64_t samples) {
  v1::SampleBatch b;
  b.set_seq(seq);
  b.mutable_dropped()->set_last_seq(last_seq);
  b.mutable_dropped()->set_samples(samples);
  return b;
}

}  // namespace

absl::StatusOr<std::unique_ptr<BatchSpool>> BatchSpool::Open(const std::string& dir,
                                                             uint64_t max_bytes) {
  if (max_bytes == 0) return absl::InvalidArgumentError("spool size must be > 0");
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return absl::UnavailableError(absl::StrCat("spool ", dir, ": ", ec.message()));
  std::unique_ptr<BatchSpool> s(new BatchSpool(dir, max_bytes));
  if (auto text = ReadFileToString(dir + "/last_seq", 64); text.ok()) {
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(*text), &s->last_seq_floor_)) {
      return absl::DataLossError(absl::StrCat(dir, "/last_seq: not a number"));
    }
  }
  std::vector<uint64_t> unreadable;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    uint64_t seq = 0;
    if (name.find(".tmp.") != std::string::npos) {
      fs::remove(e.path(), ec);  // an interrupted write
      continue;
    }
    if (name.size() != 26 || name.substr(20) != ".batch" ||
        !absl::SimpleAtoi(name.substr(0, 20), &seq) || seq == 0) {
      continue;
    }
    auto bytes = ReadFileToString(e.path().string());
    v1::SampleBatch batch;
    if (!bytes.ok() || !batch.ParseFromString(*bytes) || batch.seq() != seq ||
        (batch.has_dropped() && batch.dropped().last_seq() < seq)) {
      unreadable.push_back(seq);
      continue;
    }
    const bool placeholder = batch.has_dropped();
    s->index_[seq] = {bytes->size(),
                      placeholder ? batch.dropped().samples()
                                  : CompletionSamples(batch),
                      placeholder ? batch.dropped().last_seq() : seq, placeholder};
    s->bytes_ += bytes->size();
  }
  if (ec) return absl::UnavailableError(absl::StrCat("spool ", dir, ": ", ec.message()));
  // A damaged file keeps its place in the sequence: the tuner is told that
  // one batch (of unknown size) is gone.
  for (uint64_t seq : unreadable) {
    Logger().error("spool: {} is unreadable; it is sent as one dropped batch", s->PathOf(seq));
    SPINTUNE_RETURN_IF_ERROR(s->Put(Placeholder(seq, seq, 0)));
    ++s->unreadable_;
  }
  return s;
}

std::string BatchSpool::PathOf(uint64_t seq) const {
  return absl::StrFormat("%s/%020d.batch", dir_, seq);
}

uint64_t BatchSpool::last_seq() const {
  return index_.empty() ? last_seq_floor_
                        : std::max(last_seq_floor_, index_.rbegin()->second.last_seq);
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

absl::Status BatchSpool::Put(const v1::SampleBatch& batch) {
  const std::string bytes = batch.SerializeAsString();
  SPINTUNE_RETURN_IF_ERROR(WriteFileAtomically(PathOf(batch.seq()), bytes));
  auto it = index_.find(batch.seq());
  if (it != index_.end()) bytes_ -= it->second.bytes;
  const bool placeholder = batch.has_dropped();
  index_[batch.seq()] = {bytes.size(),
                         placeholder ? batch.dropped().samples()
                                     : CompletionSamples(batch),
                         placeholder ? batch.dropped().last_seq() : batch.seq(), placeholder};
  bytes_ += bytes.size();
  return absl::OkStatus();
}

absl::Status BatchSpool::Drop(uint64_t seq, uint64_t droppable_from, SpoolDrops* drops) {
  const Entry dropped = index_.at(seq);
  uint64_t first = seq;
  uint64_t samples = dropped.samples;
  // Merge with the placeholder right before it, if that one may change too.
  auto it = index_.find(seq);
  if (it != index_.begin()) {
    auto prev = std::prev(it);
    if (prev->second.placeholder && prev->second.last_seq + 1 == seq &&
        prev->first >= droppable_from) {
      first = prev->first;
      samples += prev->second.samples;
    }
  }
  const v1::SampleBatch placeholder = Placeholder(first, dropped.last_seq, samples);
  SPINTUNE_RETURN_IF_ERROR(Put(placeholder));
  if (first != seq) {
    Erase(seq);
    drops->removed.push_back(seq);
  }
  // A merged placeholder replaces the one reported earlier in this call.
  auto& p = drops->placeholders;
  p.erase(std::remove_if(p.begin(), p.end(), [first](const v1::SampleBatch& b) {
            return b.seq() == first;
          }), p.end());
  p.push_back(placeholder);
  ++drops->batches;
  drops->samples += dropped.samples;
  return absl::OkStatus();
}

absl::StatusOr<SpoolDrops> BatchSpool::Append(const v1::SampleBatch& batch,
                                              uint64_t droppable_from) {
  const uint64_t size = batch.ByteSizeLong();
  SpoolDrops drops;
  // Oldest first: the first real batch at or after droppable_from.
  auto next_victim = [&]() {
    for (auto it = index_.lower_bound(droppable_from); it != index_.end(); ++it) {
      if (!it->second.placeholder) return it;
    }
    return index_.end();
  };
  while (bytes_ + size > max_bytes_) {
    auto victim = next_victim();
    if (victim == index_.end()) break;
    SPINTUNE_RETURN_IF_ERROR(Drop(victim->first, droppable_from, &drops));
  }
  SPINTUNE_RETURN_IF_ERROR(Put(batch));
  return drops;
}

void BatchSpool::Erase(uint64_t seq) {
  auto it = index_.find(seq);
  if (it == index_.end()) return;
  // Before the highest seq leaves the spool, remember it.
  if (std::next(it) == index_.end() && it->second.last_seq > last_seq_floor_) {
    absl::Status s = WriteFileAtomically(dir_ + "/last_seq", absl::StrCat(it->second.last_seq));
    if (!s.ok()) {
      Logger().warn("spool: cannot record the last seq: {}", s.message());
    } else {
      last_seq_floor_ = it->second.last_seq;
    }
  }
  bytes_ -= it->second.bytes;
  index_.erase(it);
  ::unlink(PathOf(seq).c_str());
}

void BatchSpool::AckThrough(uint64_t seq) {
  while (!index_.empty() && index_.begin()->first <= seq) Erase(index_.begin()->first);
}

void BatchSpool::Remove(uint64_t seq) { Erase(seq); }

absl::Status BatchSpool::Shift(int64_t delta) {
  if (delta == 0 || index_.empty()) return absl::OkStatus();
  SPINTUNE_ASSIGN_OR_RETURN(std::vector<v1::SampleBatch> all, LoadAll());
  if (delta < 0 && index_.begin()->first <= static_cast<uint64_t>(-delta)) {
    return absl::InvalidArgumentError("spool: a shift below seq 1");
  }
  // Write the renumbered copies in an order that never overwrites a batch
  // not yet moved, then drop the old names.
  if (delta > 0) std::reverse(all.begin(), all.end());
  for (auto& b : all) {
    const uint64_t old_seq = b.seq();
    b.set_seq(old_seq + static_cast<uint64_t>(delta));
    if (b.has_dropped()) {
      b.mutable_dropped()->set_last_seq(b.dropped().last_seq() + static_cast<uint64_t>(delta));
    }
    bytes_ -= index_.at(old_seq).bytes;
    index_.erase(old_seq);
    SPINTUNE_RETURN_IF_ERROR(Put(b));
    if (index_.count(old_seq) == 0) ::unlink(PathOf(old_seq).c_str());
  }
  if (delta < 0 && last_seq_floor_ > 0) {  // the sequence restarts lower
    ::unlink((dir_ + "/last_seq").c_str());
    last_seq_floor_ = 0;
  }
  return absl::OkStatus();
}

}  // namespace spintune
