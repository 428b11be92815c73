#include "storage/delta_codec.h"

#include <cassert>
#include <cmath>
#include <limits>

#include "absl/base/casts.h"
#include "absl/base/internal/endian.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "storage/histogram_codec.h"
#include "models/varint.h"

namespace spintune {
namespace {

void PutBytes(std::string* out, absl::string_view bytes) {
  PutVarint(out, bytes.size());
  out->append(bytes.data(), bytes.size());
}

void PutHistogram(std::string* out, const LatencyHistogram& h) {
  PutVarint(out, EncodedHistogramBytes(h));
  AppendHistogram(out, h);
}

void PutKey(std::string* out, const PolicyKey& key) {
  PutBytes(out, key.cpu_class);
  PutBytes(out, key.device);
  PutVarint(out, key.opcode);
  PutVarint(out, key.size_class);
}

void PutDouble(std::string* out, double v) {
  char bytes[8];
  absl::little_endian::Store64(bytes, absl::bit_cast<uint64_t>(v));
  out->append(bytes, 8);
}

absl::Status Malformed(absl::string_view what) {
  return absl::DataLossError(absl::StrCat("pending delta: ", what));
}

bool GetBytes(absl::string_view* in, absl::string_view* bytes) {
  uint64_t n = 0;
  if (!GetVarint(in, &n) || n > in->size()) return false;
  *bytes = in->substr(0, n);
  in->remove_prefix(n);
  return true;
}

absl::StatusOr<LatencyHistogram> GetHistogram(absl::string_view* in) {
  absl::string_view bytes;
  if (!GetBytes(in, &bytes)) return Malformed("truncated histogram");
  return DecodeHistogram(bytes);
}

absl::StatusOr<uint32_t> GetU32(absl::string_view* in) {
  uint64_t v = 0;
  if (!GetVarint(in, &v) || v > std::numeric_limits<uint32_t>::max()) {
    return Malformed("bad 32-bit field");
  }
  return static_cast<uint32_t>(v);
}

absl::StatusOr<uint64_t> GetU64(absl::string_view* in) {
  uint64_t v = 0;
  if (!GetVarint(in, &v)) return Malformed("bad varint");
  return v;
}

absl::StatusOr<std::string> GetString(absl::string_view* in) {
  absl::string_view bytes;
  if (!GetBytes(in, &bytes)) return Malformed("truncated string");
  return std::string(bytes);
}

absl::StatusOr<PolicyKey> GetKey(absl::string_view* in) {
  PolicyKey key;
  SPINTUNE_ASSIGN_OR_RETURN(key.cpu_class, GetString(in));
  SPINTUNE_ASSIGN_OR_RETURN(key.device, GetString(in));
  SPINTUNE_ASSIGN_OR_RETURN(key.opcode, GetU32(in));
  SPINTUNE_ASSIGN_OR_RETURN(key.size_class, GetU32(in));
  return key;
}

absl::StatusOr<double> GetDouble(absl::string_view* in) {
  if (in->size() < 8) return Malformed("truncated number");
  const double v = absl::bit_cast<double>(absl::little_endian::Load64(in->data()));
  in->remove_prefix(8);
  if (!std::isfinite(v)) return Malformed("not a finite number");
  return v;
}

std::string Encode(const BatchDelta& delta, const EncodedKeyHistograms* key_histograms) {
  std::string out;
  out.reserve(256 + 32 * delta.keys.size() +
              (key_histograms != nullptr ? key_histograms->bytes.size() : 0));
  out.push_back('\x02');
  PutVarint(&out, delta.keys.size());
  for (size_t i = 0; i < delta.keys.size(); ++i) {
    const KeyEvidence& k = delta.keys[i];
    PutKey(&out, k.key);
    for (uint64_t v : {k.errors, k.irq_timeouts, k.spin_timeouts, k.irq_path, k.spin_path}) {
      PutVarint(&out, v);
    }
    if (key_histograms != nullptr) {
      const size_t begin = i == 0 ? 0 : key_histograms->ends[i - 1];
      PutBytes(&out, absl::string_view(key_histograms->bytes)
                         .substr(begin, key_histograms->ends[i] - begin));
    } else {
      PutHistogram(&out, k.histogram);
    }
  }
  PutVarint(&out, delta.dispatch.size());
  for (const auto& d : delta.dispatch) {
    PutBytes(&out, d.cpu_class);
    PutBytes(&out, d.device);
    PutHistogram(&out, d.handler);
    PutHistogram(&out, d.wake);
  }
  PutVarint(&out, delta.outcomes.size());
  for (const auto& o : delta.outcomes) {
    PutKey(&out, o.key);
    PutVarint(&out, o.version);
    PutVarint(&out, static_cast<uint64_t>(o.arm));
    PutVarint(&out, o.moments.requests);
    for (double v : {o.moments.cpu_ns_sum, o.moments.latency_ns_sum, o.moments.cpu_ns_sq_sum,
                     o.moments.latency_ns_sq_sum, o.moments.cpu_latency_ns_sum}) {
      PutDouble(&out, v);
    }
  }
  PutVarint(&out, delta.timers.size());
  for (const auto& t : delta.timers) {
    PutBytes(&out, t.cpu_class);
    PutHistogram(&out, t.oversleep);
  }
  PutVarint(&out, delta.completion_samples);
  PutVarint(&out, delta.dispatch_samples);
  return out;
}

}  // namespace

std::string EncodeBatchDelta(const BatchDelta& delta) { return Encode(delta, nullptr); }

std::string EncodeBatchDelta(const BatchDelta& delta, const EncodedKeyHistograms& key_histograms) {
  assert(key_histograms.ends.size() == delta.keys.size());
  return Encode(delta, &key_histograms);
}

absl::StatusOr<BatchDelta> DecodeBatchDelta(absl::string_view in) {
  if (in.empty() || (in[0] != '\x01' && in[0] != '\x02')) return Malformed("unknown version");
  const bool has_arms = in[0] == '\x02';  // version 1: every outcome on the table arm
  in.remove_prefix(1);
  BatchDelta delta;
  SPINTUNE_ASSIGN_OR_RETURN(uint64_t keys, GetU64(&in));
  if (keys > in.size()) return Malformed("key count");
  delta.keys.resize(keys);
  for (auto& k : delta.keys) {
    SPINTUNE_ASSIGN_OR_RETURN(k.key, GetKey(&in));
    for (uint64_t* v : {&k.errors, &k.irq_timeouts, &k.spin_timeouts, &k.irq_path, &k.spin_path}) {
      SPINTUNE_ASSIGN_OR_RETURN(*v, GetU64(&in));
    }
    SPINTUNE_ASSIGN_OR_RETURN(k.histogram, GetHistogram(&in));
  }
  SPINTUNE_ASSIGN_OR_RETURN(uint64_t dispatch, GetU64(&in));
  if (dispatch > in.size()) return Malformed("dispatch count");
  delta.dispatch.resize(dispatch);
  for (auto& d : delta.dispatch) {
    SPINTUNE_ASSIGN_OR_RETURN(d.cpu_class, GetString(&in));
    SPINTUNE_ASSIGN_OR_RETURN(d.device, GetString(&in));
    SPINTUNE_ASSIGN_OR_RETURN(d.handler, GetHistogram(&in));
    SPINTUNE_ASSIGN_OR_RETURN(d.wake, GetHistogram(&in));
  }
  SPINTUNE_ASSIGN_OR_RETURN(uint64_t outcomes, GetU64(&in));
  if (outcomes > in.size()) return Malformed("outcome count");
  delta.outcomes.resize(outcomes);
  for (auto& o : delta.outcomes) {
    SPINTUNE_ASSIGN_OR_RETURN(o.key, GetKey(&in));
    SPINTUNE_ASSIGN_OR_RETURN(o.version, GetU64(&in));
    if (has_arms) {
      SPINTUNE_ASSIGN_OR_RETURN(uint64_t arm, GetU64(&in));
      if (arm > 1) return Malformed("outcome arm");
      o.arm = static_cast<OutcomeArm>(arm);
    }
    SPINTUNE_ASSIGN_OR_RETURN(o.moments.requests, GetU64(&in));
    for (double* v : {&o.moments.cpu_ns_sum, &o.moments.latency_ns_sum, &o.moments.cpu_ns_sq_sum,
                      &o.moments.latency_ns_sq_sum, &o.moments.cpu_latency_ns_sum}) {
      SPINTUNE_ASSIGN_OR_RETURN(*v, GetDouble(&in));
    }
  }
  SPINTUNE_ASSIGN_OR_RETURN(uint64_t timers, GetU64(&in));
  if (timers > in.size()) return Malformed("timer count");
  delta.timers.resize(timers);
  for (auto& t : delta.timers) {
    SPINTUNE_ASSIGN_OR_RETURN(t.cpu_class, GetString(&in));
    SPINTUNE_ASSIGN_OR_RETURN(t.oversleep, GetHistogram(&in));
  }
  SPINTUNE_ASSIGN_OR_RETURN(delta.completion_samples, GetU64(&in));
  SPINTUNE_ASSIGN_OR_RETURN(delta.dispatch_samples, GetU64(&in));
  if (!in.empty()) return Malformed("trailing bytes");
  return delta;
}

}  // namespace spintune
