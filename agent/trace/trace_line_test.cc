// Every documented line layout (docs/traces.md), with the fields
// worked out by hand from the line.
#include "agent/trace/trace_line.h"

#include <string>

#include "gtest/gtest.h"

namespace spintune {
namespace {

struct Expected {
  std::string task;
  int pid;
  int cpu;
  std::string flags;
  uint64_t ts_ns;
  std::string event;
  std::string payload;
  bool integer_clock = false;
};

void ExpectEvent(const std::string& line, const Expected& e) {
  SCOPED_TRACE(line);
  TraceRecord r;
  ASSERT_EQ(ParseTraceLine(line, &r), LineKind::kEvent);
  EXPECT_EQ(r.task, e.task);
  EXPECT_EQ(r.pid, e.pid);
  EXPECT_EQ(r.cpu, e.cpu);
  EXPECT_EQ(r.flags, e.flags);
  EXPECT_EQ(r.ts_ns, e.ts_ns);
  EXPECT_EQ(r.integer_clock, e.integer_clock);
  EXPECT_EQ(r.event, e.event);
  EXPECT_EQ(r.payload, e.payload);
}

TEST(TraceLineTest, KernelFiveCharFlags) {
  ExpectEvent(
      "              dd-8372    [001] d..2.   449.030470: sched_switch: prev_comm=dd prev_pid=8372",
      {"dd", 8372, 1, "d..2.", 449'030'470'000, "sched_switch", "prev_comm=dd prev_pid=8372"});
}

TEST(TraceLineTest, KernelFourCharFlagsAndOldPidWidth) {
  const std::string line =
      "          <idle>-0     [000] d.h.   826.627311: irq_handler_entry: irq=36 name=mmc0";
  ExpectEvent(line, {"<idle>", 0, 0, "d.h.", 826'627'311'000, "irq_handler_entry",
                     "irq=36 name=mmc0"});
  TraceRecord r;
  ParseTraceLine(line, &r);
  EXPECT_TRUE(r.InHardIrq());
  EXPECT_FALSE(r.InSoftIrq());
}

TEST(TraceLineTest, SoftirqFlags) {
  TraceRecord r;
  ASSERT_EQ(ParseTraceLine("  <idle>-0  [001] ..s1.  4690.365501: block_rq_complete: 254,0 RM () "
                           "1432464 + 8 be,0,4 [0]",
                           &r),
            LineKind::kEvent);
  EXPECT_TRUE(r.InSoftIrq());
  EXPECT_FALSE(r.InHardIrq());
}

TEST(TraceLineTest, NoIrqInfoColumn) {
  ExpectEvent("         cc1plus-8621    [000]    453.142657: sched_switch: prev_comm=cc1plus",
              {"cc1plus", 8621, 0, "", 453'142'657'000, "sched_switch", "prev_comm=cc1plus"});
}

TEST(TraceLineTest, TgidColumn) {
  ExpectEvent("            bash-8645    (   8645) [000] d..2.   453.234579: sched_switch: x=1",
              {"bash", 8645, 0, "d..2.", 453'234'579'000, "sched_switch", "x=1"});
  ExpectEvent("     kworker/0:1-12      (-------) [001] .....   453.234580: block_rq_issue: y",
              {"kworker/0:1", 12, 1, ".....", 453'234'580'000, "block_rq_issue", "y"});
  // Android atrace: "(-----)" and a 4-char flag column.
  ExpectEvent("mmcqd/1-6736  ( 6736) [006] d..2  3189.434652: block_rq_issue: 179,0 R 0 () 8 + 8",
              {"mmcqd/1", 6736, 6, "d..2", 3'189'434'652'000, "block_rq_issue",
               "179,0 R 0 () 8 + 8"});
}

TEST(TraceLineTest, TaskNamesWithSpacesDashesAndDigits) {
  ExpectEvent("    AsyncTask #1-4321    [002] ..s1.   100.000001: block_rq_complete: z",
              {"AsyncTask #1", 4321, 2, "..s1.", 100'000'001'000, "block_rq_complete", "z"});
  ExpectEvent("   rs:main Q:Reg-777     [000] .....     1.500000: sched_waking: comm=a pid=1",
              {"rs:main Q:Reg", 777, 0, ".....", 1'500'000'000, "sched_waking", "comm=a pid=1"});
  ExpectEvent("  irq/24-mmc2-96     [000] ....    12.5: mmc_request_done: mmc2: end",
              {"irq/24-mmc2", 96, 0, "....", 12'500'000'000, "mmc_request_done", "mmc2: end"});
  ExpectEvent(" kworker/30:1H-566  [030] .....  7.000001: block_rq_issue: q",
              {"kworker/30:1H", 566, 30, ".....", 7'000'001'000, "block_rq_issue", "q"});
}

TEST(TraceLineTest, IntegerClocksAreTicks) {
  ExpectEvent("              dd-1       [000] ..... 1178761359646: block_rq_issue: a",
              {"dd", 1, 0, ".....", 1'178'761'359'646, "block_rq_issue", "a", true});
}

TEST(TraceLineTest, TraceCmdDefaultPadsEventNames) {
  ExpectEvent(
      "              as-9088  [001]   466.363615: sched_wakeup:         c++:9066 [120] CPU:001",
      {"as", 9088, 1, "", 466'363'615'000, "sched_wakeup", "c++:9066 [120] CPU:001"});
}

TEST(TraceLineTest, TraceCmdLatencyFormatGluesCpuToFlags) {
  ExpectEvent("      as-9088    1dN.5.   466.363610: sched_waking:         comm=c++ pid=9066",
              {"as", 9088, 1, "dN.5.", 466'363'610'000, "sched_waking", "comm=c++ pid=9066"});
}

TEST(TraceLineTest, TraceCmdNanosecondTimestamps) {
  ExpectEvent("          <idle>-0     [001]   466.366664767: irq_handler_entry:    irq=36 name=v",
              {"<idle>", 0, 1, "", 466'366'664'767, "irq_handler_entry", "irq=36 name=v"});
}

TEST(TraceLineTest, TraceCmdTsDiff) {
  ExpectEvent("              as-9088  [001]   466.363615: (+5)     sched_wakeup:         c++:9066",
              {"as", 9088, 1, "", 466'363'615'000, "sched_wakeup", "c++:9066"});
}

TEST(TraceLineTest, TraceCmdInstancePrefix) {
  ExpectEvent("tc:             bash-22527 [000]  4708.911162: sched_switch:         bash:22527",
              {"bash", 22527, 0, "", 4'708'911'162'000, "sched_switch", "bash:22527"});
}

TEST(TraceLineTest, PerfScript) {
  ExpectEvent(" kworker/0:1H-kb    44 [000]   479.037824:    block:block_rq_issue: 254,0 DS 8192",
              {"kworker/0:1H-kb", 44, 0, "", 479'037'824'000, "block_rq_issue", "254,0 DS 8192"});
  ExpectEvent("            perf  9733 [001]   479.037890:   irq:irq_handler_entry: irq=36",
              {"perf", 9733, 1, "", 479'037'890'000, "irq_handler_entry", "irq=36"});
}

TEST(TraceLineTest, WindowsLineEndingsAndEmptyPayload) {
  ExpectEvent("  dd-5 [000] ..... 1.000000: my_event:\r\n",
              {"dd", 5, 0, ".....", 1'000'000'000, "my_event", ""});
}

TEST(TraceLineTest, LinesThatAreNotEvents) {
  TraceRecord r;
  EXPECT_EQ(ParseTraceLine("", &r), LineKind::kEmpty);
  EXPECT_EQ(ParseTraceLine("   \n", &r), LineKind::kEmpty);
  EXPECT_EQ(ParseTraceLine("# tracer: nop", &r), LineKind::kComment);
  EXPECT_EQ(ParseTraceLine("cpus=2", &r), LineKind::kComment);
  EXPECT_EQ(ParseTraceLine("version = 7", &r), LineKind::kComment);
  EXPECT_EQ(ParseTraceLine("CPU:1 [LOST 123 EVENTS]", &r), LineKind::kLost);
  // Function tracer, function_graph and stack lines.
  EXPECT_EQ(ParseTraceLine("  bash-1 [000] ..... 1.000000: do_sys_open <-do_syscall_64", &r),
            LineKind::kNotEvent);
  EXPECT_EQ(ParseTraceLine("  bash-1 [000] ..... 1.000000: func+0x14/0x754 <-caller+0xbc/0x224", &r),
            LineKind::kNotEvent);
  EXPECT_EQ(ParseTraceLine(" => __schedule+0x2f0/0x880", &r), LineKind::kNotEvent);
  EXPECT_EQ(ParseTraceLine("hello world: nothing here", &r), LineKind::kNotEvent);
}

TEST(TraceLineTest, MalformedContextIsRejected) {
  TraceRecord r;
  EXPECT_EQ(ParseTraceLine("  dd-1 [0x1] ..... 1.000000: sched_switch: a", &r), LineKind::kMalformed);
  EXPECT_EQ(ParseTraceLine("  dd-1 [000] .......... 1.000000: sched_switch: a", &r),
            LineKind::kMalformed);
  EXPECT_EQ(ParseTraceLine("  nopid [000] ..... 1.000000: sched_switch: a", &r),
            LineKind::kMalformed);
}

TEST(TraceLineTest, NumbersAndFields) {
  uint64_t v = 0;
  EXPECT_TRUE(ParseNumber("0x1f", &v));
  EXPECT_EQ(v, 31u);
  EXPECT_TRUE(ParseNumber("18446744073709551615", &v));
  EXPECT_EQ(v, ~uint64_t{0});
  EXPECT_FALSE(ParseNumber("18446744073709551616", &v));
  EXPECT_FALSE(ParseNumber("12a", &v));
  EXPECT_FALSE(ParseNumber("0x", &v));
  EXPECT_FALSE(ParseNumber("", &v));
  int64_t s = 0;
  EXPECT_TRUE(ParseSigned("-84", &s));
  EXPECT_EQ(s, -84);
  const absl::string_view payload = "prev_pid=5 pid=7, tag=0x1f,op=3 empty=";
  EXPECT_EQ(FindField(payload, "pid"), "7");  // not prev_pid
  EXPECT_EQ(FindField(payload, "prev_pid"), "5");
  EXPECT_EQ(FindField(payload, "tag"), "0x1f");
  EXPECT_EQ(FindField(payload, "op"), "3");
  EXPECT_EQ(FindField(payload, "empty"), "");
  EXPECT_EQ(FindField(payload, "missing"), "");
}

}  // namespace
}  // namespace spintune
