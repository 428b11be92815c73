#include "agent/policy_sink.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "policy/policy_blob.h"

namespace spintune {
namespace {

absl::Status ErrnoError(const std::string& what, const std::string& path) {
  return absl::UnavailableError(absl::StrCat(what, " ", path, ": ", std::strerror(errno)));
}

absl::Status WriteAll(int fd, const std::string& bytes, const std::string& path) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoError("cannot write", path);
    }
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

class FileSink : public PolicySink {
 public:
  explicit FileSink(std::string pattern) : pattern_(std::move(pattern)) {}

  std::string Where(const std::string& device) const override {
    return absl::StrReplaceAll(pattern_, {{"{device}", device}});
  }

  absl::Status Apply(const std::string& device, const std::string& blob) override {
    const std::string path = Where(device);
    absl::Status s = WriteFileAtomically(path, blob);
    if (!s.ok()) return s;
    std::ifstream in(path, std::ios::binary);
    std::stringstream back;
    back << in.rdbuf();
    if (back.str() != blob) {
      return absl::DataLossError(absl::StrCat(path, ": read back differs from what was written"));
    }
    auto decoded = DecodePolicyBlob(back.str());
    if (!decoded.ok()) return decoded.status();
    return absl::OkStatus();
  }

 private:
  std::string pattern_;
};

class NoSink : public PolicySink {
 public:
  std::string Where(const std::string&) const override { return "(none)"; }
  absl::Status Apply(const std::string&, const std::string& blob) override {
    auto decoded = DecodePolicyBlob(blob);
    return decoded.ok() ? absl::OkStatus() : decoded.status();
  }
};

}  // namespace

absl::Status WriteFileAtomically(const std::string& path, const std::string& bytes) {
  const std::string tmp = absl::StrCat(path, ".tmp.", ::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoError("cannot create", tmp);
  absl::Status s = WriteAll(fd, bytes, tmp);
  if (s.ok() && ::fsync(fd) != 0) s = ErrnoError("cannot fsync", tmp);
  if (::close(fd) != 0 && s.ok()) s = ErrnoError("cannot close", tmp);
  if (s.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) s = ErrnoError("cannot rename to", path);
  if (!s.ok()) {
    ::unlink(tmp.c_str());
    return s;
  }
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash + 1);
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return ErrnoError("cannot open directory", dir);
  const int rc = ::fsync(dfd);
  ::close(dfd);
  if (rc != 0) return ErrnoError("cannot fsync directory", dir);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<PolicySink>> MakePolicySink(
    const std::string& spec, const std::vector<std::string>& devices) {
  if (spec == "none") return std::unique_ptr<PolicySink>(new NoSink());
  if (absl::StartsWith(spec, "file:")) {
    const std::string pattern = spec.substr(5);
    if (pattern.empty()) return absl::InvalidArgumentError("file: sink needs a path");
    if (devices.size() > 1 && !absl::StrContains(pattern, "{device}")) {
      return absl::InvalidArgumentError(absl::StrCat(
          "sink path '", pattern, "' needs a {device} placeholder: the target has ",
          devices.size(), " devices"));
    }
    return std::unique_ptr<PolicySink>(new FileSink(pattern));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown sink '", spec, "' (expected file:PATH or none)"));
}

}  // namespace spintune
