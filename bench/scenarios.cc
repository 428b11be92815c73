#include "bench/scenarios.h"

#include <cmath>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "agent/board_model.h"
#include "policy/default_rule.h"

namespace spintune {
namespace {

std::string SizeLabel(uint64_t bytes) {
  if (bytes == 0) return "0";
  if (bytes % 1024 == 0) return absl::StrCat(bytes / 1024, "KiB");
  return absl::StrCat(bytes, "B");
}

Sampler Lognormal(double median, double sigma) {
  return [=](std::mt19937_64& rng) {
    return std::lognormal_distribution<double>(std::log(median), sigma)(rng);
  };
}

// Platform costs for the synthetic families, by the buy price B at lambda 1.
PlatformCosts SyntheticCosts(double irq_cpu_ns, double irq_wake_ns) {
  PlatformCosts c;
  c.irq_cpu_ns = irq_cpu_ns;
  c.irq_wake_ns = irq_wake_ns;
  c.poll_read_ns = 100;
  c.timer_cpu_ns = irq_cpu_ns / 2;
  c.timer_wake_ns = std::max(50e3, irq_wake_ns);
  return c;
}

struct Family {
  std::string name;
  // Samplers scaled to the buy price b (ns).
  std::function<std::vector<Segment>(double b, size_t n, size_t seg)> make;
};

std::vector<Family> SyntheticFamilies() {
  auto one = [](std::string label, Sampler s, size_t n) {
    return std::vector<Segment>{{std::move(label), std::move(s), n}};
  };
  return {
      {"deterministic", [=](double b, size_t n, size_t) {
         return one("X=0.8B", [b](std::mt19937_64&) { return 0.8 * b; }, n);
       }},
      {"uniform", [=](double b, size_t n, size_t) {
         return one("U[0,3B]", [b](std::mt19937_64& r) {
           return std::uniform_real_distribution<double>(0, 3 * b)(r);
         }, n);
       }},
      {"exponential", [=](double b, size_t n, size_t) {
         return one("Exp(mean 0.7B)", [b](std::mt19937_64& r) {
           return std::exponential_distribution<double>(1 / (0.7 * b))(r);
         }, n);
       }},
      {"lognormal", [=](double b, size_t n, size_t) {
         return one("LN(median 0.5B, 1.0)", Lognormal(0.5 * b, 1.0), n);
       }},
      {"bimodal", [=](double b, size_t n, size_t) {
         return one("90% 0.1B / 10% 20B", [b](std::mt19937_64& r) {
           const bool slow = std::uniform_real_distribution<double>(0, 1)(r) < 0.1;
           return std::lognormal_distribution<double>(std::log(slow ? 20 * b : 0.1 * b), 0.2)(r);
         }, n);
       }},
      {"pareto", [=](double b, size_t n, size_t) {
         return one("Pareto(alpha 1.5, xm 0.2B)", [b](std::mt19937_64& r) {
           const double u = std::uniform_real_distribution<double>(1e-12, 1)(r);
           return 0.2 * b / std::pow(u, 1 / 1.5);
         }, n);
       }},
      {"shift", [=](double b, size_t, size_t seg) {
         return std::vector<Segment>{
             {"LN(0.2B)", Lognormal(0.2 * b, 0.3), seg},
             {"LN(5B)", Lognormal(5 * b, 0.3), seg}};
       }},
  };
}

}  // namespace

std::vector<Scenario> BuildScenarios(const ScenarioOptions& o) {
  std::vector<Scenario> out;
  auto keep = [&](const Scenario& s) {
    return o.filter.empty() || absl::StrContains(s.name, o.filter);
  };
  for (double lambda : o.lambdas) {
    const std::string lam = absl::StrFormat("l%g", lambda);
    if (o.boards) {
      for (const BoardModel& board : BoardCatalog()) {
        if (board.modulation.modulated()) continue;  // not stationary: the context suite's
        for (const OpcodeModel& op : board.opcodes) {
          for (const SizeShare& size : op.sizes) {
            Scenario s;
            s.name = absl::StrCat("board/", board.name, "/op", op.opcode, "/",
                                  SizeLabel(size.bytes), "/", lam);
            s.family = "board";
            s.opcode = op.opcode;
            s.bytes = size.bytes;
            s.costs = board.Costs();
            s.costs_label = board.name;
            s.lambda = lambda;
            const BoardModel* b = &board;
            const OpcodeModel* m = &op;
            const uint64_t bytes = size.bytes;
            s.segments.push_back({op.name, [b, m, bytes](std::mt19937_64& r) {
                                    return DrawCompletionNs(*b, *m, bytes, r);
                                  },
                                  o.train_samples + o.test_samples});
            if (keep(s)) out.push_back(std::move(s));
          }
        }
      }
      // Drift on real boards: a card that starts garbage collection, and a
      // CPU clock that halves (the ondemand governor of seed 004).
      {
        static const BoardModel* gc = FindBoard("litex-rocket-100mhz-fastcard");
        static const OpcodeModel gc_before = gc->opcodes[3];  // CMD25
        static const OpcodeModel gc_after = [] {
          OpcodeModel m = gc->opcodes[3];
          m.slow_share = 0.4;
          return m;
        }();
        Scenario s;
        s.name = absl::StrCat("shift/gc-onset/litex-rocket-100mhz-fastcard/op25/", lam);
        s.family = "shift";
        s.opcode = 25;
        s.bytes = 4096;
        s.costs = gc->Costs();
        s.costs_label = gc->name;
        s.lambda = lambda;
        s.segments = {{"GC 3%", [](std::mt19937_64& r) { return DrawCompletionNs(*gc, gc_before, 4096, r); },
                       o.segment_samples},
                      {"GC 40%", [](std::mt19937_64& r) { return DrawCompletionNs(*gc, gc_after, 4096, r); },
                       o.segment_samples}};
        if (keep(s)) out.push_back(std::move(s));
      }
      {
        static const BoardModel* fast = FindBoard("ls1021a-dspi-12mhz");
        static const BoardModel slow = [] {
          BoardModel b = *fast;
          b.cpu_khz /= 2;  // ondemand at 600 MHz
          return b;
        }();
        Scenario s;
        s.name = absl::StrCat("shift/cpufreq-halves/ls1021a-dspi-12mhz/op0/", lam);
        s.family = "shift";
        s.opcode = 0;
        s.bytes = 1;
        s.costs = fast->Costs();  // the platform costs a table was fitted with
        s.costs_label = fast->name;
        s.lambda = lambda;
        s.segments = {{"1.2 GHz", [](std::mt19937_64& r) {
                         return DrawCompletionNs(*fast, fast->opcodes[0], 1, r);
                       },
                       o.segment_samples},
                      {"600 MHz", [](std::mt19937_64& r) {
                         return DrawCompletionNs(slow, slow.opcodes[0], 1, r);
                       },
                       o.segment_samples}};
        if (keep(s)) out.push_back(std::move(s));
      }
    }
    if (o.synthetic) {
      const std::vector<std::pair<double, double>> costs = {
          {2e3, 3e3}, {20e3, 30e3}, {200e3, 300e3}};
      for (const Family& f : SyntheticFamilies()) {
        for (const auto& [cpu, wake] : costs) {
          Scenario s;
          s.costs = SyntheticCosts(cpu, wake);
          const double b = cpu + std::max(lambda, 1.0) * wake;
          s.costs_label = absl::StrFormat("B=%gus", (cpu + wake) / 1e3);
          s.name = absl::StrCat(f.name == "shift" ? "shift/" : "synthetic/", f.name, "/",
                                s.costs_label, "/", lam);
          s.family = f.name;
          s.lambda = lambda;
          s.segments = f.make(b, o.train_samples + o.test_samples, o.segment_samples);
          if (keep(s)) out.push_back(std::move(s));
        }
      }
    }
  }
  return out;
}

}  // namespace spintune
