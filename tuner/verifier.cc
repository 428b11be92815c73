#include "tuner/verifier.h"

#include <map>
#include <set>

#include "absl/strings/str_format.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "models/cost_model.h"
#include "models/wait_distribution.h"
#include "models/wait_optimizer.h"
#include "policy/policy_builder.h"

namespace spintune {
namespace {

// The wait of `key` under its device's default rule among `devices` (IRQ
// when it has none).
WaitParams DefaultWait(const std::vector<DeviceInfo>& devices, const PolicyKey& key) {
  for (const auto& d : devices) {
    if (d.name != key.device) continue;
    if (auto w = MatchDefault(d.default_rules, key.opcode, key.size_class)) return *w;
  }
  return WaitParams::Irq();
}

// The wait of `key` under version `version` (0: the device's default rule
// among `devices`; IRQ when it has none).
absl::StatusOr<WaitParams> WaitUnder(Store& store, int64_t target_id, uint64_t version,
                                     const std::vector<DeviceInfo>& devices,
                                     const PolicyKey& key) {
  if (version == 0) return DefaultWait(devices, key);
  SPINTUNE_ASSIGN_OR_RETURN(auto table, store.LoadPolicy(target_id, version));
  if (!table) return absl::NotFoundError(absl::StrCat("no version ", version));
  const PolicyEntry* e = table->EntryFor(key);
  return e ? e->wait : WaitParams::Irq();
}

// Sets `e`'s wait to `w`, priced on the key's evidence (when it has any)
// with `table`'s platform costs and the key's own IRQ path when `irq` has
// enough requests (as BuildPolicyTable prices it), so the entry's prediction
// is the wait's.
void SetWait(const WaitParams& w, const KeyEvidence* evidence, const CostMoments* irq,
             const PolicyTable& table, PolicyEntry* e) {
  e->wait = w;
  const int cls = table.CpuClassIndex(e->key.cpu_class);
  if (evidence == nullptr || evidence->histogram.empty() || cls < 0) return;
  const PlatformModel model = WithKeyIrqPath(table.cpu_classes[static_cast<size_t>(cls)].costs,
                                             evidence->histogram, irq);
  e->expected =
      EvaluateWait(WaitDistribution::FromHistogram(evidence->histogram), w, model.means());
  e->expected_cost_ns = e->expected.Cost(table.latency_weight);
}

const CostMoments* Find(const std::map<PolicyKey, CostMoments>& m, const PolicyKey& key) {
  auto it = m.find(key);
  return it == m.end() ? nullptr : &it->second;
}

// Sets `v`'s verdict from its two intervals: worse or better when they do
// not overlap, inconclusive once `requests` reached the maximum. False:
// wait for more requests.
bool Decide(const VerifierOptions& options, uint64_t requests, VerificationRecord* v) {
  if (v->measured.low_ns > v->incumbent.high_ns) {
    v->verdict = "worse";
  } else if (v->measured.high_ns < v->incumbent.low_ns) {
    v->verdict = "better";
  } else if (requests >= options.max_requests) {
    v->verdict = "inconclusive";
  } else {
    return false;
  }
  return true;
}

std::string Us(const CostInterval& i) {
  return absl::StrFormat("%.1f us [%.1f, %.1f]", i.mean_ns / 1e3, i.low_ns / 1e3,
                         i.high_ns / 1e3);
}

}  // namespace

absl::StatusOr<VerifyResult> VerifyTarget(Store& store, int64_t target_id,
                                          const VerifierOptions& options) {
  VerifyResult result;
  SPINTUNE_ASSIGN_OR_RETURN(TargetRecord target, store.LoadTarget(target_id));
  SPINTUNE_ASSIGN_OR_RETURN(auto summary, store.FindTarget(target.agent_id));
  if (!summary || summary->applied_version == 0) return result;
  const uint64_t applied = summary->applied_version;
  SPINTUNE_ASSIGN_OR_RETURN(auto table, store.LoadPolicy(target_id, applied));
  if (!table) return result;
  SPINTUNE_ASSIGN_OR_RETURN(auto outcomes, store.LoadOutcomes(target_id));
  SPINTUNE_ASSIGN_OR_RETURN(auto verified, store.ListVerifications(target_id));
  // Drifts, detected (Store::DetectChanges) once a before/after verdict is
  // due: the detector then sees every window measured so far.
  std::optional<std::map<PolicyKey, uint64_t>> drift;
  std::set<std::pair<uint64_t, PolicyKey>> decided;
  for (const auto& v : verified) decided.insert({v.version, v.key});
  // key -> version -> what the version's own wait measured (its table arm)
  std::map<PolicyKey, std::map<uint64_t, const OutcomeRecord*>> by_key;
  // key -> the incumbent arm of the applied version's trial
  std::map<PolicyKey, const OutcomeRecord*> incumbent_arm;
  for (const auto& o : outcomes) {
    if (o.arm == OutcomeArm::kTable) {
      by_key[o.key][o.version] = &o;
    } else if (o.version == applied) {
      incumbent_arm[o.key] = &o;
    }
  }

  struct Worse {
    VerificationRecord v;
    WaitParams incumbent_wait;  // what it is rolled back to
  };
  std::vector<Worse> worse;
  std::set<PolicyKey> settled_trials;  // trials of `applied` decided now
  for (const auto& e : table->entries) {
    if (e.fallback || decided.count({applied, e.key})) continue;
    auto key_outcomes = by_key.find(e.key);
    if (key_outcomes == by_key.end()) continue;
    auto found = key_outcomes->second.find(applied);
    if (found == key_outcomes->second.end()) continue;
    const OutcomeRecord& now = *found->second;
    VerificationRecord v;
    v.key = e.key;
    v.version = applied;
    v.predicted_cost_ns = e.expected_cost_ns;
    v.measured = now.moments.Interval(table->latency_weight, options.z);
    v.requests = now.moments.requests;
    WaitParams incumbent_wait;
    auto arm = incumbent_arm.find(e.key);
    if (e.trial && arm != incumbent_arm.end()) {
      // A/B: both arms interleaved in the same window, so a drift moves
      // both alike. Each arm needs half the requests a before/after needs.
      const CostMoments& other = arm->second->moments;
      const uint64_t half = (options.min_requests + 1) / 2;
      if (now.moments.requests < half || other.requests < half) continue;
      v.method = "ab";
      v.incumbent_version = applied;
      v.incumbent = other.Interval(table->latency_weight, options.z);
      incumbent_wait = e.trial->wait;
      if (!Decide(options, now.moments.requests + other.requests, &v)) continue;
      v.reason = absl::StrFormat(
          "A/B in one window: table arm measured %s over %d requests; incumbent arm (%s, %d/256 "
          "of the commands) measured %s over %d; predicted %.1f us",
          Us(v.measured), v.requests, DescribeWait(incumbent_wait), e.trial->share,
          Us(v.incumbent), other.requests, v.predicted_cost_ns / 1e3);
      settled_trials.insert(e.key);
    } else {
      if (now.moments.requests < options.min_requests) continue;
      // The incumbent: the latest earlier version measured enough (the
      // default rule is version 0).
      const OutcomeRecord* before = nullptr;
      for (const auto& [version, o] : key_outcomes->second) {
        if (version < applied && o->moments.requests >= options.min_requests) {
          before = o;
          v.incumbent_version = version;
        }
      }
      if (before == nullptr) continue;  // nothing to compare with (yet)
      SPINTUNE_ASSIGN_OR_RETURN(
          incumbent_wait, WaitUnder(store, target_id, v.incumbent_version, table->devices, e.key));
      if (incumbent_wait == e.wait) continue;  // this version did not change the key
      v.incumbent = before->moments.Interval(table->latency_weight, options.z);
      // Before/after compares two measurement windows: a drift of the key's
      // completion times between them is confounded with the table change.
      if (!drift) {
        SPINTUNE_ASSIGN_OR_RETURN(result.drifted, store.DetectChanges(target_id, options.change));
        SPINTUNE_ASSIGN_OR_RETURN(drift, store.LoadDriftWindows(target_id));
      }
      auto drifted = drift->find(e.key);
      if (drifted != drift->end() && before->first_window < drifted->second &&
          drifted->second <= now.last_window) {
        v.verdict = "inconclusive";
        v.reason = absl::StrFormat(
            "completion times drifted (detected in sample window %d) between version %d's "
            "measurements (from window %d) and this version's (to window %d): before/after "
            "cannot tell the table from the workload; measured %s, version %d measured %s",
            drifted->second, v.incumbent_version, before->first_window, now.last_window,
            Us(v.measured), v.incumbent_version, Us(v.incumbent));
      } else {
        if (!Decide(options, v.requests, &v)) continue;
        v.reason = absl::StrFormat(
            "measured %s over %d requests; version %d measured %s; predicted %.1f us",
            Us(v.measured), v.requests, v.incumbent_version, Us(v.incumbent),
            v.predicted_cost_ns / 1e3);
      }
    }
    if (v.verdict == "worse") {
      worse.push_back({std::move(v), incumbent_wait});
    } else {
      SPINTUNE_RETURN_IF_ERROR(store.RecordVerification(target_id, v));
      result.decided.push_back(std::move(v));
    }
  }
  if (worse.empty() && settled_trials.empty()) return result;

  // A new version on top of the latest (a newer fit may have been stored
  // meanwhile): the worse keys rolled back to their incumbents' waits, and
  // the trials decided now dropped (their commands all take the entry's
  // wait again).
  SPINTUNE_ASSIGN_OR_RETURN(auto latest, store.LoadPolicy(target_id, 0));
  PolicyTable next = latest ? *latest : *table;
  for (auto& e : next.entries) {
    if (settled_trials.count(e.key)) e.trial.reset();
  }
  SPINTUNE_ASSIGN_OR_RETURN(auto keys, store.LoadKeys(target_id));
  std::map<PolicyKey, const KeyEvidence*> evidence;
  for (const auto& k : keys) evidence[k.key] = &k;
  SPINTUNE_ASSIGN_OR_RETURN(auto irq, IrqPathOutcomes(store, target_id, next.devices));
  std::vector<HeldKey> held;
  for (const auto& [v, w] : worse) {
    const KeyEvidence* ev = evidence.count(v.key) ? evidence[v.key] : nullptr;
    for (auto& e : next.entries) {
      if (!e.fallback && e.key == v.key) {
        SetWait(w, ev, Find(irq, v.key), next, &e);
        e.trial.reset();
      }
    }
    held.push_back({v.key, w, ev ? ev->histogram.total_count() : 0});
  }
  if (latest && worse.empty() && SameDecisions(next, *latest)) return result;  // nothing to drop
  next.origin = worse.empty() ? "verify-settled" : "verify-rollback";
  // The rollback's version, its verdicts and its key holds in one
  // transaction: a refit never sees the version without the holds. Stored
  // as based_on + 1 or not at all (below).
  const uint64_t based_on = latest ? latest->version : 0;
  VersionVerdicts verdicts;
  for (const auto& [v, w] : worse) {
    VerificationRecord rolled = v;
    rolled.rollback_version = based_on + 1;
    rolled.reason +=
        absl::StrFormat("; rolled back to %s in version %d", DescribeWait(w), based_on + 1);
    verdicts.verifications.push_back(std::move(rolled));
  }
  verdicts.holds = std::move(held);
  auto version = store.AppendPolicyVersion(target_id, &next, based_on, &verdicts);
  if (absl::IsFailedPrecondition(version.status())) {
    // Pinned by an operator: record the verdicts, change nothing.
    for (auto& [v, w] : worse) {
      v.reason += "; not rolled back: the target is pinned";
      SPINTUNE_RETURN_IF_ERROR(store.RecordVerification(target_id, v));
      result.decided.push_back(std::move(v));
    }
    return result;
  }
  // Another process stored a version meanwhile: nothing of the rollback
  // was stored; the verdicts recorded and the drifts found stand, and the
  // worse keys are judged again on the next outcomes.
  if (absl::IsAborted(version.status())) return result;
  SPINTUNE_RETURN_IF_ERROR(version.status());
  for (auto& v : verdicts.verifications) {
    Logger().warn("target={} key {}/{}/op{}/sc{}: version {} measured worse ({}; {}); "
                  "rolled back in version {}",
                  target_id, v.key.device, v.key.cpu_class, v.key.opcode, v.key.size_class,
                  v.version, v.method, v.reason, *version);
    result.decided.push_back(std::move(v));
  }
  result.rollback = std::move(next);
  return result;
}

absl::Status AttachTrials(Store& store, int64_t target_id, const PolicyTable* latest,
                          uint32_t share, PolicyTable* table) {
  if (share == 0) return absl::OkStatus();
  std::set<PolicyKey> decided;
  if (latest != nullptr) {
    SPINTUNE_ASSIGN_OR_RETURN(auto verified, store.ListVerifications(target_id));
    for (const auto& v : verified) {
      if (v.version == latest->version) decided.insert(v.key);
    }
  }
  // A key with context leaves has no single wait to trial.
  std::map<PolicyKey, int> entries_of;
  for (const auto& e : table->entries) ++entries_of[e.key];
  for (auto& e : table->entries) {
    e.trial.reset();
    if (e.fallback || entries_of[e.key] > 1) continue;
    const PolicyEntry* before = latest ? latest->EntryFor(e.key) : nullptr;
    const WaitParams incumbent =
        before ? before->wait : DefaultWait(table->devices, e.key);
    if (incumbent != e.wait) {
      e.trial = Trial{incumbent, share};  // a changed key: a new hypothesis
    } else if (before && !before->fallback && before->trial && !decided.count(e.key)) {
      e.trial = before->trial;  // same wait, not decided yet: keep testing
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<PolicyKey>> ApplyHeldKeys(Store& store, int64_t target_id,
                                                     const std::vector<KeyEvidence>& keys,
                                                     const std::vector<PolicyKey>& changed,
                                                     PolicyTable* table) {
  SPINTUNE_ASSIGN_OR_RETURN(auto held, store.ListHeldKeys(target_id));
  if (held.empty()) return std::vector<PolicyKey>();
  SPINTUNE_ASSIGN_OR_RETURN(auto irq, IrqPathOutcomes(store, target_id, table->devices));
  std::vector<PolicyKey> released;
  const std::set<PolicyKey> drifted(changed.begin(), changed.end());
  for (const auto& h : held) {
    auto evidence = std::find_if(keys.begin(), keys.end(),
                                 [&](const KeyEvidence& k) { return k.key == h.key; });
    const uint64_t samples = evidence == keys.end() ? 0 : evidence->histogram.total_count();
    if (drifted.count(h.key) || samples >= 2 * std::max<uint64_t>(h.samples_at_hold, 1)) {
      SPINTUNE_RETURN_IF_ERROR(store.ReleaseKey(target_id, h));
      released.push_back(h.key);
      continue;
    }
    for (auto& e : table->entries) {
      if (e.fallback || !(e.key == h.key) || e.wait == h.wait) continue;
      SetWait(h.wait, evidence == keys.end() ? nullptr : &*evidence, Find(irq, h.key), *table, &e);
    }
  }
  return released;
}

absl::StatusOr<std::map<PolicyKey, CostMoments>> IrqPathOutcomes(
    Store& store, int64_t target_id, const std::vector<DeviceInfo>& devices) {
  SPINTUNE_ASSIGN_OR_RETURN(auto outcomes, store.LoadOutcomes(target_id));
  std::map<PolicyKey, CostMoments> irq;
  std::map<uint64_t, std::optional<PolicyTable>> versions;  // loaded once each
  for (const auto& o : outcomes) {
    WaitParams wait = WaitParams::Irq();
    if (o.version == 0) {
      wait = DefaultWait(devices, o.key);
    } else {
      auto it = versions.find(o.version);
      if (it == versions.end()) {
        SPINTUNE_ASSIGN_OR_RETURN(auto t, store.LoadPolicy(target_id, o.version));
        it = versions.emplace(o.version, std::move(t)).first;
      }
      if (!it->second) continue;  // a version this tuner never stored
      const PolicyEntry* e = it->second->EntryFor(o.key);
      if (e) wait = o.arm == OutcomeArm::kIncumbent && e->trial ? e->trial->wait : e->wait;
    }
    if (wait.strategy == Strategy::kIrq) irq[o.key].Merge(o.moments);
  }
  return irq;
}

}  // namespace spintune
