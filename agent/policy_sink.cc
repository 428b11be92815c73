#include "agent/policy_sink.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/file_util.h"
#include "policy/policy_blob.h"

namespace spintune {
namespace {

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

class NoSink : public PolicySink {
 public:
  std::string Where(const std::string&) const override { return "(none)"; }
  absl::Status Apply(const std::string&, const std::string& blob) override {
    auto decoded = DecodePolicyBlob(blob);
    return decoded.ok() ? absl::OkStatus() : decoded.status();
  }
};

}  // namespace

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
