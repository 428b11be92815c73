// Replay of traces recorded on this machine's kernel (6.18, virtio-blk),
// checked in under tests/fixtures/trace, plus the skip report on junk.
#include "agent/replay_source.h"

#include <filesystem>
#include <regex>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/trace/trace_reader.h"
#include "gtest/gtest.h"
#include "tests/testing/temp_dir.h"

namespace spintune {
namespace {

namespace fs = std::filesystem;

std::string Fixture(const std::string& name) {
  return (fs::path(SPINTUNE_SOURCE_DIR) / "tests/fixtures/trace" / name).string();
}

struct Extracted {
  std::vector<CompletionEvent> completions;
  std::vector<DispatchEvent> dispatches;
  SkipReport skipped;
  CorrelatorStats stats;
  absl::Status usable;
};

Extracted Extract(const std::string& path, CorrelatorOptions options = {}) {
  Extracted out;
  auto reader = TraceReader::Open(path, std::move(options));
  EXPECT_TRUE(reader.ok()) << reader.status();
  if (!reader.ok()) return out;
  while (true) {
    auto more = (*reader)->ReadMore(7);
    EXPECT_TRUE(more.ok());
    auto& c = (*reader)->correlator().completions();
    auto& d = (*reader)->correlator().dispatches();
    out.completions.insert(out.completions.end(), c.begin(), c.end());
    out.dispatches.insert(out.dispatches.end(), d.begin(), d.end());
    c.clear();
    d.clear();
    if (!more.ok() || !*more) break;
  }
  out.skipped = (*reader)->skipped();
  out.stats = (*reader)->correlator().stats();
  out.usable = (*reader)->CheckUsable();
  return out;
}

class TempDir : public ::testing::Test {
 protected:
  std::string Write(const std::string& name, const std::string& text) {
    const std::string path = dir_.File(name);
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }
  testing::TempDir dir_;
};

TEST(FixtureTest, KernelTraceOfThisMachine) {
  const Extracted e = Extract(Fixture("virtio-6.18-trace.txt"));
  ASSERT_TRUE(e.usable.ok());
  ASSERT_EQ(e.completions.size(), 83u);
  EXPECT_EQ(e.dispatches.size(), 83u);
  EXPECT_EQ(e.stats.unpaired_ends, 0u);
  // First request: issued by bash on CPU 0 at 4690.365178, IRQ 36 entered
  // at 4690.365468 (the block_rq_complete follows in softirq at .365501).
  const CompletionEvent& first = e.completions[0];
  EXPECT_EQ(first.device, "254:0");
  EXPECT_EQ(first.opcode, 0u);  // RM: a read
  EXPECT_EQ(first.bytes, 4096u);
  EXPECT_EQ(first.wait_ns, 290'000u);
  EXPECT_EQ(first.path, TracePath::kIrq);
  EXPECT_EQ(first.cpu, 0);
  // Its IRQ: entry .365468 -> exit .365486. The waiter was not asleep yet
  // (bash switches out later), so the sample has no wake and is emitted
  // when the wake window closes, not first.
  int found = 0;
  for (const auto& d : e.dispatches) {
    EXPECT_EQ(d.irq, 36);
    EXPECT_EQ(d.irq_name, "virtio1-req.0");
    EXPECT_EQ(d.device, "254:0");
    if (d.handler_ns == 18'000u && !d.wake_ns) ++found;
  }
  EXPECT_EQ(found, 1);
  for (const auto& c : e.completions) EXPECT_EQ(c.path, TracePath::kIrq);
}

TEST(FixtureTest, TgidColumn) {
  const Extracted e = Extract(Fixture("virtio-6.18-tgid.txt"));
  ASSERT_EQ(e.completions.size(), 7u);
  // dd issues 64 KiB at 4693.526474; IRQ entry at 4693.526820.
  EXPECT_EQ(e.completions[0].bytes, 65536u);
  EXPECT_EQ(e.completions[0].wait_ns, 346'000u);
  ASSERT_FALSE(e.dispatches.empty());
  EXPECT_EQ(e.dispatches[0].handler_ns, 5'000u);  // .526820 -> .526825
}

// One capture printed three ways by trace-cmd report: default, -l and -t.
TEST(FixtureTest, TraceCmdDialectsAgree) {
  const testing::TempDir dir;
  const std::string head_path = dir.File("trace-cmd-head.txt");
  {
    std::ifstream in(Fixture("virtio-6.18-trace-cmd.txt"));
    std::ofstream out(head_path);
    std::string line;
    for (int i = 0; i < 100 && std::getline(in, line); ++i) out << line << "\n";
  }
  const Extracted plain = Extract(head_path);
  const Extracted latency = Extract(Fixture("virtio-6.18-trace-cmd-l.txt"));
  const Extracted ns = Extract(Fixture("virtio-6.18-trace-cmd-t.txt"));
  ASSERT_EQ(plain.completions.size(), 15u);
  ASSERT_EQ(latency.completions.size(), plain.completions.size());
  ASSERT_EQ(ns.completions.size(), plain.completions.size());
  for (size_t i = 0; i < plain.completions.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(latency.completions[i].wait_ns, plain.completions[i].wait_ns);
    EXPECT_EQ(latency.completions[i].opcode, plain.completions[i].opcode);
    EXPECT_EQ(ns.completions[i].bytes, plain.completions[i].bytes);
    EXPECT_EQ(ns.completions[i].path, plain.completions[i].path);
    // -t has ns; the others truncate to µs, so they differ by < 1 µs per end.
    EXPECT_NEAR(static_cast<double>(ns.completions[i].wait_ns),
                static_cast<double>(plain.completions[i].wait_ns), 1000.0);
  }
  // First: issue 4708.911758265, IRQ entry 4708.912099530 (from the -t file).
  EXPECT_EQ(ns.completions[0].wait_ns, 341'265u);
}

TEST_F(TempDir, SkipReportCountsByReasonWithLineNumbers) {
  std::string text =
      "# tracer: nop\n"
      "  dd-1 [000] ..... 1.000000: block_rq_issue: 254,0 R 4096 () 8 + 8 be,0,4 [dd]\n"
      "  dd-1 [000] ..... 1.000001: do_sys_open <-do_syscall_64\n"
      "CPU:0 [LOST 12 EVENTS]\n"
      "  dd-1 [0x0] ..... 1.000002: sched_switch: x\n"
      "  dd-1 [000] ..... 1.000003: block_rq_issue: nonsense\n"
      "  dd-1 [000] ..... 1.000004: kmalloc: call_site=foo\n";
  text += std::string("\x01\x02\x00\xff binary\n", 12);
  text += "  dd-1 [000] ..... 1.000100: block_rq_complete: 254,0 R () 8 + 8 be,0,4 [0]\n";
  text += "  dd-1 [000] ..... 1.000200: block_rq_issue: 254,0 R 4096 () 16 + 8 be,0,4 [dd]";  // truncated
  const Extracted e = Extract(Write("mixed.txt", text));
  ASSERT_TRUE(e.usable.ok());
  ASSERT_EQ(e.completions.size(), 1u);
  EXPECT_EQ(e.completions[0].wait_ns, 100'000u);
  EXPECT_EQ(e.skipped.counts.at("not a tracepoint (function tracer, printk, stack)"), 1u);
  EXPECT_EQ(e.skipped.counts.at("ring buffer lost events"), 1u);
  EXPECT_EQ(e.skipped.counts.at("malformed line"), 1u);
  EXPECT_EQ(e.skipped.counts.at("event payload did not parse"), 1u);
  EXPECT_EQ(e.skipped.counts.at("event not used (kmalloc)"), 1u);
  EXPECT_EQ(e.skipped.counts.at("binary data"), 1u);
  ASSERT_GE(e.skipped.examples.size(), 2u);
  EXPECT_EQ(e.skipped.examples[0].first, 3u);  // line numbers, 1-based
  EXPECT_EQ(e.skipped.examples[1].first, 4u);
  EXPECT_NE(e.skipped.Summary().find("line 3: not a tracepoint"), std::string::npos);
}

TEST_F(TempDir, FileWithoutUsableEventsIsAnError) {
  const Extracted e = Extract(Write("junk.txt", "hello\nworld: 1\n\x7f\x45\x4c\x46\n"));
  EXPECT_EQ(e.usable.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(TraceReader::Open(dir_.File("missing.txt"), {}).status().code() ==
              absl::StatusCode::kNotFound);
}

TEST_F(TempDir, ReplaySourceStreamsTheFixture) {
  const std::string platform = Write("platform.json", R"({"irq_cpu_ns": 8000,
      "irq_wake_ns": 40000, "poll_read_ns": 200, "timer_cpu_ns": 20000, "timer_wake_ns": 30000,
      "board": "this-vm", "devices": [{"name": "vda", "driver": "virtio_blk"}]})");
  SourceOptions options;
  options.platform = platform;
  options.block_dev = {"254:0=vda"};
  auto source = ReplaySource::Open(Fixture("virtio-6.18-trace.txt"), options);
  ASSERT_TRUE(source.ok()) << source.status();
  v1::Hello hello;
  (*source)->Describe(&hello);
  EXPECT_EQ(hello.target().board(), "this-vm");
  ASSERT_EQ(hello.devices_size(), 1);
  EXPECT_EQ(hello.devices(0).name(), "vda");
  EXPECT_EQ(hello.devices(0).driver(), "virtio_blk");
  ASSERT_EQ(hello.target().cpu_classes_size(), 1);
  EXPECT_EQ(hello.target().cpu_classes(0).costs().irq_cpu_ns(), 8000u);
  size_t completions = 0, dispatches = 0, batches = 0;
  while (!(*source)->exhausted()) {
    v1::SampleBatch batch;
    auto n = (*source)->Fill(10, &batch);
    ASSERT_TRUE(n.ok());
    ASSERT_LE(*n, 10u);
    completions += *n;
    dispatches += static_cast<size_t>(batch.dispatches().handler_ns_size());
    // The optional issue time travels with every sample of a replay.
    ASSERT_EQ(batch.completions().issue_ns_size(), batch.completions().wait_ns_size());
    for (int i = 0; i < batch.completions().wait_ns_size(); ++i) {
      EXPECT_EQ(batch.completions().device_index(i), 0u);
      if (completions == *n && i == 0) {
        EXPECT_EQ(batch.completions().wait_ns(0), 290'000u);
        EXPECT_EQ(batch.completions().issue_ns(0), 4'690'365'178'000u);
      }
    }
    ++batches;
    ASSERT_LT(batches, 100u);
  }
  EXPECT_EQ(completions, 83u);
  EXPECT_EQ(dispatches, 83u);
}

TEST_F(TempDir, ReplaySourceRefusesBadInput) {
  SourceOptions options;
  EXPECT_EQ(ReplaySource::Open(Fixture("virtio-6.18-trace.txt"), options).status().code(),
            absl::StatusCode::kInvalidArgument);  // no --platform
  options.platform = Write("p.json", R"({"irq_cpu_ns": 1, "irq_wake_ns": 1, "poll_read_ns": 1,
      "timer_cpu_ns": 1, "timer_wake_ns": 1})");
  EXPECT_EQ(ReplaySource::Open(Write("junk.txt", "nothing\n"), options).status().code(),
            absl::StatusCode::kFailedPrecondition);
  options.block_dev = {"254-0=vda"};
  EXPECT_EQ(ReplaySource::Open(Fixture("virtio-6.18-trace.txt"), options).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace spintune

namespace spintune {
namespace {

// The fixture tiled 600 times (timestamps shifted 10 s per copy): 240k lines.
TEST_F(TempDir, LongReplaysLogTheirProgress) {
  std::ifstream in(Fixture("virtio-6.18-trace.txt"));
  std::vector<std::string> events;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line[0] != '#') events.push_back(line);
  }
  const std::regex ts(R"((\d+)\.(\d{6}):)");
  std::string tiled;
  for (int copy = 0; copy < 600; ++copy) {
    for (const auto& line : events) {
      std::smatch m;
      ASSERT_TRUE(std::regex_search(line, m, ts)) << line;
      tiled += m.prefix().str() + std::to_string(std::stoll(m[1]) + 10 * copy) + "." +
               m[2].str() + ":" + m.suffix().str() + "\n";
    }
  }
  SourceOptions options;
  options.platform = Write("platform.json", R"({"irq_cpu_ns": 8000, "irq_wake_ns": 40000,
      "poll_read_ns": 200, "timer_cpu_ns": 20000, "timer_wake_ns": 30000})");
  options.block_dev = {"254:0=vda"};
  auto source = ReplaySource::Open(Write("tiled.txt", tiled), options);
  ASSERT_TRUE(source.ok()) << source.status();
  ::testing::internal::CaptureStderr();
  size_t completions = 0;
  while (!(*source)->exhausted()) {
    v1::SampleBatch batch;
    auto n = (*source)->Fill(4096, &batch);
    ASSERT_TRUE(n.ok());
    completions += *n;
  }
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(completions, 83u * 600);
  for (int pct = 10; pct <= 90; pct += 10) {
    EXPECT_NE(log.find(absl::StrCat(": ", pct, "% (")), std::string::npos) << pct << "\n" << log;
  }
  EXPECT_EQ(log.find(": 100% ("), std::string::npos);
}

}  // namespace
}  // namespace spintune
