// Correlation of synthetic event sequences, each with its samples worked out
// by hand from the timestamps in the lines.
#include "agent/trace/trace_correlator.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

#include "gtest/gtest.h"

namespace spintune {
namespace {

std::unique_ptr<TraceCorrelator> Correlate(const std::vector<std::string>& lines,
                                     CorrelatorOptions options = {}) {
  auto c = std::make_unique<TraceCorrelator>(std::move(options));
  for (const auto& line : lines) {
    TraceRecord r;
    EXPECT_EQ(ParseTraceLine(line, &r), LineKind::kEvent) << line;
    EXPECT_TRUE(c->Process(r)) << line;
  }
  c->Finish();
  return c;
}

TEST(RwbsTest, OpcodesFollowReqOp) {
  EXPECT_EQ(OpcodeFromRwbs("R"), 0u);
  EXPECT_EQ(OpcodeFromRwbs("RA"), 0u);
  EXPECT_EQ(OpcodeFromRwbs("RM"), 0u);
  EXPECT_EQ(OpcodeFromRwbs("WFS"), 1u);
  EXPECT_EQ(OpcodeFromRwbs("FWS"), 1u);  // preflush + write
  EXPECT_EQ(OpcodeFromRwbs("FF"), 2u);   // preflush + flush
  EXPECT_EQ(OpcodeFromRwbs("F"), 2u);
  EXPECT_EQ(OpcodeFromRwbs("DS"), 3u);
  EXPECT_EQ(OpcodeFromRwbs("DE"), 5u);
  EXPECT_EQ(OpcodeFromRwbs("ZA"), 7u);
  EXPECT_EQ(OpcodeFromRwbs("WZS"), 9u);
  EXPECT_EQ(OpcodeFromRwbs("ZRA"), 15u);
  EXPECT_EQ(OpcodeFromRwbs("N"), 34u);
}

// virtio-blk on 6.18: the completion runs in the BLOCK softirq after the
// hard handler; the waiter was asleep (prev_state=D) and is switched in.
TEST(CorrelatorTest, BlockIrqPathEndsAtIrqEntryAndMeasuresWake) {
  auto c = Correlate({
      "  dd-100 [000] ..... 10.000000: block_rq_issue: 254,0 RS 4096 () 1000 + 8 be,0,4 [dd]",
      "  dd-100 [000] d..2. 10.000010: sched_switch: prev_comm=dd prev_pid=100 prev_prio=120 "
      "prev_state=D ==> next_comm=swapper/0 next_pid=0 next_prio=120",
      "  <idle>-0 [000] d.h1. 10.000300: irq_handler_entry: irq=36 name=virtio1-req.0",
      "  <idle>-0 [000] d.h1. 10.000305: irq_handler_exit: irq=36 ret=handled",
      "  <idle>-0 [000] ..s1. 10.000310: block_rq_complete: 254,0 RS () 1000 + 8 be,0,4 [0]",
      "  <idle>-0 [000] d.s3. 10.000312: sched_waking: comm=dd pid=100 prio=120 target_cpu=000",
      "  <idle>-0 [000] d..2. 10.000340: sched_switch: prev_comm=swapper/0 prev_pid=0 "
      "prev_prio=120 prev_state=R ==> next_comm=dd next_pid=100 next_prio=120",
  });
  ASSERT_EQ(c->completions().size(), 1u);
  const CompletionEvent& e = c->completions()[0];
  EXPECT_EQ(e.device, "254:0");
  EXPECT_EQ(e.opcode, 0u);
  EXPECT_EQ(e.bytes, 4096u);
  EXPECT_EQ(e.wait_ns, 300'000u);  // issue 10.000000 -> IRQ entry 10.000300
  EXPECT_EQ(e.issue_ns, 10'000'000'000u);
  EXPECT_EQ(e.path, TracePath::kIrq);
  EXPECT_FALSE(e.error);
  EXPECT_EQ(e.cpu, 0);
  ASSERT_EQ(c->dispatches().size(), 1u);
  const DispatchEvent& d = c->dispatches()[0];
  EXPECT_EQ(d.irq, 36);
  EXPECT_EQ(d.irq_name, "virtio1-req.0");
  EXPECT_EQ(d.device, "254:0");
  EXPECT_EQ(d.handler_ns, 5'000u);
  ASSERT_TRUE(d.wake_ns.has_value());
  EXPECT_EQ(*d.wake_ns, 40'000u);  // IRQ entry 10.000300 -> switch-in 10.000340
}

// A kworker that issued a flush on someone's behalf and went idle (I) is
// not waiting for it: no wake latency is measured for it.
TEST(CorrelatorTest, IdleKernelThreadIsNotAWaiter) {
  auto c = Correlate({
      "  kworker/1:1H-44 [001] ..... 3.000000: block_rq_issue: 254,0 FF 0 () 0 + 0 none,0,0 [k]",
      "  kworker/1:1H-44 [001] d..2. 3.000005: sched_switch: prev_comm=kworker/1:1H prev_pid=44 "
      "prev_prio=100 prev_state=I ==> next_comm=swapper/1 next_pid=0 next_prio=120",
      "  <idle>-0 [001] d.h1. 3.000100: irq_handler_entry: irq=36 name=virtio1-req.0",
      "  <idle>-0 [001] d.h1. 3.000102: irq_handler_exit: irq=36 ret=handled",
      "  <idle>-0 [001] ..s1. 3.000104: block_rq_complete: 254,0 FF () 18446744073709551615 + 0 "
      "none,0,0 [0]",
      "  <idle>-0 [001] d..2. 3.009000: sched_switch: prev_comm=swapper/1 prev_pid=0 prev_prio=120 "
      "prev_state=R ==> next_comm=kworker/1:1H next_pid=44 next_prio=100",
  });
  ASSERT_EQ(c->completions().size(), 1u);
  EXPECT_EQ(c->completions()[0].opcode, 2u);
  EXPECT_EQ(c->completions()[0].wait_ns, 100'000u);
  ASSERT_EQ(c->dispatches().size(), 1u);
  EXPECT_FALSE(c->dispatches()[0].wake_ns.has_value());
}

// The switch into a woken issuer can be missing from the trace (on this
// VM's kernel most switches out of the idle task are): the issuer is then
// known to run by its own events, and a completion while it runs has no
// waiter. Worked by hand: IRQ 1 wakes dd (asleep since 10.000010), whose
// switch in is missing; its wake ends at its next issue, 10.000330 (30 us).
// IRQ 2 completes that request while dd still runs (its own events at
// 10.000330 and 10.000450): no wake. dd sleeps at 10.000460; IRQ 3 wakes it,
// switched in at 10.001040: 40 us. Taking dd as asleep since 10.000010
// would give IRQ 2 the wake that ends at 10.001040 (640 us).
TEST(CorrelatorTest, AnIssuerWithEventsOfItsOwnIsNotAsleep) {
  auto c = Correlate({
      "  dd-100 [000] ..... 10.000000: block_rq_issue: 254,0 RS 4096 () 1000 + 8 be,0,4 [dd]",
      "  dd-100 [000] d..2. 10.000010: sched_switch: prev_comm=dd prev_pid=100 prev_prio=120 "
      "prev_state=D ==> next_comm=swapper/0 next_pid=0 next_prio=120",
      "  <idle>-0 [000] d.h1. 10.000300: irq_handler_entry: irq=36 name=virtio1-req.0",
      "  <idle>-0 [000] d.h1. 10.000305: irq_handler_exit: irq=36 ret=handled",
      "  <idle>-0 [000] ..s1. 10.000310: block_rq_complete: 254,0 RS () 1000 + 8 be,0,4 [0]",
      "  <idle>-0 [000] d.s3. 10.000312: sched_waking: comm=dd pid=100 prio=120 target_cpu=000",
      // (no switch from swapper/0 to dd)
      "  dd-100 [000] ..... 10.000330: block_rq_issue: 254,0 RS 4096 () 2000 + 8 be,0,4 [dd]",
      "  dd-100 [000] d.h.. 10.000400: irq_handler_entry: irq=36 name=virtio1-req.0",
      "  dd-100 [000] d.h.. 10.000404: irq_handler_exit: irq=36 ret=handled",
      "  dd-100 [000] ..s.. 10.000410: block_rq_complete: 254,0 RS () 2000 + 8 be,0,4 [0]",
      "  dd-100 [000] ..... 10.000450: block_rq_issue: 254,0 RS 4096 () 3000 + 8 be,0,4 [dd]",
      "  dd-100 [000] d..2. 10.000460: sched_switch: prev_comm=dd prev_pid=100 prev_prio=120 "
      "prev_state=D ==> next_comm=swapper/0 next_pid=0 next_prio=120",
      "  <idle>-0 [000] d.h1. 10.001000: irq_handler_entry: irq=36 name=virtio1-req.0",
      "  <idle>-0 [000] d.h1. 10.001005: irq_handler_exit: irq=36 ret=handled",
      "  <idle>-0 [000] ..s1. 10.001010: block_rq_complete: 254,0 RS () 3000 + 8 be,0,4 [0]",
      "  <idle>-0 [000] d.s3. 10.001012: sched_waking: comm=dd pid=100 prio=120 target_cpu=000",
      "  <idle>-0 [000] d..2. 10.001040: sched_switch: prev_comm=swapper/0 prev_pid=0 "
      "prev_prio=120 prev_state=R ==> next_comm=dd next_pid=100 next_prio=120",
  });
  ASSERT_EQ(c->completions().size(), 3u);
  ASSERT_EQ(c->dispatches().size(), 3u);
  std::vector<std::pair<uint64_t, std::optional<uint64_t>>> wakes;  // (IRQ entry, wake)
  for (const auto& d : c->dispatches()) wakes.emplace_back(d.entry_ns, d.wake_ns);
  std::sort(wakes.begin(), wakes.end());
  EXPECT_EQ(wakes[0], std::make_pair(uint64_t{10'000'300'000}, std::optional<uint64_t>(30'000)));
  EXPECT_EQ(wakes[1], std::make_pair(uint64_t{10'000'400'000}, std::optional<uint64_t>()));
  EXPECT_EQ(wakes[2], std::make_pair(uint64_t{10'001'000'000}, std::optional<uint64_t>(40'000)));
}

// MMC v4.7 layout (no blk_addr/tag), 4-character flags, completion and
// wake-up inside the hard handler.
TEST(CorrelatorTest, MmcV47HardIrqCompletion) {
  auto c = Correlate({
      "  mmcqd/0-82 [000] ...1 100.000000: mmc_request_start: mmc0: start struct "
      "mmc_request[c669d954]: cmd_opcode=25 cmd_arg=0x47fd98 cmd_flags=0xb5 cmd_retries=0 "
      "stop_opcode=12 stop_arg=0x0 stop_flags=0x49d stop_retries=0 sbc_opcode=23 "
      "sbc_arg=0x80000008 sbc_flags=0x15 sbc_retires=0 blocks=8 block_size=512 data_flags=0x100 "
      "can_retune=0 doing_retune=0 retune_now=0 need_retune=0 hold_retune=1 retune_period=0",
      "  mmcqd/0-82 [000] d..2 100.000005: sched_switch: prev_comm=mmcqd/0 prev_pid=82 "
      "prev_prio=120 prev_state=D ==> next_comm=swapper/0 next_pid=0 next_prio=120",
      "  <idle>-0 [000] d.h1 100.000900: irq_handler_entry: irq=51 name=mmc0",
      "  <idle>-0 [000] d.h1 100.000903: mmc_request_done: mmc0: end struct "
      "mmc_request[c669d954]: cmd_opcode=25 cmd_err=0 cmd_resp=0x900 0x0 0x0 0x0 cmd_retries=0 "
      "stop_opcode=12 stop_err=0 stop_resp=0x0 0x0 0x0 0x0 stop_retries=0 sbc_opcode=23 "
      "sbc_err=0 sbc_resp=0x0 0x0 0x0 0x0 sbc_retries=0 bytes_xfered=4096 data_err=0",
      "  <idle>-0 [000] d.h2 100.000904: sched_waking: comm=mmcqd/0 pid=82 prio=120 target_cpu=000",
      "  <idle>-0 [000] d.h1 100.000910: irq_handler_exit: irq=51 ret=handled",
      "  <idle>-0 [000] d..2 100.000950: sched_switch: prev_comm=swapper/0 prev_pid=0 "
      "prev_prio=120 prev_state=R ==> next_comm=mmcqd/0 next_pid=82 next_prio=120",
  });
  ASSERT_EQ(c->completions().size(), 1u);
  const CompletionEvent& e = c->completions()[0];
  EXPECT_EQ(e.device, "mmc0");
  EXPECT_EQ(e.opcode, 25u);  // the data command; sbc_opcode=23 is the CMD23 before it
  EXPECT_EQ(e.bytes, 4096u);  // 8 blocks x 512
  EXPECT_EQ(e.wait_ns, 900'000u);
  EXPECT_EQ(e.path, TracePath::kIrq);
  ASSERT_EQ(c->dispatches().size(), 1u);
  EXPECT_EQ(c->dispatches()[0].device, "mmc0");
  EXPECT_EQ(c->dispatches()[0].handler_ns, 10'000u);
  ASSERT_TRUE(c->dispatches()[0].wake_ns.has_value());
  EXPECT_EQ(*c->dispatches()[0].wake_ns, 50'000u);
}

TEST(CorrelatorTest, MmcV415SwappedBlockSizeAndErrors) {
  // v4.15 printed blk_addr as block_size and the other way round.
  auto c = Correlate({
      "  kworker/1:1-30 [001] ..... 5.000000: mmc_request_start: mmc1: start struct "
      "mmc_request[0000000005d331e4]: cmd_opcode=18 cmd_arg=0x1000 cmd_flags=0xb5 "
      "cmd_retries=0 stop_opcode=0 stop_arg=0x0 stop_flags=0x0 stop_retries=0 sbc_opcode=0 "
      "sbc_arg=0x0 sbc_flags=0x0 sbc_retires=0 blocks=4 block_size=1234567 blk_addr=512 "
      "data_flags=0x200 tag=-1 can_retune=0",
      "  kworker/1:1-30 [001] ..... 5.000250: mmc_request_done: mmc1: end struct "
      "mmc_request[0000000005d331e4]: cmd_opcode=18 cmd_err=0 cmd_resp=0x900 0x0 0x0 0x0 "
      "cmd_retries=0 stop_opcode=0 stop_err=0 stop_resp=0x0 0x0 0x0 0x0 stop_retries=0 "
      "sbc_opcode=0 sbc_err=0 sbc_resp=0x0 0x0 0x0 0x0 sbc_retries=0 bytes_xfered=0 "
      "data_err=-84 tag=-1",
  });
  ASSERT_EQ(c->completions().size(), 1u);
  const CompletionEvent& e = c->completions()[0];
  EXPECT_EQ(e.opcode, 18u);
  EXPECT_EQ(e.bytes, 2048u);
  EXPECT_EQ(e.wait_ns, 250'000u);
  EXPECT_TRUE(e.error);  // data_err=-84 (EILSEQ)
  EXPECT_EQ(e.path, TracePath::kSpin);  // done in the issuer's own context
}

TEST(CorrelatorTest, MmcCqePairsOnTag) {
  // CQE: no command (cmd_opcode=0), a tag; two requests overlap and finish
  // out of order.
  auto c = Correlate({
      "  kworker/0:1H-9 [000] ..... 1.000000: mmc_request_start: mmc2: start struct "
      "mmc_request[00000000aaaa0001]: cmd_opcode=0 blocks=16 block_size=512 blk_addr=4096 "
      "data_flags=0x200 tag=3",
      "  kworker/0:1H-9 [000] ..... 1.000010: mmc_request_start: mmc2: start struct "
      "mmc_request[00000000aaaa0002]: cmd_opcode=0 blocks=8 block_size=512 blk_addr=9000 "
      "data_flags=0x100 tag=4",
      "  kworker/0:1H-9 [000] ..... 1.000100: mmc_request_done: mmc2: end struct "
      "mmc_request[00000000aaaa0009]: cmd_opcode=0 cmd_err=0 data_err=0 tag=4",
      "  kworker/0:1H-9 [000] ..... 1.000200: mmc_request_done: mmc2: end struct "
      "mmc_request[00000000aaaa0009]: cmd_opcode=0 cmd_err=0 data_err=0 tag=3",
  });
  ASSERT_EQ(c->completions().size(), 2u);
  EXPECT_EQ(c->completions()[0].opcode, 47u);  // EXECUTE_WRITE_TASK (data_flags 0x100)
  EXPECT_EQ(c->completions()[0].bytes, 4096u);
  EXPECT_EQ(c->completions()[0].wait_ns, 90'000u);
  EXPECT_EQ(c->completions()[1].opcode, 46u);  // EXECUTE_READ_TASK
  EXPECT_EQ(c->completions()[1].bytes, 8192u);
  EXPECT_EQ(c->completions()[1].wait_ns, 200'000u);
}

TEST(CorrelatorTest, MmcRetryKeepsTheFirstStart) {
  auto c = Correlate({
      "  a-1 [000] ..... 1.000000: mmc_request_start: mmc0: start struct mmc_request[c0de]: "
      "cmd_opcode=17 blocks=1 block_size=512",
      // The first try failed with retries left: no done, a second start.
      "  a-1 [000] ..... 1.000300: mmc_request_start: mmc0: start struct mmc_request[c0de]: "
      "cmd_opcode=17 blocks=1 block_size=512",
      "  a-1 [000] ..... 1.000500: mmc_request_done: mmc0: end struct mmc_request[c0de]: "
      "cmd_opcode=17 cmd_err=0 data_err=0",
      // The pointer is reused by the next request.
      "  a-1 [000] ..... 1.001000: mmc_request_start: mmc0: start struct mmc_request[c0de]: "
      "cmd_opcode=13 blocks=0 block_size=0",
      "  a-1 [000] ..... 1.001040: mmc_request_done: mmc0: end struct mmc_request[c0de]: "
      "cmd_opcode=13 cmd_err=0",
  });
  ASSERT_EQ(c->completions().size(), 2u);
  EXPECT_EQ(c->completions()[0].wait_ns, 500'000u);  // from the first try
  EXPECT_EQ(c->completions()[1].opcode, 13u);
  EXPECT_EQ(c->completions()[1].wait_ns, 40'000u);
  EXPECT_EQ(c->stats().retried, 1u);
}

TEST(CorrelatorTest, MmcReusedPointerPairsFifo) {
  auto c = Correlate({
      "  a-1 [000] ..... 1.000000: mmc_request_start: mmc0: start struct mmc_request[c0de]: "
      "cmd_opcode=13 blocks=0 block_size=0",
      "  a-1 [000] ..... 1.000040: mmc_request_done: mmc0: end struct mmc_request[c0de]: "
      "cmd_opcode=13 cmd_err=0",
      "  a-1 [000] ..... 1.000100: mmc_request_start: mmc0: start struct mmc_request[c0de]: "
      "cmd_opcode=6 blocks=0 block_size=0",
      "  a-1 [000] ..... 1.000400: mmc_request_done: mmc0: end struct mmc_request[c0de]: "
      "cmd_opcode=6 cmd_err=-110",
  });
  ASSERT_EQ(c->completions().size(), 2u);
  EXPECT_EQ(c->completions()[0].opcode, 13u);
  EXPECT_EQ(c->completions()[0].wait_ns, 40'000u);
  EXPECT_EQ(c->completions()[1].opcode, 6u);
  EXPECT_EQ(c->completions()[1].wait_ns, 300'000u);
  EXPECT_TRUE(c->completions()[1].error);
}

TEST(CorrelatorTest, BlockFlushesPairFifoAndOldKernelsSizeFromSectors) {
  auto c = Correlate({
      // Two flushes in flight: position 0 at issue, -1 at completion.
      "  jbd2/vda1-8-200 [001] ..... 2.000000: block_rq_issue: 254,0 FF 0 () 0 + 0 none,0,0 [jbd2]",
      "  jbd2/vda1-8-200 [001] ..... 2.000050: block_rq_issue: 254,0 FF 0 () 0 + 0 none,0,0 [jbd2]",
      "  <idle>-0 [001] ..s.. 2.000400: block_rq_complete: 254,0 FF () 18446744073709551615 + 0 "
      "none,0,0 [0]",
      "  <idle>-0 [001] ..s.. 2.000900: block_rq_complete: 254,0 FF () 18446744073709551615 + 0 "
      "none,0,0 [0]",
      // A 4.x kernel: bytes 0 for file system requests, no ioprio triple.
      "  kworker/0:2-40 [000] .... 3.000000: block_rq_issue: 179,0 WFS 0 () 4717976 + 8 [kworker/0:2]",
      "  kworker/0:2-40 [000] .... 3.002000: block_rq_complete: 179,0 WFS () 4717976 + 8 [-5]",
  });
  ASSERT_EQ(c->completions().size(), 3u);
  EXPECT_EQ(c->completions()[0].opcode, 2u);
  EXPECT_EQ(c->completions()[0].wait_ns, 400'000u);  // FIFO: first issue, first complete
  EXPECT_EQ(c->completions()[1].wait_ns, 850'000u);
  EXPECT_EQ(c->completions()[2].device, "179:0");
  EXPECT_EQ(c->completions()[2].opcode, 1u);
  EXPECT_EQ(c->completions()[2].bytes, 4096u);  // 8 sectors
  EXPECT_EQ(c->completions()[2].wait_ns, 2'000'000u);
  EXPECT_TRUE(c->completions()[2].error);  // [-5] = EIO
}

TEST(CorrelatorTest, BlockPartialCompletionAndRequeue) {
  auto c = Correlate({
      "  fio-7 [000] ..... 1.000000: block_rq_issue: 8,0 R 8192 () 1000 + 16 be,0,4 [fio]",
      "  fio-7 [000] ..s.. 1.000100: block_rq_complete: 8,0 R () 1000 + 8 be,0,4 [0]",
      "  fio-7 [000] ..s.. 1.000300: block_rq_complete: 8,0 R () 1008 + 8 be,0,4 [0]",
      // Requeued: the wait starts at the second issue.
      "  fio-7 [000] ..... 2.000000: block_rq_issue: 8,0 W 4096 () 2000 + 8 be,0,4 [fio]",
      "  fio-7 [000] ..... 2.000010: block_rq_requeue: 8,0 W () 2000 + 8 be,0,4 [0]",
      "  fio-7 [000] ..... 2.000500: block_rq_issue: 8,0 W 4096 () 2000 + 8 be,0,4 [fio]",
      "  fio-7 [000] ..s.. 2.000700: block_rq_complete: 8,0 W () 2000 + 8 be,0,4 [0]",
  });
  ASSERT_EQ(c->completions().size(), 2u);
  EXPECT_EQ(c->completions()[0].bytes, 8192u);
  EXPECT_EQ(c->completions()[0].wait_ns, 300'000u);  // ends at the last part
  EXPECT_EQ(c->completions()[1].wait_ns, 200'000u);
  EXPECT_EQ(c->stats().requeued, 1u);
}

TEST(CorrelatorTest, BlockFieldListOfTraceCmdFailedToParse) {
  // dev is the kernel's dev_t: 254 << 20 | 0 = 266338304.
  auto c = Correlate({
      "  dd-5 [000] 1.000000: block_rq_issue: [FAILED TO PARSE] dev=266338304 sector=1432464 "
      "nr_sector=8 bytes=4096 ioprio=16388 rwbs=RM comm=dd cmd=",
      "  dd-5 [000] 1.000120: block_rq_complete: [FAILED TO PARSE] dev=266338304 sector=1432464 "
      "nr_sector=8 error=0 ioprio=16388 rwbs=RM cmd=",
  });
  ASSERT_EQ(c->completions().size(), 1u);
  EXPECT_EQ(c->completions()[0].device, "254:0");
  EXPECT_EQ(c->completions()[0].bytes, 4096u);
  EXPECT_EQ(c->completions()[0].wait_ns, 120'000u);
}

TEST(CorrelatorTest, BlockDeviceNamesAndUnpairedEnds) {
  CorrelatorOptions o;
  o.block_device_name = [](int major, int minor) {
    return major == 254 && minor == 0 ? std::string("vda") : std::string("other");
  };
  auto c = Correlate({
                   "  x-1 [000] ..... 1.000000: block_rq_complete: 254,0 R () 5 + 8 be,0,4 [0]",
                   "  x-1 [000] ..... 1.000000: block_rq_issue: 254,0 R 4096 () 9 + 8 be,0,4 [x]",
                   "  x-1 [000] ..... 1.000010: block_rq_complete: 254,0 R () 9 + 8 be,0,4 [0]",
               },
               o);
  ASSERT_EQ(c->completions().size(), 1u);
  EXPECT_EQ(c->completions()[0].device, "vda");
  EXPECT_EQ(c->stats().unpaired_ends, 1u);
}

TEST(CorrelatorTest, SpiTransfersAndMessages) {
  auto c = Correlate({
      "  spi0-50 [001] ..... 5.000000: spi_message_start: spi0.0 000000001b20b93c",
      "  spi0-50 [001] ..... 5.000001: spi_transfer_start: spi0.0 00000000ea1cf8b6 len=16 "
      "tx=[4c-80-00-00] rx=[]",
      "  spi0-50 [001] ..... 5.000041: spi_transfer_stop: spi0.0 00000000ea1cf8b6 len=16 "
      "tx=[4c-80-00-00] rx=[]",
      "  spi0-50 [001] ..... 5.000050: spi_message_done: spi0.0 000000001b20b93c len=12/16",
  });
  ASSERT_EQ(c->completions().size(), 2u);
  const CompletionEvent& t = c->completions()[0];
  EXPECT_EQ(t.device, "spi0.0");
  EXPECT_EQ(t.opcode, 0u);
  EXPECT_EQ(t.bytes, 16u);
  EXPECT_EQ(t.wait_ns, 40'000u);
  EXPECT_EQ(t.path, TracePath::kSpin);
  const CompletionEvent& m = c->completions()[1];
  EXPECT_EQ(m.opcode, 1u);
  EXPECT_EQ(m.bytes, 12u);  // actual length of the done event
  EXPECT_EQ(m.wait_ns, 50'000u);
}

TEST(CorrelatorTest, UserDefinedPairs) {
  auto pairs = ParseEventPairs(R"([{"name": "nand0", "start_event": "my_cmd_start",
      "end_event": "my_cmd_end", "match_fields": ["host", "tag"], "opcode_field": "op",
      "size_field": "blocks", "size_unit_bytes": 512}])");
  ASSERT_TRUE(pairs.ok()) << pairs.status();
  CorrelatorOptions o;
  o.pairs = *pairs;
  auto c = Correlate({
                   "  v-3 [000] ..... 1.000000: my_cmd_start: host=2, tag=0x1f, op=17, blocks=8",
                   "  v-3 [000] ..... 1.000005: my_cmd_start: host=3, tag=0x1f, op=24, blocks=1",
                   "  v-3 [000] ..... 1.000070: my_cmd_end: host=2 tag=0x1f status=0",
                   "  v-3 [000] ..... 1.000090: my_cmd_end: host=3 tag=31 status=0",
               },
               o);
  ASSERT_EQ(c->completions().size(), 1u);
  EXPECT_EQ(c->completions()[0].device, "nand0");
  EXPECT_EQ(c->completions()[0].opcode, 17u);
  EXPECT_EQ(c->completions()[0].bytes, 4096u);
  EXPECT_EQ(c->completions()[0].wait_ns, 70'000u);
  // Match fields compare as text: "31" is not "0x1f", so host 3 stays open.
  EXPECT_EQ(c->stats().unpaired_ends, 1u);
}

TEST(CorrelatorTest, PairsFileErrorsNameTheField) {
  EXPECT_FALSE(ParseEventPairs("{}").ok());
  EXPECT_FALSE(ParseEventPairs("not json").ok());
  auto missing = ParseEventPairs(R"([{"name": "a", "start_event": "s"}])");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("pairs[0].end_event"), std::string::npos);
  auto unit = ParseEventPairs(R"([{"name": "a", "start_event": "s", "end_event": "e",
      "match_fields": ["x"], "size_unit_bytes": 0}])");
  ASSERT_FALSE(unit.ok());
  EXPECT_NE(unit.status().message().find("size_unit_bytes"), std::string::npos);
}

// A threaded handler (irq/51-mmc0) completes the request after the hard
// handler returned IRQ_WAKE_THREAD; the IRQ is attributed by --irq.
TEST(CorrelatorTest, ThreadedIrqAndDeclaredIrqDevice) {
  CorrelatorOptions o;
  o.irq_device["mmc0"] = "mmc0";
  auto c = Correlate({
                   "  w-9 [000] ..... 1.000000: mmc_request_start: mmc0: start struct "
                   "mmc_request[ab]: cmd_opcode=17 blocks=1 block_size=512",
                   "  w-9 [000] d..2. 1.000002: sched_switch: prev_comm=w prev_pid=9 prev_prio=120 "
                   "prev_state=D ==> next_comm=swapper/0 next_pid=0 next_prio=120",
                   "  <idle>-0 [001] d.h1. 1.000200: irq_handler_entry: irq=51 name=mmc0",
                   "  <idle>-0 [001] d.h1. 1.000204: irq_handler_exit: irq=51 ret=handled",
                   "  irq/51-mmc0-77 [001] ..... 1.000230: mmc_request_done: mmc0: end struct "
                   "mmc_request[ab]: cmd_opcode=17 cmd_err=0 data_err=0",
                   "  irq/51-mmc0-77 [001] d..3. 1.000232: sched_waking: comm=w pid=9 prio=120 "
                   "target_cpu=000",
                   "  <idle>-0 [000] d..2. 1.000260: sched_switch: prev_comm=swapper/0 prev_pid=0 "
                   "prev_prio=120 prev_state=R ==> next_comm=w next_pid=9 next_prio=120",
               },
               o);
  ASSERT_EQ(c->completions().size(), 1u);
  EXPECT_EQ(c->completions()[0].path, TracePath::kIrq);
  EXPECT_EQ(c->completions()[0].wait_ns, 200'000u);
  ASSERT_EQ(c->dispatches().size(), 1u);
  EXPECT_EQ(c->dispatches()[0].handler_ns, 4'000u);
  ASSERT_TRUE(c->dispatches()[0].wake_ns.has_value());
  EXPECT_EQ(*c->dispatches()[0].wake_ns, 60'000u);
}

// trace-cmd's sched plugin rewrites sched_waking/sched_switch.
TEST(CorrelatorTest, TraceCmdPluginSchedLines) {
  auto c = Correlate({
      "              dd-100   [000]    10.000000: block_rq_issue:       254,0 RS 4096 () 1000 + 8 "
      "0x2,0,4 [dd]",
      "              dd-100   [000]    10.000010: sched_switch:         dd:100 [120] D ==> "
      "swapper/0:0 [120]",
      "          <idle>-0     [000]    10.000300: irq_handler_entry:    irq=36 name=virtio1-req.0",
      "          <idle>-0     [000]    10.000305: irq_handler_exit:     irq=36 ret=handled",
      "          <idle>-0     [000]    10.000310: block_rq_complete:    254,0 RS () 1000 + 8 "
      "0x2,0,4 [0]",
      "          <idle>-0     [000]    10.000312: sched_wakeup:         dd:100 [120] CPU:000",
      "          <idle>-0     [000]    10.000345: sched_switch:         swapper/0:0 [120] R ==> "
      "dd:100 [120]",
  });
  ASSERT_EQ(c->completions().size(), 1u);
  EXPECT_EQ(c->completions()[0].path, TracePath::kIrq);
  EXPECT_EQ(c->completions()[0].wait_ns, 300'000u);
  ASSERT_EQ(c->dispatches().size(), 1u);
  ASSERT_TRUE(c->dispatches()[0].wake_ns.has_value());
  EXPECT_EQ(*c->dispatches()[0].wake_ns, 45'000u);
}

TEST(CorrelatorTest, EvictionTakesTheOldestStartStillPending) {
  CorrelatorOptions o;
  o.max_pending = 4;
  TraceCorrelator c(o);
  auto feed = [&c](const std::string& event, int sector) {
    const std::string line =
        "  x-1 [000] ..... 1.000000: " + event + ": 8,0 R " +
        (event == "block_rq_issue" ? "4096 () " : "() ") + std::to_string(sector) + " + 8 " +
        (event == "block_rq_issue" ? "be,0,4 [x]" : "be,0,4 [0]");
    TraceRecord r;
    ASSERT_EQ(ParseTraceLine(line, &r), LineKind::kEvent) << line;
    c.Process(r);
  };
  for (int s : {0, 8, 16, 24}) feed("block_rq_issue", s);
  feed("block_rq_complete", 8);  // ended: the oldest still pending stays 0
  feed("block_rq_complete", 16);
  for (int s : {32, 40}) feed("block_rq_issue", s);
  EXPECT_EQ(c.stats().evicted, 0u);
  feed("block_rq_issue", 48);  // the fifth pending start
  EXPECT_EQ(c.stats().evicted, 1u);
  feed("block_rq_complete", 0);  // the evicted one: no start any more
  EXPECT_EQ(c.stats().unpaired_ends, 1u);
  for (int s : {24, 32, 40, 48}) feed("block_rq_complete", s);
  EXPECT_EQ(c.completions().size(), 2u + 4u);
  EXPECT_EQ(c.stats().unpaired_ends, 1u);
}

TEST(CorrelatorTest, MemoryIsBoundedByEvictingOldStarts) {
  CorrelatorOptions o;
  o.max_pending = 4;
  auto c = std::make_unique<TraceCorrelator>(o);
  for (int i = 0; i < 100; ++i) {
    const std::string line = "  x-1 [000] ..... 1.000000: block_rq_issue: 8,0 R 4096 () " +
                             std::to_string(i * 8) + " + 8 be,0,4 [x]";
    TraceRecord r;
    ASSERT_EQ(ParseTraceLine(line, &r), LineKind::kEvent);
    c->Process(r);
  }
  EXPECT_EQ(c->stats().evicted, 96u);
  // The newest starts are still there.
  TraceRecord r;
  ASSERT_EQ(ParseTraceLine("  x-1 [000] ..... 1.000100: block_rq_complete: 8,0 R () 792 + 8 be,0,4 [0]",
                           &r),
            LineKind::kEvent);
  c->Process(r);
  EXPECT_EQ(c->completions().size(), 1u);
}

TEST(CorrelatorTest, MalformedPayloadsAreCountedNotFatal) {
  TraceCorrelator c({});
  TraceRecord r;
  ASSERT_EQ(ParseTraceLine("  x-1 [000] ..... 1.0: block_rq_issue: garbage", &r), LineKind::kEvent);
  EXPECT_FALSE(c.Process(r));
  ASSERT_EQ(ParseTraceLine("  x-1 [000] ..... 1.0: irq_handler_entry: irq=abc", &r), LineKind::kEvent);
  EXPECT_FALSE(c.Process(r));
  EXPECT_EQ(c.stats().malformed_payloads, 2u);
}


// The raw capture hands the correlator decoded fields (TraceRecord::typed)
// for its hot events; text sources hand it the kernel's print layout. One
// event as both.
struct DualEvent {
  uint64_t ts_ns = 0;
  int cpu = 0;
  int pid = 0;
  std::string task;
  std::string flags = ".....";
  std::string event;
  TypedEvent typed;
  std::string rwbs;      // storage for typed.rwbs
  std::string irq_name;  // storage for typed.irq_name
  std::string comm = "x";
  bool preempted = false;  // prev_state "R+" in the text
};

// The kernel's TP_printk of each event (6.x), from the typed fields.
std::string KernelText(const DualEvent& e) {
  const TypedEvent& t = e.typed;
  switch (t.kind) {
    case TypedEvent::Kind::kBlockIssue:
      return absl::StrCat(t.major, ",", t.minor, " ", e.rwbs, " ", t.bytes, " () ", t.sector,
                          " + ", t.nr_sector, " be,0,4 [", e.comm, "]");
    case TypedEvent::Kind::kBlockComplete:
    case TypedEvent::Kind::kBlockRequeue:
      return absl::StrCat(t.major, ",", t.minor, " ", e.rwbs, " () ", t.sector, " + ",
                          t.nr_sector, " be,0,4 [", t.error, "]");
    case TypedEvent::Kind::kIrqEntry:
      return absl::StrCat("irq=", t.irq, " name=", e.irq_name);
    case TypedEvent::Kind::kIrqExit:
      return absl::StrCat("irq=", t.irq, " ret=handled");
    case TypedEvent::Kind::kWaking:
      return absl::StrCat("comm=", e.comm, " pid=", t.pid, " prio=120 target_cpu=00", e.cpu);
    case TypedEvent::Kind::kSwitch:
      return absl::StrCat("prev_comm=", e.task, " prev_pid=", t.prev_pid,
                          " prev_prio=120 prev_state=", std::string(1, t.prev_state),
                          e.preempted ? "+" : "", " ==> next_comm=", e.comm,
                          " next_pid=", t.next_pid, " next_prio=120");
  }
  return "";
}

const char* EventName(TypedEvent::Kind kind, uint32_t variant) {
  switch (kind) {
    case TypedEvent::Kind::kBlockIssue: return "block_rq_issue";
    case TypedEvent::Kind::kBlockComplete: return "block_rq_complete";
    case TypedEvent::Kind::kBlockRequeue: return "block_rq_requeue";
    case TypedEvent::Kind::kIrqEntry: return "irq_handler_entry";
    case TypedEvent::Kind::kIrqExit: return "irq_handler_exit";
    case TypedEvent::Kind::kWaking: return variant % 2 ? "sched_wakeup" : "sched_waking";
    case TypedEvent::Kind::kSwitch: return "sched_switch";
  }
  return "";
}

// Requests on three disks from five tasks, overlapping, each completed one
// of the ways the correlator tells apart: in a hard IRQ or its softirq, in
// a threaded handler, polled in the issuer's context, elsewhere; partial
// completions, requeues, errors, flushes, passthrough, unpaired ends.
std::vector<DualEvent> MixedLoad(uint32_t seed) {
  std::mt19937 rng(seed);
  auto pick = [&rng](uint32_t n) { return static_cast<uint32_t>(rng() % n); };
  struct Disk { int major, minor; int irq; const char* irq_name; const char* thread; };
  const Disk disks[] = {{254, 0, 36, "virtio1-req.0", "irq/36-virtio1-r"},
                        {259, 1, 41, "nvme0q1", "irq/41-nvme0q1"},
                        {8, 16, 19, "PCIe PME,ahci", "irq/19-ahci"}};
  const char* rwbs[] = {"R", "RS", "RA", "RM", "W", "WS", "WFS", "FWS", "DS", "WZS"};
  const int pids[] = {100, 101, 102, 103, 44};
  std::vector<DualEvent> out;
  auto add = [&](uint64_t ts, int cpu, int pid, std::string task, std::string flags,
                 TypedEvent::Kind kind) -> DualEvent& {
    DualEvent e;
    e.ts_ns = ts;
    e.cpu = cpu;
    e.pid = pid;
    e.task = std::move(task);
    e.flags = std::move(flags);
    e.typed.kind = kind;
    e.event = EventName(kind, pick(2));
    out.push_back(std::move(e));
    return out.back();
  };
  auto block = [&](DualEvent& e, const Disk& d, const std::string& flags_rwbs, uint64_t sector,
                   uint64_t nr, uint64_t bytes, int64_t error) {
    e.typed.major = d.major;
    e.typed.minor = d.minor;
    e.rwbs = flags_rwbs;
    e.typed.sector = sector;
    e.typed.nr_sector = nr;
    e.typed.bytes = bytes;
    e.typed.error = error;
  };
  for (int k = 0; k < 600; ++k) {
    const uint64_t t0 = 1'000'000'000ull + static_cast<uint64_t>(k) * 9'000 + pick(4'000);
    const Disk& d = disks[pick(3)];
    const int pid = pids[pick(5)];
    const std::string task = pid == 44 ? "kworker/1:1H" : absl::StrCat("dd", pid);
    const int cpu = static_cast<int>(pick(2));
    // The request: positional, flush (no position), passthrough, old
    // kernel (no bytes field: 0), or data without a position.
    std::string op = rwbs[pick(10)];
    uint64_t sector = 1000 + pick(50) * 64, nr = 8 * (1 + pick(4)), bytes = nr * 512;
    const uint32_t shape = pick(10);
    if (shape == 0) { op = "FF"; sector = ~uint64_t{0}; nr = 0; bytes = 0; }
    if (shape == 1) { op = "N"; sector = ~uint64_t{0}; nr = 0; bytes = 512 * (1 + pick(3)); }
    if (shape == 2) bytes = 0;
    if (shape == 3) sector = ~uint64_t{0};  // data but no position: pairs FIFO
    // 0-2 IRQ (0: completed in the hard handler), 3-4 threaded, 5 polled,
    // 6 elsewhere, 7 requeued and issued again, 8 the end was lost.
    const uint32_t how = pick(30) == 0 ? 8 : pick(8);
    if (pick(20) == 0) {
      // An end whose start the capture missed; a preflush write's data-less end.
      DualEvent& end = add(t0, cpu, 0, "<idle>", "..s1.", TypedEvent::Kind::kBlockComplete);
      block(end, d, pick(2) ? "WS" : "RS", sector + 7, pick(2) ? 0 : 8, 0, 0);
      continue;
    }
    DualEvent& issue = add(t0, cpu, pid, task, ".....", TypedEvent::Kind::kBlockIssue);
    block(issue, d, op, sector, nr, bytes, 0);
    issue.comm = task;
    // The issuer sleeps (D, S), goes idle (I) or is preempted (R+), or keeps running.
    const char states[] = {'D', 'D', 'S', 'I', 'R', 'R'};
    const uint32_t st = pick(6);
    if (st < 5) {
      DualEvent& sw = add(t0 + 3'000, cpu, pid, task, "d..2.", TypedEvent::Kind::kSwitch);
      sw.typed.prev_pid = pid;
      sw.typed.prev_state = states[st];
      sw.preempted = st == 4;
      sw.typed.next_pid = 0;
      sw.comm = "swapper";
    }
    const int64_t error = pick(12) == 0 ? -5 : 0;
    const int irq_cpu = static_cast<int>(pick(2));
    const uint64_t t1 = t0 + 20'000 + pick(60'000);
    const bool partial = nr >= 16 && pick(3) == 0;
    auto complete = [&](DualEvent& c, uint64_t s, uint64_t n) {
      block(c, d, op, s, n, 0, error);
    };
    if (how == 7) {
      DualEvent& rq = add(t0 + 8'000, cpu, pid, task, ".....", TypedEvent::Kind::kBlockRequeue);
      block(rq, d, op, sector, nr, 0, 0);
      DualEvent& again = add(t0 + 9'000, cpu, pid, task, ".....", TypedEvent::Kind::kBlockIssue);
      block(again, d, op, sector, nr, bytes, 0);
    }
    if (how <= 4 || how == 7) {
      DualEvent& entry = add(t1, irq_cpu, 0, "<idle>", "d.h1.", TypedEvent::Kind::kIrqEntry);
      entry.typed.irq = d.irq;
      entry.irq_name = d.irq_name;
      const bool threaded = how == 3 || how == 4;
      const bool in_hard = how == 0;
      auto do_complete = [&](uint64_t ts) {
        const std::string ctx = threaded ? "....." : in_hard ? "d.h1." : "..s1.";
        const int cpid = threaded ? 300 + d.irq : 0;
        const std::string ctask = threaded ? d.thread : "<idle>";
        if (partial) {
          DualEvent& c1 = add(ts, irq_cpu, cpid, ctask, ctx, TypedEvent::Kind::kBlockComplete);
          complete(c1, sector, nr / 2);
          DualEvent& c2 = add(ts + 500, irq_cpu, cpid, ctask, ctx,
                              TypedEvent::Kind::kBlockComplete);
          complete(c2, sector + nr / 2, nr - nr / 2);
        } else {
          DualEvent& c = add(ts, irq_cpu, cpid, ctask, ctx, TypedEvent::Kind::kBlockComplete);
          complete(c, sector, nr);
        }
        DualEvent& w = add(ts + 1'000, irq_cpu, cpid, ctask, in_hard ? "d.h3." : "d.s3.",
                           TypedEvent::Kind::kWaking);
        w.typed.pid = pid;
        w.comm = task;
      };
      if (in_hard) do_complete(t1 + 1'000);
      DualEvent& exit = add(t1 + 4'000, irq_cpu, 0, "<idle>", "d.h1.", TypedEvent::Kind::kIrqExit);
      // Now and then an exit of another IRQ than the one entered.
      exit.typed.irq = pick(15) == 0 ? d.irq + 1 : d.irq;
      if (!in_hard) do_complete(t1 + 6'000 + (threaded ? 20'000 : 0));
      DualEvent& in = add(t1 + 40'000 + pick(30'000), cpu, 0, "swapper", "d..2.",
                          TypedEvent::Kind::kSwitch);
      in.typed.prev_pid = 0;
      in.typed.prev_state = 'R';
      in.typed.next_pid = pid;
      in.comm = task;
    } else if (how == 8) {
      // no end
    } else if (how == 5) {
      DualEvent& c = add(t1, cpu, pid, task, ".....", TypedEvent::Kind::kBlockComplete);
      complete(c, sector, nr);
    } else {
      DualEvent& c = add(t1, 1 - cpu, 555, "other", ".....", TypedEvent::Kind::kBlockComplete);
      complete(c, sector, nr);
    }
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const DualEvent& a, const DualEvent& b) { return a.ts_ns < b.ts_ns; });
  for (auto& e : out) {
    e.typed.rwbs = e.rwbs;
    e.typed.irq_name = e.irq_name;
  }
  return out;
}

// Everything the correlator produced, one line per sample, then its stats.
std::vector<std::string> Outcome(TraceCorrelator& c) {
  std::vector<std::string> lines;
  for (const auto& e : c.completions()) {
    lines.push_back(absl::StrCat("completion ", e.device, " op=", e.opcode, " bytes=", e.bytes,
                                 " wait=", e.wait_ns, " path=", static_cast<int>(e.path),
                                 " error=", e.error, " cpu=", e.cpu, " issue=", e.issue_ns,
                                 " end=", e.end_ns));
  }
  for (const auto& d : c.dispatches()) {
    lines.push_back(absl::StrCat("dispatch cpu=", d.cpu, " irq=", d.irq, " name=", d.irq_name,
                                 " device=", d.device, " handler=", d.handler_ns, " wake=",
                                 d.wake_ns ? absl::StrCat(*d.wake_ns) : "none"));
  }
  const CorrelatorStats& s = c.stats();
  lines.push_back(absl::StrCat("stats records=", s.records, " completions=", s.completions,
                               " dispatches=", s.dispatches, " unpaired=", s.unpaired_ends,
                               " flush_seq=", s.flush_sequence_ends, " evicted=", s.evicted,
                               " requeued=", s.requeued, " retried=", s.retried,
                               " malformed=", s.malformed_payloads, " other=", s.other_events,
                               " last_ts=", s.last_ts_ns));
  return lines;
}

std::vector<std::string> CorrelateDual(const std::vector<DualEvent>& events, bool typed,
                                       CorrelatorOptions options) {
  TraceCorrelator c(std::move(options));
  for (const auto& e : events) {
    const std::string text = KernelText(e);
    TraceRecord r;
    r.task = e.task;
    r.pid = e.pid;
    r.cpu = e.cpu;
    r.flags = e.flags;
    r.ts_ns = e.ts_ns;
    r.event = e.event;
    if (typed) {
      r.typed = &e.typed;  // no payload: the fields must come from here
    } else {
      r.payload = text;
    }
    c.Process(r);
  }
  c.Finish();
  return Outcome(c);
}

TEST(TraceCorrelatorTypedTest, TypedRecordsCorrelateAsTheirText) {
  for (uint32_t seed : {1u, 2u, 3u}) {
    SCOPED_TRACE(seed);
    const auto events = MixedLoad(seed);
    CorrelatorOptions options;
    options.max_pending = 16;  // lost ends' starts get evicted
    options.irq_device["nvme0q1"] = "259:1";
    const auto text = CorrelateDual(events, false, options);
    const auto typed = CorrelateDual(events, true, options);
    ASSERT_EQ(text.size(), typed.size());
    for (size_t i = 0; i < text.size(); ++i) EXPECT_EQ(text[i], typed[i]) << "line " << i;

    // The load exercised what it means to.
    int irq = 0, spin = 0, woken = 0, errors = 0, pcie = 0;
    for (const auto& line : text) {
      if (line.find("path=2") != std::string::npos) ++irq;
      if (line.find("path=1") != std::string::npos) ++spin;
      if (line.find("error=1") != std::string::npos) ++errors;
      if (line.rfind("dispatch", 0) == 0 && line.find("wake=none") == std::string::npos) ++woken;
      if (line.find("name=PCIe device") != std::string::npos) ++pcie;
    }
    EXPECT_GT(irq, 100);
    EXPECT_GT(spin, 10);
    EXPECT_GT(errors, 10);
    EXPECT_GT(woken, 50);
    EXPECT_GT(pcie, 5);  // an IRQ name with a space is cut there, as FindField cuts it
    EXPECT_NE(text.back().find("malformed=0 "), std::string::npos) << text.back();
    for (const char* counted : {"unpaired=0 ", "flush_seq=0 ", "evicted=0 ", "requeued=0 "}) {
      EXPECT_EQ(text.back().find(counted), std::string::npos) << counted << text.back();
    }
  }
}

// Negative numbers do not parse as text ("irq=-1", "pid=-1"): the typed
// path rejects them the same way.
TEST(TraceCorrelatorTypedTest, NegativeFieldsAreRejectedAsTheirText) {
  std::vector<DualEvent> events(4);
  events[0].typed.kind = TypedEvent::Kind::kIrqEntry;
  events[0].typed.irq = -1;
  events[1].typed.kind = TypedEvent::Kind::kIrqExit;
  events[1].typed.irq = -1;
  events[2].typed.kind = TypedEvent::Kind::kWaking;
  events[2].typed.pid = -1;
  events[3].typed.kind = TypedEvent::Kind::kSwitch;
  events[3].typed.prev_pid = -1;
  events[3].typed.next_pid = -1;
  for (size_t i = 0; i < events.size(); ++i) {
    events[i].ts_ns = 1000 + i;
    events[i].event = EventName(events[i].typed.kind, 0);
  }
  const auto text = CorrelateDual(events, false, {});
  EXPECT_EQ(CorrelateDual(events, true, {}), text);
  EXPECT_NE(text.back().find("malformed=2 "), std::string::npos) << text.back();
}

}  // namespace
}  // namespace spintune
