#include "policy/policy_blob.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace spintune {
namespace {

void PutLe16(std::string* out, size_t at, uint32_t v) {
  (*out)[at] = static_cast<char>(v & 0xFF);
  (*out)[at + 1] = static_cast<char>((v >> 8) & 0xFF);
}

void PutLe32(std::string* out, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) (*out)[at + i] = static_cast<char>((v >> (8 * i)) & 0xFF);
}

absl::StatusOr<uint32_t> Narrow(uint64_t v, uint64_t bound, absl::string_view what) {
  if (v > bound) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " = ", v, " exceeds the driver bound ", bound));
  }
  return static_cast<uint32_t>(v);
}

}  // namespace

absl::StatusOr<std::string> EncodePolicyBlob(const PolicyTable& table,
                                             const std::string& device) {
  if (device.empty() || device.size() >= SPINTUNE_DEVICE_NAME_BYTES) {
    return absl::InvalidArgumentError(absl::StrCat(
        "device name '", device, "' must be 1..", SPINTUNE_DEVICE_NAME_BYTES - 1, " bytes"));
  }
  // The blob orders entries by (cpu class index, opcode, size class), the
  // fallback (all wildcards) last.
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
      key = spintune__entry_key(static_cast<uint8_t>(index), e.key.opcode,
                                static_cast<uint8_t>(e.key.size_class));
    }
    keyed.emplace_back(key, &e);
  }
  std::stable_sort(keyed.begin(), keyed.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<const PolicyEntry*> rows;
  for (const auto& k : keyed) rows.push_back(k.second);
  if (rows.empty() || !rows.back()->fallback) {
    return absl::InvalidArgumentError(
        absl::StrCat("device '", device, "' has no entries or no fallback entry"));
  }
  if (rows.size() > SPINTUNE_MAX_ENTRIES) {
    return absl::InvalidArgumentError(absl::StrCat("device '", device, "' has ", rows.size(),
                                                   " entries, more than ", SPINTUNE_MAX_ENTRIES));
  }
  const size_t total =
      SPINTUNE_BLOB_HEADER_BYTES + rows.size() * SPINTUNE_BLOB_ENTRY_BYTES;
  std::string out(total, '\0');
  PutLe32(&out, 0, SPINTUNE_BLOB_MAGIC);
  PutLe16(&out, 4, SPINTUNE_BLOB_VERSION);
  PutLe16(&out, 6, SPINTUNE_BLOB_HEADER_BYTES);
  PutLe32(&out, 8, static_cast<uint32_t>(total));
  PutLe32(&out, 16, static_cast<uint32_t>(table.version & 0xFFFFFFFFu));
  PutLe32(&out, 20, static_cast<uint32_t>(table.version >> 32));
  PutLe32(&out, 24, static_cast<uint32_t>(rows.size()));
  PutLe16(&out, 28, SPINTUNE_BLOB_ENTRY_BYTES);
  PutLe16(&out, 30, 0);
  std::memcpy(&out[32], device.data(), device.size());

  size_t at = SPINTUNE_BLOB_HEADER_BYTES;
  for (const PolicyEntry* e : rows) {
    uint8_t cpu = SPINTUNE_ANY_CPU_CLASS, size = SPINTUNE_ANY_SIZE_CLASS;
    uint32_t opcode = SPINTUNE_ANY_OPCODE;
    if (!e->fallback) {
      cpu = static_cast<uint8_t>(table.CpuClassIndex(e->key.cpu_class));
      size = static_cast<uint8_t>(e->key.size_class);
      opcode = e->key.opcode;
    }
    auto spin = Narrow(e->wait.spin_ns, SPINTUNE_MAX_SPIN_NS, "spin_ns");
    auto sleep = Narrow(e->wait.sleep_ns, SPINTUNE_MAX_SLEEP_NS, "sleep_ns");
    auto poll = Narrow(e->wait.poll_interval_ns, SPINTUNE_MAX_SLEEP_NS, "poll_interval_ns");
    if (!spin.ok()) return spin.status();
    if (!sleep.ok()) return sleep.status();
    if (!poll.ok()) return poll.status();
    out[at + 0] = static_cast<char>(cpu);
    out[at + 1] = static_cast<char>(size);
    out[at + 2] = static_cast<char>(e->wait.strategy);
    out[at + 3] = static_cast<char>(e->fallback ? SPINTUNE_ENTRY_FALLBACK : 0);
    PutLe32(&out, at + 4, opcode);
    PutLe32(&out, at + 8, *spin);
    PutLe32(&out, at + 12, *sleep);
    PutLe32(&out, at + 16, *poll);
    at += SPINTUNE_BLOB_ENTRY_BYTES;
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
  decoded->entries.resize(SPINTUNE_MAX_ENTRIES);
  const int rc = spintune_blob_parse(blob.data(), blob.size(), decoded->entries.data(),
                                     SPINTUNE_MAX_ENTRIES, &decoded->table);
  if (rc != 0) {
    const char* name = rc == -EINVAL           ? "EINVAL (malformed)"
                       : rc == -EPROTONOSUPPORT ? "EPROTONOSUPPORT (format version)"
                       : rc == -EMSGSIZE        ? "EMSGSIZE (truncated)"
                       : rc == -E2BIG           ? "E2BIG (too many entries)"
                       : rc == -EBADMSG         ? "EBADMSG (CRC mismatch)"
                                                : "unknown error";
    return absl::InvalidArgumentError(absl::StrCat("policy blob rejected: ", name));
  }
  decoded->entries.resize(decoded->table.count);
  decoded->table.entries = decoded->entries.data();
  return decoded;
}

}  // namespace spintune
