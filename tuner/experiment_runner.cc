#include "tuner/experiment_runner.h"

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/logging.h"
#include "common/printable.h"
#include "tuner/knob_protocol.h"

namespace spintune {
namespace {

// The settings of `declaration` among a target's, as "coordinate=value,...".
std::string SettingsKey(const std::vector<KnobSettingRecord>& settings,
                        const std::string& declaration) {
  std::string key;
  for (const auto& s : settings) {
    if (s.declaration == declaration) {
      absl::StrAppend(&key, key.empty() ? "" : ",", s.coordinate, "=", s.value);
    }
  }
  return key;
}

v1::TunerMessage EndMessage(int64_t experiment_id, const std::string& statement) {
  v1::TunerMessage m;
  m.mutable_knob()->set_experiment_id(static_cast<uint64_t>(experiment_id));
  m.mutable_knob()->mutable_end()->set_statement(statement);
  return m;
}

}  // namespace

ExperimentRunner::ExperimentRunner(Store* store, ExperimentRunnerOptions options)
    : store_(store), options_(options) {}

void ExperimentRunner::OnMessage(const std::shared_ptr<SessionHandle>& session,
                                 const v1::AgentMessage& message) {
  if (session->target_id == 0) return;
  switch (message.msg_case()) {
    case v1::AgentMessage::kKnobsDeclared:
      return OnDeclared(session, message.knobs_declared());
    case v1::AgentMessage::kKnobTrial:
      return OnTrial(session, message.knob_trial());
    case v1::AgentMessage::kKnobApplied:
      return OnApplied(session, message.knob_applied());
    default:
      return;
  }
}

void ExperimentRunner::Refuse(const std::shared_ptr<SessionHandle>& session,
                              const absl::Status& why) {
  Logger().warn("agent={} knob declaration refused: {}", session->hello.agent_id(), why.message());
  v1::TunerMessage rejected;
  rejected.mutable_rejected()->set_code(static_cast<int>(why.code()));
  rejected.mutable_rejected()->set_message(std::string(why.message()));
  session->Send(std::move(rejected));
  // The agent must not wait for trials that never come.
  session->Send(EndMessage(0, absl::StrCat("declaration refused: ", why.message())));
}

std::unique_ptr<ExperimentDesign> ExperimentRunner::NewDesign(const ExperimentRecord& r) const {
  ExperimentDesignOptions o = options_.design;
  o.seed = r.seed;
  if (r.max_trials > 0) o.max_trials = r.max_trials;
  return std::make_unique<ExperimentDesign>(r.space, r.start, o, r.lower_is_better);
}

void ExperimentRunner::OnDeclared(const std::shared_ptr<SessionHandle>& session,
                                  const v1::KnobsDeclared& d) {
  const std::string agent = session->hello.agent_id();
  auto declared = SpaceFromDeclaration(d);
  if (!declared.ok()) return Refuse(session, declared.status());
  ExperimentDesignOptions design = options_.design;
  if (d.max_trials() > 0) design.max_trials = d.max_trials();
  if (absl::Status s = design.Validate(); !s.ok()) {
    return Refuse(session, absl::InvalidArgumentError(
                               absl::StrCat("knobs_declared.max_trials: ", s.message())));
  }
  if (absl::Status s = ExperimentDesign::ValidateSpace(declared->space, declared->start); !s.ok()) {
    return Refuse(session, absl::InvalidArgumentError(absl::StrCat("knobs_declared: ", s.message())));
  }
  OnSessionEnd(session.get());  // a second declaration replaces the first
  Declared& entry = declared_[session.get()];
  entry = {session, session->target_id, d.name(), ""};
  const uint64_t fingerprint = DeclarationFingerprint(d);
  auto latest = store_->LatestExperiment(session->target_id, d.name());
  if (!latest.ok()) {
    Logger().error("knob experiments of agent={}: {}", agent, latest.status().ToString());
    return session->Fail(absl::UnavailableError("tuner storage unavailable; retry later"));
  }
  if (latest->has_value() && (*latest)->fingerprint == fingerprint) {
    ExperimentRecord& r = **latest;
    if (r.state != "running") {
      return SendSettings(session, &entry, r.id, r.statement);
    }
    if (r.abort_requested) return Abort(r, session, "aborted by spintune experiments abort");
    // Resume: the stored trials, replayed, bring the design where it was.
    auto trials = store_->LoadKnobTrials(r.id);
    if (!trials.ok()) {
      Logger().error("experiment {}: {}", r.id, trials.status().ToString());
      return session->Fail(absl::UnavailableError("tuner storage unavailable; retry later"));
    }
    Live live{session, r, NewDesign(r), 0, {}};
    for (const auto& t : *trials) {
      live.design->Next();
      live.design->Record({t.setting, t.metric, t.feasible});
    }
    Logger().info("agent={} experiment {} ({}) resumed after {} trials", agent, r.id, r.name,
                  trials->size());
    return Run(r.id, session, std::move(live));
  }
  if (latest->has_value() && (*latest)->state == "running") {
    Abort(**latest, nullptr, "superseded: the agent declared other knobs under this name");
  }
  ExperimentRecord r;
  r.target_id = session->target_id;
  r.agent_id = agent;
  r.name = d.name();
  r.fingerprint = fingerprint;
  r.space = declared->space;
  r.start = declared->start;
  r.metric = d.metric();
  r.metric_unit = d.metric_unit();
  r.lower_is_better = d.lower_is_better();
  r.constraints = ConstraintsText(d);
  r.workload = d.workload();
  r.max_trials = static_cast<uint32_t>(design.max_trials);
  r.apply_winner = d.apply_winner();
  r.seed = d.seed() != 0 ? d.seed()
                         : static_cast<uint64_t>(absl::ToUnixNanos(absl::Now())) >> 1 | 1;
  if (auto id = store_->CreateExperiment(&r); !id.ok()) {
    Logger().error("storing an experiment of agent={}: {}", agent, id.status().ToString());
    return session->Fail(absl::UnavailableError("tuner storage unavailable; retry later"));
  }
  Logger().info("agent={} experiment {} ({}): {} settings, start {}, up to {} trials", agent, r.id,
                r.name, r.space.Size(), r.space.Format(r.start), r.max_trials);
  Run(r.id, session, Live{session, r, NewDesign(r), 0, {}});
}

void ExperimentRunner::Continue(int64_t id) {
  auto it = live_.find(id);
  if (it == live_.end()) return;
  Live& live = it->second;
  auto session = live.session.lock();
  if (!session) return;
  ExperimentDesign::Step step = live.design->Next();
  if (auto* c = std::get_if<ExperimentConclusion>(&step)) return Finish(id, *c);
  live.planned = std::get<PlannedTrial>(step);
  live.awaiting = static_cast<uint32_t>(live.design->trials() + 1);
  v1::TunerMessage m;
  m.mutable_knob()->set_experiment_id(static_cast<uint64_t>(id));
  m.mutable_knob()->mutable_trial()->set_trial(live.awaiting);
  SettingToProto(live.record.space, live.planned.setting,
                 m.mutable_knob()->mutable_trial()->mutable_setting());
  session->Send(std::move(m));
}

void ExperimentRunner::OnTrial(const std::shared_ptr<SessionHandle>& session,
                               const v1::KnobTrial& t) {
  auto running = running_.find(session.get());
  if (running == running_.end() || static_cast<uint64_t>(running->second) != t.experiment_id()) {
    return;  // of no experiment this session runs
  }
  auto it = live_.find(running->second);
  if (it == live_.end() || it->second.session.lock() != session) return;
  Live& live = it->second;
  if (t.trial() != live.awaiting) return;  // stale
  KnobTrialRecord r;
  r.trial = t.trial();
  r.phase = live.planned.phase == TrialPhase::kConfirm ? "confirm" : "search";
  r.setting = live.planned.setting;
  r.metric = t.metric();
  for (const auto& [name, value] : t.metrics()) {
    if (r.metrics.size() < 64) r.metrics[Printable(name, 64)] = value;
  }
  r.error = Printable(t.error(), 1024);
  r.feasible = t.error().empty() && t.constraints_ok() && t.metric() > 0;
  r.duration_ns = t.duration_ns();
  if (absl::Status s = store_->AppendKnobTrial(running->second, r); !s.ok()) {
    Logger().error("experiment {}: storing trial {}: {}", running->second, r.trial, s.ToString());
    // The agent comes back and the trial is run again.
    return session->Fail(absl::UnavailableError("tuner storage unavailable; retry later"));
  }
  if (!r.error.empty()) {
    Logger().warn("experiment {} trial {} ({}) failed on the agent: {}", running->second, r.trial,
                  live.record.space.Format(r.setting), r.error);
  }
  live.design->Record({r.setting, r.metric, r.feasible});
  live.awaiting = 0;
  Continue(running->second);
}

void ExperimentRunner::Finish(int64_t id, const ExperimentConclusion& c) {
  auto it = live_.find(id);
  if (it == live_.end()) return;
  Live live = std::move(it->second);
  live_.erase(it);
  auto session = live.session.lock();
  if (session) running_.erase(session.get());
  ExperimentRecord& r = live.record;
  r.state = "finished";
  r.verdict = VerdictName(c.verdict);
  r.best = c.best;
  r.applied = r.apply_winner ? c.apply : r.start;
  r.ratio = c.confirmed ? c.comparison.ratio : 0;
  r.ci_low = c.confirmed ? c.comparison.low : 0;
  r.ci_high = c.confirmed ? c.comparison.high : 0;
  r.confidence = c.confidence;
  r.statement = ConclusionStatement(r.space, c, r.metric);
  if (c.verdict == Verdict::kBetter && !r.apply_winner) {
    absl::StrAppend(&r.statement, "; the start values are restored (on_finish: restore)");
  }
  const bool keep = r.applied != r.start;
  const auto settings =
      keep ? SettingRecords(r.space, r.applied, r.name, r.id, r.statement) : std::vector<KnobSettingRecord>{};
  if (absl::Status s = store_->FinishExperiment(r, settings); !s.ok()) {
    Logger().error("experiment {}: storing its conclusion: {}", id, s.ToString());
    if (session) session->Fail(absl::UnavailableError("tuner storage unavailable; retry later"));
    return;
  }
  Logger().info("experiment {} ({}) of agent={}: {}", id, r.name, r.agent_id, r.statement);
  if (!session) return;
  v1::TunerMessage m = EndMessage(id, r.statement);
  if (keep) SettingToProto(r.space, r.applied, m.mutable_knob()->mutable_end()->mutable_setting());
  auto declared = declared_.find(session.get());
  auto in_force = store_->LoadKnobSettings(r.target_id);
  if (declared != declared_.end() && in_force.ok()) {
    declared->second.sent = SettingsKey(*in_force, r.name);
  }
  session->Send(std::move(m));
}

void ExperimentRunner::Abort(ExperimentRecord r, const std::shared_ptr<SessionHandle>& session,
                             const std::string& why) {
  live_.erase(r.id);
  for (auto it = running_.begin(); it != running_.end();) {
    it = it->second == r.id ? running_.erase(it) : std::next(it);
  }
  r.state = "aborted";
  r.verdict = "aborted";
  r.applied = r.start;
  r.statement = absl::StrCat(why, " after ", r.trials, " trials; the start (",
                             r.space.Format(r.start), ") is restored");
  if (absl::Status s = store_->FinishExperiment(r, {}); !s.ok()) {
    Logger().error("experiment {}: storing its abort: {}", r.id, s.ToString());
    return;
  }
  Logger().info("experiment {} ({}) of agent={}: {}", r.id, r.name, r.agent_id, r.statement);
  if (session) session->Send(EndMessage(r.id, r.statement));
}

void ExperimentRunner::SendSettings(const std::shared_ptr<SessionHandle>& session,
                                    Declared* declared, int64_t experiment_id,
                                    const std::string& statement) {
  auto settings = store_->LoadKnobSettings(declared->target_id);
  if (!settings.ok()) {
    Logger().error("knob settings of target={}: {}", declared->target_id,
                   settings.status().ToString());
    return;
  }
  v1::TunerMessage m = EndMessage(experiment_id, statement);
  for (const auto& s : *settings) {
    if (s.declaration != declared->name) continue;
    v1::KnobValue* v = m.mutable_knob()->mutable_end()->add_setting();
    v->set_coordinate(s.coordinate);
    v->set_value(s.value);
  }
  declared->sent = SettingsKey(*settings, declared->name);
  session->Send(std::move(m));
}

void ExperimentRunner::OnApplied(const std::shared_ptr<SessionHandle>& session,
                                 const v1::KnobApplied& a) {
  if (a.experiment_id() == 0) return;
  const std::string result = a.ok() ? "ok" : Printable(a.error(), 1024);
  if (!a.ok()) {
    Logger().error("agent={} could not end experiment {} as asked: {}", session->hello.agent_id(),
                   a.experiment_id(), result);
  }
  absl::Status s = store_->RecordKnobEnd(static_cast<int64_t>(a.experiment_id()), result);
  if (!s.ok()) Logger().error("experiment {}: {}", a.experiment_id(), s.ToString());
}

void ExperimentRunner::OnSessionEnd(const SessionHandle* session) {
  auto running = running_.find(session);
  if (running != running_.end()) {
    // Another session of the agent may have taken the experiment over.
    auto live = live_.find(running->second);
    if (live != live_.end()) {
      auto owner = live->second.session.lock();
      if (!owner || owner.get() == session) live_.erase(live);
    }
    running_.erase(running);
  }
  declared_.erase(session);
}

void ExperimentRunner::Run(int64_t id, const std::shared_ptr<SessionHandle>& session, Live live) {
  // One session runs an experiment: an older one of the same agent (not
  // closed yet) loses it.
  for (auto it = running_.begin(); it != running_.end();) {
    it = it->second == id ? running_.erase(it) : std::next(it);
  }
  live_[id] = std::move(live);
  running_[session.get()] = id;
  Continue(id);
}

void ExperimentRunner::Tick() {
  auto version = store_->DataVersion();
  if (!version.ok() || *version == data_version_) return;
  data_version_ = *version;
  // Aborts asked for through the database.
  auto aborts = store_->AbortRequests();
  if (!aborts.ok()) return;
  for (auto& r : *aborts) {
    std::shared_ptr<SessionHandle> session;
    if (auto live = live_.find(r.id); live != live_.end()) session = live->second.session.lock();
    Abort(r, session, "aborted by spintune experiments abort");
  }
  // Settings another process changed (a rollback), for agents between
  // experiments.
  for (auto& [ptr, declared] : declared_) {
    auto session = declared.session.lock();
    if (!session || running_.count(ptr)) continue;
    auto settings = store_->LoadKnobSettings(declared.target_id);
    if (!settings.ok()) continue;
    if (SettingsKey(*settings, declared.name) != declared.sent) {
      Logger().info("agent={} knob settings of {} changed by another process: pushing",
                    session->hello.agent_id(), declared.name);
      SendSettings(session, &declared, 0, "knob settings changed (profiles rollback)");
    }
  }
}

}  // namespace spintune
