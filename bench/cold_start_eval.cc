#include "bench/cold_start_eval.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "agent/sim_source.h"
#include "cli/table_format.h"
#include "models/wait_optimizer.h"
#include "policy/cold_start.h"
#include "policy/policy_proto.h"
#include "tuner/batch_decoder.h"

namespace spintune {
namespace {

struct Measured {
  BoardEvidence evidence;
  FitInputs description;  // classes and devices, no keys
};

Measured Measure(const BoardModel& board, size_t samples) {
  SimSource source(board, 1234);
  v1::Hello hello;
  source.Describe(&hello);
  v1::SampleBatch batch;
  batch.set_seq(1);
  (void)source.Fill(samples, &batch);
  Measured m;
  auto delta = DecodeBatch(batch, hello);
  m.description.board = board.name;
  m.description.cpu_classes = CpuClassesFromHello(hello);
  m.description.devices = *DevicesFromHello(hello);
  m.evidence.cpu_classes = m.description.cpu_classes;
  m.evidence.devices = m.description.devices;
  if (delta.ok()) m.evidence.keys = delta->keys;
  return m;
}

}  // namespace

std::vector<ColdStartResult> EvaluateColdStart(size_t samples_per_board) {
  std::vector<Measured> all;
  for (const auto& b : BoardCatalog()) {
    if (!b.modulation.modulated()) all.push_back(Measure(b, samples_per_board));
  }
  std::vector<ColdStartResult> out;
  const FitConfig config;
  for (size_t i = 0; i < all.size(); ++i) {
    ColdStartResult r;
    r.board = all[i].description.board;
    std::vector<BoardEvidence> others;
    for (size_t j = 0; j < all.size(); ++j) {
      if (j == i) continue;
      const DeviceInfo& d = all[j].description.devices[0];
      const DeviceInfo& mine = all[i].description.devices[0];
      if (d.driver == mine.driver && d.model == mine.model) ++r.donor_boards;
      others.push_back(all[j].evidence);
    }
    auto predicted = PredictPolicyTable(others, all[i].description, config);
    if (!predicted.ok()) {
      r.note = std::string(predicted.status().message());
      out.push_back(r);
      continue;
    }
    FitInputs real = all[i].description;
    real.keys = all[i].evidence.keys;
    auto fitted = BuildPolicyTable(real, config);
    if (!fitted.ok()) continue;
    double j_pred = 0, j_fit = 0;
    const PlatformCosts& costs = real.cpu_classes[0].costs;
    for (const auto& k : real.keys) {
      const WaitDistribution dist = WaitDistribution::FromHistogram(k.histogram);
      const PolicyEntry* p = nullptr;
      const PolicyEntry* f = nullptr;
      for (const auto& e : predicted->entries) {
        if (!e.fallback && e.key == k.key) p = &e;
      }
      for (const auto& e : fitted->entries) {
        if (!e.fallback && e.key == k.key) f = &e;
      }
      if (p == nullptr || f == nullptr) continue;
      ++r.keys;
      if (p->wait.strategy == f->wait.strategy) ++r.same_decisions;
      const double w = static_cast<double>(k.histogram.total_count());
      const double jp = EvaluateWait(dist, p->wait, costs).Cost(config.objective.latency_weight);
      const double jf = EvaluateWait(dist, f->wait, costs).Cost(config.objective.latency_weight);
      j_pred += w * jp;
      j_fit += w * jf;
      r.worst_key_ratio = std::max(r.worst_key_ratio, jp / jf);
    }
    r.j_ratio = j_fit > 0 ? j_pred / j_fit : 0;
    out.push_back(r);
  }
  return out;
}

std::string RenderColdStart(const std::vector<ColdStartResult>& results) {
  std::vector<std::vector<std::string>> rows = {
      {"HELD-BACK BOARD", "SAME DEVICE ON", "KEYS", "SAME STRATEGY", "J PRED/FITTED",
       "WORST KEY", "NOTE"}};
  for (const auto& r : results) {
    rows.push_back({r.board, absl::StrCat(r.donor_boards, " boards"), absl::StrCat(r.keys),
                    absl::StrCat(r.same_decisions, "/", r.keys),
                    r.keys ? absl::StrFormat("%.3f", r.j_ratio) : "-",
                    r.keys ? absl::StrFormat("%.3f", r.worst_key_ratio) : "-", r.note});
  }
  return "Cold start: each board held back, its table predicted from the other boards'\n"
         "samples (same driver and card; completion quantiles fitted as device_ns +\n"
         "cycles / f_cpu) and evaluated on its own samples against the table fitted on them:\n" +
         RenderColumns(rows);
}

}  // namespace spintune
