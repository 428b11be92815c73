#include "tuner/tuner_metrics.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace spintune {
namespace {

void Metric(std::string* out, const char* name, const char* type, const char* help,
            uint64_t value) {
  absl::StrAppend(out, "# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n", name, " ",
                  value, "\n");
}

}  // namespace

std::string RenderPrometheusText(const TunerCounters& c) {
  std::string out;
  Metric(&out, "spintune_tuner_sessions_total", "counter", "Agent sessions opened (hello accepted).",
         c.sessions);
  Metric(&out, "spintune_tuner_sessions_active", "gauge", "Agent sessions open now.",
         c.active_sessions);
  Metric(&out, "spintune_tuner_streams_tracked", "gauge",
         "Streams the tuner holds any state for (open, or closed and not yet forgotten).",
         c.tracked_streams);
  Metric(&out, "spintune_tuner_storage_errors_total", "counter",
         "Storage reads or writes that failed (the work is retried).", c.storage_errors);
  Metric(&out, "spintune_tuner_hello_timeouts_total", "counter",
         "Streams ended for sending no Hello in time.", c.hello_timeouts);
  Metric(&out, "spintune_tuner_batches_ingested_total", "counter",
         "Sample batches stored (acknowledged after the commit).", c.batches_ingested);
  Metric(&out, "spintune_tuner_batches_deduplicated_total", "counter",
         "Batches already stored (same agent and sequence), acknowledged as duplicates.",
         c.batches_duplicate);
  Metric(&out, "spintune_tuner_samples_ingested_total", "counter",
         "Completion samples stored.", c.samples_ingested);
  Metric(&out, "spintune_tuner_refits_total", "counter", "Policy table refits.", c.refits);
  Metric(&out, "spintune_tuner_policy_versions_total", "counter",
         "New policy table versions stored (fitted).", c.policy_versions);
  Metric(&out, "spintune_tuner_pushes_total", "counter",
         "Policy tables pushed to agent sessions.", c.pushes);
  Metric(&out, "spintune_tuner_changes_detected_total", "counter",
         "Keys whose completion-time distribution changed (drift).", c.changes_detected);
  Metric(&out, "spintune_tuner_predicted_tables_total", "counter",
         "Cold-start tables predicted for new targets.", c.predicted_tables);
  Metric(&out, "spintune_tuner_spool_dropped_samples_total", "counter",
         "Samples in batches agents' full spools dropped (placeholders).", c.spool_dropped_samples);
  absl::StrAppend(&out,
                  "# HELP spintune_tuner_verifications_total Keys of pushed versions verified "
                  "against measured outcomes, by verdict.\n"
                  "# TYPE spintune_tuner_verifications_total counter\n");
  for (const auto& [verdict, n] : {std::pair<const char*, uint64_t>{"better", c.verified_better},
                                   {"worse", c.verified_worse},
                                   {"inconclusive", c.verified_inconclusive}}) {
    absl::StrAppend(&out, "spintune_tuner_verifications_total{verdict=\"", verdict, "\"} ", n,
                    "\n");
  }
  Metric(&out, "spintune_tuner_rollbacks_total", "counter",
         "Keys rolled back because their measured cost was worse than the incumbent's.",
         c.rollbacks);
  absl::StrAppend(&out,
                  "# HELP spintune_tuner_rejected_total Messages and calls refused, by reason.\n"
                  "# TYPE spintune_tuner_rejected_total counter\n");
  const std::pair<const char*, uint64_t> reasons[] = {
      {"invalid", c.batches_rejected},
      {"deferred", c.batches_deferred},
      {"over_limit", c.batches_over_limit},
      {"conflict", c.batches_conflict},
      {"out_of_order", c.batches_out_of_order},
      {"unauthenticated", c.unauthenticated},
      {"permission_denied", c.permission_denied}};
  for (const auto& [reason, n] : reasons) {
    absl::StrAppend(&out, "spintune_tuner_rejected_total{reason=\"", reason, "\"} ", n, "\n");
  }
  absl::StrAppend(&out,
                  "# HELP spintune_tuner_ingest_latency_seconds Batch receipt to acknowledgement "
                  "(after the SQLite commit).\n"
                  "# TYPE spintune_tuner_ingest_latency_seconds histogram\n");
  for (size_t i = 0; i < kIngestLatencyBoundsSeconds.size(); ++i) {
    const double le = kIngestLatencyBoundsSeconds[i];
    absl::StrAppend(&out, "spintune_tuner_ingest_latency_seconds_bucket{le=\"",
                    std::isinf(le) ? std::string("+Inf") : absl::StrFormat("%g", le), "\"} ",
                    c.ingest_latency_buckets[i], "\n");
  }
  absl::StrAppend(&out, "spintune_tuner_ingest_latency_seconds_sum ",
                  absl::StrFormat("%.6f", c.ingest_latency_sum_seconds), "\n",
                  "spintune_tuner_ingest_latency_seconds_count ", c.ingest_latency_count, "\n");
  const WriteGate::Counts& g = c.write_gate;
  absl::StrAppend(
      &out,
      "# HELP spintune_tuner_write_gate_wait_seconds_total Time the ingest worker's write "
      "transactions waited for a background one (compaction, ledger pruning, refits).\n"
      "# TYPE spintune_tuner_write_gate_wait_seconds_total counter\n"
      "spintune_tuner_write_gate_wait_seconds_total ",
      absl::StrFormat("%.6f", g.urgent_wait_seconds), "\n",
      "# HELP spintune_tuner_write_gate_held_seconds_total Time write transactions held the "
      "database's write turn, by writer.\n"
      "# TYPE spintune_tuner_write_gate_held_seconds_total counter\n"
      "spintune_tuner_write_gate_held_seconds_total{writer=\"ingest\"} ",
      absl::StrFormat("%.6f", g.urgent_held_seconds), "\n",
      "spintune_tuner_write_gate_held_seconds_total{writer=\"background\"} ",
      absl::StrFormat("%.6f", g.background_held_seconds), "\n",
      "# HELP spintune_tuner_write_gate_longest_background_seconds The longest one background "
      "write transaction held the write turn (what an acknowledgement may wait for).\n"
      "# TYPE spintune_tuner_write_gate_longest_background_seconds gauge\n"
      "spintune_tuner_write_gate_longest_background_seconds ",
      absl::StrFormat("%.6f", g.longest_background_seconds), "\n");
  return out;
}

}  // namespace spintune
