// KnobController: the agent's side of knob experiments. It declares the
// knobs (KnobsDeclared, with the values in force as the start), carries out
// the tuner's commands on a worker thread of its own (a trial sets the
// setting, reads it back, runs the workload and answers with KnobTrial; an
// end leaves the board on the given setting and answers with KnobApplied),
// and guarantees the start values come back whenever an experiment is
// interrupted:
//   - a trial that failed (set, read back, measure) or broke a constraint
//     is followed at once by the baseline (the values before the
//     experiment's first trial), so the board never stays on it;
//   - the session ending (Detach) restores the baseline; the tuner resumes
//     the experiment when the agent is back;
//   - the baseline is in the journal (knob_journal.h) before the first
//     write: a restarted agent calls Recover() first and writes it back,
//     also after kill -9; a clean exit (the destructor) restores it too.
// After an end on a setting other than the start, Recover() re-applies it.
//
// Thread-safety: all public methods are thread-safe; commands run one at a
// time, in order, on the worker. mu_ (an absl::Mutex; the worker and
// WaitIdle() wait on it with absl::Condition) guards the task queue and the
// session; send_mu_ is held while a message is sent and taken before mu_.
// What is marked worker-only takes no lock.
#ifndef SPINTUNE_AGENT_KNOBS_KNOB_CONTROLLER_H_
#define SPINTUNE_AGENT_KNOBS_KNOB_CONTROLLER_H_

#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "agent/knobs/knob_access.h"
#include "agent/knobs/knob_declaration.h"
#include "agent/knobs/knob_journal.h"
#include "spintune/v1/spintune.pb.h"

namespace spintune {

class KnobController {
 public:
  // Writes one message on the current session; false when it is gone.
  using Sender = std::function<bool(const v1::AgentMessage&)>;

  // `journal_path` empty: nothing survives a crash (a warning says so).
  // `seed` drives simulated boards.
  static absl::StatusOr<std::unique_ptr<KnobController>> Create(KnobDeclaration declaration,
                                                                std::string journal_path,
                                                                uint64_t seed);
  // For tests: any accessors (one per knob, in declaration order) and workload.
  KnobController(KnobDeclaration declaration, std::string journal_path,
                 std::vector<std::unique_ptr<KnobAccessor>> accessors,
                 std::unique_ptr<KnobWorkload> workload);
  // Stops the worker and restores the baseline if a trial setting may be
  // in force.
  ~KnobController();
  KnobController(const KnobController&) = delete;
  KnobController& operator=(const KnobController&) = delete;

  // Once, before the first session: writes back the baseline of an
  // interrupted experiment, else re-applies the setting a finished one
  // left. DataLoss for an unreadable journal (the knobs are not touched).
  absl::Status Recover();
  // The declaration with the values in force as the start (a start value
  // outside the declared candidates is added to them). Marks the
  // controller busy until the tuner ends the experiment.
  absl::StatusOr<v1::KnobsDeclared> Declare();
  // A session is up: messages go to `send`.
  void Attach(Sender send);
  // The session is going: the baseline comes back; commands still queued
  // for it are dropped. Returns once no message is being sent on it.
  void Detach();
  // Queues a command of the current session.
  void OnCommand(v1::KnobCommand command);
  // True from Declare() until an end was carried out: the agent does not
  // finish while the tuner may still ask for trials.
  bool busy() const;
  const KnobDeclaration& declaration() const { return declaration_; }
  // Waits until every queued command has run (tests).
  void WaitIdle();

 private:
  // Worker-only.
  void RunTrial(const v1::KnobCommand& command);
  void RunEnd(const v1::KnobCommand& command);
  absl::StatusOr<v1::KnobsDeclared> DeclareNow();
  absl::Status RestoreBaseline(const char* why);
  // Writes raw values (knob name -> raw) and checks they read back.
  absl::Status WriteAll(const std::map<std::string, std::string>& raw);
  absl::StatusOr<std::map<std::string, std::string>> ReadAll();
  // The raw values of a setting; coordinates not given keep `base`.
  absl::StatusOr<std::map<std::string, std::string>> RawOf(
      const google::protobuf::RepeatedPtrField<v1::KnobValue>& setting,
      const std::map<std::string, std::string>& base) const;
  absl::Status SaveJournal();
  void Send(uint64_t session, const v1::AgentMessage& message) ABSL_LOCKS_EXCLUDED(mu_);
  // Runs `task` on the worker if it belongs to `session` (0: always).
  void Post(uint64_t session, std::function<void()> task) ABSL_LOCKS_EXCLUDED(mu_);
  void WorkerLoop() ABSL_LOCKS_EXCLUDED(mu_);
  // Conditions the worker and WaitIdle() wait for.
  bool HasWork() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool Idle() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  KnobDeclaration declaration_;  // start values added to the domains
  const std::string journal_path_;
  std::vector<std::unique_ptr<KnobAccessor>> accessors_;
  std::unique_ptr<KnobWorkload> workload_;
  KnobJournalState journal_;  // worker-only after Recover()

  mutable absl::Mutex mu_;
  absl::Mutex send_mu_ ABSL_ACQUIRED_BEFORE(mu_);  // held while a message is sent
  std::deque<std::pair<uint64_t, std::function<void()>>> tasks_ ABSL_GUARDED_BY(mu_);
  bool running_task_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t session_ ABSL_GUARDED_BY(mu_) = 0;  // odd while attached
  Sender sender_ ABSL_GUARDED_BY(mu_);
  bool busy_ ABSL_GUARDED_BY(mu_) = false;
  std::thread worker_;  // last
};

}  // namespace spintune

#endif  // SPINTUNE_AGENT_KNOBS_KNOB_CONTROLLER_H_
