#include "policy/policy_blob.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace spintune {
namespace {

static_assert(kMaxWriteOpcodes == SPINTUNE_MAX_WRITE_OPCODES);

void PutLe16(std::string* out, size_t at, uint32_t v) {
  (*out)[at] = static_cast<char>(v & 0xFF);
  (*out)[at + 1] = static_cast<char>((v >> 8) & 0xFF);
}

void PutLe32(std::string* out, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) (*out)[at + i] = static_cast<char>((v >> (8 * i)) & 0xFF);
}

void PutLe64(std::string* out, size_t at, uint64_t v) {
  PutLe32(out, at, static_cast<uint32_t>(v & 0xFFFFFFFFu));
  PutLe32(out, at + 4, static_cast<uint32_t>(v >> 32));
}

absl::StatusOr<uint32_t> Narrow(uint64_t v, uint64_t bound, absl::string_view what) {
  if (v > bound) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " = ", v, " exceeds the driver bound ", bound));
  }
  return static_cast<uint32_t>(v);
}

// Writes `w`: its strategy byte at `strategy_at`, then spin_ns, sleep_ns and
// poll_interval_ns (u32 each) from `params_at`.
absl::Status PutWait(const WaitParams& w, size_t strategy_at, size_t params_at,
                     std::string* out) {
  auto spin = Narrow(w.spin_ns, SPINTUNE_MAX_SPIN_NS, "spin_ns");
  auto sleep = Narrow(w.sleep_ns, SPINTUNE_MAX_SLEEP_NS, "sleep_ns");
  auto poll = Narrow(w.poll_interval_ns, SPINTUNE_MAX_SLEEP_NS, "poll_interval_ns");
  if (!spin.ok()) return spin.status();
  if (!sleep.ok()) return sleep.status();
  if (!poll.ok()) return poll.status();
  (*out)[strategy_at] = static_cast<char>(w.strategy);
  PutLe32(out, params_at, *spin);
  PutLe32(out, params_at + 4, *sleep);
  PutLe32(out, params_at + 8, *poll);
  return absl::OkStatus();
}

// The blob key of a (non-fallback) entry.
uint64_t BlobKey(const PolicyTable& table, const PolicyEntry& e) {
  return spintune__entry_key(static_cast<uint8_t>(table.CpuClassIndex(e.key.cpu_class)),
                             e.key.opcode, static_cast<uint8_t>(e.key.size_class));
}

}  // namespace

absl::StatusOr<std::vector<const PolicyEntry*>> EntriesInBlobOrder(const PolicyTable& table,
                                                                   const std::string& device) {
  std::vector<std::pair<uint64_t, const PolicyEntry*>> keyed;
  for (const auto& e : table.entries) {
    if (e.key.device != device) continue;
    uint64_t key = spintune__entry_key(SPINTUNE_ANY_CPU_CLASS, SPINTUNE_ANY_OPCODE,
                                       SPINTUNE_ANY_SIZE_CLASS);
    if (!e.fallback) {
      const int index = table.CpuClassIndex(e.key.cpu_class);
      if (index < 0 || index >= static_cast<int>(SPINTUNE_ANY_CPU_CLASS)) {
        return absl::InvalidArgumentError(
            absl::StrCat("entry names unknown cpu class '", e.key.cpu_class, "'"));
      }
      if (e.key.size_class > 64 || e.key.opcode == SPINTUNE_ANY_OPCODE) {
        return absl::InvalidArgumentError("entry key out of range");
      }
      key = BlobKey(table, e);
    }
    keyed.emplace_back(key, &e);
  }
  std::stable_sort(keyed.begin(), keyed.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<const PolicyEntry*> out;
  for (const auto& k : keyed) out.push_back(k.second);
  return out;
}

absl::StatusOr<std::string> EncodePolicyBlob(const PolicyTable& table,
                                             const std::string& device) {
  if (device.empty() || device.size() >= SPINTUNE_DEVICE_NAME_BYTES) {
    return absl::InvalidArgumentError(absl::StrCat(
        "device name '", device, "' must be 1..", SPINTUNE_DEVICE_NAME_BYTES - 1, " bytes"));
  }
  const DeviceInfo* info = nullptr;
  for (const auto& d : table.devices) {
    if (d.name == device) info = &d;
  }
  std::vector<uint32_t> writes = info ? info->write_opcodes : DefaultWriteOpcodes();
  std::sort(writes.begin(), writes.end());
  writes.erase(std::unique(writes.begin(), writes.end()), writes.end());
  if (writes.size() > SPINTUNE_MAX_WRITE_OPCODES) {
    return absl::InvalidArgumentError(absl::StrCat("device '", device, "' has ", writes.size(),
                                                   " write opcodes, more than ",
                                                   SPINTUNE_MAX_WRITE_OPCODES));
  }
  auto ordered = EntriesInBlobOrder(table, device);
  if (!ordered.ok()) return ordered.status();
  const std::vector<const PolicyEntry*>& rows = *ordered;
  auto key_of = [&](size_t r) {
    return rows[r]->fallback ? ~uint64_t{0} : BlobKey(table, *rows[r]);
  };
  if (rows.empty() || !rows.back()->fallback) {
    return absl::InvalidArgumentError(
        absl::StrCat("device '", device, "' has no entries or no fallback entry"));
  }
  if (rows.size() > SPINTUNE_MAX_ENTRIES) {
    return absl::InvalidArgumentError(absl::StrCat("device '", device, "' has ", rows.size(),
                                                   " entries, more than ", SPINTUNE_MAX_ENTRIES));
  }

  // Each key with several entries: its tree, nodes in preorder after the
  // previous key's, leaves its rows in order.
  std::vector<uint16_t> tree(rows.size(), 0);
  std::vector<ContextTree::Node> nodes;
  for (size_t first = 0; first < rows.size();) {
    size_t last = first + 1;
    while (last < rows.size() && key_of(last) == key_of(first)) ++last;
    std::vector<ContextConditions> leaves;
    for (size_t i = first; i < last; ++i) leaves.push_back(rows[i]->context);
    const PolicyKey& k = rows[first]->key;
    const std::string where = absl::StrCat("device '", device, "' cpu class ", k.cpu_class,
                                           " opcode ", k.opcode, " size class ", k.size_class);
    if (last - first == 1) {
      if (!leaves[0].empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat(rows[first]->fallback ? absl::StrCat("device '", device, "' fallback")
                                               : where,
                         ": a single entry with a context"));
      }
    } else {
      auto t = ContextTree::FromLeafConditions(leaves);
      if (!t.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": ", t.status().message()));
      }
      if (nodes.size() + t->nodes().size() > SPINTUNE_MAX_NODES) {
        return absl::InvalidArgumentError(
            absl::StrCat("device '", device, "' needs more than ", SPINTUNE_MAX_NODES,
                         " context nodes"));
      }
      // The tree's children are relative: nodes to its first node, leaves
      // to its first row.
      const int base = static_cast<int>(nodes.size());
      for (size_t i = first; i < last; ++i) tree[i] = static_cast<uint16_t>(base + 1);
      for (ContextTree::Node n : t->nodes()) {
        for (int* child : {&n.left, &n.right}) {
          *child = *child >= 0 ? base + *child : ~(static_cast<int>(first) + ~*child);
        }
        nodes.push_back(n);
      }
    }
    first = last;
  }

  // A/B trials (format 3, written only when there are some): one per
  // entry, in entry order.
  std::vector<size_t> trial_rows;
  for (size_t r = 0; r < rows.size(); ++r) {
    const PolicyEntry* e = rows[r];
    if (!e->trial) continue;
    if (e->fallback || tree[r] != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "device '", device, "': an A/B trial on the fallback entry or a context leaf"));
    }
    if (e->trial->share < 1 || e->trial->share > 255) {
      return absl::InvalidArgumentError(absl::StrCat(
          "device '", device, "': A/B trial share ", e->trial->share, " is not 1..255"));
    }
    trial_rows.push_back(r);
  }
  if (rows.size() + trial_rows.size() > SPINTUNE_MAX_ENTRIES) {
    return absl::InvalidArgumentError(absl::StrCat("device '", device, "' has ", rows.size(),
                                                   " entries and ", trial_rows.size(),
                                                   " trials, more than ", SPINTUNE_MAX_ENTRIES));
  }
  const size_t header = SPINTUNE_BLOB_HEADER_V2_BYTES;
  const size_t total = header + rows.size() * SPINTUNE_BLOB_ENTRY_BYTES +
                       nodes.size() * SPINTUNE_BLOB_NODE_BYTES +
                       trial_rows.size() * SPINTUNE_BLOB_TRIAL_BYTES;
  std::string out(total, '\0');
  PutLe32(&out, 0, SPINTUNE_BLOB_MAGIC);
  PutLe16(&out, 4, trial_rows.empty() ? SPINTUNE_BLOB_VERSION : SPINTUNE_BLOB_VERSION_3);
  PutLe16(&out, 6, static_cast<uint32_t>(header));
  PutLe32(&out, 8, static_cast<uint32_t>(total));
  PutLe64(&out, 16, table.version);
  PutLe32(&out, 24, static_cast<uint32_t>(rows.size()));
  PutLe16(&out, 28, SPINTUNE_BLOB_ENTRY_BYTES);
  PutLe16(&out, 30, 0);
  std::memcpy(&out[32], device.data(), device.size());
  PutLe32(&out, 64, static_cast<uint32_t>(nodes.size()));
  PutLe16(&out, 68, SPINTUNE_BLOB_NODE_BYTES);
  out[70] = static_cast<char>(writes.size());
  for (size_t i = 0; i < writes.size(); ++i) PutLe32(&out, 72 + 4 * i, writes[i]);
  PutLe32(&out, 88, static_cast<uint32_t>(trial_rows.size()));

  size_t at = header;
  for (size_t r = 0; r < rows.size(); ++r) {
    const PolicyEntry* e = rows[r];
    uint8_t cpu = SPINTUNE_ANY_CPU_CLASS, size = SPINTUNE_ANY_SIZE_CLASS;
    uint32_t opcode = SPINTUNE_ANY_OPCODE;
    if (!e->fallback) {
      cpu = static_cast<uint8_t>(table.CpuClassIndex(e->key.cpu_class));
      size = static_cast<uint8_t>(e->key.size_class);
      opcode = e->key.opcode;
    }
    out[at + 0] = static_cast<char>(cpu);
    out[at + 1] = static_cast<char>(size);
    out[at + 3] = static_cast<char>(e->fallback ? SPINTUNE_ENTRY_FALLBACK : 0);
    PutLe32(&out, at + 4, opcode);
    if (absl::Status s = PutWait(e->wait, at + 2, at + 8, &out); !s.ok()) return s;
    PutLe16(&out, at + 20, tree[r]);
    auto trial = std::find(trial_rows.begin(), trial_rows.end(), r);
    if (trial != trial_rows.end()) {
      PutLe16(&out, at + 22, static_cast<uint32_t>(trial - trial_rows.begin() + 1));
    }
    at += SPINTUNE_BLOB_ENTRY_BYTES;
  }
  for (const auto& n : nodes) {
    auto child = [](int c) {
      return static_cast<uint32_t>(c >= 0 ? c : SPINTUNE_CHILD_LEAF | static_cast<uint32_t>(~c));
    };
    out[at] = static_cast<char>(n.feature);
    PutLe16(&out, at + 2, child(n.left));
    PutLe16(&out, at + 4, child(n.right));
    PutLe64(&out, at + 8, n.threshold);
    at += SPINTUNE_BLOB_NODE_BYTES;
  }
  for (size_t r : trial_rows) {
    const Trial& t = *rows[r]->trial;
    PutLe16(&out, at, static_cast<uint32_t>(r));
    out[at + 2] = static_cast<char>(t.share);
    if (absl::Status s = PutWait(t.wait, at + 3, at + 4, &out); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("A/B trial: ", s.message()));
    }
    at += SPINTUNE_BLOB_TRIAL_BYTES;
  }
  const uint32_t crc = spintune_crc32(
      0, reinterpret_cast<const uint8_t*>(out.data()) + 16, total - 16);
  PutLe32(&out, 12, crc);

  // The same checks a driver makes: never hand out a blob it would refuse.
  auto decoded = DecodePolicyBlob(out);
  if (!decoded.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("device '", device,
                                                   "': table violates the blob rules: ",
                                                   decoded.status().message()));
  }
  return out;
}

absl::StatusOr<std::unique_ptr<DecodedBlob>> DecodePolicyBlob(const std::string& blob) {
  auto decoded = std::make_unique<DecodedBlob>();
  decoded->storage.resize(SPINTUNE_TABLE_STORAGE_WORDS);
  const char* why = "";
  const int rc = spintune_table_parse(blob.data(), blob.size(), decoded->storage.data(),
                                      decoded->storage.size() * sizeof(uint64_t),
                                      &decoded->table, &why);
  if (rc != 0) {
    const char* name = rc == -EINVAL           ? "EINVAL (malformed)"
                       : rc == -EPROTONOSUPPORT ? "EPROTONOSUPPORT (format version)"
                       : rc == -EMSGSIZE        ? "EMSGSIZE (truncated)"
                       : rc == -E2BIG           ? "E2BIG (too many entries)"
                       : rc == -EBADMSG         ? "EBADMSG (CRC mismatch)"
                                                : "unknown error";
    return absl::InvalidArgumentError(absl::StrCat("policy blob rejected: ", name, ": ", why));
  }
  return decoded;
}

}  // namespace spintune
