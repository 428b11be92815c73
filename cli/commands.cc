#include "cli/commands.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "policy/samples_csv.h"
#include "cli/dispatch_csv.h"
#include "cli/knob_header.h"
#include "cli/report_evidence.h"
#include "cli/report_writer.h"
#include "cli/table_format.h"
#include "cli/verification_format.h"
#include "common/file_util.h"
#include "common/status_macros.h"
#include "common/version.h"
#include "models/context_features.h"
#include "policy/header_writer.h"
#include "policy/policy_blob.h"
#include "policy/policy_builder.h"
#include "policy/platform_json.h"
#include "policy/policy_json.h"
#include "spintune/v1/spintune.grpc.pb.h"
#include "storage/store.h"
#include "tuner/fit_inputs.h"

namespace spintune {
namespace {

// Calls `rpc` on the tuners of `repo.tuner` (host:port, or a list a:1,b:2)
// in order until one answers: an unreachable tuner (UNAVAILABLE,
// DEADLINE_EXCEEDED) is passed over. The error names the tuner it is from.
absl::Status CallTuner(
    const Repository& repo,
    const std::function<grpc::Status(v1::Tuner::Stub&, grpc::ClientContext*)>& rpc) {
  grpc::Status s;
  std::string address;
  for (absl::string_view a : absl::StrSplit(repo.tuner, ',', absl::SkipWhitespace())) {
    address = std::string(a);
    SPINTUNE_ASSIGN_OR_RETURN(auto channel, MakeChannel(address, repo.security));
    auto stub = v1::Tuner::NewStub(channel);
    grpc::ClientContext ctx;
    AddCallCredentials(repo.security, &ctx);
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    s = rpc(*stub, &ctx);
    if (s.ok()) return absl::OkStatus();
    if (s.error_code() != grpc::StatusCode::UNAVAILABLE &&
        s.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED) {
      break;
    }
  }
  if (address.empty()) return absl::InvalidArgumentError("--tuner: no address");
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                      absl::StrCat(address, ": ", s.error_message()));
}

using nlohmann::json;

absl::Status CheckFormat(const std::string& format) {
  if (format != "json" && format != "table") {
    return absl::InvalidArgumentError(
        absl::StrCat("--format must be json or table, got '", format, "'"));
  }
  return absl::OkStatus();
}

// Platform JSON (docs/csv-formats.md) applied to the classes and devices
// the samples name, as the tuner holds a target of an agent replaying them
// (declared costs, no irq overhead), and the dispatch samples merged in by
// the tuner's own BuildFitInputs.
absl::StatusOr<FitInputs> ReadPlatform(const std::string& path, const SampleSet& samples,
                                       const std::vector<DispatchRecord>& dispatch) {
  SPINTUNE_ASSIGN_OR_RETURN(PlatformFile platform, ReadPlatformFile(path));
  TargetRecord target;
  target.board = platform.board;
  for (const auto& name : samples.cpu_classes) {
    SPINTUNE_ASSIGN_OR_RETURN(CpuClassInfo cpu, platform.CpuClass(name));
    CpuClassRecord c;
    c.name = cpu.name;
    c.cpu_khz = cpu.cpu_khz;
    c.declared = cpu.costs;
    target.cpu_classes.push_back(std::move(c));
  }
  for (const auto& name : samples.devices) target.devices.push_back(platform.Device(name));
  // A device with dispatch samples alone is one of the replaying agent's
  // devices too (after the samples' ones: their indexes stay).
  for (const auto& d : dispatch) {
    const auto& ds = target.devices;
    const auto named = [&](const DeviceInfo& x) { return x.name == d.device; };
    if (std::none_of(ds.begin(), ds.end(), named)) {
      target.devices.push_back(platform.Device(d.device));
    }
  }
  FitInputs in = BuildFitInputs(target, samples.keys, dispatch);
  in.requests = samples.requests;  // same key and device order
  return in;
}

void PrintTable(const PolicyTable& t, const std::string& format, bool families,
                std::ostream& out) {
  if (format == "json") {
    out << PolicyTableToJson(t).dump(2) << "\n";
  } else {
    out << RenderPolicyTable(t);
    if (families) out << "\n" << RenderFamilies(t);
  }
}

// A stored table and the verifications of the target's versions.
struct StoredPolicy {
  PolicyTable table;
  std::vector<VerificationRecord> verifications;
};

absl::StatusOr<StoredPolicy> LoadStoredPolicyAndVerifications(const Repository& repo,
                                                              const std::string& target,
                                                              uint64_t version) {
  StoredPolicy out;
  if (!repo.tuner.empty()) {
    v1::GetPolicyRequest req;
    req.set_agent_id(target);
    req.set_version(version);
    v1::GetPolicyResponse resp;
    SPINTUNE_RETURN_IF_ERROR(CallTuner(repo, [&](v1::Tuner::Stub& stub, grpc::ClientContext* ctx) {
      return stub.GetPolicy(ctx, req, &resp);
    }));
    SPINTUNE_ASSIGN_OR_RETURN(out.table, ParsePolicyJson(resp.policy_json()));
    for (const auto& o : resp.verifications()) {
      VerificationRecord v;
      v.version = o.version();
      v.key = {o.cpu_class(), o.device(), o.opcode(), o.size_class()};
      v.verdict = o.verdict();
      v.predicted_cost_ns = o.predicted_cost_ns();
      v.measured = {o.measured_cost_ns(), o.measured_low_ns(), o.measured_high_ns()};
      v.requests = o.requests();
      v.incumbent_version = o.incumbent_version();
      v.incumbent = {o.incumbent_cost_ns(), o.incumbent_low_ns(), o.incumbent_high_ns()};
      v.rollback_version = o.rollback_version();
      v.reason = o.reason();
      if (!o.method().empty()) v.method = o.method();
      out.verifications.push_back(std::move(v));
    }
    return out;
  }
  SPINTUNE_ASSIGN_OR_RETURN(auto store, Store::Open(repo.db, {}, OpenMode::kReadOnly));
  SPINTUNE_ASSIGN_OR_RETURN(auto summary, store->FindTarget(target));
  if (!summary) {
    return absl::NotFoundError(absl::StrCat(repo.db, ": no target '", target,
                                            "' (spintune targets lists them)"));
  }
  SPINTUNE_ASSIGN_OR_RETURN(auto table, store->LoadPolicy(summary->id, version));
  if (!table) {
    return absl::NotFoundError(
        version ? absl::StrCat("target '", target, "' has no policy version ", version)
                : absl::StrCat("target '", target, "' has no policy yet"));
  }
  out.table = std::move(*table);
  SPINTUNE_ASSIGN_OR_RETURN(out.verifications, store->ListVerifications(summary->id));
  return out;
}

absl::StatusOr<PolicyTable> LoadStoredPolicy(const Repository& repo, const std::string& target,
                                             uint64_t version) {
  SPINTUNE_ASSIGN_OR_RETURN(StoredPolicy p, LoadStoredPolicyAndVerifications(repo, target, version));
  return std::move(p.table);
}

}  // namespace

absl::Status RunTune(const TuneFlags& flags, std::ostream& out, std::ostream& err) {
  SPINTUNE_RETURN_IF_ERROR(CheckFormat(flags.format));
  if (flags.context != "auto" && flags.context != "off") {
    return absl::InvalidArgumentError(
        absl::StrCat("--context must be auto or off, got '", flags.context, "'"));
  }
  SPINTUNE_ASSIGN_OR_RETURN(FitConfig config, FitConfigFromFlags(flags.fit));
  SPINTUNE_ASSIGN_OR_RETURN(SampleSet samples, ReadSamplesCsv(flags.samples_csv));
  std::vector<DispatchRecord> dispatch;
  if (!flags.dispatch_csv.empty()) {
    SPINTUNE_ASSIGN_OR_RETURN(dispatch, ReadDispatchCsv(flags.dispatch_csv));
  }
  SPINTUNE_ASSIGN_OR_RETURN(FitInputs inputs,
                            ReadPlatform(flags.platform_json, samples, dispatch));
  if (!flags.board.empty()) inputs.board = flags.board;
  config.context = flags.context == "auto";
  if (config.context && inputs.requests.empty()) {
    err << "spintune tune: " << flags.samples_csv
        << " has no issue_ns column: fitted without context (spintune extract writes it)\n";
  }
  std::optional<PolicyTable> incumbent;
  if (!flags.incumbent.empty()) {
    SPINTUNE_ASSIGN_OR_RETURN(std::string text, ReadFileToString(flags.incumbent));
    auto parsed = ParsePolicyJson(text);
    if (!parsed.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(flags.incumbent, ": ", parsed.status().message()));
    }
    incumbent = std::move(*parsed);
  }
  SPINTUNE_ASSIGN_OR_RETURN(PolicyTable table,
                            BuildPolicyTable(inputs, config, incumbent ? &*incumbent : nullptr));
  PrintTable(table, flags.format, flags.families, out);
  return absl::OkStatus();
}

absl::Status RunTargets(const Repository& repo, const std::string& format, std::ostream& out) {
  SPINTUNE_RETURN_IF_ERROR(CheckFormat(format));
  std::vector<TargetSummary> targets;
  if (!repo.tuner.empty()) {
    v1::ListTargetsResponse resp;
    SPINTUNE_RETURN_IF_ERROR(CallTuner(repo, [&](v1::Tuner::Stub& stub, grpc::ClientContext* ctx) {
      return stub.ListTargets(ctx, v1::ListTargetsRequest(), &resp);
    }));
    for (const auto& t : resp.targets()) {
      TargetSummary ts;
      ts.agent_id = t.agent_id();
      ts.board = t.board();
      ts.cpu_model = t.cpu_model();
      ts.total_samples = t.total_samples();
      ts.current_version = t.current_policy_version();
      ts.applied_version = t.applied_policy_version();
      ts.dropped_samples = t.dropped_samples();
      ts.pinned_version = t.pinned_policy_version();
      targets.push_back(std::move(ts));
    }
  } else {
    SPINTUNE_ASSIGN_OR_RETURN(auto store, Store::Open(repo.db, {}, OpenMode::kReadOnly));
    SPINTUNE_ASSIGN_OR_RETURN(targets, store->ListTargets());
  }
  if (format == "json") {
    json arr = json::array();
    for (const auto& t : targets) {
      arr.push_back(json{{"agent_id", t.agent_id},
                         {"board", t.board},
                         {"cpu_model", t.cpu_model},
                         {"total_samples", t.total_samples},
                         {"current_version", t.current_version},
                         {"applied_version", t.applied_version},
                         {"dropped_samples", t.dropped_samples},
                         {"pinned_version", t.pinned_version}});
    }
    out << json{{"targets", arr}}.dump(2) << "\n";
  } else {
    std::vector<std::vector<std::string>> rows = {
        {"AGENT", "BOARD", "SAMPLES", "VERSION", "APPLIED", "DROPPED", "PINNED"}};
    for (const auto& t : targets) {
      rows.push_back({t.agent_id, t.board, absl::StrCat(t.total_samples),
                      absl::StrCat(t.current_version), absl::StrCat(t.applied_version),
                      absl::StrCat(t.dropped_samples),
                      t.pinned_version ? absl::StrCat(t.pinned_version) : "-"});
    }
    out << RenderColumns(rows);
  }
  return absl::OkStatus();
}

absl::Status RunPolicy(const Repository& repo, const std::string& target, uint64_t version,
                       const std::string& format, bool families, std::ostream& out) {
  SPINTUNE_RETURN_IF_ERROR(CheckFormat(format));
  SPINTUNE_ASSIGN_OR_RETURN(StoredPolicy p, LoadStoredPolicyAndVerifications(repo, target, version));
  if (format == "json") {
    nlohmann::json j = PolicyTableToJson(p.table);
    j["verifications"] = VerificationsToJson(p.verifications);
    out << j.dump(2) << "\n";
    return absl::OkStatus();
  }
  PrintTable(p.table, format, families, out);
  if (!p.verifications.empty()) out << "\n" << RenderVerifications(p.verifications);
  return absl::OkStatus();
}

absl::StatusOr<PolicyTable> LoadTable(const Repository& repo, const TableSource& source) {
  const int given = !source.target.empty() + !source.json_file.empty() + !source.profile.empty();
  if (given != 1) {
    return absl::InvalidArgumentError("give exactly one of TARGET, --json FILE or --profile NAME");
  }
  if (!source.json_file.empty()) {
    SPINTUNE_ASSIGN_OR_RETURN(std::string text, ReadFileToString(source.json_file));
    auto parsed = ParsePolicyJson(text);
    if (!parsed.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(source.json_file, ": ", parsed.status().message()));
    }
    return std::move(*parsed);
  }
  if (!source.profile.empty()) {
    if (!repo.tuner.empty()) {
      return absl::InvalidArgumentError("profiles live in the database: use --db, not --tuner");
    }
    SPINTUNE_ASSIGN_OR_RETURN(auto store, Store::Open(repo.db, {}, OpenMode::kReadOnly));
    SPINTUNE_ASSIGN_OR_RETURN(Profile p, store->LoadProfile(source.profile));
    return std::move(p.table);
  }
  return LoadStoredPolicy(repo, source.target, source.version);
}

absl::Status RunHeader(const Repository& repo, const HeaderFlags& flags, std::ostream& out) {
  HeaderOptions options;
  PolicyTable table;
  if (repo.tuner.empty() && flags.source.json_file.empty() &&
      flags.source.target.empty() != flags.source.profile.empty()) {
    // From the database: the table with the knob settings (a target with
    // knob settings and no table gets a header of #defines alone).
    SPINTUNE_ASSIGN_OR_RETURN(auto store, Store::Open(repo.db, {}, OpenMode::kReadOnly));
    Profile p;
    if (!flags.source.profile.empty()) {
      SPINTUNE_ASSIGN_OR_RETURN(p, store->LoadProfile(flags.source.profile));
    } else {
      SPINTUNE_ASSIGN_OR_RETURN(auto summary, store->FindTarget(flags.source.target));
      if (!summary) {
        return absl::NotFoundError(absl::StrCat(repo.db, ": no target '", flags.source.target,
                                                "' (spintune targets lists them)"));
      }
      SPINTUNE_ASSIGN_OR_RETURN(p, store->SnapshotProfile(summary->id, flags.source.version, ""));
    }
    table = std::move(p.table);
    options.defines = KnobHeaderDefines(p.knobs);
  } else {
    SPINTUNE_ASSIGN_OR_RETURN(table, LoadTable(repo, flags.source));
  }
  options.tool_version = Version();
  SPINTUNE_ASSIGN_OR_RETURN(std::string header, GenerateCHeader(table, options));
  if (flags.output.empty() || flags.output == "-") {
    out << header;
    return absl::OkStatus();
  }
  return WriteFileAtomically(flags.output, header);
}

absl::Status RunBlob(const Repository& repo, const BlobFlags& flags, std::ostream& out) {
  if (flags.output.empty()) return absl::InvalidArgumentError("blob: -o FILE is required");
  SPINTUNE_ASSIGN_OR_RETURN(PolicyTable table, LoadTable(repo, flags.source));
  std::string device = flags.device;
  if (device.empty()) {
    if (table.devices.size() != 1) {
      std::string names;
      for (const auto& d : table.devices) absl::StrAppend(&names, names.empty() ? "" : ", ", d.name);
      return absl::InvalidArgumentError(
          absl::StrCat("the table has devices ", names, ": pick one with --device"));
    }
    device = table.devices[0].name;
  }
  SPINTUNE_ASSIGN_OR_RETURN(std::string blob, EncodePolicyBlob(table, device));
  SPINTUNE_RETURN_IF_ERROR(WriteFileAtomically(flags.output, blob));
  out << "wrote " << blob.size() << " bytes for device " << device << " (table version "
      << table.version << ") to " << flags.output << "\n";
  return absl::OkStatus();
}

absl::Status RunBlobDecode(const std::string& path, std::ostream& out) {
  SPINTUNE_ASSIGN_OR_RETURN(std::string blob, ReadFileToString(path));
  auto decoded = DecodePolicyBlob(blob);
  if (!decoded.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", decoded.status().message()));
  }
  const spintune_table& t = (*decoded)->table;
  const uint32_t trials = spintune_trial_count(&t);
  const auto le16 = [&](size_t at) {
    return static_cast<uint32_t>(static_cast<uint8_t>(blob[at]) |
                                 static_cast<uint8_t>(blob[at + 1]) << 8);
  };
  const auto le32 = [&](size_t at) { return le16(at) | le16(at + 2) << 16; };
  std::string writes;
  for (uint32_t i = 0; i < t.write_opcode_count; ++i) {
    absl::StrAppend(&writes, i ? "," : "", t.write_opcodes[i]);
  }
  out << path << ": valid policy blob, format " << le16(4) << ", " << le32(8) << " bytes, CRC-32 "
      << absl::StrFormat("0x%08x", le32(12)) << "\n"
      << "device " << t.device << ", table version " << t.version << ", " << t.count
      << " entries, " << t.node_count << " context nodes, write opcodes "
      << (writes.empty() ? "-" : writes)
      << (trials ? absl::StrCat(", ", trials, " A/B trials") : "") << "\n";
  const auto any = [](uint64_t v, uint64_t wildcard, std::string shown) {
    return v == wildcard ? std::string("*") : shown;
  };
  std::vector<std::vector<std::string>> rows = {
      {"#", "CPU", "OPCODE", "SIZE", "STRATEGY", "SPIN", "SLEEP", "POLL", "TREE", "FLAGS"}};
  if (trials) rows[0].push_back("TRIAL");
  for (uint32_t i = 0; i < t.count; ++i) {
    const spintune_entry& e = t.entries[i];
    rows.push_back({absl::StrCat(i),
                    any(e.cpu_class, SPINTUNE_ANY_CPU_CLASS, absl::StrCat(e.cpu_class)),
                    any(e.opcode, SPINTUNE_ANY_OPCODE, absl::StrCat(e.opcode)),
                    any(e.size_class, SPINTUNE_ANY_SIZE_CLASS, FormatSizeClass(e.size_class)),
                    std::string(StrategyName(static_cast<Strategy>(e.strategy))),
                    e.spin_ns ? FormatDurationNs(e.spin_ns) : "-",
                    e.sleep_ns ? FormatDurationNs(e.sleep_ns) : "-",
                    e.poll_interval_ns ? FormatDurationNs(e.poll_interval_ns) : "-",
                    e.tree ? absl::StrCat("node ", e.tree - 1) : "-",
                    e.flags & SPINTUNE_ENTRY_FALLBACK ? "fallback" : "-"});
    if (trials == 0) continue;
    // The trial: the incumbent's wait for share / 256 of the commands.
    std::string trial = "-";
    if (e.trial) {
      const spintune_entry& x = t.entries[t.count + e.trial - 1];
      const WaitParams w{static_cast<Strategy>(x.strategy), x.spin_ns, x.sleep_ns,
                         x.poll_interval_ns};
      trial = absl::StrCat(DescribeWait(w), " for ", x.trial, "/256");
    }
    rows.back().push_back(trial);
  }
  out << RenderColumns(rows);
  if (t.node_count == 0) return absl::OkStatus();
  const auto child = [](uint16_t c) {
    return c & SPINTUNE_CHILD_LEAF ? absl::StrCat("entry ", c & ~SPINTUNE_CHILD_LEAF)
                                   : absl::StrCat("node ", c);
  };
  std::vector<std::vector<std::string>> nodes = {{"NODE", "FEATURE", "THRESHOLD", "BELOW", "ELSE"}};
  for (uint32_t i = 0; i < t.node_count; ++i) {
    const spintune_node& n = t.nodes[i];
    nodes.push_back({absl::StrCat(i),
                     std::string(ContextFeatureName(static_cast<ContextFeature>(n.feature))),
                     absl::StrCat(n.threshold), child(n.left), child(n.right)});
  }
  out << "\n" << RenderColumns(nodes);
  return absl::OkStatus();
}

absl::Status RunReport(const Repository& repo, const ReportFlags& flags, std::ostream& out) {
  if (flags.target.empty() == flags.profile.empty()) {
    return absl::InvalidArgumentError("report: give either --target AGENT or --profile NAME");
  }
  if (flags.output.empty()) return absl::InvalidArgumentError("report: -o FILE is required");
  if (!repo.tuner.empty()) {
    return absl::InvalidArgumentError("report reads the database (evidence): use --db, not --tuner");
  }
  SPINTUNE_ASSIGN_OR_RETURN(auto store, Store::Open(repo.db, {}, OpenMode::kReadOnly));
  Profile profile;
  std::vector<VerificationRecord> verifications;
  std::string evidence;  // where the page's samples come from
  if (!flags.profile.empty()) {
    SPINTUNE_ASSIGN_OR_RETURN(profile, store->LoadProfile(flags.profile));
    evidence = absl::StrCat("the samples saved with profile '", flags.profile, "'");
  } else {
    SPINTUNE_ASSIGN_OR_RETURN(auto summary, store->FindTarget(flags.target));
    if (!summary) {
      return absl::NotFoundError(absl::StrCat(repo.db, ": no target '", flags.target,
                                              "' (spintune targets lists them)"));
    }
    auto snapshot = store->SnapshotProfile(summary->id, flags.version, "");
    if (absl::IsNotFound(snapshot.status())) {
      return absl::NotFoundError(
          absl::StrCat("target '", flags.target, "': ", snapshot.status().message()));
    }
    SPINTUNE_RETURN_IF_ERROR(snapshot.status());
    SPINTUNE_ASSIGN_OR_RETURN(profile, WithFitEvidence(*store, std::move(*snapshot), &evidence));
    SPINTUNE_ASSIGN_OR_RETURN(verifications, store->ListVerifications(summary->id));
  }
  ReportOptions options;
  options.verifications = std::move(verifications);
  options.evidence_source = evidence;
  options.generated_at = NowRfc3339();
  options.tool_version = Version();
  options.max_key_charts = flags.max_charts;
  if (!flags.target.empty()) {
    SPINTUNE_ASSIGN_OR_RETURN(options.experiments, LoadExperimentEvidence(*store, flags.target));
  }
  const std::string html = RenderHtmlReport(profile, options);
  SPINTUNE_RETURN_IF_ERROR(WriteFileAtomically(flags.output, html));
  out << "wrote " << flags.output << ": " << profile.keys.size() << " keys ("
      << (flags.max_charts && profile.keys.size() > flags.max_charts ? flags.max_charts
                                                                     : profile.keys.size())
      << " charted), "
      << profile.dispatch.size() << " IRQ dispatch charts, " << html.size() / 1024 << " KiB\n";
  return absl::OkStatus();
}

}  // namespace spintune
