#include "agent/policy_sink.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/file_util.h"
#include "policy/policy_blob.h"
#include "spintune/shm.h"

namespace spintune {
namespace {

class FileSink : public PolicySink {
 public:
  FileSink(std::string pattern, uint32_t format)
      : PolicySink(format), pattern_(std::move(pattern)) {}

  std::string Where(const std::string& device) const override {
    return absl::StrReplaceAll(pattern_, {{"{device}", device}});
  }

  absl::Status Apply(const std::string& device, const std::string& blob) override {
    const std::string path = Where(device);
    absl::Status s = WriteFileAtomically(path, blob);
    if (!s.ok()) return s;
    auto back = ReadFileToString(path);
    if (!back.ok()) return back.status();
    if (*back != blob) {
      return absl::DataLossError(absl::StrCat(path, ": read back differs from what was written"));
    }
    auto decoded = DecodePolicyBlob(*back);
    if (!decoded.ok()) return decoded.status();
    return absl::OkStatus();
  }

 private:
  std::string pattern_;
};

class AttrSink : public PolicySink {
 public:
  AttrSink(std::string pattern, uint32_t format)
      : PolicySink(format), pattern_(std::move(pattern)) {}
  std::string Where(const std::string& device) const override {
    return absl::StrReplaceAll(pattern_, {{"{device}", device}});
  }
  absl::Status Apply(const std::string& device, const std::string& blob) override {
    const std::string path = Where(device);
    const int fd = ::open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
    if (fd < 0) {
      return absl::UnavailableError(absl::StrCat("cannot open ", path, ": ", std::strerror(errno)));
    }
    // sysfs takes a binary attribute a page per write() (kernfs caps each at
    // PAGE_SIZE); spintune.ko stages the pages by offset and parses the blob
    // when its header's length has arrived, so write on until all of it is in.
    size_t written = 0;
    while (written < blob.size()) {
      const ssize_t n = ::write(fd, blob.data() + written, blob.size() - written);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        const int saved = errno;
        ::close(fd);
        if (n == 0) {
          return absl::DataLossError(absl::StrCat(path, ": the attribute took ", written,
                                                  " of ", blob.size(), " bytes"));
        }
        return absl::UnavailableError(
            absl::StrCat("write to ", path, " failed: ", std::strerror(saved)));
      }
      written += static_cast<size_t>(n);
    }
    ::close(fd);
    auto back = ReadFileToString(path);
    if (back.ok() && !back->empty() && *back != blob) {
      return absl::DataLossError(absl::StrCat(path, ": read back differs from what was written"));
    }
    return absl::OkStatus();
  }

 private:
  std::string pattern_;
};

class ShmSink : public PolicySink {
 public:
  ShmSink(std::string pattern, uint32_t format)
      : PolicySink(format), pattern_(std::move(pattern)) {}
  ~ShmSink() override {
    for (auto& [name, m] : maps_) ::munmap(m.addr, m.size);
  }
  std::string Where(const std::string& device) const override {
    std::string name = absl::StrReplaceAll(pattern_, {{"{device}", device}});
    return name[0] == '/' ? name : "/" + name;
  }
  absl::Status Apply(const std::string& device, const std::string& blob) override {
    const std::string name = Where(device);
    auto mapped = Map(name);
    if (!mapped.ok()) return mapped.status();
    spintune_shm* shm = *mapped;
    auto decoded = DecodePolicyBlob(blob);
    if (!decoded.ok()) return decoded.status();
    const int rc = spintune_shm_publish(shm, blob.data(), static_cast<uint32_t>(blob.size()),
                                        (*decoded)->table.version);
    if (rc != 0) return absl::ResourceExhaustedError(absl::StrCat(name, ": blob too large"));
    std::string back(blob.size(), '\0');
    uint32_t len = 0;
    if (spintune_shm_snapshot(shm, back.data(), static_cast<uint32_t>(back.size()), &len,
                              nullptr, 100) != 0 ||
        back != blob) {
      return absl::DataLossError(absl::StrCat(name, ": read back differs from what was written"));
    }
    return absl::OkStatus();
  }
  // Room for the largest blob a driver accepts.
  static constexpr uint32_t kCapacity =
      SPINTUNE_BLOB_HEADER_BYTES + SPINTUNE_MAX_ENTRIES * SPINTUNE_BLOB_ENTRY_BYTES;

 private:
  struct Mapping {
    spintune_shm* addr;
    size_t size;
  };
  absl::StatusOr<spintune_shm*> Map(const std::string& name) {
    auto it = maps_.find(name);
    if (it != maps_.end()) return it->second.addr;
    const int fd = ::shm_open(name.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
    if (fd < 0) {
      return absl::UnavailableError(absl::StrCat("shm_open ", name, ": ", std::strerror(errno)));
    }
    const size_t size = SPINTUNE_SHM_HEADER_BYTES + kCapacity;
    struct stat st;
    if (::fstat(fd, &st) != 0 || (static_cast<size_t>(st.st_size) < size &&
                                  ::ftruncate(fd, static_cast<off_t>(size)) != 0)) {
      const int saved = errno;
      ::close(fd);
      return absl::UnavailableError(absl::StrCat("sizing ", name, ": ", std::strerror(saved)));
    }
    void* addr = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);
    if (addr == MAP_FAILED) {
      return absl::UnavailableError(absl::StrCat("mmap ", name, ": ", std::strerror(errno)));
    }
    auto* shm = static_cast<spintune_shm*>(addr);
    if (shm->magic != SPINTUNE_SHM_MAGIC || shm->capacity < kCapacity) {
      spintune_shm_init(shm, kCapacity);
    }
    maps_[name] = {shm, size};
    return shm;
  }

  std::string pattern_;
  std::map<std::string, Mapping> maps_;
};

class NoSink : public PolicySink {
 public:
  explicit NoSink(uint32_t format) : PolicySink(format) {}
  std::string Where(const std::string&) const override { return "(none)"; }
  absl::Status Apply(const std::string&, const std::string& blob) override {
    auto decoded = DecodePolicyBlob(blob);
    return decoded.ok() ? absl::OkStatus() : decoded.status();
  }
};

// What the driver behind the attribute `path` says it reads: the number in
// `max_blob_format` beside it; kBaseBlobFormat when there is none.
uint32_t AttrDriverBlobFormat(const std::string& path) {
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
  auto text = ReadFileToString(dir + "/max_blob_format");
  uint32_t format = 0;
  if (!text.ok() || !absl::SimpleAtoi(absl::StripAsciiWhitespace(*text), &format) ||
      format < kBaseBlobFormat) {
    return kBaseBlobFormat;
  }
  return format;
}

}  // namespace

absl::StatusOr<std::unique_ptr<PolicySink>> MakePolicySink(
    const std::string& spec, const std::vector<std::string>& devices,
    uint32_t declared_blob_format) {
  // This agent writes no format beyond what its own parser reads.
  constexpr uint32_t kAgentFormat = SPINTUNE_BLOB_VERSION_3;
  if (declared_blob_format != 0 &&
      (declared_blob_format < kBaseBlobFormat || declared_blob_format > kAgentFormat)) {
    return absl::InvalidArgumentError(absl::StrCat("driver blob format ", declared_blob_format,
                                                   " is not ", kBaseBlobFormat, "..",
                                                   kAgentFormat));
  }
  if (spec == "none") {
    return std::unique_ptr<PolicySink>(
        new NoSink(declared_blob_format ? declared_blob_format : kAgentFormat));
  }
  const size_t colon = spec.find(':');
  const std::string kind = colon == std::string::npos ? spec : spec.substr(0, colon);
  const std::string pattern = colon == std::string::npos ? "" : spec.substr(colon + 1);
  if (kind != "file" && kind != "attr" && kind != "shm") {
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown sink '", spec, "' (expected file:PATH, attr:PATH, shm:NAME or none)"));
  }
  if (pattern.empty()) return absl::InvalidArgumentError(absl::StrCat(kind, ": sink needs a path"));
  if (devices.size() > 1 && !absl::StrContains(pattern, "{device}")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sink path '", pattern, "' needs a {device} placeholder: the target has ",
        devices.size(), " devices"));
  }
  // Checked now, not at the first table: a destination that cannot be
  // written is a usage error, not a "refused policy" an hour later.
  uint32_t format = declared_blob_format ? declared_blob_format : kBaseBlobFormat;
  if (kind == "attr" && !declared_blob_format) format = kAgentFormat;
  for (const auto& device : devices) {
    const std::string path = absl::StrReplaceAll(pattern, {{"{device}", device}});
    if (kind == "file") {
      const size_t slash = path.rfind('/');
      const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash + (slash == 0));
      struct stat st;
      if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
        return absl::FailedPreconditionError(
            absl::StrCat("file:", path, ": directory ", dir, " does not exist"));
      }
      if (::access(dir.c_str(), W_OK) != 0) {
        return absl::FailedPreconditionError(
            absl::StrCat("file:", path, ": directory ", dir, " is not writable"));
      }
    } else if (kind == "attr") {
      if (::access(path.c_str(), F_OK) != 0) {
        return absl::FailedPreconditionError(absl::StrCat(
            "attr:", path, " does not exist (is the driver, or spintune.ko, loaded?)"));
      }
      if (::access(path.c_str(), W_OK) != 0) {
        return absl::FailedPreconditionError(
            absl::StrCat("attr:", path, " is not writable: ", std::strerror(errno)));
      }
      if (!declared_blob_format) format = std::min(format, AttrDriverBlobFormat(path));
    }
  }
  if (kind == "file") return std::unique_ptr<PolicySink>(new FileSink(pattern, format));
  if (kind == "attr") return std::unique_ptr<PolicySink>(new AttrSink(pattern, format));
  if (pattern.find('/', 1) != std::string::npos) {
    return absl::InvalidArgumentError("shm: name must not contain '/' (it names /dev/shm/NAME)");
  }
  return std::unique_ptr<PolicySink>(new ShmSink(pattern, format));
}

}  // namespace spintune
