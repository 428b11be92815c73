#include "models/context_features.h"

#include <algorithm>
#include <functional>
#include <numeric>
#include <queue>

#include "absl/strings/str_cat.h"

namespace spintune {

absl::string_view ContextFeatureName(ContextFeature feature) {
  switch (feature) {
    case ContextFeature::kPrevWaitNs:
      return "prev_wait_ns";
    case ContextFeature::kSinceWriteNs:
      return "since_write_ns";
    case ContextFeature::kInflight:
      return "inflight";
    case ContextFeature::kBytes:
      return "bytes";
  }
  return "invalid";
}

absl::StatusOr<ContextFeature> ParseContextFeature(absl::string_view name) {
  for (int f = 0; f < kContextFeatureCount; ++f) {
    if (ContextFeatureName(static_cast<ContextFeature>(f)) == name) {
      return static_cast<ContextFeature>(f);
    }
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown context feature '", name,
      "' (expected prev_wait_ns, since_write_ns, inflight or bytes)"));
}

std::vector<ContextVector> ComputeContext(absl::Span<const DeviceRequest> requests) {
  const size_t n = requests.size();
  auto done = [&](size_t i) { return requests[i].issue_ns + requests[i].wait_ns; };
  std::vector<size_t> by_issue(n), by_done(n);
  std::iota(by_issue.begin(), by_issue.end(), 0);
  std::iota(by_done.begin(), by_done.end(), 0);
  std::stable_sort(by_issue.begin(), by_issue.end(), [&](size_t a, size_t b) {
    return requests[a].issue_ns < requests[b].issue_ns;
  });
  std::stable_sort(by_done.begin(), by_done.end(),
                   [&](size_t a, size_t b) { return done(a) < done(b); });

  std::vector<ContextVector> out(n);
  std::priority_queue<uint64_t, std::vector<uint64_t>, std::greater<>> in_flight;
  uint64_t prev_wait_ns = 0;
  bool wrote = false;
  uint64_t last_write_done_ns = 0;
  size_t next_done = 0;
  for (size_t i : by_issue) {
    const uint64_t t = requests[i].issue_ns;
    for (; next_done < n && done(by_done[next_done]) <= t; ++next_done) {
      const DeviceRequest& c = requests[by_done[next_done]];
      prev_wait_ns = c.wait_ns;
      if (c.write) {
        wrote = true;
        last_write_done_ns = done(by_done[next_done]);
      }
    }
    while (!in_flight.empty() && in_flight.top() <= t) in_flight.pop();
    ContextVector& f = out[i];
    f[static_cast<int>(ContextFeature::kPrevWaitNs)] = prev_wait_ns;
    f[static_cast<int>(ContextFeature::kSinceWriteNs)] =
        wrote ? t - last_write_done_ns : kNoWriteYet;
    f[static_cast<int>(ContextFeature::kInflight)] = in_flight.size();
    f[static_cast<int>(ContextFeature::kBytes)] = requests[i].bytes;
    in_flight.push(done(i));
  }
  return out;
}

const std::vector<uint32_t>& DefaultWriteOpcodes() {
  static const std::vector<uint32_t> kOpcodes = {1, 24, 25};
  return kOpcodes;
}

}  // namespace spintune
