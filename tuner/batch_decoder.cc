#include "tuner/batch_decoder.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "absl/base/optimization.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "policy/default_rule.h"
#include "policy/policy_proto.h"
#include "storage/delta_codec.h"
#include "storage/histogram_codec.h"

namespace spintune {
namespace {

absl::Status Invalid(absl::string_view field, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", message));
}

// Free text (may be empty): bounded, no control characters (it reaches the
// log, the database and terminals).
absl::Status CheckText(const std::string& text, absl::string_view field, size_t max_bytes) {
  if (text.size() > max_bytes) {
    return Invalid(field, absl::StrCat("longer than ", max_bytes, " bytes"));
  }
  for (unsigned char ch : text) {
    if (ch < 0x20 || ch == 0x7F) return Invalid(field, "contains control characters");
  }
  return absl::OkStatus();
}

absl::Status CheckName(const std::string& name, absl::string_view field, size_t max_bytes) {
  if (name.empty()) return Invalid(field, "must not be empty");
  if (name.size() > max_bytes) {
    return Invalid(field, absl::StrCat("longer than ", max_bytes, " bytes"));
  }
  for (unsigned char ch : name) {
    if (ch < 0x20 || ch == 0x7F) return Invalid(field, "contains control characters");
  }
  return absl::OkStatus();
}

// Checks a HistogramDelta and adds it to `into`, or, with `encoded`,
// encodes it there for staging instead (storage/histogram_codec.h); returns
// its count. `field` names it in errors. On an error `into` or `encoded`
// holds part of it. Either form of the buckets (docs/protocol.md): the
// arrays, or `buckets` in the staging encoding, appended to `encoded` as
// they came once checked.
absl::StatusOr<uint64_t> AddHistogramDelta(const v1::HistogramDelta& h,
                                           absl::FunctionRef<std::string()> field,
                                           LatencyHistogram* into, std::string* encoded = nullptr) {
  uint64_t count = 0;
  unsigned __int128 low_ns = 0, high_ns = 0;  // bounds of the sum the buckets allow
  // Bucket `b` with `c` (1..kMaxHistogramCount) samples.
  auto add = [&](int b, uint64_t c) {
    count += c;
    low_ns += static_cast<unsigned __int128>(LatencyHistogram::BucketLowerNs(b)) * c;
    high_ns += static_cast<unsigned __int128>(LatencyHistogram::BucketUpperNs(b)) * c;
  };
  auto bad_count = [&](absl::string_view where, int i) {
    return Invalid(absl::StrCat(field(), where, "[", i, "]"),
                   absl::StrCat("must be 1..", kMaxHistogramCount));
  };
  const int n = h.bucket_index_size();
  if (!h.buckets().empty()) {
    if (n != 0 || h.bucket_count_size() != 0) {
      return Invalid(field(), "buckets and bucket_index/bucket_count are exclusive");
    }
    if (h.buckets()[0] != '\x02') {
      return Invalid(field() + ".buckets", "must start with the version byte 2");
    }
    HistogramReader reader(h.buckets());
    if (encoded == nullptr) into->Reserve(into->buckets().size() + h.buckets().size());
    int b = 0;
    uint64_t c = 0;
    for (int i = 0; reader.Next(&b, &c); ++i) {
      if (ABSL_PREDICT_FALSE(c > kMaxHistogramCount)) return bad_count(".buckets", i);
      add(b, c);
      if (encoded == nullptr) into->AddToBucket(b, c);
    }
    if (!reader.status().ok()) return Invalid(field() + ".buckets", reader.status().message());
    if (encoded != nullptr) encoded->append(h.buckets());
  } else {
    if (h.bucket_count_size() != n) {
      return Invalid(field(), "bucket_index and bucket_count differ in length");
    }
    if (n > LatencyHistogram::kBucketCount) {
      return Invalid(field(), "more buckets than the layout has");
    }
    std::optional<HistogramEncoder> encoder;
    if (encoded != nullptr) {
      encoder.emplace(encoded);
    } else {
      into->Reserve(into->buckets().size() + static_cast<size_t>(n));
    }
    uint64_t index = 0;
    for (int i = 0; i < n; ++i) {
      const uint64_t step = h.bucket_index(i);
      if (i > 0 && step == 0) {
        return Invalid(absl::StrCat(field(), ".bucket_index[", i, "]"), "indexes must increase");
      }
      index += step;
      if (index >= static_cast<uint64_t>(LatencyHistogram::kBucketCount)) {
        return Invalid(absl::StrCat(field(), ".bucket_index[", i, "]"), "beyond the last bucket");
      }
      const uint64_t c = h.bucket_count(i);
      if (c == 0 || c > kMaxHistogramCount) return bad_count(".bucket_count", i);
      const int b = static_cast<int>(index);
      add(b, c);
      if (encoder) {
        encoder->Add(b, c);
      } else {
        into->AddToBucket(b, c);
      }
    }
  }
  if (count != h.count()) return Invalid(field() + ".count", "differs from the sum of the buckets");
  if (count > kMaxHistogramCount) return Invalid(field() + ".count", "too many samples");
  if (h.sum_ns() < low_ns || h.sum_ns() > high_ns) {
    return Invalid(field() + ".sum_ns", "outside what the buckets allow");
  }
  return count;
}

// Counts samples' bucket indexes into histograms with one AddToBucket per
// distinct index (a sparse histogram's Record() per sample costs a search
// and an insert): a dense count per bucket, then the touched buckets in
// order.
class BucketCounter {
 public:
  void AddTo(const std::vector<uint32_t>& indexes, LatencyHistogram* into) {
    if (counts_.empty()) counts_.assign(LatencyHistogram::kBucketCount, 0);
    touched_.clear();
    for (uint32_t i : indexes) {
      if (counts_[i]++ == 0) touched_.push_back(i);
    }
    std::sort(touched_.begin(), touched_.end());
    for (uint32_t i : touched_) {
      into->AddToBucket(static_cast<int>(i), counts_[i]);
      counts_[i] = 0;
    }
  }

 private:
  std::vector<uint64_t> counts_;  // all 0 between calls
  std::vector<uint32_t> touched_;
};

}  // namespace

absl::StatusOr<TargetRecord> DecodeHello(const v1::Hello& hello) {
  TargetRecord r;
  SPINTUNE_RETURN_IF_ERROR(CheckName(hello.agent_id(), "hello.agent_id", kMaxNameBytes));
  SPINTUNE_RETURN_IF_ERROR(CheckName(hello.target().board(), "hello.target.board", kMaxNameBytes));
  SPINTUNE_RETURN_IF_ERROR(
      CheckText(hello.target().cpu_model(), "hello.target.cpu_model", kMaxNameBytes));
  SPINTUNE_RETURN_IF_ERROR(
      CheckText(hello.target().kernel_release(), "hello.target.kernel_release", kMaxNameBytes));
  SPINTUNE_RETURN_IF_ERROR(CheckText(hello.agent_version(), "hello.agent_version", kMaxNameBytes));
  r.agent_id = hello.agent_id();
  r.board = hello.target().board();
  r.cpu_model = hello.target().cpu_model();
  r.kernel_release = hello.target().kernel_release();
  r.agent_version = hello.agent_version();
  r.max_blob_format = hello.max_blob_format();

  const auto& classes = hello.target().cpu_classes();
  if (classes.empty() || classes.size() > kMaxCpuClasses) {
    return Invalid("hello.target.cpu_classes", absl::StrCat("needs 1..", kMaxCpuClasses, " classes"));
  }
  std::set<std::string> class_names;
  for (int i = 0; i < classes.size(); ++i) {
    const std::string field = absl::StrCat("hello.target.cpu_classes[", i, "]");
    const auto& c = classes[i];
    SPINTUNE_RETURN_IF_ERROR(CheckName(c.name(), field + ".name", 64));
    if (c.name() == "*") return Invalid(field + ".name", "'*' is reserved");
    if (!class_names.insert(c.name()).second) return Invalid(field + ".name", "duplicate");
    if (c.cpu_khz() > 1'000'000'000) return Invalid(field + ".cpu_khz", "above 1 THz");
    CpuClassRecord rec;
    rec.name = c.name();
    rec.cpu_khz = c.cpu_khz();
    rec.declared = CostsFromProto(c.costs());
    absl::Status s = rec.declared.Validate();
    if (!s.ok()) return Invalid(field + ".costs", s.message());
    if (c.costs().irq_overhead_cpu_ns() > c.costs().irq_cpu_ns()) {
      return Invalid(field + ".costs.irq_overhead_cpu_ns", "exceeds irq_cpu_ns");
    }
    rec.irq_overhead_cpu_ns = static_cast<double>(c.costs().irq_overhead_cpu_ns());
    r.cpu_classes.push_back(std::move(rec));
  }

  if (hello.devices().empty() || hello.devices_size() > kMaxDevices) {
    return Invalid("hello.devices", absl::StrCat("needs 1..", kMaxDevices, " devices"));
  }
  auto devices = DevicesFromHello(hello);
  if (!devices.ok()) return devices.status();
  std::set<std::string> device_names;
  for (int i = 0; i < hello.devices_size(); ++i) {
    const std::string field = absl::StrCat("hello.devices[", i, "]");
    // The blob stores the name in 32 bytes with a terminator.
    SPINTUNE_RETURN_IF_ERROR(CheckName(hello.devices(i).name(), field + ".name", 31));
    if (!device_names.insert(hello.devices(i).name()).second) {
      return Invalid(field + ".name", "duplicate");
    }
    SPINTUNE_RETURN_IF_ERROR(CheckText(hello.devices(i).driver(), field + ".driver", kMaxNameBytes));
    SPINTUNE_RETURN_IF_ERROR(CheckText(hello.devices(i).model(), field + ".model", kMaxNameBytes));
    if (hello.devices(i).default_rules_size() > 64) {
      return Invalid(field + ".default_rules", "more than 64 rules");
    }
    for (int k = 0; k < hello.devices(i).default_rules_size(); ++k) {
      SPINTUNE_RETURN_IF_ERROR(CheckText(hello.devices(i).default_rules(k).note(),
                                         absl::StrCat(field, ".default_rules[", k, "].note"),
                                         kMaxNameBytes));
    }
  }
  r.devices = std::move(*devices);
  return r;
}

namespace {

// DecodeBatch into `delta`; with `encoded`, each histogram delta's key is
// appended to delta.keys in the batch's order with its histogram encoded
// in `encoded` instead (REQUIRES then: no sample columns, each key once).
absl::Status DecodeInto(const v1::SampleBatch& batch, const v1::Hello& hello, BatchDelta& delta,
                        EncodedKeyHistograms* encoded) {
  if (batch.seq() == 0) return Invalid("batch.seq", "must be >= 1");
  delta.seq = batch.seq();
  const auto& c = batch.completions();
  const int n = c.wait_ns_size();
  if (n > kMaxCompletionsPerBatch) {
    return Invalid("completions", absl::StrCat(n, " samples, more than ", kMaxCompletionsPerBatch));
  }
  if (c.device_index_size() != n || c.cpu_class_index_size() != n || c.opcode_size() != n ||
      c.bytes_size() != n || c.path_size() != n || c.flags_size() != n) {
    return Invalid("completions", "columns have different lengths");
  }
  const int classes = hello.target().cpu_classes_size();
  const int devices = hello.devices_size();
  using KeyTuple = std::tuple<uint32_t, uint32_t, uint32_t, uint32_t>;
  std::map<KeyTuple, KeyEvidence> keys;
  // Per key of the columns: its evidence and its samples' bucket indexes,
  // counted into the histogram once at the end.
  struct ColumnKey {
    KeyEvidence* evidence;
    std::vector<uint32_t> buckets;
  };
  absl::flat_hash_map<KeyTuple, ColumnKey> column_keys;
  for (int i = 0; i < n; ++i) {
    if (c.device_index(i) >= static_cast<uint32_t>(devices)) {
      return Invalid(absl::StrCat("completions.device_index[", i, "]"), "no such device");
    }
    if (c.cpu_class_index(i) >= static_cast<uint32_t>(classes)) {
      return Invalid(absl::StrCat("completions.cpu_class_index[", i, "]"), "no such cpu class");
    }
    if (c.opcode(i) == 0xFFFFFFFFu) {
      return Invalid(absl::StrCat("completions.opcode[", i, "]"), "0xFFFFFFFF is reserved");
    }
    if (c.wait_ns(i) > LatencyHistogram::kMaxValueNs) {
      return Invalid(absl::StrCat("completions.wait_ns[", i, "]"),
                     absl::StrCat(c.wait_ns(i), " ns is beyond the histogram range"));
    }
    if (!v1::WaitPath_IsValid(c.path(i))) {
      return Invalid(absl::StrCat("completions.path[", i, "]"), "unknown wait path");
    }
    if (c.flags(i) > 3) {
      return Invalid(absl::StrCat("completions.flags[", i, "]"), "unknown flag bits");
    }
    const KeyTuple k{c.device_index(i), c.cpu_class_index(i), c.opcode(i),
                     SizeClassOf(c.bytes(i))};
    ColumnKey& ck = column_keys[k];
    if (ck.evidence == nullptr) {
      ck.evidence = &keys[k];
      ck.evidence->key = {hello.target().cpu_classes(c.cpu_class_index(i)).name(),
                          hello.devices(c.device_index(i)).name(), c.opcode(i), std::get<3>(k)};
    }
    KeyEvidence& e = *ck.evidence;
    ck.buckets.push_back(static_cast<uint32_t>(LatencyHistogram::BucketIndex(c.wait_ns(i))));
    const bool irq = c.path(i) == v1::WAIT_PATH_IRQ;
    const bool spin = c.path(i) == v1::WAIT_PATH_SPIN;
    if (c.flags(i) & 1) ++e.errors;
    if (c.flags(i) & 2) {
      if (irq) ++e.irq_timeouts;
      if (spin) ++e.spin_timeouts;
    }
    if (irq) ++e.irq_path;
    if (spin) ++e.spin_path;
  }
  BucketCounter counter;
  for (auto& [k, ck] : column_keys) counter.AddTo(ck.buckets, &ck.evidence->histogram);
  delta.completion_samples = static_cast<uint64_t>(n);

  if (batch.histograms_size() > kMaxHistogramsPerBatch) {
    return Invalid("histograms", absl::StrCat("more than ", kMaxHistogramsPerBatch, " keys"));
  }
  if (encoded != nullptr) delta.keys.reserve(static_cast<size_t>(batch.histograms_size()));
  for (int i = 0; i < batch.histograms_size(); ++i) {
    const v1::KeyHistogram& h = batch.histograms(i);
    auto field = [i] { return absl::StrCat("histograms[", i, "]"); };
    if (h.device_index() >= static_cast<uint32_t>(devices)) {
      return Invalid(field() + ".device_index", "no such device");
    }
    if (h.cpu_class_index() >= static_cast<uint32_t>(classes)) {
      return Invalid(field() + ".cpu_class_index", "no such cpu class");
    }
    if (h.opcode() == 0xFFFFFFFFu) return Invalid(field() + ".opcode", "0xFFFFFFFF is reserved");
    if (h.size_class() > 64) return Invalid(field() + ".size_class", "above 64");
    const KeyTuple k{h.device_index(), h.cpu_class_index(), h.opcode(), h.size_class()};
    KeyEvidence& e = encoded != nullptr ? delta.keys.emplace_back() : keys[k];
    if (e.key.device.empty()) {
      e.key = {hello.target().cpu_classes(h.cpu_class_index()).name(),
               hello.devices(h.device_index()).name(), h.opcode(), h.size_class()};
    }
    SPINTUNE_ASSIGN_OR_RETURN(
        const uint64_t count,
        AddHistogramDelta(h.wait(), [&] { return field() + ".wait"; }, &e.histogram,
                          encoded != nullptr ? &encoded->bytes : nullptr));
    if (encoded != nullptr) encoded->ends.push_back(encoded->bytes.size());
    if (h.irq_path() + h.spin_path() > count || h.errors() > count ||
        h.irq_timeouts() > h.irq_path() || h.spin_timeouts() > h.spin_path()) {
      return Invalid(field(), "path, error or timeout counts exceed the samples");
    }
    e.irq_path += h.irq_path();
    e.spin_path += h.spin_path();
    e.errors += h.errors();
    e.irq_timeouts += h.irq_timeouts();
    e.spin_timeouts += h.spin_timeouts();
    delta.completion_samples += count;
  }
  for (auto& [k, e] : keys) delta.keys.push_back(std::move(e));

  const auto& d = batch.dispatches();
  const int m = d.handler_ns_size();
  if (m > kMaxCompletionsPerBatch) return Invalid("dispatches", "too many samples");
  if (d.cpu_class_index_size() != m || d.device_index_size() != m || d.wake_ns_size() != m) {
    return Invalid("dispatches", "columns have different lengths");
  }
  std::map<std::pair<uint32_t, uint32_t>, DispatchRecord> dispatch;
  // Per (cpu class, device) of the columns: its record and its samples'
  // handler and wake bucket indexes, counted in at the end.
  struct ColumnDispatch {
    DispatchRecord* record;
    std::vector<uint32_t> handler, wake;
  };
  absl::flat_hash_map<std::pair<uint32_t, uint32_t>, ColumnDispatch> column_dispatch;
  for (int i = 0; i < m; ++i) {
    if (d.cpu_class_index(i) >= static_cast<uint32_t>(classes)) {
      return Invalid(absl::StrCat("dispatches.cpu_class_index[", i, "]"), "no such cpu class");
    }
    if (d.device_index(i) >= static_cast<uint32_t>(devices)) {
      return Invalid(absl::StrCat("dispatches.device_index[", i, "]"), "no such device");
    }
    if (d.handler_ns(i) > LatencyHistogram::kMaxValueNs || d.wake_ns(i) > LatencyHistogram::kMaxValueNs) {
      return Invalid(absl::StrCat("dispatches[", i, "]"), "beyond the histogram range");
    }
    const std::pair<uint32_t, uint32_t> k{d.cpu_class_index(i), d.device_index(i)};
    ColumnDispatch& cd = column_dispatch[k];
    if (cd.record == nullptr) {
      cd.record = &dispatch[k];
      cd.record->cpu_class = hello.target().cpu_classes(d.cpu_class_index(i)).name();
      cd.record->device = hello.devices(d.device_index(i)).name();
    }
    cd.handler.push_back(static_cast<uint32_t>(LatencyHistogram::BucketIndex(d.handler_ns(i))));
    if (d.wake_ns(i) > 0) {  // 0: not measured
      cd.wake.push_back(static_cast<uint32_t>(LatencyHistogram::BucketIndex(d.wake_ns(i))));
    }
  }
  for (auto& [k, cd] : column_dispatch) {
    counter.AddTo(cd.handler, &cd.record->handler);
    counter.AddTo(cd.wake, &cd.record->wake);
  }
  delta.dispatch_samples = static_cast<uint64_t>(m);
  if (batch.dispatch_histograms_size() > kMaxCpuClasses * kMaxDevices) {
    return Invalid("dispatch_histograms", "more entries than CPU classes x devices");
  }
  for (int i = 0; i < batch.dispatch_histograms_size(); ++i) {
    const v1::DispatchHistogram& h = batch.dispatch_histograms(i);
    auto field = [i] { return absl::StrCat("dispatch_histograms[", i, "]"); };
    if (h.cpu_class_index() >= static_cast<uint32_t>(classes)) {
      return Invalid(field() + ".cpu_class_index", "no such cpu class");
    }
    if (h.device_index() >= static_cast<uint32_t>(devices)) {
      return Invalid(field() + ".device_index", "no such device");
    }
    DispatchRecord& r = dispatch[{h.cpu_class_index(), h.device_index()}];
    if (r.device.empty()) {
      r.cpu_class = hello.target().cpu_classes(h.cpu_class_index()).name();
      r.device = hello.devices(h.device_index()).name();
    }
    SPINTUNE_ASSIGN_OR_RETURN(const uint64_t handlers,
                              AddHistogramDelta(h.handler(), [&] { return field() + ".handler"; }, &r.handler));
    // A wake is measured after its handler: an interval may end between them.
    SPINTUNE_RETURN_IF_ERROR(
        AddHistogramDelta(h.wake(), [&] { return field() + ".wake"; }, &r.wake).status());
    delta.dispatch_samples += handlers;
  }
  for (auto& [k, r] : dispatch) delta.dispatch.push_back(std::move(r));

  if (batch.outcomes_size() > kMaxHistogramsPerBatch) {
    return Invalid("outcomes", absl::StrCat("more than ", kMaxHistogramsPerBatch, " entries"));
  }
  std::set<std::tuple<uint32_t, uint32_t, uint32_t, uint32_t, uint64_t, int>> seen_outcomes;
  for (int i = 0; i < batch.outcomes_size(); ++i) {
    const v1::KeyOutcome& o = batch.outcomes(i);
    const std::string field = absl::StrCat("outcomes[", i, "]");
    if (o.device_index() >= static_cast<uint32_t>(devices)) {
      return Invalid(field + ".device_index", "no such device");
    }
    if (o.cpu_class_index() >= static_cast<uint32_t>(classes)) {
      return Invalid(field + ".cpu_class_index", "no such cpu class");
    }
    if (o.opcode() == 0xFFFFFFFFu) return Invalid(field + ".opcode", "0xFFFFFFFF is reserved");
    if (o.size_class() > 64) return Invalid(field + ".size_class", "above 64");
    if (o.policy_version() > (uint64_t{1} << 40)) {
      return Invalid(field + ".policy_version", "beyond 2^40");
    }
    if (o.requests() == 0 || o.requests() > kMaxHistogramCount) {
      return Invalid(field + ".requests", absl::StrCat("must be 1..", kMaxHistogramCount));
    }
    if (o.arm() != v1::OUTCOME_ARM_TABLE && o.arm() != v1::OUTCOME_ARM_INCUMBENT) {
      return Invalid(field + ".arm", "unknown arm");
    }
    if (!seen_outcomes
             .insert({o.device_index(), o.cpu_class_index(), o.opcode(), o.size_class(),
                      o.policy_version(), o.arm()})
             .second) {
      return Invalid(field, "a second entry for the same key, version and arm");
    }
    // Every sum finite and >= 0, each mean within an hour, and the squares
    // consistent with the sums (Cauchy-Schwarz: (sum x)^2 <= n sum x^2).
    const double n = static_cast<double>(o.requests());
    for (const auto& [name, v] :
         std::vector<std::pair<const char*, double>>{{"cpu_ns_sum", o.cpu_ns_sum()},
                                                      {"latency_ns_sum", o.latency_ns_sum()},
                                                      {"cpu_ns_sq_sum", o.cpu_ns_sq_sum()},
                                                      {"latency_ns_sq_sum", o.latency_ns_sq_sum()},
                                                      {"cpu_latency_ns_sum",
                                                       o.cpu_latency_ns_sum()}}) {
      if (!std::isfinite(v) || v < 0) return Invalid(field + "." + name, "not a finite sum >= 0");
    }
    if (o.cpu_ns_sum() / n > 3.6e12 || o.latency_ns_sum() / n > 3.6e12) {
      return Invalid(field, "a mean above one hour");
    }
    const double slack = 1 + 1e-9;
    if (o.cpu_ns_sum() * o.cpu_ns_sum() > n * o.cpu_ns_sq_sum() * slack ||
        o.latency_ns_sum() * o.latency_ns_sum() > n * o.latency_ns_sq_sum() * slack) {
      return Invalid(field, "the sums of squares do not fit the sums");
    }
    OutcomeRecord r;
    r.key = {hello.target().cpu_classes(o.cpu_class_index()).name(),
             hello.devices(o.device_index()).name(), o.opcode(), o.size_class()};
    r.version = o.policy_version();
    r.arm = o.arm() == v1::OUTCOME_ARM_INCUMBENT ? OutcomeArm::kIncumbent : OutcomeArm::kTable;
    r.moments = {o.requests(), o.cpu_ns_sum(), o.latency_ns_sum(), o.cpu_ns_sq_sum(),
                 o.latency_ns_sq_sum(), o.cpu_latency_ns_sum()};
    delta.outcomes.push_back(std::move(r));
  }
  if (batch.timer_oversleep_size() > kMaxCpuClasses) {
    return Invalid("timer_oversleep", "more entries than CPU classes");
  }
  std::set<uint32_t> seen_timers;
  for (int i = 0; i < batch.timer_oversleep_size(); ++i) {
    const v1::TimerOversleep& t = batch.timer_oversleep(i);
    const std::string field = absl::StrCat("timer_oversleep[", i, "]");
    if (t.cpu_class_index() >= static_cast<uint32_t>(classes)) {
      return Invalid(field + ".cpu_class_index", "no such cpu class");
    }
    if (!seen_timers.insert(t.cpu_class_index()).second) {
      return Invalid(field, "a second entry for the same cpu class");
    }
    TimerRecord r;
    r.cpu_class = hello.target().cpu_classes(t.cpu_class_index()).name();
    SPINTUNE_RETURN_IF_ERROR(
        AddHistogramDelta(t.oversleep(), [&] { return field + ".oversleep"; }, &r.oversleep)
            .status());
    delta.timers.push_back(std::move(r));
  }
  return absl::OkStatus();
}

// Whether `batch` can be staged with its key histograms encoded as they are
// checked: no sample columns and no key twice.
bool EncodesDirectly(const v1::SampleBatch& batch) {
  if (batch.completions().wait_ns_size() != 0) return false;
  std::vector<std::tuple<uint32_t, uint32_t, uint32_t, uint32_t>> keys;
  keys.reserve(static_cast<size_t>(batch.histograms_size()));
  for (const auto& h : batch.histograms()) {
    keys.emplace_back(h.device_index(), h.cpu_class_index(), h.opcode(), h.size_class());
  }
  std::sort(keys.begin(), keys.end());
  return std::adjacent_find(keys.begin(), keys.end()) == keys.end();
}

// What the ingest worker keeps of a staged delta: its histograms go.
void DropHistograms(BatchDelta& d) {
  for (KeyEvidence& k : d.keys) k.histogram = LatencyHistogram();
  for (DispatchRecord& r : d.dispatch) r.handler = r.wake = LatencyHistogram();
  d.timers = {};
}

}  // namespace

absl::StatusOr<BatchDelta> DecodeBatch(const v1::SampleBatch& batch, const v1::Hello& hello) {
  BatchDelta delta;
  SPINTUNE_RETURN_IF_ERROR(DecodeInto(batch, hello, delta, nullptr));
  return delta;
}

absl::StatusOr<StagedBatch> DecodeBatchForStaging(const v1::SampleBatch& batch,
                                                  const v1::Hello& hello) {
  StagedBatch out;
  if (EncodesDirectly(batch)) {
    EncodedKeyHistograms encoded;
    size_t buckets = 0;  // about a byte each (storage/histogram_codec.h)
    for (const auto& h : batch.histograms()) {
      buckets += 2 + static_cast<size_t>(h.wait().bucket_index_size()) +
                 h.wait().buckets().size();
    }
    encoded.bytes.reserve(buckets + buckets / 4);
    encoded.ends.reserve(static_cast<size_t>(batch.histograms_size()));
    SPINTUNE_RETURN_IF_ERROR(DecodeInto(batch, hello, out.delta, &encoded));
    out.staged = EncodeBatchDelta(out.delta, encoded);
  } else {
    SPINTUNE_RETURN_IF_ERROR(DecodeInto(batch, hello, out.delta, nullptr));
    out.staged = EncodeBatchDelta(out.delta);
  }
  DropHistograms(out.delta);
  return out;
}

}  // namespace spintune
