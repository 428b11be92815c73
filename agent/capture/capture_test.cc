// The capture choice (no root needed for most): mode names, `auto` falling
// back when the availability probe says no BPF or no BTF, a named mode the
// kernel does not allow refused with the reason, and the BPF program's
// bucket arithmetic against models/latency_histogram.
#include "agent/capture/capture.h"

#include <unistd.h>

#include <random>

#include "agent/capture/bpf/bpf_capture.h"
#include "agent/live_trace.h"
#include "gtest/gtest.h"
#include "models/latency_histogram.h"
#include "policy/default_rule.h"

namespace spintune {
namespace {

using __u32 = uint32_t;
using __u64 = uint64_t;
#include "agent/capture/bpf/histogram_bits.h"

TEST(CaptureModeTest, NamesRoundTrip) {
  for (CaptureMode m : {CaptureMode::kAuto, CaptureMode::kBpf, CaptureMode::kRaw, CaptureMode::kText}) {
    auto parsed = ParseCaptureMode(CaptureModeName(m));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, m);
  }
  auto bad = ParseCaptureMode("ebpf");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(bad.status().message()).find("auto, bpf, raw or text"), std::string::npos);
}

TEST(HistogramBitsTest, BpfBucketsAreTheModelsBuckets) {
  std::mt19937_64 rng(7);
  std::vector<uint64_t> values;
  for (uint64_t v = 0; v < 70000; ++v) values.push_back(v);
  for (int e = 8; e < 64; ++e) {
    const uint64_t p = uint64_t{1} << e;
    for (uint64_t v : {p - 1, p, p + 1, p + p / 2}) values.push_back(v);
  }
  for (int i = 0; i < 200000; ++i) values.push_back(rng() >> (rng() % 64));
  values.push_back(~uint64_t{0});
  for (uint64_t v : values) {
    ASSERT_EQ(static_cast<int>(stc_bucket_index(v)), LatencyHistogram::BucketIndex(v)) << v;
    ASSERT_EQ(stc_size_class(v), SizeClassOf(v)) << v;
  }
  EXPECT_EQ(STC_BUCKET_COUNT, LatencyHistogram::kBucketCount);
  EXPECT_EQ(STC_MAX_VALUE_NS, LatencyHistogram::kMaxValueNs);
}

CaptureSupport Everything() {
  CaptureSupport s;
  s.bpf_built = s.bpf_syscall = s.btf = s.tracefs = s.raw_pipe = true;
  return s;
}

TEST(OpenCaptureTest, ANamedModeTheKernelRefusesSaysWhy) {
  CaptureConfig config;
  config.devices = {"vda"};
  auto no_btf = [] {
    CaptureSupport s = Everything();
    s.btf = false;
    s.detail = "no BTF at /sys/kernel/btf/vmlinux (CONFIG_DEBUG_INFO_BTF)";
    return s;
  };
  auto c = OpenCapture(CaptureMode::kBpf, config, no_btf);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(std::string(c.status().message()).find("no BTF"), std::string::npos) << c.status();

  auto no_raw = [] {
    CaptureSupport s = Everything();
    s.raw_pipe = false;
    s.detail = "no per-CPU trace_pipe_raw";
    return s;
  };
  c = OpenCapture(CaptureMode::kRaw, config, no_raw);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(std::string(c.status().message()).find("trace_pipe_raw"), std::string::npos);
}

// --capture-windows ON/EVERY: the same rules as --wake-windows, its own
// flag in the message.
TEST(OpenCaptureTest, CaptureWindowsParseAndNameTheirFlag) {
  auto windows = ParseWindows("1s/10s", "--capture-windows");
  ASSERT_TRUE(windows.ok()) << windows.status();
  EXPECT_EQ(windows->on, absl::Seconds(1));
  EXPECT_EQ(CaptureDrain(*windows), absl::Milliseconds(200));
  EXPECT_EQ(CaptureDrain(*ParseWindows("900ms/1s", "--capture-windows")), absl::Milliseconds(50))
      << "at most half the time between windows";
  EXPECT_FALSE(ParseWindows("2s/1s", "--capture-windows").ok());
  EXPECT_NE(std::string(ParseWindows("x", "--capture-windows").status().message())
                .find("--capture-windows 'x'"),
            std::string::npos);
}

// The rest opens real captures: root and tracefs.
class AutoFallbackTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "opening a capture needs root";
    const CaptureSupport real = ProbeCaptureSupport();
    if (!real.tracefs || !real.raw_pipe) GTEST_SKIP() << "no tracefs: " << real.detail;
    disk_ = DiskOf("/var/tmp/");
    if (disk_.empty()) GTEST_SKIP() << "no block disk behind /var/tmp";
    config_.devices = {disk_};
  }
  std::string disk_;
  CaptureConfig config_;
};

TEST_F(AutoFallbackTest, NoBpfOrNoBtfFallsBackToRaw) {
  for (int which = 0; which < 2; ++which) {
    auto probe = [which] {
      CaptureSupport s = Everything();
      (which == 0 ? s.bpf_syscall : s.btf) = false;
      s.detail = which == 0 ? "bpf() refused: Operation not permitted" : "no BTF";
      return s;
    };
    auto c = OpenCapture(CaptureMode::kAuto, config_, probe);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_STREQ((*c)->mode(), "raw");
  }
}

TEST_F(AutoFallbackTest, NeitherBpfNorRawFallsBackToText) {
  auto probe = [] {
    CaptureSupport s = Everything();
    s.btf = false;
    s.raw_pipe = false;
    s.detail = "no BTF; no per-CPU trace_pipe_raw";
    return s;
  };
  auto c = OpenCapture(CaptureMode::kAuto, config_, probe);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_STREQ((*c)->mode(), "text");
}

TEST_F(AutoFallbackTest, AutoTakesBpfWhereTheKernelAllowsIt) {
  const CaptureSupport real = ProbeCaptureSupport();
  if (!real.bpf_built || !real.bpf_syscall || !real.btf) GTEST_SKIP() << "no bpf: " << real.detail;
  auto c = OpenCapture(CaptureMode::kAuto, config_);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_STREQ((*c)->mode(), "bpf");
  // --pairs events need the correlator: auto passes over bpf, bpf refuses.
  CaptureConfig with_pairs = config_;
  EventPair p;
  p.name = "vendor0";
  p.start_event = "block_rq_issue";
  p.end_event = "block_rq_complete";
  p.match_fields = {"sector"};
  with_pairs.correlator.pairs = {p};
  with_pairs.devices.insert("vendor0");
  auto refused = OpenCapture(CaptureMode::kBpf, with_pairs);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace spintune
