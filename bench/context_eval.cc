#include "bench/context_eval.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <random>
#include <tuple>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "agent/board_model.h"
#include "bench/bench_runner.h"
#include "bench/references.h"
#include "bench/scenarios.h"
#include "cli/table_format.h"
#include "common/status_macros.h"
#include "models/context_features.h"
#include "models/latency_histogram.h"
#include "models/wait_optimizer.h"
#include "policy/default_rule.h"
#include "policy/platform_json.h"
#include "policy/samples_csv.h"

namespace spintune {
namespace {

constexpr uint64_t kMaxSpinNs = 10'000'000;  // the driver header's cap, as the main suite
constexpr double kThinkNs = 50'000;          // i.i.d. streams: completion -> next issue
constexpr size_t kTrain = 5'000;             // simulated streams: fit on these ...
constexpr size_t kTest = 20'000;             // ... evaluate on these
constexpr double kReplayTrainShare = 0.3;    // the replayed stream: first 30% fit
constexpr size_t kReplayMinSamples = 2'000;  // keys with fewer are not evaluated

std::string SizeLabel(uint64_t bytes) {
  if (bytes == 0) return "0";
  if (bytes % 1024 == 0) return absl::StrCat(bytes / 1024, "KiB");
  return absl::StrCat(bytes, "B");
}

OptimizerOptions Options(double lambda) {
  OptimizerOptions o;
  o.objective = lambda == 0 ? Objective::Cpu() : Objective{lambda, false};
  o.max_spin_ns = kMaxSpinNs;
  return o;
}

// The wait a table entry gets for these completion times (a histogram, as
// the tuner and `spintune tune` fit); IRQ when nothing is feasible.
WaitParams FitWait(std::vector<uint64_t> x, const PlatformCosts& costs,
                   const OptimizerOptions& options) {
  std::sort(x.begin(), x.end());
  LatencyHistogram h;
  for (uint64_t v : x) h.Record(v);
  auto fit = OptimizeWait(WaitDistribution::FromHistogram(h), costs, options);
  return fit.ok() ? fit->params : WaitParams::Irq();
}

// Relative slack on the cpu objective's latency cap, as the main suite's.
constexpr double kCapSlack = 0.01;

// One key's samples in issue order, with the hidden state where known.
struct KeySamples {
  std::vector<ContextSample> samples;
  std::vector<uint8_t> busy;
};

// Per key of one device stream. `busy`: per request, or empty.
std::map<std::pair<uint32_t, uint64_t>, KeySamples> ByKey(
    const std::vector<DeviceRequest>& requests, const std::vector<uint32_t>& opcodes,
    const std::vector<uint8_t>& busy = {}) {
  const std::vector<ContextVector> context = ComputeContext(requests);
  std::vector<size_t> order(requests.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return requests[a].issue_ns < requests[b].issue_ns;
  });
  std::map<std::pair<uint32_t, uint64_t>, KeySamples> out;
  for (size_t i : order) {
    // The key's bytes: the lowest length of its size class, for the label.
    const uint64_t label = SizeClassLowerBytes(SizeClassOf(requests[i].bytes));
    KeySamples& k = out[{opcodes[i], label}];
    k.samples.push_back({requests[i].wait_ns, context[i]});
    if (!busy.empty()) k.busy.push_back(busy[i]);
  }
  return out;
}

// One structured key's scenarios, at latency weights 1 and 10.
void AddStructured(const std::string& stream, const std::pair<uint32_t, uint64_t>& key,
                   const PlatformCosts& costs, size_t train, const KeySamples& samples,
                   std::vector<ContextScenario>* out) {
  for (double lambda : {1.0, 10.0}) {
    ContextScenario c;
    c.name = absl::StrFormat("%s/op%d/%s/l%g", stream, key.first, SizeLabel(key.second), lambda);
    c.stream = stream;
    c.structured = true;
    c.costs = costs;
    c.lambda = lambda;
    c.train = train;
    c.samples = samples.samples;
    c.busy = samples.busy;
    out->push_back(std::move(c));
  }
}

void AddIid(std::vector<ContextScenario>* out) {
  const ScenarioOptions so;
  for (const Scenario& s : BuildScenarios(so)) {
    if (s.shifting()) continue;
    const std::vector<double> x = GenerateStream(s);
    std::mt19937_64 rng(std::hash<std::string>()(s.name) ^ 0x7469'6D65ull);
    std::exponential_distribution<double> think(1 / kThinkNs);
    const auto& writes = DefaultWriteOpcodes();
    const bool write = s.family == "board" &&
                       std::find(writes.begin(), writes.end(), s.opcode) != writes.end();
    std::vector<DeviceRequest> requests;
    double now = 0;
    for (double v : x) {
      requests.push_back({static_cast<uint64_t>(now), static_cast<uint64_t>(v), s.bytes, write});
      now += v + std::round(think(rng));
    }
    const std::vector<ContextVector> context = ComputeContext(requests);
    ContextScenario c;
    c.name = absl::StrCat("iid/", s.name);
    c.stream = "iid";
    c.costs = s.costs;
    c.lambda = s.lambda;
    c.train = so.train_samples;
    for (size_t i = 0; i < x.size(); ++i) c.samples.push_back({requests[i].wait_ns, context[i]});
    out->push_back(std::move(c));
  }
}

void AddMarkov(std::vector<ContextScenario>* out) {
  for (const BoardModel& board : BoardCatalog()) {
    if (!board.modulation.modulated()) continue;
    const std::string stream = absl::StrCat("markov/", board.name);
    // Enough commands for kTrain + kTest of the rarest key (20% of them).
    std::mt19937_64 rng(1);
    BoardSimulator sim(board, 1, &rng);
    std::vector<DeviceRequest> requests;
    std::vector<uint32_t> opcodes;
    std::vector<uint8_t> busy;
    const auto& writes = DefaultWriteOpcodes();
    for (size_t i = 0; i < 6 * (kTrain + kTest); ++i) {
      const SimRequest r = sim.Next();
      const uint32_t op = r.op->opcode;
      requests.push_back({r.issue_ns, std::max<uint64_t>(1, std::llround(r.x_ns)), r.bytes,
                          std::find(writes.begin(), writes.end(), op) != writes.end()});
      opcodes.push_back(op);
      busy.push_back(r.busy ? 1 : 0);
    }
    for (auto& [key, samples] : ByKey(requests, opcodes, busy)) {
      if (samples.samples.size() < kTrain + kTest) continue;
      samples.samples.resize(kTrain + kTest);
      samples.busy.resize(kTrain + kTest);
      AddStructured(stream, key, board.Costs(), kTrain, samples, out);
    }
  }
}

absl::Status AddReplay(const std::string& dir, std::vector<ContextScenario>* out) {
  const std::string stream = "replay/vda-fsync";
  SPINTUNE_ASSIGN_OR_RETURN(SampleSet set, ReadSamplesCsv(dir + "/vda-fsync.csv"));
  SPINTUNE_ASSIGN_OR_RETURN(PlatformFile platform,
                            ReadPlatformFile(dir + "/vda-fsync-platform.json"));
  if (set.requests.empty() || set.cpu_classes.size() != 1 || set.devices.size() != 1) {
    return absl::InvalidArgumentError("the replay fixture: one device, one CPU class, issue_ns");
  }
  SPINTUNE_ASSIGN_OR_RETURN(CpuClassInfo cpu, platform.CpuClass(set.cpu_classes[0]));
  const std::vector<uint32_t> writes = platform.Device(set.devices[0]).write_opcodes;
  std::vector<DeviceRequest> requests;
  std::vector<uint32_t> opcodes;
  for (const TimedRequest& r : set.requests) {
    requests.push_back({r.issue_ns, r.wait_ns, r.bytes,
                        std::find(writes.begin(), writes.end(), r.opcode) != writes.end()});
    opcodes.push_back(r.opcode);
  }
  for (const auto& [key, samples] : ByKey(requests, opcodes)) {
    if (samples.samples.size() < kReplayMinSamples) continue;
    AddStructured(stream, key, cpu.costs,
                  static_cast<size_t>(kReplayTrainShare *
                                      static_cast<double>(samples.samples.size())),
                  samples, out);
  }
  return absl::OkStatus();
}

std::string Ratio(double a, double b) { return absl::StrFormat("%.3f", a / b); }

// Per structured stream and latency weight: the share of the gap its keys
// close together (sums over their evaluated requests).
struct StreamGap {
  double gap = 0, closed = 0, oracle = 0, state_oracle = 0;
  int keys = 0;
};
std::map<std::pair<std::string, double>, StreamGap> StreamGaps(
    const std::vector<ContextResult>& results) {
  std::map<std::pair<std::string, double>, StreamGap> out;
  for (const auto& r : results) {
    if (!r.structured) continue;
    StreamGap& g = out[{r.stream, r.lambda}];
    const double n = static_cast<double>(r.test);
    g.gap += n * (r.best_static_j - r.clairvoyant_j);
    g.closed += n * (r.best_static_j - r.context_j);
    g.oracle += n * (r.best_static_j - r.oracle_j);
    g.state_oracle += n * (r.best_static_j - r.state_oracle_j);  // NaN without a state
    ++g.keys;
  }
  return out;
}

// Mean J on `samples` of context leaves fitted on these very samples (in
// sample, no held-out part, no penalty, every 1% quantile a candidate,
// leaves of 10 samples): an upper bound of what a tree over the features
// reaches, not a table anyone could use.
double InSampleTreeJ(absl::Span<const ContextSample> samples, const PlatformCosts& costs,
                     const OptimizerOptions& options, double lambda) {
  ContextOptions o;
  o.in_sample = true;
  o.z_score = 0;
  o.split_penalty = 0;
  o.min_leaf_samples = 10;
  o.dense_cuts = 100;
  auto fit = FitContextTree(samples, costs, options, o);
  if (!fit.ok()) return std::nan("");
  ExpectedCost total;
  for (const auto& idx : fit->leaf_samples) {
    std::vector<uint64_t> x;
    for (size_t i : idx) x.push_back(samples[i].x_ns);
    const WaitParams w = FitWait(x, costs, options);
    for (uint64_t v : x) {
      const RequestCost c = CostOfRequest(static_cast<double>(v), w, costs);
      total.cpu_ns += c.cpu_ns;
      total.latency_ns += c.latency_ns;
    }
  }
  return total.Cost(lambda) / static_cast<double>(samples.size());
}

nlohmann::json OrNull(double v) {
  return std::isnan(v) ? nlohmann::json(nullptr) : nlohmann::json(v);
}

// The share of the gap `j` closes; NaN for a NaN `j`.
double Closed(double best_static_j, double clairvoyant_j, double j) {
  const double gap = best_static_j - clairvoyant_j;
  if (std::isnan(j)) return j;
  return gap > 0 ? (best_static_j - j) / gap : 0.0;
}

}  // namespace

double ContextResult::GapClosed() const { return Closed(best_static_j, clairvoyant_j, context_j); }
double ContextResult::OracleGapClosed() const {
  return Closed(best_static_j, clairvoyant_j, oracle_j);
}
double ContextResult::StateOracleGapClosed() const {
  return Closed(best_static_j, clairvoyant_j, state_oracle_j);
}

absl::StatusOr<std::vector<ContextScenario>> BuildContextScenarios(
    const ContextSuiteOptions& options) {
  std::vector<ContextScenario> all, out;
  if (options.markov) AddMarkov(&all);
  if (!options.replay_dir.empty()) SPINTUNE_RETURN_IF_ERROR(AddReplay(options.replay_dir, &all));
  if (options.iid) AddIid(&all);
  for (auto& s : all) {
    if (options.filter.empty() || absl::StrContains(s.name, options.filter)) {
      out.push_back(std::move(s));
    }
  }
  return out;
}

ContextResult RunContextScenario(const ContextScenario& s, bool oracles) {
  ContextResult r;
  r.name = s.name;
  r.stream = s.stream;
  r.structured = s.structured;
  r.lambda = s.lambda;
  const size_t train = std::min(s.train, s.samples.size());
  r.train = train;
  r.test = s.samples.size() - train;
  const OptimizerOptions options = Options(s.lambda);
  const auto fitted = absl::MakeConstSpan(s.samples).subspan(0, train);
  std::vector<uint64_t> x;
  for (const auto& v : fitted) x.push_back(v.x_ns);
  const WaitParams fixed = FitWait(x, s.costs, options);

  ContextTree tree;
  std::vector<WaitParams> leaves = {fixed};
  auto fit = FitContextTree(fitted, s.costs, options, ContextOptions());
  if (fit.ok() && fit->tree.leaf_count() > 1) {
    tree = fit->tree;
    leaves.clear();
    for (const auto& idx : fit->leaf_samples) {
      std::vector<uint64_t> lx;
      for (size_t i : idx) lx.push_back(fitted[i].x_ns);
      leaves.push_back(FitWait(lx, s.costs, options));
    }
  }
  r.leaves = tree.leaf_count();
  for (const auto& c : tree.LeafConditions()) {
    absl::StrAppend(&r.tree, r.tree.empty() ? "" : " | ", DescribeContext(c));
  }

  std::vector<uint64_t> tested;
  ExpectedCost with_fixed, with_context;
  double clair_sum = 0, x_sum = 0;
  for (size_t i = train; i < s.samples.size(); ++i) {
    const double v = static_cast<double>(s.samples[i].x_ns);
    tested.push_back(s.samples[i].x_ns);
    const RequestCost f = CostOfRequest(v, fixed, s.costs);
    const RequestCost c = CostOfRequest(
        v, leaves[static_cast<size_t>(tree.Route(s.samples[i].context))], s.costs);
    with_fixed.cpu_ns += f.cpu_ns;
    with_fixed.latency_ns += f.latency_ns;
    with_context.cpu_ns += c.cpu_ns;
    with_context.latency_ns += c.latency_ns;
    clair_sum += ClairvoyantCost(v, s.costs, s.lambda);
    x_sum += v;
  }
  const double n = static_cast<double>(r.test);
  r.fixed_j = with_fixed.Cost(s.lambda) / n;
  r.context_j = with_context.Cost(s.lambda) / n;
  r.clairvoyant_j = clair_sum / n;
  if (s.lambda == 0) {
    const double cap = (x_sum / n + s.costs.irq_wake_ns) * (1 + kCapSlack);
    r.fixed_feasible = with_fixed.latency_ns / n <= cap;
    r.context_feasible = with_context.latency_ns / n <= cap;
  }
  auto best = OptimizeWait(WaitDistribution::FromSamples(tested), s.costs, options);
  r.best_static_j = best.ok() ? best->cost_ns : r.fixed_j;

  if (oracles && s.structured) {
    const auto evaluated = absl::MakeConstSpan(s.samples).subspan(train);
    r.oracle_j = InSampleTreeJ(evaluated, s.costs, options, s.lambda);
    if (s.busy.size() == s.samples.size()) {
      double sum = 0;
      for (uint8_t state : {0, 1}) {
        std::vector<ContextSample> part;
        for (size_t i = train; i < s.samples.size(); ++i) {
          if (s.busy[i] == state) part.push_back(s.samples[i]);
        }
        if (!part.empty()) {
          sum += static_cast<double>(part.size()) *
                 InSampleTreeJ(part, s.costs, options, s.lambda);
        }
      }
      r.state_oracle_j = sum / n;
    }
  }
  return r;
}

std::vector<ContextCheck> CheckContextResults(const std::vector<ContextResult>& results) {
  std::vector<ContextCheck> checks;
  for (const auto& [key, g] : StreamGaps(results)) {
    const double share = g.gap > 0 ? g.closed / g.gap : 0;
    checks.push_back({absl::StrFormat("%s (latency weight %g, %d keys): %.1f%% of the best "
                                      "static -> clairvoyant gap closed (target >= 30%%)",
                                      key.first, key.second, g.keys, 100 * share),
                      share >= 0.30});
  }
  int iid = 0, one_leaf = 0, worse = 0, infeasible = 0;
  double worst = 0;
  std::string worst_name;
  for (const auto& r : results) {
    if (r.structured) continue;
    ++iid;
    one_leaf += r.leaves == 1;
    const double ratio = r.context_j / r.fixed_j;
    if (ratio > 1.005) ++worse;
    if (r.fixed_feasible && !r.context_feasible) ++infeasible;
    if (ratio > worst) {
      worst = ratio;
      worst_name = r.name;
    }
  }
  if (iid > 0) {
    checks.push_back({absl::StrFormat("i.i.d.: %d scenarios, context J / fixed J at worst %.4f "
                                      "(%s), %d above 1.005 (target 0)",
                                      iid, worst, worst_name, worse),
                      worse == 0});
    checks.push_back({absl::StrFormat("i.i.d.: %d scenarios above the cpu objective's latency "
                                      "cap where the fixed fit is not (target 0)",
                                      infeasible),
                      infeasible == 0});
    const double share = static_cast<double>(one_leaf) / iid;
    checks.push_back({absl::StrFormat("i.i.d.: one leaf on %d of %d scenarios, %.1f%% "
                                      "(target >= 95%%)",
                                      one_leaf, iid, 100 * share),
                      share >= 0.95});
  }
  return checks;
}

std::string RenderContextResults(const std::vector<ContextResult>& results) {
  std::vector<std::vector<std::string>> rows = {
      {"SCENARIO", "TRAIN/TEST", "LEAVES", "FIXED J", "CONTEXT J", "BEST STATIC", "CLAIRVOYANT",
       "CTX/FIXED", "GAP CLOSED", "ORACLE", "STATE ORACLE", "CONTEXT LEAVES"}};
  auto share = [](bool shown, double v) {
    return shown && !std::isnan(v) ? absl::StrFormat("%.1f%%", 100 * v) : std::string("-");
  };
  for (const auto& r : results) {
    rows.push_back({r.name, absl::StrCat(r.train, "/", r.test), absl::StrCat(r.leaves),
                    FormatDurationNs(r.fixed_j), FormatDurationNs(r.context_j),
                    FormatDurationNs(r.best_static_j), FormatDurationNs(r.clairvoyant_j),
                    Ratio(r.context_j, r.fixed_j) + (r.context_feasible ? "" : "*"),
                    share(r.structured, r.GapClosed()), share(r.structured, r.OracleGapClosed()),
                    share(r.structured, r.StateOracleGapClosed()), r.leaves > 1 ? r.tree : "-"});
  }
  std::string out = RenderColumns(rows);
  absl::StrAppend(&out, "(* = above the cpu objective's latency cap: the IRQ path's mean latency "
                        "+1%; ORACLE = leaves fitted in sample on the evaluated part, an upper "
                        "bound for these features; STATE ORACLE = the same per value of the "
                        "simulator's hidden busy state)\n");
  for (const auto& [key, g] : StreamGaps(results)) {
    const auto pct = [&](double v) { return g.gap > 0 ? 100 * v / g.gap : 0.0; };
    const auto pct_or_dash = [&](double v) {
      return std::isnan(v) ? std::string("-") : absl::StrFormat("%.1f%%", pct(v));
    };
    absl::StrAppend(&out, absl::StrFormat("%s, latency weight %g: %d keys close %.1f%% of their "
                                          "gap together (oracle %s, state oracle %s)\n",
                                          key.first, key.second, g.keys, pct(g.closed),
                                          pct_or_dash(g.oracle), pct_or_dash(g.state_oracle)));
  }
  absl::StrAppend(&out, "\nChecks:\n");
  for (const auto& c : CheckContextResults(results)) {
    absl::StrAppend(&out, c.ok ? "  ok      " : "  MISSED  ", c.what, "\n");
  }
  return out;
}

nlohmann::json ContextResultsToJson(const std::vector<ContextResult>& results) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& r : results) {
    rows.push_back({{"scenario", r.name},
                    {"stream", r.stream},
                    {"structured", r.structured},
                    {"latency_weight", r.lambda},
                    {"train", r.train},
                    {"test", r.test},
                    {"leaves", r.leaves},
                    {"tree", r.tree},
                    {"fixed_j_ns", r.fixed_j},
                    {"context_j_ns", r.context_j},
                    {"best_static_j_ns", r.best_static_j},
                    {"clairvoyant_j_ns", r.clairvoyant_j},
                    {"gap_closed", r.GapClosed()},
                    {"oracle_gap_closed", OrNull(r.OracleGapClosed())},
                    {"state_oracle_gap_closed", OrNull(r.StateOracleGapClosed())},
                    {"context_feasible", r.context_feasible}});
  }
  nlohmann::json checks = nlohmann::json::array();
  for (const auto& c : CheckContextResults(results)) {
    checks.push_back({{"check", c.what}, {"ok", c.ok}});
  }
  return {{"scenarios", rows}, {"checks", checks}};
}

}  // namespace spintune
