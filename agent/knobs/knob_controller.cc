#include "agent/knobs/knob_controller.h"

#include <algorithm>
#include <future>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/logging.h"
#include "common/status_macros.h"

namespace spintune {
namespace {

absl::StatusOr<int64_t> ParseInteger(const std::string& knob, const std::string& raw) {
  int64_t v = 0;
  uint64_t u = 0;
  if (absl::SimpleAtoi(raw, &v)) return v;
  if (raw.size() > 2 && raw[0] == '0' && (raw[1] == 'x' || raw[1] == 'X') &&
      absl::SimpleHexAtoi(raw.substr(2), &u)) {
    return static_cast<int64_t>(u);
  }
  return absl::InvalidArgumentError(absl::StrCat(knob, ": '", raw, "' is not a number"));
}

uint64_t FieldMask(const KnobFieldSpec& f) {
  return (f.width >= 64 ? ~uint64_t{0} : (uint64_t{1} << f.width) - 1) << f.shift;
}

int64_t FieldOf(const KnobFieldSpec& f, int64_t reg) {
  return static_cast<int64_t>((static_cast<uint64_t>(reg) & FieldMask(f)) >> f.shift);
}

// The knob's value as the coordinate sees it: the integer, the label's
// index (-1 for a label not declared) or the whole register.
absl::StatusOr<int64_t> Parse(const KnobSpec& k, const std::string& raw) {
  if (k.is_enum()) {
    auto it = std::find(k.labels.begin(), k.labels.end(), raw);
    return it == k.labels.end() ? -1 : static_cast<int64_t>(it - k.labels.begin());
  }
  return ParseInteger(k.name, raw);
}

std::string Format(const KnobSpec& k, int64_t v) {
  if (k.is_enum()) return k.labels[static_cast<size_t>(v)];
  if (k.is_register()) return absl::StrFormat("0x%08x", static_cast<uint64_t>(v));
  return absl::StrCat(v);
}

// Equal as the experiment sees it (a register: its declared fields).
bool SameValue(const KnobSpec& k, int64_t a, int64_t b) {
  if (!k.is_register()) return a == b;
  for (const auto& f : k.fields) {
    if (FieldOf(f, a) != FieldOf(f, b)) return false;
  }
  return true;
}

void AddCandidate(std::vector<int64_t>* values, int64_t v) {
  if (std::find(values->begin(), values->end(), v) == values->end()) values->push_back(v);
}

}  // namespace

absl::StatusOr<std::unique_ptr<KnobController>> KnobController::Create(
    KnobDeclaration declaration, std::string journal_path, uint64_t seed) {
  std::shared_ptr<AhciSunxiSim> sim;
  if (!declaration.sim_board.empty()) {
    SPINTUNE_ASSIGN_OR_RETURN(sim, MakeAhciSunxiSim(declaration.sim_board, seed));
  }
  std::vector<std::unique_ptr<KnobAccessor>> accessors;
  for (const auto& k : declaration.knobs) accessors.push_back(MakeKnobAccessor(k.access, sim));
  auto workload = MakeKnobWorkload(declaration.workload, sim);
  if (journal_path.empty()) {
    Logger().warn("knobs: no state directory: a crash mid-experiment cannot restore the start "
                  "values");
  }
  return std::make_unique<KnobController>(std::move(declaration), std::move(journal_path),
                                          std::move(accessors), std::move(workload));
}

KnobController::KnobController(KnobDeclaration declaration, std::string journal_path,
                               std::vector<std::unique_ptr<KnobAccessor>> accessors,
                               std::unique_ptr<KnobWorkload> workload)
    : declaration_(std::move(declaration)),
      journal_path_(std::move(journal_path)),
      accessors_(std::move(accessors)),
      workload_(std::move(workload)) {
  journal_.declaration = declaration_.name;
  worker_ = std::thread([this] { WorkerLoop(); });
}

KnobController::~KnobController() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
    sender_ = nullptr;
  }
  worker_.join();
  if (journal_.experiment_id != 0) {
    absl::Status s = RestoreBaseline("the agent is stopping");
    if (!s.ok()) Logger().error("knobs: {}", s.message());
  }
}

bool KnobController::HasWork() const { return stop_ || !tasks_.empty(); }

bool KnobController::Idle() const { return stop_ || (tasks_.empty() && !running_task_); }

void KnobController::WorkerLoop() {
  mu_.Lock();
  while (true) {
    mu_.Await(absl::Condition(this, &KnobController::HasWork));
    if (stop_) break;
    auto [session, task] = std::move(tasks_.front());
    tasks_.pop_front();
    if (session != 0 && session != session_) continue;  // its session is gone
    running_task_ = true;
    mu_.Unlock();
    task();
    mu_.Lock();
    running_task_ = false;
  }
  mu_.Unlock();
}

void KnobController::Post(uint64_t session, std::function<void()> task) {
  absl::MutexLock lock(&mu_);
  tasks_.emplace_back(session, std::move(task));
}

void KnobController::WaitIdle() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(this, &KnobController::Idle));
}

void KnobController::Send(uint64_t session, const v1::AgentMessage& message) {
  // Held while sending: Detach() waits for a send in progress, so the
  // session's stream outlives every use.
  absl::MutexLock sending(&send_mu_);
  Sender send;
  {
    absl::MutexLock lock(&mu_);
    if (session != session_) return;
    send = sender_;
  }
  // Lost with its session: the tuner asks again when the agent is back.
  if (send) send(message);
}

void KnobController::Attach(Sender send) {
  absl::MutexLock lock(&mu_);
  session_ += session_ % 2 == 0 ? 1 : 2;
  sender_ = std::move(send);
}

void KnobController::Detach() {
  {
    absl::MutexLock lock(&mu_);
    if (session_ % 2 == 1) ++session_;
    sender_ = nullptr;
  }
  { absl::MutexLock wait_for_send(&send_mu_); }
  Post(0, [this] {
    if (journal_.experiment_id == 0) return;
    absl::Status s = RestoreBaseline("the session with the tuner ended");
    if (!s.ok()) Logger().error("knobs: {}", s.message());
  });
}

bool KnobController::busy() const {
  absl::MutexLock lock(&mu_);
  return busy_;
}

void KnobController::OnCommand(v1::KnobCommand command) {
  uint64_t session;
  {
    absl::MutexLock lock(&mu_);
    if (session_ % 2 == 0) return;  // read after Detach(): its session is gone
    session = session_;
  }
  auto c = std::make_shared<v1::KnobCommand>(std::move(command));
  Post(session, [this, c] {
    if (c->has_trial()) {
      RunTrial(*c);
    } else if (c->has_end()) {
      RunEnd(*c);
    }
  });
}

absl::Status KnobController::SaveJournal() {
  if (journal_path_.empty()) return absl::OkStatus();
  return SaveKnobJournal(journal_path_, journal_);
}

absl::StatusOr<std::map<std::string, std::string>> KnobController::ReadAll() {
  std::map<std::string, std::string> raw;
  for (size_t i = 0; i < accessors_.size(); ++i) {
    SPINTUNE_ASSIGN_OR_RETURN(raw[declaration_.knobs[i].name], accessors_[i]->Read());
  }
  return raw;
}

absl::Status KnobController::WriteAll(const std::map<std::string, std::string>& raw) {
  // Knobs can bound each other (a block queue's nr_requests is limited by
  // the hardware depth under scheduler "none", not under mq-deadline): a
  // write that fails is tried again after the others, while that helps.
  std::vector<size_t> pending;
  for (size_t i = 0; i < accessors_.size(); ++i) {
    if (raw.count(declaration_.knobs[i].name)) pending.push_back(i);
  }
  absl::Status last;
  while (!pending.empty()) {
    std::vector<size_t> failed;
    for (size_t i : pending) {
      absl::Status w = accessors_[i]->Write(raw.at(declaration_.knobs[i].name));
      if (!w.ok()) {
        failed.push_back(i);
        last = w;
      }
    }
    if (failed.size() == pending.size()) return last;
    pending = std::move(failed);
  }
  for (size_t i = 0; i < accessors_.size(); ++i) {
    const KnobSpec& k = declaration_.knobs[i];
    auto want = raw.find(k.name);
    if (want == raw.end()) continue;
    SPINTUNE_ASSIGN_OR_RETURN(std::string got, accessors_[i]->Read());
    SPINTUNE_ASSIGN_OR_RETURN(int64_t a, Parse(k, want->second));
    SPINTUNE_ASSIGN_OR_RETURN(int64_t b, Parse(k, got));
    if (got != want->second && !SameValue(k, a, b)) {
      return absl::FailedPreconditionError(
          absl::StrCat(k.name, ": wrote '", want->second, "', read back '", got, "'"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::map<std::string, std::string>> KnobController::RawOf(
    const google::protobuf::RepeatedPtrField<v1::KnobValue>& setting,
    const std::map<std::string, std::string>& base) const {
  std::map<std::string, int64_t> given;
  for (const auto& v : setting) given[v.coordinate()] = v.value();
  std::map<std::string, std::string> raw = base;
  size_t used = 0;
  for (const KnobSpec& k : declaration_.knobs) {
    if (k.is_register()) {
      auto b = base.find(k.name);
      if (b == base.end()) return absl::InternalError(absl::StrCat(k.name, ": no base value"));
      SPINTUNE_ASSIGN_OR_RETURN(int64_t reg, Parse(k, b->second));
      bool changed = false;
      for (const auto& f : k.fields) {
        auto it = given.find(k.name + "." + f.name);
        if (it == given.end()) continue;
        ++used;
        if (it->second < 0 || static_cast<uint64_t>(it->second) > (FieldMask(f) >> f.shift)) {
          return absl::InvalidArgumentError(
              absl::StrCat(it->first, ": ", it->second, " does not fit in ", f.width, " bits"));
        }
        reg = static_cast<int64_t>((static_cast<uint64_t>(reg) & ~FieldMask(f)) |
                                   (static_cast<uint64_t>(it->second) << f.shift));
        changed = true;
      }
      if (changed) raw[k.name] = Format(k, reg);
      continue;
    }
    auto it = given.find(k.name);
    if (it == given.end()) continue;
    ++used;
    if (k.is_enum() && (it->second < 0 || static_cast<size_t>(it->second) >= k.labels.size())) {
      return absl::InvalidArgumentError(absl::StrCat(k.name, ": no value ", it->second));
    }
    raw[k.name] = Format(k, it->second);
  }
  if (used != given.size()) {
    return absl::InvalidArgumentError("the setting names a coordinate this agent did not declare");
  }
  return raw;
}

absl::Status KnobController::RestoreBaseline(const char* why) {
  if (journal_.baseline.empty()) {
    journal_.experiment_id = 0;
    return SaveJournal();
  }
  absl::Status s = WriteAll(journal_.baseline);
  if (!s.ok()) return absl::UnavailableError(absl::StrCat("restoring the start values (", why, "): ", s.message()));
  Logger().info("knobs: start values restored ({})", why);
  journal_.experiment_id = 0;
  journal_.baseline.clear();
  return SaveJournal();
}

absl::Status KnobController::Recover() {
  auto loaded = journal_path_.empty() ? absl::StatusOr<KnobJournalState>(KnobJournalState{})
                                      : LoadKnobJournal(journal_path_);
  if (!loaded.ok()) return loaded.status();
  absl::Status s;
  Post(0, [&, state = *loaded]() mutable {
    if (!state.empty() && state.declaration != declaration_.name) {
      s = absl::FailedPreconditionError(absl::StrCat(
          journal_path_, " holds knob values of declaration '", state.declaration, "', not '",
          declaration_.name, "'; restore them by hand, then remove it"));
      return;
    }
    journal_ = std::move(state);
    journal_.declaration = declaration_.name;
    if (journal_.experiment_id != 0) {
      Logger().warn("knobs: experiment {} was interrupted (agent restart): restoring the start "
                    "values",
                    journal_.experiment_id);
      s = RestoreBaseline("the agent restarted mid-experiment");
    } else if (!journal_.applied.empty()) {
      s = WriteAll(journal_.applied);
      if (s.ok()) Logger().info("knobs: re-applied the setting the last experiment left");
    }
  });
  WaitIdle();
  return s;
}

absl::StatusOr<v1::KnobsDeclared> KnobController::Declare() {
  std::promise<absl::StatusOr<v1::KnobsDeclared>> done;
  auto result = done.get_future();
  Post(0, [&] { done.set_value(DeclareNow()); });
  auto declared = result.get();
  if (declared.ok()) {
    absl::MutexLock lock(&mu_);
    busy_ = true;
  }
  return declared;
}

absl::StatusOr<v1::KnobsDeclared> KnobController::DeclareNow() {
  // While a trial of an earlier session may be in force (its restore
  // failed), the baseline is the start.
  std::map<std::string, std::string> current;
  if (!journal_.baseline.empty()) {
    current = journal_.baseline;
  } else {
    SPINTUNE_ASSIGN_OR_RETURN(current, ReadAll());
  }
  v1::KnobsDeclared d;
  d.set_name(declaration_.name);
  for (KnobSpec& k : declaration_.knobs) {
    SPINTUNE_ASSIGN_OR_RETURN(int64_t start, Parse(k, current[k.name]));
    v1::Knob* knob = d.add_knobs();
    knob->set_name(k.name);
    knob->set_access(k.access.Describe());
    knob->set_unit(k.unit);
    if (k.is_enum()) {
      if (start < 0) {  // a value in force that was not declared is a candidate too
        k.labels.push_back(current[k.name]);
        start = static_cast<int64_t>(k.labels.size() - 1);
      }
      for (const auto& l : k.labels) knob->add_labels(l);
    } else if (k.is_register()) {
      for (auto& f : k.fields) {
        AddCandidate(&f.values, FieldOf(f, start));
        v1::KnobField* field = knob->add_fields();
        field->set_name(f.name);
        field->set_shift(f.shift);
        field->set_width(f.width);
        for (int64_t v : f.values) field->add_values(v);
      }
    } else {
      AddCandidate(&k.values, start);
      for (int64_t v : k.values) knob->add_values(v);
    }
    knob->set_start_value(start);
  }
  d.set_metric(declaration_.metric);
  d.set_metric_unit(declaration_.metric_unit);
  d.set_lower_is_better(declaration_.lower_is_better);
  for (const auto& c : declaration_.constraints) {
    v1::KnobConstraint* out = d.add_constraints();
    out->set_metric(c.metric);
    if (c.min) out->set_min(*c.min);
    if (c.max) out->set_max(*c.max);
  }
  d.set_workload(declaration_.workload.Describe());
  d.set_max_trials(declaration_.max_trials);
  d.set_apply_winner(declaration_.apply_winner);
  d.set_seed(declaration_.seed);
  return d;
}

void KnobController::RunTrial(const v1::KnobCommand& command) {
  uint64_t session;
  {
    absl::MutexLock lock(&mu_);
    session = session_;
  }
  const absl::Time start = absl::Now();
  v1::AgentMessage reply;
  v1::KnobTrial* trial = reply.mutable_knob_trial();
  trial->set_experiment_id(command.experiment_id());
  trial->set_trial(command.trial().trial());
  absl::Status s = [&]() -> absl::Status {
    if (journal_.experiment_id != command.experiment_id() || journal_.baseline.empty()) {
      // The values before the experiment, on disk before the first write.
      if (journal_.experiment_id == 0 || journal_.baseline.empty()) {
        SPINTUNE_ASSIGN_OR_RETURN(journal_.baseline, ReadAll());
      }
      journal_.experiment_id = command.experiment_id();
      SPINTUNE_RETURN_IF_ERROR(SaveJournal());
    }
    SPINTUNE_ASSIGN_OR_RETURN(auto raw, RawOf(command.trial().setting(), journal_.baseline));
    SPINTUNE_RETURN_IF_ERROR(WriteAll(raw));
    SPINTUNE_ASSIGN_OR_RETURN(auto metrics, workload_->Run());
    for (const auto& [name, value] : metrics) (*trial->mutable_metrics())[name] = value;
    auto objective = metrics.find(declaration_.metric);
    if (objective == metrics.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("the workload did not report the metric '", declaration_.metric, "'"));
    }
    trial->set_metric(objective->second);
    bool ok = true;
    for (const auto& c : declaration_.constraints) {
      auto m = metrics.find(c.metric);
      ok = ok && m != metrics.end() && (!c.min || m->second >= *c.min) &&
           (!c.max || m->second <= *c.max);
    }
    trial->set_constraints_ok(ok);
    return absl::OkStatus();
  }();
  if (!s.ok()) trial->set_error(std::string(s.message()));
  if (!s.ok() || !trial->constraints_ok()) {
    // Never stay on a setting that failed.
    absl::Status r = RestoreBaseline(s.ok() ? "a constraint failed" : "the trial failed");
    if (!r.ok()) {
      Logger().error("knobs: {}", r.message());
      trial->set_error(absl::StrCat(trial->error(), trial->error().empty() ? "" : "; ", r.message()));
    }
  }
  trial->set_duration_ns(static_cast<uint64_t>(absl::ToInt64Nanoseconds(absl::Now() - start)));
  Send(session, reply);
}

void KnobController::RunEnd(const v1::KnobCommand& command) {
  uint64_t session;
  {
    absl::MutexLock lock(&mu_);
    session = session_;
  }
  v1::AgentMessage reply;
  v1::KnobApplied* applied = reply.mutable_knob_applied();
  applied->set_experiment_id(command.experiment_id());
  const auto& setting = command.end().setting();
  absl::Status s = [&]() -> absl::Status {
    if (setting.empty()) {
      SPINTUNE_RETURN_IF_ERROR(RestoreBaseline("the experiment ended on the start values"));
    } else {
      std::map<std::string, std::string> base = journal_.baseline;
      if (base.empty()) {
        SPINTUNE_ASSIGN_OR_RETURN(base, ReadAll());
      }
      SPINTUNE_ASSIGN_OR_RETURN(auto raw, RawOf(setting, base));
      // Kept before it is written: a crash from here on re-applies it.
      journal_.applied = raw;
      SPINTUNE_RETURN_IF_ERROR(SaveJournal());
      absl::Status w = WriteAll(raw);
      if (!w.ok()) {
        journal_.applied.clear();
        absl::Status r = RestoreBaseline("applying the end setting failed");
        return r.ok() ? w : absl::UnavailableError(absl::StrCat(w.message(), "; ", r.message()));
      }
      journal_.experiment_id = 0;
      journal_.baseline.clear();
      SPINTUNE_RETURN_IF_ERROR(SaveJournal());
    }
    return absl::OkStatus();
  }();
  applied->set_ok(s.ok());
  if (!s.ok()) {
    applied->set_error(std::string(s.message()));
    Logger().error("knobs: ending experiment {}: {}", command.experiment_id(), s.message());
  } else if (!command.end().statement().empty()) {
    Logger().info("knobs: experiment {} ended: {}", command.experiment_id(),
                  command.end().statement());
  }
  if (auto now = ReadAll(); now.ok()) {
    for (const KnobSpec& k : declaration_.knobs) {
      auto v = Parse(k, (*now)[k.name]);
      if (!v.ok()) continue;
      if (k.is_register()) {
        for (const auto& f : k.fields) {
          v1::KnobValue* out = applied->add_setting();
          out->set_coordinate(k.name + "." + f.name);
          out->set_value(FieldOf(f, *v));
        }
      } else {
        v1::KnobValue* out = applied->add_setting();
        out->set_coordinate(k.name);
        out->set_value(*v);
      }
    }
  }
  {
    absl::MutexLock lock(&mu_);
    busy_ = false;
  }
  Send(session, reply);
}

}  // namespace spintune
