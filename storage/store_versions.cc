// Store: policy versions, pins (rollbacks), verifications and held keys
// (storage/store.h).
#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "policy/policy_json.h"
#include "storage/store.h"
#include "storage/store_rows.h"

namespace spintune {
namespace {

using store_rows::I;
using store_rows::KeyAt;
using store_rows::U;
using store_rows::Upsert;

}  // namespace

absl::StatusOr<std::vector<std::pair<int64_t, uint64_t>>> Store::LatestVersions() {
  absl::MutexLock lock(&mu_);
  SPINTUNE_ASSIGN_OR_RETURN(
      auto q, db_->Prepare("SELECT target_id, MAX(version) FROM policy_versions GROUP BY target_id"));
  std::vector<std::pair<int64_t, uint64_t>> out;
  while (true) {
    SPINTUNE_ASSIGN_OR_RETURN(bool row, q->Step());
    if (!row) break;
    out.emplace_back(q->ColumnInt(0), U(q->ColumnInt(1)));
  }
  return out;
}

absl::StatusOr<uint64_t> Store::AppendPolicyVersion(int64_t target_id, PolicyTable* table,
                                                    uint64_t based_on,
                                                    const VersionVerdicts* verdicts) {
  absl::MutexLock lock(&mu_);
  return AppendVersion(target_id, table, /*pin=*/false, based_on, verdicts);
}

absl::StatusOr<uint64_t> Store::AppendPinnedVersion(int64_t target_id, PolicyTable* table) {
  table->origin = "rollback";
  absl::MutexLock lock(&mu_);
  // (An operator's rollback goes on top of whatever is stored.)
  return AppendVersion(target_id, table, /*pin=*/true, std::nullopt, nullptr);
}

absl::StatusOr<uint64_t> Store::AppendVersion(int64_t target_id, PolicyTable* table, bool pin,
                                              std::optional<uint64_t> based_on,
                                              const VersionVerdicts* verdicts) {
  // The highest version stored, read before the transaction and again in it.
  SPINTUNE_ASSIGN_OR_RETURN(auto latest, db_->Prepare("SELECT COALESCE(MAX(version), 0) FROM "
                                                      "policy_versions WHERE target_id = ?1"));
  auto next_version = [&]() -> absl::StatusOr<uint64_t> {
    latest->Reset();
    latest->Bind(1, target_id);
    SPINTUNE_ASSIGN_OR_RETURN(bool row, latest->Step());
    const uint64_t version = (row ? U(latest->ColumnInt(0)) : 0) + 1;
    latest->Reset();
    return version;
  };
  // The table is serialized before the write transaction, numbered as it
  // will most likely be (tens of KiB of JSON, milliseconds on the fitter's
  // low-priority thread while the ingest worker waits for the write turn);
  // again inside if another appender took that number meanwhile (a pinned
  // version; one `based_on` names is based_on + 1 or refused).
  std::string json;
  auto serialize = [&](uint64_t version) {
    table->version = version;
    table->fitted_at = NowRfc3339();
    json = PolicyTableToJson(*table).dump();
  };
  uint64_t version = 0;
  if (based_on) {
    version = *based_on + 1;
  } else {
    SPINTUNE_ASSIGN_OR_RETURN(version, next_version());
  }
  serialize(version);
  Transaction tx(db_.get());
  SPINTUNE_RETURN_IF_ERROR(tx.Begin());
  // The target's row locked first: versions are numbered one at a time
  // whoever appends them (another tuner, a rollback).
  SPINTUNE_ASSIGN_OR_RETURN(
      auto p, db_->Prepare(absl::StrCat("SELECT pinned_version FROM targets WHERE id = ?1",
                                        db_->ForUpdate())));
  p->Bind(1, target_id);
  SPINTUNE_ASSIGN_OR_RETURN(bool found, p->Step());
  // Checked in the transaction: a rollback between a refit's start and its
  // store wins.
  if (!pin && found && p->ColumnInt(0) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("target is pinned to version ", p->ColumnInt(0)));
  }
  SPINTUNE_ASSIGN_OR_RETURN(uint64_t inside, next_version());
  // Checked under the row lock too: a table built on an older version
  // would undo what the newer one decided (a rollback, a hold).
  if (based_on && inside != version) {
    return absl::AbortedError(absl::StrCat("version ", inside - 1,
                                           " was stored meanwhile; this table was built on ",
                                           *based_on == 0 ? std::string("none")
                                                          : absl::StrCat("version ", *based_on)));
  }
  if (inside != version) serialize(version = inside);
  SPINTUNE_ASSIGN_OR_RETURN(
      auto put, db_->Prepare("INSERT INTO policy_versions VALUES (?1, ?2, ?3, ?4, ?5)"));
  put->Bind(1, target_id).Bind(2, I(version)).Bind(3, table->fitted_at);
  put->Bind(4, I(table->TotalSamples())).Bind(5, json);
  SPINTUNE_RETURN_IF_ERROR(put->Run());
  if (verdicts != nullptr) {
    for (const auto& v : verdicts->verifications) {
      SPINTUNE_RETURN_IF_ERROR(PutVerification(target_id, v));
    }
    for (const auto& h : verdicts->holds) SPINTUNE_RETURN_IF_ERROR(PutHold(target_id, h));
  }
  if (pin) {
    SPINTUNE_ASSIGN_OR_RETURN(
        auto p, db_->Prepare("UPDATE targets SET pinned_version = ?2 WHERE id = ?1"));
    p->Bind(1, target_id).Bind(2, I(version));
    SPINTUNE_RETURN_IF_ERROR(p->Run());
  }
  SPINTUNE_RETURN_IF_ERROR(tx.Commit());
  return version;
}

absl::Status Store::Unpin(int64_t target_id) {
  absl::MutexLock lock(&mu_);
  SPINTUNE_ASSIGN_OR_RETURN(auto q,
                            db_->Prepare("UPDATE targets SET pinned_version = 0 WHERE id = ?1"));
  q->Bind(1, target_id);
  return q->Run();
}

absl::Status Store::UpdatePolicyEvidence(int64_t target_id, PolicyTable* table) {
  absl::MutexLock lock(&mu_);
  table->fitted_at = NowRfc3339();
  SPINTUNE_ASSIGN_OR_RETURN(
      auto q, db_->Prepare("UPDATE policy_versions SET samples = ?3, table_json = ?4 "
                           "WHERE target_id = ?1 AND version = ?2"));
  q->Bind(1, target_id).Bind(2, I(table->version)).Bind(3, I(table->TotalSamples()));
  q->Bind(4, PolicyTableToJson(*table).dump());
  SPINTUNE_RETURN_IF_ERROR(q->Run());
  if (db_->Changes() != 1) {
    return absl::NotFoundError(absl::StrCat("no policy version ", table->version));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<PolicyTable>> Store::LoadPolicy(int64_t target_id,
                                                             uint64_t version) {
  absl::MutexLock lock(&mu_);
  SPINTUNE_ASSIGN_OR_RETURN(
      auto q, db_->Cached(version == 0
                              ? "SELECT table_json FROM policy_versions WHERE target_id = ?1 "
                                "ORDER BY version DESC LIMIT 1"
                              : "SELECT table_json FROM policy_versions WHERE target_id = ?1 "
                                "AND version = ?2"));
  absl::Cleanup done = [q] { q->Reset(); };  // (every Hello runs it)
  q->Bind(1, target_id);
  if (version != 0) q->Bind(2, I(version));
  SPINTUNE_ASSIGN_OR_RETURN(bool row, q->Step());
  if (!row) return std::optional<PolicyTable>();
  auto table = ParsePolicyJson(q->ColumnText(0));
  if (!table.ok()) {
    return absl::DataLossError(
        absl::StrCat("stored policy version is unreadable: ", table.status().message()));
  }
  return std::optional<PolicyTable>(std::move(*table));
}

absl::Status Store::RecordVerification(int64_t target_id, const VerificationRecord& v) {
  absl::MutexLock lock(&mu_);
  return PutVerification(target_id, v);
}

absl::Status Store::PutVerification(int64_t target_id, const VerificationRecord& v) {
  SPINTUNE_ASSIGN_OR_RETURN(
      auto q, db_->Prepare(Upsert(
                  "verifications",
                  {"target_id", "version", "cpu_class", "device", "opcode", "size_class",
                   "verdict", "predicted_cost_ns", "measured_cost_ns", "measured_low_ns",
                   "measured_high_ns", "requests", "incumbent_version", "incumbent_cost_ns",
                   "incumbent_low_ns", "incumbent_high_ns", "rollback_version", "reason",
                   "decided_at", "method"},
                  6)));
  q->Bind(1, target_id).Bind(2, I(v.version)).Bind(3, v.key.cpu_class).Bind(4, v.key.device);
  q->Bind(5, I(v.key.opcode)).Bind(6, I(v.key.size_class)).Bind(7, v.verdict);
  q->Bind(8, v.predicted_cost_ns).Bind(9, v.measured.mean_ns).Bind(10, v.measured.low_ns);
  q->Bind(11, v.measured.high_ns).Bind(12, I(v.requests)).Bind(13, I(v.incumbent_version));
  q->Bind(14, v.incumbent.mean_ns).Bind(15, v.incumbent.low_ns).Bind(16, v.incumbent.high_ns);
  q->Bind(17, I(v.rollback_version)).Bind(18, v.reason);
  q->Bind(19, v.decided_at.empty() ? NowRfc3339() : v.decided_at);
  q->Bind(20, v.method);
  return q->Run();
}

absl::StatusOr<std::vector<VerificationRecord>> Store::ListVerifications(int64_t target_id) {
  absl::MutexLock lock(&mu_);
  SPINTUNE_ASSIGN_OR_RETURN(
      auto q, db_->Prepare("SELECT version, cpu_class, device, opcode, size_class, verdict, "
                           "predicted_cost_ns, measured_cost_ns, measured_low_ns, "
                           "measured_high_ns, requests, incumbent_version, incumbent_cost_ns, "
                           "incumbent_low_ns, incumbent_high_ns, rollback_version, reason, "
                           "decided_at, method FROM verifications WHERE target_id = ?1 "
                           "ORDER BY version, device, cpu_class, opcode, size_class"));
  q->Bind(1, target_id);
  std::vector<VerificationRecord> out;
  while (true) {
    SPINTUNE_ASSIGN_OR_RETURN(bool row, q->Step());
    if (!row) break;
    VerificationRecord v;
    v.version = U(q->ColumnInt(0));
    v.key = KeyAt(*q, 1);
    v.verdict = q->ColumnText(5);
    v.predicted_cost_ns = q->ColumnDouble(6);
    v.measured = {q->ColumnDouble(7), q->ColumnDouble(8), q->ColumnDouble(9)};
    v.requests = U(q->ColumnInt(10));
    v.incumbent_version = U(q->ColumnInt(11));
    v.incumbent = {q->ColumnDouble(12), q->ColumnDouble(13), q->ColumnDouble(14)};
    v.rollback_version = U(q->ColumnInt(15));
    v.reason = q->ColumnText(16);
    v.decided_at = q->ColumnText(17);
    v.method = q->ColumnText(18);
    out.push_back(std::move(v));
  }
  return out;
}

absl::Status Store::PutHold(int64_t target_id, const HeldKey& held) {
  SPINTUNE_ASSIGN_OR_RETURN(
      auto q, db_->Prepare(Upsert("held_keys",
                                  {"target_id", "cpu_class", "device", "opcode", "size_class",
                                   "strategy", "spin_ns", "sleep_ns", "poll_interval_ns",
                                   "samples_at_hold"},
                                  5)));
  q->Bind(1, target_id).Bind(2, held.key.cpu_class).Bind(3, held.key.device);
  q->Bind(4, I(held.key.opcode)).Bind(5, I(held.key.size_class));
  q->Bind(6, static_cast<int64_t>(held.wait.strategy)).Bind(7, I(held.wait.spin_ns));
  q->Bind(8, I(held.wait.sleep_ns)).Bind(9, I(held.wait.poll_interval_ns));
  q->Bind(10, I(held.samples_at_hold));
  return q->Run();
}

absl::Status Store::ReleaseKey(int64_t target_id, const HeldKey& held) {
  absl::MutexLock lock(&mu_);
  SPINTUNE_ASSIGN_OR_RETURN(
      auto q, db_->Prepare("DELETE FROM held_keys WHERE target_id = ?1 AND cpu_class = ?2 AND "
                           "device = ?3 AND opcode = ?4 AND size_class = ?5 AND strategy = ?6 "
                           "AND spin_ns = ?7 AND sleep_ns = ?8 AND poll_interval_ns = ?9 AND "
                           "samples_at_hold = ?10"));
  const PolicyKey& key = held.key;
  q->Bind(1, target_id).Bind(2, key.cpu_class).Bind(3, key.device).Bind(4, I(key.opcode));
  q->Bind(5, I(key.size_class)).Bind(6, static_cast<int64_t>(held.wait.strategy));
  q->Bind(7, I(held.wait.spin_ns)).Bind(8, I(held.wait.sleep_ns));
  q->Bind(9, I(held.wait.poll_interval_ns)).Bind(10, I(held.samples_at_hold));
  return q->Run();
}

absl::StatusOr<std::vector<HeldKey>> Store::ListHeldKeys(int64_t target_id) {
  absl::MutexLock lock(&mu_);
  SPINTUNE_ASSIGN_OR_RETURN(
      auto q, db_->Prepare("SELECT cpu_class, device, opcode, size_class, strategy, spin_ns, "
                           "sleep_ns, poll_interval_ns, samples_at_hold FROM held_keys "
                           "WHERE target_id = ?1"));
  q->Bind(1, target_id);
  std::vector<HeldKey> out;
  while (true) {
    SPINTUNE_ASSIGN_OR_RETURN(bool row, q->Step());
    if (!row) break;
    HeldKey h;
    h.key = KeyAt(*q, 0);
    const int64_t strategy = q->ColumnInt(4);
    if (strategy < 1 || strategy > 5) return absl::DataLossError("held_keys: bad strategy");
    h.wait = {static_cast<Strategy>(strategy), U(q->ColumnInt(5)), U(q->ColumnInt(6)),
              U(q->ColumnInt(7))};
    h.samples_at_hold = U(q->ColumnInt(8));
    out.push_back(std::move(h));
  }
  return out;
}

}  // namespace spintune
