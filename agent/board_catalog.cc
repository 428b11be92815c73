// The simulated boards. Every constant is derived in docs/boards.md from
// the seed reports in ../shared/seeds; comments here give the short form.
#include "agent/board_model.h"

#include <algorithm>
#include <cmath>

namespace spintune {
namespace {

OpcodeModel Op(uint32_t opcode, std::string name, double share, std::vector<SizeShare> sizes,
               double device_median_ns, double device_sigma, double bus_ns_per_byte,
               double cpu_cycles) {
  OpcodeModel m;
  m.opcode = opcode;
  m.name = std::move(name);
  m.share = share;
  m.sizes = std::move(sizes);
  m.device_median_ns = device_median_ns;
  m.device_sigma = device_sigma;
  m.bus_ns_per_byte = bus_ns_per_byte;
  m.cpu_cycles = cpu_cycles;
  return m;
}

OpcodeModel WithSlowMode(OpcodeModel m, double share, double median_ns, double sigma) {
  m.slow_share = share;
  m.slow_median_ns = median_ns;
  m.slow_sigma = sigma;
  return m;
}

OpcodeModel WithErrors(OpcodeModel m, double share) {
  m.error_share = share;
  return m;
}

DefaultRule Rule(WaitParams wait, std::string note, uint64_t min_bytes = 0,
                 uint64_t max_bytes = 0) {
  DefaultRule r;
  r.any_opcode = true;
  r.min_bytes = min_bytes;
  r.max_bytes = max_bytes;
  r.wait = wait;
  r.note = std::move(note);
  return r;
}

// --- LiteX LiteSDCard (litex-mmc), seed 000 ------------------------------
// 4-bit bus at sd_clk = sys_clk / 2 (litex_mmc_setclk rounds the divider up
// to a power of two, minimum 2): 4 sys cycles per byte. mmc max_req_size is
// PAGE_SIZE, so every data request is 4 KiB: CMD23 + CMD18 (read) or CMD23
// + CMD25 (write) followed by CMD13 polls while the card programs.
struct Card {
  const char* model;
  double read_access_ns;   // CMD18 latency before data flows
  double read_sigma;
  double write_busy_ns;    // busy between the blocks of a CMD25
  double write_slow_share; // garbage collection
  double write_slow_ns;
};
constexpr Card kSlowCard = {"SanDisk 32GB (older, slow)", 2.9e6, 0.25, 600e3, 0.05, 25e6};
constexpr Card kFastCard = {"SanDisk Ultra 32GB (fast)", 60e3, 0.3, 150e3, 0.03, 8e6};

std::vector<OpcodeModel> LitexOpcodes(uint64_t sys_khz, const Card& card) {
  const double ns_per_byte = 4.0 * 1e6 / static_cast<double>(sys_khz);
  // A command and its short response: ~136 sd clocks = 272 sys cycles, plus
  // the CSR writes that issue it.
  const double cmd_cycles = 400;
  return {
      Op(23, "CMD23 SET_BLOCK_COUNT", 0.40, {{0, 1}}, 500, 0.2, 0, cmd_cycles),
      Op(13, "CMD13 SEND_STATUS", 0.20, {{0, 1}}, 500, 0.2, 0, cmd_cycles),
      Op(18, "CMD18 READ_MULTIPLE_BLOCK", 0.20, {{4096, 1}}, card.read_access_ns,
         card.read_sigma, ns_per_byte, cmd_cycles),
      WithErrors(WithSlowMode(Op(25, "CMD25 WRITE_MULTIPLE_BLOCK", 0.20, {{4096, 1}},
                                 card.write_busy_ns, 0.5, ns_per_byte, cmd_cycles),
                              card.write_slow_share, card.write_slow_ns, 0.4),
                 2e-4),
  };
}

// Upstream litex_mmc_send_cmd(): wait for the IRQ when data is transferred
// (or the response is R1b busy), else readx_poll_timeout() with
// SD_SLEEP_US = 5.
std::vector<DefaultRule> LitexUpstreamRules() {
  return {Rule(WaitParams::Irq(), "litex-mmc upstream: IRQ for data transfers", 1),
          Rule(WaitParams::PollSleep(5'000),
               "litex-mmc upstream: readx_poll_timeout with SD_SLEEP_US 5")};
}

// Platform of a LiteX-style board: IRQ path and timer in CPU cycles.
struct LitexCpu {
  const char* cpu_class;
  const char* cpu_model;
  uint64_t sys_khz;
  double irq_overhead_cycles, irq_handler_cycles, irq_wake_cycles, timer_cpu_cycles;
  double timer_wake_ns;
};

BoardModel LitexBoard(const char* name, const LitexCpu& cpu, const Card& card,
                      std::string sources) {
  BoardModel b;
  b.name = name;
  b.summary = std::string(cpu.cpu_model) + ", litex-mmc, " + card.model;
  b.cpu_model = cpu.cpu_model;
  b.cpu_class = cpu.cpu_class;
  b.cpu_khz = cpu.sys_khz;
  b.kernel_release = "6.6 litex-rebase (simulated)";
  b.device_name = "mmc0";
  b.driver = "litex-mmc";
  b.device_model = card.model;
  b.irq_overhead_cycles = cpu.irq_overhead_cycles;
  b.irq_handler_cycles = cpu.irq_handler_cycles;
  b.irq_wake_cycles = cpu.irq_wake_cycles;
  b.poll_read_cycles = 30;  // one CSR read over the SoC bus
  b.timer_cpu_cycles = cpu.timer_cpu_cycles;
  b.timer_wake_ns = cpu.timer_wake_ns;
  b.opcodes = LitexOpcodes(cpu.sys_khz, card);
  b.default_rules = LitexUpstreamRules();
  b.sources = std::move(sources);
  return b;
}

// Rocket: rows 1 and 6 of the seed table (IRQ for data vs spin everything)
// differ by 62.5k cycles (50 MHz) to 68k cycles (100 MHz) per 4 KiB request
// with one IRQ: the IRQ path adds ~60k cycles of latency, of which ~22.5k
// are CPU work. Row 5 (poll with 5 us sleeps): 1126 KB/s = 3.6 ms per 4 KiB
// at 50 MHz (one 4 ms tick, HZ=250) and 388 KB/s = 10.5 ms at 100 MHz (one
// 10 ms tick, HZ=100): sleeps are tick-bound, mean oversleep half a tick.
constexpr LitexCpu kRocket50 = {"rocket", "LiteX Rocket RV64GC (4 cores) @ 50 MHz", 50'000,
                                20'000, 2'500, 60'000, 12'000, 2e6};
constexpr LitexCpu kRocket100 = {"rocket", "LiteX Rocket RV64GC (4 cores) @ 100 MHz", 100'000,
                                 20'000, 2'500, 60'000, 12'000, 5e6};
// NaxRiscv (Dolu1990): all-IRQ read 3343 KB/s vs sleep-0 4551 KB/s is +0.325
// ms per request with two IRQs, ~16k cycles each; vanilla (CMD23 polled
// with one 5 us sleep) 936 KB/s = 4.38 ms vs 0.9 ms: that sleep lasts ~3.5
// ms ("waiting on timer tick").
constexpr LitexCpu kNax = {"naxriscv", "LiteX NaxRiscv RV64 (2 cores, 256 KB L2) @ 100 MHz",
                           100'000, 10'000, 1'500, 16'000, 8'000, 3.5e6};
// Microwatt (paulusmack): "the latency to take and dispatch an interrupt and
// then resume a task that had called wait_for_completion() [is] at least 120
// microseconds" at 100 MHz; hrtimer sleeps cost about the IRQ path plus
// usleep_range slack.
constexpr LitexCpu kMicrowatt = {"microwatt", "Microwatt ppc64le @ 100 MHz (FPGA)", 100'000,
                                 9'000, 1'500, 12'000, 9'000, 130e3};

// Markov modulation (issue 16, docs/boards.md): the card's garbage
// collection comes in episodes instead of striking writes independently.
// Calibrated: the slow share of writes stays the card's (seed 000's write
// times); assumed (no seed measures them): episodes of 25 commands (about 5
// of the 4 KiB writes), 1 ms of busy for the commands issued meanwhile, and
// reads issued within 500 us of a write's completion 250 us slower (the card
// still programs the write).
BoardModel WithGarbageCollection(BoardModel b, const Card& card) {
  b.name += "-gc";
  b.summary += ", garbage collection in episodes (Markov-modulated)";
  b.modulation.busy_share = card.write_slow_share;
  b.modulation.busy_run_commands = 25;
  b.modulation.busy_extra_ns = 1e6;
  b.modulation.after_write_window_ns = 500e3;
  b.modulation.after_write_extra_ns = 250e3;
  b.modulation.read_opcodes = {17, 18};
  b.modulation.write_opcodes = {24, 25};
  b.sources += "; Markov modulation: episode length, busy and read-after-write delays assumed";
  return b;
}

std::vector<BoardModel> BuildCatalog() {
  std::vector<BoardModel> boards;
  const std::string table = "seed 000 (gsomlo's table, rows 1, 5, 6)";
  boards.push_back(LitexBoard("litex-rocket-50mhz-slowcard", kRocket50, kSlowCard,
                              table + "; timer oversleep from row 5: HZ=250 tick"));
  boards.push_back(LitexBoard("litex-rocket-50mhz-fastcard", kRocket50, kFastCard,
                              table + "; timer oversleep from row 5: HZ=250 tick"));
  boards.push_back(LitexBoard("litex-rocket-100mhz-slowcard", kRocket100, kSlowCard,
                              table + "; timer oversleep from row 5: HZ=100 tick"));
  boards.push_back(LitexBoard("litex-rocket-100mhz-fastcard", kRocket100, kFastCard,
                              table + "; timer oversleep from row 5: HZ=100 tick"));
  boards.push_back(LitexBoard("litex-naxriscv-100mhz", kNax, kFastCard,
                              "seed 000 (Dolu1990: vanilla W468/R936, sleep 0 W2100/R4551, "
                              "b695cee W1733/R3343; CMD23 spins once)"));
  boards.push_back(LitexBoard("microwatt-100mhz", kMicrowatt, kFastCard,
                              "seed 000 (paulusmack: IRQ -> task >= 120 us at 100 MHz; poll "
                              "~150 us)"));
  {  // i.MX28 mxs-mmc, seed 001.
    BoardModel b;
    b.name = "imx28-mxs-mmc";
    b.summary = "i.MX28 ARM926EJ-S @ 454 MHz, mxs-mmc, class 10 SD card";
    b.cpu_model = "ARM926EJ-S @ 454 MHz (i.MX28, Duckbill)";
    b.cpu_class = "arm926";
    b.cpu_khz = 454'000;
    b.kernel_release = "4.8 (simulated)";
    b.device_name = "mmc0";
    b.driver = "mxs-mmc";
    b.device_model = "class 10 SD card";
    b.irq_overhead_cycles = 7'000;
    b.irq_handler_cycles = 1'500;
    b.irq_wake_cycles = 9'000;
    b.poll_read_cycles = 40;
    b.timer_cpu_cycles = 5'000;
    b.timer_wake_ns = 60e3;
    const double bus = 8.0 / (4 * 48e6) * 1e9;  // 4-bit at 48 MHz
    b.opcodes = {
        Op(13, "CMD13 SEND_STATUS", 0.15, {{0, 1}}, 1'500, 0.2, 0, 600),
        Op(17, "CMD17 READ_SINGLE_BLOCK", 0.05, {{512, 1}}, 300e3, 0.3, bus, 600),
        Op(18, "CMD18 READ_MULTIPLE_BLOCK", 0.10, {{4096, 0.5}, {65536, 0.5}}, 300e3, 0.3, bus,
           600),
        WithSlowMode(Op(24, "CMD24 WRITE_BLOCK", 0.15, {{512, 0.6}, {1024, 0.4}}, 600e3, 0.5,
                        bus, 600),
                     0.02, 20e6, 0.4),
        WithErrors(WithSlowMode(Op(25, "CMD25 WRITE_MULTIPLE_BLOCK", 0.35,
                                   {{4096, 0.3}, {32768, 0.3}, {131072, 0.4}}, 1.2e6, 0.5, bus,
                                   600),
                                0.04, 40e6, 0.4),
                   2e-4),
        Op(12, "CMD12 STOP_TRANSMISSION (R1b)", 0.20, {{0, 1}}, 300e3, 0.8, 0, 600),
    };
    // Mainline mxs-mmc: DMA and IRQ for every command.
    b.default_rules = {Rule(WaitParams::Irq(), "mxs-mmc mainline: DMA + IRQ for every request")};
    b.sources = "seed 001 (Joerg Krause / Stefan Wahren: dd 1k 3.8 MB/s vs 3.0 polled, "
                "8k 9.9 vs 5.7; vendor kernel polls <= 1024 bytes)";
    boards.push_back(std::move(b));
  }
  {  // BCM2835 SPI, seed 002.
    BoardModel b;
    b.name = "bcm2835-spi-20mhz";
    b.summary = "BCM2835 ARM1176 @ 700 MHz, spi-bcm2835 at 20 MHz, ks8851 Ethernet";
    b.cpu_model = "ARM1176JZF-S @ 700 MHz (BCM2835)";
    b.cpu_class = "arm1176";
    b.cpu_khz = 700'000;
    b.kernel_release = "5.3-rt (simulated)";
    b.device_name = "spi0";
    b.driver = "spi-bcm2835";
    b.device_model = "ks8851 SPI Ethernet";
    b.irq_overhead_cycles = 8'000;
    b.irq_handler_cycles = 1'200;
    b.irq_wake_cycles = 10'000;
    b.poll_read_cycles = 50;
    b.timer_cpu_cycles = 6'000;
    b.timer_wake_ns = 50e3;
    // 8 bits per byte at 20 MHz; after the last byte, the TX FIFO drains:
    // "45% of the cases no busy-waiting, 76% fewer than 10 iterations".
    b.opcodes = {Op(0, "SPI transfer", 1.0,
                    {{2, 0.35}, {4, 0.25}, {64, 0.10}, {600, 0.15}, {1518, 0.15}}, 600, 0.8,
                    400, 2'000)};
    // spi-bcm2835: transfers estimated under polling_limit_us = 30 us (at
    // 9 bit-times per byte: <= 66 bytes at 20 MHz) are polled, falling back
    // to the IRQ after BCM2835_SPI_POLLING_JIFFIES = 2 jiffies (20 ms at
    // HZ=100); longer ones use DMA (>= 96 bytes) or IRQ.
    b.default_rules = {
        Rule(WaitParams::SpinThenIrq(20'000'000),
             "spi-bcm2835: poll transfers under polling_limit_us 30, 2 jiffies", 0, 66),
        Rule(WaitParams::Irq(), "spi-bcm2835: IRQ/DMA above polling_limit_us")};
    b.sources = "seed 002 (Lukas Wunner, 8259bf66: TX DMA IRQ then FIFO drain, 20 MHz)";
    boards.push_back(std::move(b));
  }
  {  // LS1021A DSPI, seed 004.
    BoardModel b;
    b.name = "ls1021a-dspi-12mhz";
    b.summary = "LS1021A Cortex-A7 @ 1.2 GHz, spi-fsl-dspi TCFQ at 12 MHz, SJA1105 switch";
    b.cpu_model = "Cortex-A7 (2 cores) @ 1.2 GHz (LS1021A-TSN)";
    b.cpu_class = "a7";
    b.cpu_khz = 1'200'000;
    b.kernel_release = "5.3 (simulated)";
    b.device_name = "spi0";
    b.driver = "spi-fsl-dspi";
    b.device_model = "SJA1105 (PTP clock reads, 12-byte transfers)";
    // IRQ mode: 12 IRQs per 12-byte transfer, delay ~201 us (test A) -> ~16.7
    // us per frame through the IRQ path.
    b.irq_overhead_cycles = 12'000;
    b.irq_handler_cycles = 2'400;
    b.irq_wake_cycles = 8'000;
    b.poll_read_cycles = 60;
    b.timer_cpu_cycles = 5'000;
    b.timer_wake_ns = 55e3;
    // TCFQ: one 8-bit frame per wait, 667 ns at 12 MHz; "the status register
    // is always set on the first access" in poll mode.
    b.opcodes = {Op(0, "DSPI TCFQ frame", 1.0, {{1, 1}}, 150, 0.3, 667, 200)};
    b.default_rules = {Rule(WaitParams::Irq(), "spi-fsl-dspi TCFQ (before v5.4): IRQ per frame")};
    b.sources = "seed 004 (Vladimir Oltean: IRQ mode delay 163-237 us per 12-byte transfer, "
                "poll mode 4.4 us, frame 666 ns at 12 MHz)";
    boards.push_back(std::move(b));
  }
  // Last, so the calibrated boards keep their places.
  boards.push_back(WithGarbageCollection(boards[3], kFastCard));  // rocket 100 MHz, fast card
  boards.push_back(WithGarbageCollection(boards[5], kFastCard));  // microwatt
  return boards;
}

}  // namespace

namespace {

double Lognormal(std::mt19937_64& rng, double median, double sigma) {
  if (median <= 0) return 0.0;
  return std::lognormal_distribution<double>(std::log(median), sigma)(rng);
}

// The completion time in the slow or the fast mode.
double DrawInMode(const BoardModel& board, const OpcodeModel& op, uint64_t bytes, bool slow,
                  std::mt19937_64& rng) {
  const double device_ns = slow ? Lognormal(rng, op.slow_median_ns, op.slow_sigma)
                                : Lognormal(rng, op.device_median_ns, op.device_sigma);
  return device_ns + static_cast<double>(bytes) * op.bus_ns_per_byte +
         board.CyclesToNs(op.cpu_cycles);
}

bool Contains(const std::vector<uint32_t>& v, uint32_t x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

}  // namespace

double DrawCompletionNs(const BoardModel& board, const OpcodeModel& op, uint64_t bytes,
                        std::mt19937_64& rng) {
  const bool slow = std::uniform_real_distribution<double>(0, 1)(rng) < op.slow_share;
  return DrawInMode(board, op, bytes, slow, rng);
}

BoardSimulator::BoardSimulator(const BoardModel& board, uint64_t seed, std::mt19937_64* rng)
    : board_(board),
      rng_(rng),
      timeline_rng_(seed ^ 0x7469'6D65'6C69'6E65ull),  // "timeline"
      chain_rng_(seed ^ 0x6368'6169'6E00'0000ull) {   // "chain"
  std::vector<double> shares;
  for (const auto& op : board.opcodes) {
    shares.push_back(op.share);
    std::vector<double> sizes;
    for (const auto& sz : op.sizes) sizes.push_back(sz.share);
    pick_size_.emplace_back(sizes.begin(), sizes.end());
  }
  pick_opcode_ = std::discrete_distribution<size_t>(shares.begin(), shares.end());
}

SimRequest BoardSimulator::Next() {
  const Modulation& m = board_.modulation;
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  SimRequest r;
  const size_t op_index = pick_opcode_(*rng_);
  r.op = &board_.opcodes[op_index];
  r.bytes = r.op->sizes[pick_size_[op_index](*rng_)].bytes;
  if (m.busy_share > 0) {
    // Stay busy with 1 - 1/L; enter with s / (L (1 - s)): episodes of L
    // commands on average, busy a share s of the time.
    const double stay = 1 - 1 / m.busy_run_commands;
    const double enter = m.busy_share / (m.busy_run_commands * (1 - m.busy_share));
    busy_ = unit(chain_rng_) < (busy_ ? stay : enter);
  }
  r.busy = busy_;
  if (m.busy_share > 0 && r.op->slow_share > 0) {
    r.x_ns = DrawInMode(board_, *r.op, r.bytes, busy_, *rng_);
  } else {
    r.x_ns = DrawCompletionNs(board_, *r.op, r.bytes, *rng_);
    if (busy_) r.x_ns += Lognormal(chain_rng_, m.busy_extra_ns, 0.3);
  }
  if (m.after_write_window_ns > 0 && wrote_ && Contains(m.read_opcodes, r.op->opcode) &&
      now_ns_ - last_write_done_ns_ < m.after_write_window_ns) {
    r.x_ns += Lognormal(chain_rng_, m.after_write_extra_ns, 0.3);
  }
  r.error = unit(*rng_) < r.op->error_share;
  r.issue_ns = static_cast<uint64_t>(std::llround(now_ns_));
  const double done_ns = now_ns_ + r.x_ns;
  if (Contains(m.write_opcodes, r.op->opcode)) {
    wrote_ = true;
    last_write_done_ns_ = done_ns;
  }
  now_ns_ = done_ns + std::exponential_distribution<double>(1 / board_.think_ns)(timeline_rng_);
  return r;
}

PlatformCosts BoardModel::Costs() const {
  PlatformCosts c;
  c.irq_cpu_ns = CyclesToNs(irq_overhead_cycles + irq_handler_cycles);
  c.irq_wake_ns = CyclesToNs(irq_wake_cycles);
  c.poll_read_ns = CyclesToNs(poll_read_cycles);
  c.timer_cpu_ns = CyclesToNs(timer_cpu_cycles);
  c.timer_wake_ns = timer_wake_ns;
  return c;
}

const std::vector<BoardModel>& BoardCatalog() {
  static const std::vector<BoardModel> kBoards = BuildCatalog();
  return kBoards;
}

const BoardModel* FindBoard(const std::string& name) {
  for (const auto& b : BoardCatalog()) {
    if (b.name == name) return &b;
  }
  return nullptr;
}

}  // namespace spintune
