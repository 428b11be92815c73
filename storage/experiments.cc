// Store: knob experiments, their trials and the knob settings in force
// (storage/experiment_record.h, SCHEMA.md migration 9).
#include <set>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"
#include "storage/store.h"

namespace spintune {
namespace {

using nlohmann::json;

json SettingToJson(const KnobSetting& s) { return json(s); }

KnobSetting SettingFromJson(const std::string& text) {
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  KnobSetting s;
  if (!j.is_array()) return s;
  for (const json& v : j) {
    if (v.is_number_integer()) s.push_back(v.get<int64_t>());
  }
  return s;
}

json SpaceToJson(const KnobSpace& space) {
  json arr = json::array();
  for (const auto& c : space.coordinates) {
    arr.push_back(json{{"name", c.name},
                       {"values", c.values},
                       {"labels", c.labels},
                       {"register", c.register_name},
                       {"shift", c.shift},
                       {"width", c.width}});
  }
  return arr;
}

absl::StatusOr<KnobSpace> SpaceFromJson(const std::string& text) {
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_array()) return absl::DataLossError("experiments.space_json is not an array");
  KnobSpace space;
  for (const json& c : j) {
    if (!c.is_object()) return absl::DataLossError("experiments.space_json: not an object");
    KnobCoordinate k;
    k.name = c.value("name", "");
    k.values = c.value("values", std::vector<int64_t>{});
    k.labels = c.value("labels", std::vector<std::string>{});
    k.register_name = c.value("register", "");
    k.shift = c.value("shift", 0u);
    k.width = c.value("width", 0u);
    space.coordinates.push_back(std::move(k));
  }
  return space;
}

constexpr char kExperimentColumns[] =
    "e.id, e.target_id, t.agent_id, e.name, e.fingerprint, e.space_json, e.start_json, e.metric, "
    "e.metric_unit, e.lower_is_better, e.constraints, e.workload, e.max_trials, e.apply_winner, "
    "e.seed, e.state, e.abort_requested, e.verdict, e.best_json, e.applied_json, e.ratio, "
    "e.ci_low, e.ci_high, e.confidence, e.trials, e.statement, e.created_at, e.finished_at, "
    "e.end_result FROM experiments e JOIN targets t ON t.id = e.target_id";

absl::StatusOr<ExperimentRecord> ReadExperiment(const Statement& q) {
  ExperimentRecord r;
  r.id = q.ColumnInt(0);
  r.target_id = q.ColumnInt(1);
  r.agent_id = q.ColumnText(2);
  r.name = q.ColumnText(3);
  r.fingerprint = static_cast<uint64_t>(q.ColumnInt(4));
  SPINTUNE_ASSIGN_OR_RETURN(r.space, SpaceFromJson(q.ColumnText(5)));
  r.start = SettingFromJson(q.ColumnText(6));
  r.metric = q.ColumnText(7);
  r.metric_unit = q.ColumnText(8);
  r.lower_is_better = q.ColumnInt(9) != 0;
  r.constraints = q.ColumnText(10);
  r.workload = q.ColumnText(11);
  r.max_trials = static_cast<uint32_t>(q.ColumnInt(12));
  r.apply_winner = q.ColumnInt(13) != 0;
  r.seed = static_cast<uint64_t>(q.ColumnInt(14));
  r.state = q.ColumnText(15);
  r.abort_requested = q.ColumnInt(16) != 0;
  r.verdict = q.ColumnText(17);
  r.best = SettingFromJson(q.ColumnText(18));
  r.applied = SettingFromJson(q.ColumnText(19));
  r.ratio = q.ColumnDouble(20);
  r.ci_low = q.ColumnDouble(21);
  r.ci_high = q.ColumnDouble(22);
  r.confidence = q.ColumnDouble(23);
  r.trials = static_cast<uint64_t>(q.ColumnInt(24));
  r.statement = q.ColumnText(25);
  r.created_at = q.ColumnText(26);
  r.finished_at = q.ColumnText(27);
  r.end_result = q.ColumnText(28);
  if (!r.space.Contains(r.start)) {
    return absl::DataLossError(absl::StrCat("experiment ", r.id, ": start outside its space"));
  }
  return r;
}

}  // namespace

absl::StatusOr<std::vector<ExperimentRecord>> Store::QueryExperiments(const std::string& where,
                                                                      int64_t arg) {
  SPINTUNE_ASSIGN_OR_RETURN(
      auto q, db_->Prepare(absl::StrCat("SELECT ", kExperimentColumns, " ", where)));
  if (!where.empty() && where.find("?1") != std::string::npos) q->Bind(1, arg);
  std::vector<ExperimentRecord> out;
  while (true) {
    SPINTUNE_ASSIGN_OR_RETURN(bool row, q->Step());
    if (!row) break;
    SPINTUNE_ASSIGN_OR_RETURN(ExperimentRecord r, ReadExperiment(*q));
    out.push_back(std::move(r));
  }
  return out;
}

absl::StatusOr<int64_t> Store::CreateExperiment(ExperimentRecord* r) {
  r->created_at = NowRfc3339();
  r->state = "running";
  absl::MutexLock lock(&mu_);
  SPINTUNE_ASSIGN_OR_RETURN(
      auto q,
      db_->Prepare("INSERT INTO experiments (target_id, name, fingerprint, space_json, "
                   "start_json, metric, metric_unit, lower_is_better, constraints, workload, "
                   "max_trials, apply_winner, seed, state, created_at) VALUES (?1, ?2, ?3, ?4, "
                   "?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, 'running', ?14) RETURNING id"));
  q->Bind(1, r->target_id).Bind(2, r->name).Bind(3, static_cast<int64_t>(r->fingerprint));
  q->Bind(4, SpaceToJson(r->space).dump()).Bind(5, SettingToJson(r->start).dump());
  q->Bind(6, r->metric).Bind(7, r->metric_unit).Bind(8, int64_t{r->lower_is_better});
  q->Bind(9, r->constraints).Bind(10, r->workload).Bind(11, int64_t{r->max_trials});
  q->Bind(12, int64_t{r->apply_winner}).Bind(13, static_cast<int64_t>(r->seed));
  q->Bind(14, r->created_at);
  SPINTUNE_ASSIGN_OR_RETURN(bool row, q->Step());
  if (!row) return absl::InternalError("experiments: INSERT returned no id");
  r->id = q->ColumnInt(0);
  q->Reset();
  return r->id;
}

absl::StatusOr<std::optional<ExperimentRecord>> Store::LatestExperiment(int64_t target_id,
                                                                        const std::string& name) {
  absl::MutexLock lock(&mu_);
  SPINTUNE_ASSIGN_OR_RETURN(
      auto all, QueryExperiments("WHERE e.target_id = ?1 ORDER BY e.id DESC", target_id));
  for (auto& r : all) {
    if (r.name == name) return std::optional<ExperimentRecord>(std::move(r));
  }
  return std::optional<ExperimentRecord>();
}

absl::StatusOr<ExperimentRecord> Store::LoadExperiment(int64_t id) {
  absl::MutexLock lock(&mu_);
  SPINTUNE_ASSIGN_OR_RETURN(auto found, QueryExperiments("WHERE e.id = ?1", id));
  if (found.empty()) {
    return absl::NotFoundError(
        absl::StrCat("no experiment ", id, " (spintune experiments list shows them)"));
  }
  return std::move(found.front());
}

absl::StatusOr<std::vector<ExperimentRecord>> Store::ListExperiments(int64_t target_id) {
  absl::MutexLock lock(&mu_);
  return target_id == 0 ? QueryExperiments("ORDER BY e.id", 0)
                        : QueryExperiments("WHERE e.target_id = ?1 ORDER BY e.id", target_id);
}

absl::Status Store::AppendKnobTrial(int64_t experiment_id, const KnobTrialRecord& t) {
  json metrics = json::object();
  for (const auto& [name, value] : t.metrics) metrics[name] = value;
  absl::MutexLock lock(&mu_);
  SPINTUNE_ASSIGN_OR_RETURN(
      auto q, db_->Prepare("INSERT INTO knob_trials VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)"));
  q->Bind(1, experiment_id).Bind(2, int64_t{t.trial}).Bind(3, t.phase);
  q->Bind(4, SettingToJson(t.setting).dump()).Bind(5, t.metric).Bind(6, metrics.dump());
  q->Bind(7, int64_t{t.feasible}).Bind(8, t.error).Bind(9, static_cast<int64_t>(t.duration_ns));
  q->Bind(10, t.measured_at.empty() ? NowRfc3339() : t.measured_at);
  SPINTUNE_RETURN_IF_ERROR(q->Run());
  SPINTUNE_ASSIGN_OR_RETURN(
      auto count, db_->Prepare("UPDATE experiments SET trials = trials + 1 WHERE id = ?1"));
  count->Bind(1, experiment_id);
  return count->Run();
}

absl::StatusOr<std::vector<KnobTrialRecord>> Store::LoadKnobTrials(int64_t experiment_id) {
  absl::MutexLock lock(&mu_);
  SPINTUNE_ASSIGN_OR_RETURN(
      auto q, db_->Prepare("SELECT trial, phase, setting_json, metric, metrics_json, feasible, "
                           "error, duration_ns, measured_at FROM knob_trials WHERE "
                           "experiment_id = ?1 ORDER BY trial"));
  q->Bind(1, experiment_id);
  std::vector<KnobTrialRecord> out;
  while (true) {
    SPINTUNE_ASSIGN_OR_RETURN(bool row, q->Step());
    if (!row) break;
    KnobTrialRecord t;
    t.trial = static_cast<uint32_t>(q->ColumnInt(0));
    t.phase = q->ColumnText(1);
    t.setting = SettingFromJson(q->ColumnText(2));
    t.metric = q->ColumnDouble(3);
    const json m = json::parse(q->ColumnText(4), nullptr, /*allow_exceptions=*/false);
    if (m.is_object()) {
      for (const auto& [name, value] : m.items()) {
        if (value.is_number()) t.metrics[name] = value.get<double>();
      }
    }
    t.feasible = q->ColumnInt(5) != 0;
    t.error = q->ColumnText(6);
    t.duration_ns = static_cast<uint64_t>(q->ColumnInt(7));
    t.measured_at = q->ColumnText(8);
    out.push_back(std::move(t));
  }
  return out;
}

absl::Status Store::FinishExperiment(const ExperimentRecord& r,
                                     const std::vector<KnobSettingRecord>& settings) {
  absl::MutexLock lock(&mu_);
  Transaction tx(db_.get());
  SPINTUNE_RETURN_IF_ERROR(tx.Begin());
  SPINTUNE_ASSIGN_OR_RETURN(
      auto q, db_->Prepare("UPDATE experiments SET state = ?2, verdict = ?3, best_json = ?4, "
                           "applied_json = ?5, ratio = ?6, ci_low = ?7, ci_high = ?8, "
                           "confidence = ?9, statement = ?10, finished_at = ?11 WHERE id = ?1 "
                           "AND state = 'running'"));
  q->Bind(1, r.id).Bind(2, r.state).Bind(3, r.verdict).Bind(4, SettingToJson(r.best).dump());
  q->Bind(5, SettingToJson(r.applied).dump()).Bind(6, r.ratio).Bind(7, r.ci_low);
  q->Bind(8, r.ci_high).Bind(9, r.confidence).Bind(10, r.statement).Bind(11, NowRfc3339());
  SPINTUNE_RETURN_IF_ERROR(q->Run());
  if (db_->Changes() != 1) {
    return absl::FailedPreconditionError(absl::StrCat("experiment ", r.id, " is not running"));
  }
  if (!settings.empty()) SPINTUNE_RETURN_IF_ERROR(WriteKnobSettings(r.target_id, settings));
  return tx.Commit();
}

absl::Status Store::RecordKnobEnd(int64_t experiment_id, const std::string& result) {
  absl::MutexLock lock(&mu_);
  SPINTUNE_ASSIGN_OR_RETURN(
      auto q, db_->Prepare("UPDATE experiments SET end_result = ?2 WHERE id = ?1"));
  q->Bind(1, experiment_id).Bind(2, result);
  return q->Run();
}

absl::Status Store::RequestAbort(int64_t experiment_id) {
  absl::MutexLock lock(&mu_);
  SPINTUNE_ASSIGN_OR_RETURN(auto found, QueryExperiments("WHERE e.id = ?1", experiment_id));
  if (found.empty()) return absl::NotFoundError(absl::StrCat("no experiment ", experiment_id));
  if (found.front().state != "running") {
    return absl::FailedPreconditionError(
        absl::StrCat("experiment ", experiment_id, " is ", found.front().state, ", not running"));
  }
  SPINTUNE_ASSIGN_OR_RETURN(
      auto q, db_->Prepare("UPDATE experiments SET abort_requested = 1 WHERE id = ?1"));
  q->Bind(1, experiment_id);
  return q->Run();
}

absl::StatusOr<std::vector<ExperimentRecord>> Store::AbortRequests() {
  absl::MutexLock lock(&mu_);
  return QueryExperiments("WHERE e.state = 'running' AND e.abort_requested = 1 ORDER BY e.id", 0);
}

absl::Status Store::WriteKnobSettings(int64_t target_id,
                                      const std::vector<KnobSettingRecord>& settings) {
  // A declaration's settings replace what it had.
  std::set<std::string> declarations;
  for (const auto& s : settings) declarations.insert(s.declaration);
  for (const auto& d : declarations) {
    SPINTUNE_ASSIGN_OR_RETURN(
        auto del, db_->Prepare("DELETE FROM knob_settings WHERE target_id = ?1 AND declaration = ?2"));
    del->Bind(1, target_id).Bind(2, d);
    SPINTUNE_RETURN_IF_ERROR(del->Run());
  }
  SPINTUNE_ASSIGN_OR_RETURN(
      auto q, db_->Prepare("INSERT INTO knob_settings VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, "
                           "?9, ?10, ?11, ?12)"));
  const std::string now = NowRfc3339();
  for (size_t i = 0; i < settings.size(); ++i) {
    const KnobSettingRecord& s = settings[i];
    q->Reset();
    q->Bind(1, target_id).Bind(2, s.declaration).Bind(3, s.coordinate);
    q->Bind(4, static_cast<int64_t>(i)).Bind(5, s.value).Bind(6, s.label);
    q->Bind(7, s.register_name).Bind(8, int64_t{s.shift}).Bind(9, int64_t{s.width});
    q->Bind(10, s.experiment_id).Bind(11, s.evidence);
    q->Bind(12, s.updated_at.empty() ? now : s.updated_at);
    SPINTUNE_RETURN_IF_ERROR(q->Run());
  }
  return absl::OkStatus();
}

absl::Status Store::ReplaceKnobSettings(int64_t target_id,
                                        const std::vector<KnobSettingRecord>& settings) {
  absl::MutexLock lock(&mu_);
  Transaction tx(db_.get());
  SPINTUNE_RETURN_IF_ERROR(tx.Begin());
  SPINTUNE_RETURN_IF_ERROR(WriteKnobSettings(target_id, settings));
  return tx.Commit();
}

absl::StatusOr<std::vector<KnobSettingRecord>> Store::LoadKnobSettings(int64_t target_id) {
  absl::MutexLock lock(&mu_);
  SPINTUNE_ASSIGN_OR_RETURN(
      auto q, db_->Prepare("SELECT declaration, coordinate, value, label, register_name, shift, "
                           "width, experiment_id, evidence, updated_at FROM knob_settings WHERE "
                           "target_id = ?1 ORDER BY declaration, idx"));
  q->Bind(1, target_id);
  std::vector<KnobSettingRecord> out;
  while (true) {
    SPINTUNE_ASSIGN_OR_RETURN(bool row, q->Step());
    if (!row) break;
    KnobSettingRecord s;
    s.declaration = q->ColumnText(0);
    s.coordinate = q->ColumnText(1);
    s.value = q->ColumnInt(2);
    s.label = q->ColumnText(3);
    s.register_name = q->ColumnText(4);
    s.shift = static_cast<uint32_t>(q->ColumnInt(5));
    s.width = static_cast<uint32_t>(q->ColumnInt(6));
    s.experiment_id = q->ColumnInt(7);
    s.evidence = q->ColumnText(8);
    s.updated_at = q->ColumnText(9);
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace spintune
