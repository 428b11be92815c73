#include "cli/experiments_command.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/experiment_summary.h"
#include "cli/table_format.h"
#include "common/status_macros.h"
#include "storage/store.h"

namespace spintune {
namespace {

using nlohmann::json;

std::string Number(double v) { return absl::StrFormat("%.4g", v); }

absl::Status List(Store& store, const ExperimentsFlags& f, std::ostream& out) {
  int64_t target_id = 0;
  if (!f.target.empty()) {
    SPINTUNE_ASSIGN_OR_RETURN(auto t, store.FindTarget(f.target));
    if (!t) return absl::NotFoundError(absl::StrCat("no target '", f.target, "'"));
    target_id = t->id;
  }
  SPINTUNE_ASSIGN_OR_RETURN(auto all, store.ListExperiments(target_id));
  if (f.format == "json") {
    json arr = json::array();
    for (const auto& r : all) arr.push_back(ExperimentToJson(r));
    out << json{{"experiments", arr}}.dump(2) << "\n";
    return absl::OkStatus();
  }
  std::vector<std::vector<std::string>> rows = {
      {"ID", "TARGET", "NAME", "STATE", "TRIALS", "START", "LEFT ON", "RATIO [95% CI]", "CREATED"}};
  for (const auto& r : all) {
    const bool done = r.state != "running";
    rows.push_back({absl::StrCat(r.id), r.agent_id, r.name, ExperimentStateText(r),
                    absl::StrCat(r.trials), r.space.Format(r.start),
                    done ? r.space.Format(r.applied) : "-",
                    r.ratio > 0 ? absl::StrCat(Number(r.ratio), "x [", Number(r.ci_low), ", ",
                                               Number(r.ci_high), "]")
                                : "-",
                    r.created_at});
  }
  out << RenderColumns(rows);
  return absl::OkStatus();
}

absl::Status Show(Store& store, const ExperimentsFlags& f, std::ostream& out) {
  ExperimentEvidence e;
  SPINTUNE_ASSIGN_OR_RETURN(e.record, store.LoadExperiment(f.id));
  SPINTUNE_ASSIGN_OR_RETURN(e.trials, store.LoadKnobTrials(f.id));
  if (f.format == "json") {
    out << ExperimentEvidenceToJson(e).dump(2) << "\n";
    return absl::OkStatus();
  }
  const ExperimentRecord& r = e.record;
  out << "experiment " << r.id << " (" << r.name << ") of target " << r.agent_id << ": "
      << ExperimentStateText(r) << ", " << r.trials << " of at most " << r.max_trials
      << " trials, started " << r.created_at << "\n";
  std::string knobs;
  for (const auto& c : r.space.coordinates) {
    absl::StrAppend(&knobs, knobs.empty() ? "" : ", ", c.name, " (", c.values.size(), " values)");
  }
  out << "knobs: " << knobs << ": " << r.space.Size() << " settings\n";
  out << "metric: " << r.metric << (r.metric_unit.empty() ? "" : " (" + r.metric_unit + ")")
      << ", " << (r.lower_is_better ? "lower" : "higher") << " is better"
      << (r.constraints.empty() ? "" : "; constraints: " + r.constraints) << "\n";
  out << "workload: " << r.workload << "\n";
  out << "start: " << r.space.Format(r.start)
      << "; on finish: " << (r.apply_winner ? "apply a winner" : "restore the start") << "\n";
  if (r.state != "running") {
    out << "conclusion: " << r.statement << "\n";
    out << "left on: " << r.space.Format(r.applied)
        << (r.end_result.empty() ? " (the agent has not confirmed it)"
                                 : r.end_result == "ok" ? " (confirmed by the agent)"
                                                        : " (the agent failed: " + r.end_result + ")")
        << "\n";
  }
  out << "\n";
  std::vector<std::vector<std::string>> rows = {
      {"SETTING", "TRIALS", "FAILED", absl::StrCat(r.metric, " (geo. mean)"), "95% CI", "NOTE"}};
  for (const auto& s : SummarizeSettings(e)) {
    std::string note;
    for (auto [flag, text] : {std::pair<bool, const char*>{s.is_start, "start"},
                              {s.is_best, "best"}, {s.is_applied, "left on"}}) {
      if (flag) absl::StrAppend(&note, note.empty() ? "" : ", ", text);
    }
    rows.push_back({s.label, absl::StrCat(s.trials), absl::StrCat(s.failed),
                    s.measured ? Number(s.metric.mean) : "-",
                    s.measured ? absl::StrCat("[", Number(s.metric.low), ", ",
                                              Number(s.metric.high), "]")
                               : "-",
                    note});
  }
  out << RenderColumns(rows) << "\n";
  std::vector<std::vector<std::string>> log = {{"TRIAL", "PHASE", "SETTING", r.metric, "RESULT"}};
  const size_t first = f.max_trials_shown > 0 && e.trials.size() > f.max_trials_shown
                           ? e.trials.size() - f.max_trials_shown
                           : 0;
  for (size_t i = first; i < e.trials.size(); ++i) {
    const auto& t = e.trials[i];
    log.push_back({absl::StrCat(t.trial), t.phase, r.space.Format(t.setting), Number(t.metric),
                   !t.error.empty() ? "error: " + t.error
                                    : t.feasible ? "ok" : "failed a constraint"});
  }
  if (first > 0) out << "(the last " << f.max_trials_shown << " of " << e.trials.size() << " trials)\n";
  out << RenderColumns(log);
  return absl::OkStatus();
}

}  // namespace

absl::Status RunExperiments(const std::string& db, const ExperimentsFlags& f, std::ostream& out) {
  if (f.format != "table" && f.format != "json") {
    return absl::InvalidArgumentError("--format: table or json");
  }
  if (f.action != "list" && f.id <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("experiments ", f.action, ": ID is required"));
  }
  SPINTUNE_ASSIGN_OR_RETURN(
      auto store,
      Store::Open(db, {}, f.action == "abort" ? OpenMode::kExisting : OpenMode::kReadOnly));
  if (f.action == "list") return List(*store, f, out);
  if (f.action == "show") return Show(*store, f, out);
  if (f.action == "abort") {
    SPINTUNE_RETURN_IF_ERROR(store->RequestAbort(f.id));
    if (f.format == "json") {
      out << json{{"id", f.id}, {"abort_requested", true}}.dump(2) << "\n";
    } else {
      out << "experiment " << f.id << ": abort requested; a tuner on " << db
          << " ends it within a second and the agent restores the start values\n";
    }
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown experiments action '", f.action, "'"));
}

}  // namespace spintune
