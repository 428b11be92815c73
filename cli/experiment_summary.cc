#include "cli/experiment_summary.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "common/status_macros.h"
#include "storage/store.h"

namespace spintune {
namespace {

using nlohmann::json;

json SettingJson(const KnobSpace& space, const KnobSetting& s) {
  json o = json::object();
  for (size_t i = 0; i < space.coordinates.size() && i < s.size(); ++i) {
    o[space.coordinates[i].name] = space.coordinates[i].labels.empty()
                                       ? json(s[i])
                                       : json(space.coordinates[i].Format(s[i]));
  }
  return o;
}

}  // namespace

std::vector<SettingSummary> SummarizeSettings(const ExperimentEvidence& e) {
  const ExperimentRecord& r = e.record;
  std::map<KnobSetting, std::vector<double>> logs;
  std::map<KnobSetting, SettingSummary> by_setting;
  for (const auto& t : e.trials) {
    SettingSummary& s = by_setting[t.setting];
    s.setting = t.setting;
    ++s.trials;
    if (!t.feasible || t.metric <= 0) {
      ++s.failed;
      continue;
    }
    logs[t.setting].push_back(std::log(t.metric));
  }
  std::vector<RunningMoments> groups;
  for (const auto& [setting, values] : logs) {
    RunningMoments m;
    for (double v : values) m.Add(v);
    groups.push_back(m);
  }
  const PooledNoise noise = PoolNoise(groups);
  std::vector<SettingSummary> out;
  for (auto& [setting, s] : by_setting) {
    s.label = r.space.Format(setting);
    s.is_start = setting == r.start;
    s.is_best = !r.best.empty() && setting == r.best;
    s.is_applied = r.state != "running" && setting == r.applied;
    auto it = logs.find(setting);
    if (it != logs.end()) {
      s.measured = true;
      s.metric = GeometricMeanInterval(it->second, r.confidence > 0 ? r.confidence : 0.95, noise);
    }
    out.push_back(std::move(s));
  }
  const bool lower = r.lower_is_better;
  std::stable_sort(out.begin(), out.end(), [lower](const SettingSummary& a, const SettingSummary& b) {
    if (a.measured != b.measured) return a.measured;
    return lower ? a.metric.mean < b.metric.mean : a.metric.mean > b.metric.mean;
  });
  return out;
}

absl::StatusOr<std::vector<ExperimentEvidence>> LoadExperimentEvidence(
    Store& store, const std::string& agent_id) {
  SPINTUNE_ASSIGN_OR_RETURN(auto target, store.FindTarget(agent_id));
  std::vector<ExperimentEvidence> out;
  if (!target) return out;
  SPINTUNE_ASSIGN_OR_RETURN(auto records, store.ListExperiments(target->id));
  for (auto& r : records) {
    ExperimentEvidence e;
    SPINTUNE_ASSIGN_OR_RETURN(e.trials, store.LoadKnobTrials(r.id));
    e.record = std::move(r);
    out.push_back(std::move(e));
  }
  return out;
}

std::string ExperimentStateText(const ExperimentRecord& r) {
  if (r.state == "running") return r.abort_requested ? "running (abort requested)" : "running";
  return r.state + ": " + r.verdict;
}

json ExperimentToJson(const ExperimentRecord& r) {
  json coords = json::array();
  for (const auto& c : r.space.coordinates) {
    json o{{"name", c.name}, {"values", c.values}};
    if (!c.labels.empty()) o["labels"] = c.labels;
    if (!c.register_name.empty()) {
      o["register"] = c.register_name;
      o["shift"] = c.shift;
      o["width"] = c.width;
    }
    coords.push_back(std::move(o));
  }
  json j{{"id", r.id},
         {"target", r.agent_id},
         {"name", r.name},
         {"state", r.state},
         {"abort_requested", r.abort_requested},
         {"coordinates", coords},
         {"settings_in_space", r.space.Size()},
         {"start", SettingJson(r.space, r.start)},
         {"metric", r.metric},
         {"metric_unit", r.metric_unit},
         {"better", r.lower_is_better ? "lower" : "higher"},
         {"constraints", r.constraints},
         {"workload", r.workload},
         {"max_trials", r.max_trials},
         {"on_finish", r.apply_winner ? "apply_winner" : "restore"},
         {"seed", r.seed},
         {"trials", r.trials},
         {"created_at", r.created_at}};
  if (r.state != "running") {
    j["verdict"] = r.verdict;
    j["best"] = SettingJson(r.space, r.best);
    j["applied"] = SettingJson(r.space, r.applied);
    j["statement"] = r.statement;
    j["finished_at"] = r.finished_at;
    j["end_result"] = r.end_result;
    if (r.ratio > 0) {
      j["ratio"] = r.ratio;
      j["ci"] = {r.ci_low, r.ci_high};
      j["confidence"] = r.confidence;
    }
  }
  return j;
}

json ExperimentEvidenceToJson(const ExperimentEvidence& e) {
  json j = ExperimentToJson(e.record);
  json settings = json::array();
  for (const auto& s : SummarizeSettings(e)) {
    json o{{"setting", SettingJson(e.record.space, s.setting)},
           {"label", s.label},
           {"trials", s.trials},
           {"failed", s.failed},
           {"start", s.is_start},
           {"best", s.is_best},
           {"applied", s.is_applied}};
    if (s.measured) {
      o["mean"] = s.metric.mean;
      o["ci"] = {s.metric.low, s.metric.high};
    }
    settings.push_back(std::move(o));
  }
  json trials = json::array();
  for (const auto& t : e.trials) {
    json o{{"trial", t.trial},
           {"phase", t.phase},
           {"setting", SettingJson(e.record.space, t.setting)},
           {"metric", t.metric},
           {"metrics", t.metrics},
           {"feasible", t.feasible},
           {"duration_ns", t.duration_ns},
           {"measured_at", t.measured_at}};
    if (!t.error.empty()) o["error"] = t.error;
    trials.push_back(std::move(o));
  }
  j["settings"] = std::move(settings);
  j["trial_log"] = std::move(trials);
  return j;
}

}  // namespace spintune
