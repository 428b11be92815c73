#include "policy/header_writer.h"

#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "policy/policy_blob.h"

namespace spintune {
namespace {

const char* StrategyMacro(uint8_t strategy) {
  switch (strategy) {
    case SPINTUNE_IRQ:
      return "SPINTUNE_IRQ";
    case SPINTUNE_SPIN:
      return "SPINTUNE_SPIN";
    case SPINTUNE_SPIN_THEN_IRQ:
      return "SPINTUNE_SPIN_THEN_IRQ";
    case SPINTUNE_SLEEP_THEN_SPIN:
      return "SPINTUNE_SLEEP_THEN_SPIN";
    case SPINTUNE_POLL_SLEEP:
      return "SPINTUNE_POLL_SLEEP";
  }
  return "0";
}

// One spintune_entry initializer line.
std::string EntryInitializer(const spintune_entry& x) {
  return absl::StrFormat("\t{ %uu, %uu, %s, %uu, %uu, %uu, %uu, %uu, %uu, %uu },\n", x.cpu_class,
                         x.size_class, StrategyMacro(x.strategy), x.flags, x.opcode, x.spin_ns,
                         x.sleep_ns, x.poll_interval_ns, x.tree, x.trial);
}

std::string FormatUs(double ns) { return absl::StrFormat("%.1fus", ns / 1000.0); }

}  // namespace

std::string SanitizeIdentifier(const std::string& text) {
  std::string out;
  for (unsigned char ch : text) {
    const bool ok = absl::ascii_isalnum(ch);
    if (ok) {
      out.push_back(absl::ascii_tolower(ch));
    } else if (!out.empty() && out.back() != '_') {
      out.push_back('_');
    }
  }
  while (!out.empty() && out.back() == '_') out.pop_back();
  if (out.empty()) out = "x";
  if (absl::ascii_isdigit(static_cast<unsigned char>(out[0]))) out.insert(0, "n");
  if (out.size() > 48) out.resize(48);
  return out;
}

std::string SanitizeText(const std::string& text) {
  std::string out;
  for (unsigned char ch : text) {
    if (ch < 0x20 || ch > 0x7E || ch == '"' || ch == '\\' || ch == '?') {
      out.push_back('_');  // '?' too: no trigraphs
    } else if ((ch == '/' && !out.empty() && out.back() == '*') ||
               (ch == '*' && !out.empty() && out.back() == '/')) {
      out.push_back('_');
    } else {
      out.push_back(static_cast<char>(ch));
    }
  }
  if (out.size() > 120) out.resize(120);
  return out;
}

absl::StatusOr<std::string> GenerateCHeader(const PolicyTable& table,
                                            const HeaderOptions& options) {
  const std::string board_id = SanitizeIdentifier(table.board);
  const std::string guard = absl::AsciiStrToUpper(absl::StrCat("SPINTUNE_TABLE_", board_id, "_H"));
  std::string out;
  absl::StrAppend(&out, "/* SPDX-License-Identifier: (GPL-2.0 OR MIT) */\n");
  absl::StrAppend(&out, "/*\n * spintune policy table -- generated, do not edit.\n");
  absl::StrAppend(&out, " * board:         ", SanitizeText(table.board), "\n");
  absl::StrAppend(&out, " * table version: ", table.version, "\n");
  absl::StrAppend(&out, " * fitted at:     ",
                  table.fitted_at.empty() ? "unknown" : SanitizeText(table.fitted_at), "\n");
  absl::StrAppend(&out, " * objective:     ", SanitizeText(table.objective_name),
                  absl::StrFormat(" (latency weight %g)", table.latency_weight),
                  ", max spin ", table.max_spin_ns, " ns\n");
  absl::StrAppend(&out, " * samples:       ", table.TotalSamples(), "\n");
  absl::StrAppend(&out, " * tool:          spintune ", SanitizeText(options.tool_version),
                  "\n");
  for (size_t i = 0; i < table.cpu_classes.size(); ++i) {
    absl::StrAppend(&out, " * cpu class ", i, ":   ", SanitizeText(table.cpu_classes[i].name),
                    " (", table.cpu_classes[i].cpu_khz, " kHz)\n");
  }
  absl::StrAppend(&out, " */\n#ifndef ", guard, "\n#define ", guard, "\n\n#include \"",
                  SanitizeText(options.policy_include), "\"\n");

  std::set<std::string> used_ids;
  for (const auto& device : table.devices) {
    // Same bounds as the blob: refuse what a driver would refuse. The
    // arrays are the driver parser's own output (entries, context nodes,
    // key index), so a header and a blob of one table look up alike.
    auto blob = EncodePolicyBlob(table, device.name);
    if (!blob.ok()) return blob.status();
    auto decoded = DecodePolicyBlob(*blob);
    if (!decoded.ok()) return decoded.status();
    auto sources = EntriesInBlobOrder(table, device.name);
    if (!sources.ok()) return sources.status();
    const spintune_table& d = (*decoded)->table;
    if (sources->size() != d.count) return absl::InternalError("decoded entries do not match");

    std::string id = absl::StrCat("spintune_", board_id, "_", SanitizeIdentifier(device.name));
    while (!used_ids.insert(id).second) absl::StrAppend(&id, "_");
    std::string device_name = SanitizeText(device.name);

    absl::StrAppend(&out, "\n/* device ", device_name, " (driver ",
                    SanitizeText(device.driver), ", ", SanitizeText(device.model), ") */\n");
    absl::StrAppend(&out, "static const struct spintune_entry ", id,
                    "_entries[] SPINTUNE_MAYBE_UNUSED = {\n");
    for (uint32_t row = 0; row < d.count; ++row) {
      const spintune_entry& x = d.entries[row];
      const PolicyEntry* e = (*sources)[row];
      if (e->fallback) {
        absl::StrAppend(&out, "\t/* fallback for keys not listed: ", e->samples, " samples */\n");
      } else {
        absl::StrAppend(&out, "\t/* ", SanitizeText(e->key.cpu_class), " opcode ", e->key.opcode,
                        " size class ", e->key.size_class,
                        e->context.empty() ? "" : absl::StrCat(" if ", SanitizeText(DescribeContext(e->context))),
                        ": ", e->samples, " samples, p50 ", FormatUs(e->p50_ns), ", p99 ",
                        FormatUs(e->p99_ns), " */\n");
      }
      absl::StrAppend(&out, EntryInitializer(x));
    }
    const uint32_t trials = spintune_trial_count(&d);
    for (uint32_t t = 0; t < trials; ++t) {
      const spintune_entry& x = d.entries[d.count + t];
      if (t == 0) {
        absl::StrAppend(&out, "\t/* A/B trials: the incumbents' waits (SPINTUNE_ENTRY_TRIAL),\n"
                              "\t * share of 256 commands in the last field */\n");
      }
      absl::StrAppend(&out, EntryInitializer(x));
    }
    absl::StrAppend(&out, "};\n\n");
    if (d.node_count > 0) {
      absl::StrAppend(&out, "/* Context trees: feature < threshold goes left; children with\n"
                            " * SPINTUNE_CHILD_LEAF are entries. */\n");
      absl::StrAppend(&out, "static const struct spintune_node ", id,
                      "_nodes[] SPINTUNE_MAYBE_UNUSED = {\n");
      for (uint32_t i = 0; i < d.node_count; ++i) {
        const spintune_node& n = d.nodes[i];
        absl::StrAppend(&out, absl::StrFormat("\t{ %uu, 0u, 0x%04xu, 0x%04xu, 0u, %uull },\n",
                                              n.feature, n.left, n.right, n.threshold));
      }
      absl::StrAppend(&out, "};\n\n");
    }
    auto u16_array = [&](const char* suffix, const uint16_t* v, size_t n) {
      absl::StrAppend(&out, "static const uint16_t ", id, suffix, "[] SPINTUNE_MAYBE_UNUSED = {");
      for (size_t i = 0; i < n; ++i) {
        absl::StrAppend(&out, i % 12 == 0 ? "\n\t" : " ", v[i], "u,");
      }
      absl::StrAppend(&out, "\n};\n\n");
    };
    absl::StrAppend(&out, "/* The O(1) key index (a perfect hash, see spintune_index). */\n");
    u16_array("_buckets", d.index.buckets, size_t{1} << d.index.bucket_bits);
    u16_array("_slots", d.index.slots, size_t{1} << d.index.slot_bits);
    absl::StrAppend(&out, "static const struct spintune_table ", id, " SPINTUNE_MAYBE_UNUSED = {\n");
    absl::StrAppend(&out, "\t", id, "_entries,\n");
    absl::StrAppend(&out, "\t", d.count, "u,\n");
    absl::StrAppend(&out, "\t", table.version, "ull,\n");
    absl::StrAppend(&out, "\t\"", device_name.substr(0, SPINTUNE_DEVICE_NAME_BYTES - 1), "\",\n");
    absl::StrAppend(&out, "\t", d.node_count > 0 ? id + "_nodes" : std::string("NULL"), ",\n");
    absl::StrAppend(&out, "\t", d.node_count, "u,\n");
    absl::StrAppend(&out, "\t", d.write_opcode_count, "u,\n");
    absl::StrAppend(&out, absl::StrFormat("\t{ %uu, %uu, %uu, %uu },\n", d.write_opcodes[0],
                                          d.write_opcodes[1], d.write_opcodes[2],
                                          d.write_opcodes[3]));
    absl::StrAppend(&out, absl::StrFormat("\t{ 0x%016xull, %s_buckets, %s_slots, %uu, %uu },\n",
                                          d.index.multiplier, id, id, d.index.bucket_bits,
                                          d.index.slot_bits));
    absl::StrAppend(&out, "};\n");
  }
  for (const HeaderDefine& d : options.defines) {
    absl::StrAppend(&out, d.comment.empty() ? "" : "\n/*\n");
    for (const auto& line : d.comment) absl::StrAppend(&out, " * ", SanitizeText(line), "\n");
    absl::StrAppend(&out, d.comment.empty() ? "" : " */\n", "#define ",
                    absl::AsciiStrToUpper(SanitizeIdentifier(d.name)), " ", d.value, "\n");
  }
  absl::StrAppend(&out, "\n#endif /* ", guard, " */\n");
  return out;
}

}  // namespace spintune
