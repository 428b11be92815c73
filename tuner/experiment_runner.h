// ExperimentRunner: the tuner's side of knob experiments (docs/knobs.md).
//
// A state machine driven by the Session's knob messages, on the tuner's
// worker thread (nothing in it waits for the wire):
//   KnobsDeclared -> a new experiment (stored, then its first trial sent),
//     the running one resumed (its stored trials replayed through the
//     design: the same plan continues), or, for a finished or aborted one,
//     a KnobEnd with the knob settings in force for that declaration;
//   KnobTrial     -> stored, fed to the design (models/experiment_design.h),
//     answered with the next trial or, once the design concludes, with the
//     conclusion stored (and, for a winner that beats the start with
//     confidence when the declaration asks for it, its setting made the
//     target's knob settings in force) and a KnobEnd naming the setting to
//     leave the board on;
//   KnobApplied   -> the agent's result of the end, stored.
// A session that ends drops its in-memory state; the agent restores the
// start values itself and the experiment resumes when it declares again.
// Tick() (once a second) carries out aborts requested through the database
// (`spintune experiments abort`) and pushes knob settings another process
// changed (`spintune profiles rollback`) to agents not in an experiment.
//
// Thread-safety: not thread-safe; the tuner core calls it from its worker.
#ifndef SPINTUNE_TUNER_EXPERIMENT_RUNNER_H_
#define SPINTUNE_TUNER_EXPERIMENT_RUNNER_H_

#include <map>
#include <memory>
#include <string>

#include "models/experiment_design.h"
#include "spintune/v1/spintune.pb.h"
#include "storage/store.h"
#include "tuner/session_handle.h"

namespace spintune {

struct ExperimentRunnerOptions {
  // Defaults of every experiment; a declaration's max_trials and seed
  // override them.
  ExperimentDesignOptions design;
};

class ExperimentRunner {
 public:
  // `store` must outlive the runner.
  ExperimentRunner(Store* store, ExperimentRunnerOptions options);

  // A knob message of `session` (which said hello).
  void OnMessage(const std::shared_ptr<SessionHandle>& session, const v1::AgentMessage& message);
  void OnSessionEnd(const SessionHandle* session);
  void Tick();

 private:
  struct Live {
    std::weak_ptr<SessionHandle> session;
    ExperimentRecord record;
    std::unique_ptr<ExperimentDesign> design;
    uint32_t awaiting = 0;  // the trial number sent
    PlannedTrial planned;
  };
  // A session's declaration, for pushing settings changed elsewhere.
  struct Declared {
    std::weak_ptr<SessionHandle> session;
    int64_t target_id = 0;
    std::string name;
    std::string sent;  // the settings last sent, formatted
  };

  void OnDeclared(const std::shared_ptr<SessionHandle>& session, const v1::KnobsDeclared& d);
  void OnTrial(const std::shared_ptr<SessionHandle>& session, const v1::KnobTrial& t);
  void OnApplied(const std::shared_ptr<SessionHandle>& session, const v1::KnobApplied& a);
  // Makes `session` the one running experiment `id` and sends its next trial.
  void Run(int64_t id, const std::shared_ptr<SessionHandle>& session, Live live);
  // Sends the next trial, or concludes.
  void Continue(int64_t id);
  void Finish(int64_t id, const ExperimentConclusion& c);
  // Stores `record` as aborted and ends it on the start values.
  void Abort(ExperimentRecord record, const std::shared_ptr<SessionHandle>& session,
             const std::string& why);
  // KnobEnd with the target's settings in force for the declaration.
  void SendSettings(const std::shared_ptr<SessionHandle>& session, Declared* declared,
                    int64_t experiment_id, const std::string& statement);
  void Refuse(const std::shared_ptr<SessionHandle>& session, const absl::Status& why);
  std::unique_ptr<ExperimentDesign> NewDesign(const ExperimentRecord& r) const;

  Store* const store_;
  const ExperimentRunnerOptions options_;
  std::map<int64_t, Live> live_;                        // by experiment id
  std::map<const SessionHandle*, int64_t> running_;     // session -> experiment id
  std::map<const SessionHandle*, Declared> declared_;
  int64_t data_version_ = 0;
};

}  // namespace spintune

#endif  // SPINTUNE_TUNER_EXPERIMENT_RUNNER_H_
