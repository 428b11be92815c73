#include "agent/tracefs_instance.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/logging.h"
#include "common/status_macros.h"

namespace spintune {
namespace {


absl::Status WriteControl(const std::string& path, const std::string& text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
  if (fd < 0) {
    return absl::UnavailableError(absl::StrCat(path, ": ", std::strerror(errno)));
  }
  const ssize_t n = ::write(fd, text.data(), text.size());
  const int saved = errno;
  ::close(fd);
  if (n != static_cast<ssize_t>(text.size())) {
    return absl::UnavailableError(
        absl::StrCat(path, ": writing '", text, "': ", std::strerror(saved)));
  }
  return absl::OkStatus();
}

}  // namespace

std::string BlockDeviceName(int major, int minor) {
  const std::string link = absl::StrCat("/sys/dev/block/", major, ":", minor);
  char target[PATH_MAX];
  const ssize_t n = ::readlink(link.c_str(), target, sizeof(target) - 1);
  if (n <= 0) return absl::StrCat(major, ":", minor);
  target[n] = '\0';
  const char* slash = std::strrchr(target, '/');
  return slash != nullptr ? std::string(slash + 1) : std::string(target);
}

absl::StatusOr<std::string> TracefsInstance::MountPoint() {
  for (const char* root : {"/sys/kernel/tracing", "/sys/kernel/debug/tracing"}) {
    if (PathExists(absl::StrCat(root, "/instances"))) return std::string(root);
  }
  if (::geteuid() != 0) {
    return absl::FailedPreconditionError(
        "tracefs is not mounted and mounting it needs root: run as root, or "
        "`sudo mount -t tracefs nodev /sys/kernel/tracing` first");
  }
  if (::mount("nodev", "/sys/kernel/tracing", "tracefs", 0, nullptr) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "mounting tracefs at /sys/kernel/tracing: ", std::strerror(errno),
        " (is CONFIG_TRACING enabled in this kernel?)"));
  }
  Logger().info("mounted tracefs at /sys/kernel/tracing");
  return std::string("/sys/kernel/tracing");
}

int TracefsInstance::RemoveStaleInstances(const std::string& root, const std::string& prefix) {
  const std::string dir = root + "/instances";
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return 0;
  int removed = 0;
  while (struct dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (!absl::StartsWith(name, prefix + "-")) continue;
    // PREFIX-PID, or PREFIX-PID-N for a process's further instances.
    const std::string rest = name.substr(prefix.size() + 1);
    int pid = 0;
    if (!absl::SimpleAtoi(rest.substr(0, rest.find('-')), &pid) || pid <= 0) continue;
    if (pid == ::getpid() || ::kill(pid, 0) == 0 || errno == EPERM) continue;  // alive
    if (::rmdir((dir + "/" + name).c_str()) == 0) {
      ++removed;
      Logger().info("removed stale tracing instance {} (its agent pid {} is gone)", name, pid);
    }
  }
  ::closedir(d);
  return removed;
}

absl::StatusOr<std::unique_ptr<TracefsInstance>> TracefsInstance::Open(
    const TracefsOptions& options) {
  auto root = MountPoint();
  if (!root.ok()) return root.status();
  if (::geteuid() != 0 || ::access((*root + "/instances").c_str(), W_OK) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "live capture needs root (CAP_SYS_ADMIN) to create a tracing instance under ", *root,
        "/instances; run as root, or capture a trace elsewhere and use --source replay:FILE"));
  }
  RemoveStaleInstances(*root, options.name_prefix);
  std::unique_ptr<TracefsInstance> t(new TracefsInstance());
  t->root_ = *root;
  // One process may hold several (the captures side by side in a test).
  static std::atomic<int> opened{0};
  const int n = opened++;
  t->path_ = absl::StrCat(*root, "/instances/", options.name_prefix, "-", ::getpid());
  if (n > 0) absl::StrAppend(&t->path_, "-", n);
  if (::mkdir(t->path_.c_str(), 0750) != 0) {
    const int saved = errno;
    t->path_.clear();  // not ours: the destructor must not remove it
    return absl::FailedPreconditionError(
        absl::StrCat("creating tracing instance: ", std::strerror(saved)));
  }
  absl::Status s = WriteControl(t->path_ + "/tracing_on", "0");
  if (s.ok() && !options.clock.empty()) s = WriteControl(t->path_ + "/trace_clock", options.clock);
  if (s.ok() && options.buffer_size_kb > 0) {
    s = WriteControl(t->path_ + "/buffer_size_kb", absl::StrCat(options.buffer_size_kb));
  }
  if (!s.ok()) return s;
  auto enable = [&](const std::string& event, bool required) -> absl::Status {
    const std::string dir = absl::StrCat(t->path_, "/events/", event);
    if (!PathExists(dir + "/enable")) {
      if (required) {
        return absl::NotFoundError(absl::StrCat("this kernel has no tracepoint ", event));
      }
      t->missing_.push_back(event);
      return absl::OkStatus();
    }
    for (const auto& [ev, filter] : options.filters) {
      if (ev != event) continue;
      absl::Status f = WriteControl(dir + "/filter", filter);
      if (!f.ok()) Logger().warn("filter on {} refused, capturing unfiltered: {}", event, f.message());
    }
    absl::Status e = WriteControl(dir + "/enable", "1");
    if (!e.ok()) return e;
    t->enabled_.push_back(event);
    return absl::OkStatus();
  };
  for (const auto& e : options.required) {
    if (absl::Status st = enable(e, true); !st.ok()) return st;
  }
  for (const auto& e : options.events) {
    if (absl::Status st = enable(e, false); !st.ok()) return st;
  }
  if (options.open_trace_pipe) {
    t->pipe_fd_ = ::open((t->path_ + "/trace_pipe").c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (t->pipe_fd_ < 0) {
      return absl::UnavailableError(absl::StrCat(t->path_, "/trace_pipe: ", std::strerror(errno)));
    }
  }
  s = WriteControl(t->path_ + "/tracing_on", "1");
  if (!s.ok()) return s;
  return t;
}

absl::Status TracefsInstance::SetEnabled(const std::vector<std::string>& events, bool on) {
  for (const auto& e : events) {
    SPINTUNE_RETURN_IF_ERROR(WriteControl(absl::StrCat(path_, "/events/", e, "/enable"), on ? "1" : "0"));
  }
  return absl::OkStatus();
}

TracefsInstance::~TracefsInstance() {
  if (pipe_fd_ >= 0) ::close(pipe_fd_);
  if (path_.empty()) return;
  WriteControl(path_ + "/tracing_on", "0").IgnoreError();
  // rmdir turns the instance's events off and frees its buffers; it is
  // refused (EBUSY) while a reader still has a file open, so retry briefly.
  for (int attempt = 0; attempt < 50; ++attempt) {
    if (::rmdir(path_.c_str()) == 0 || errno == ENOENT) return;
    if (errno != EBUSY) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  Logger().warn("could not remove tracing instance {}: {}", path_, std::strerror(errno));
}

absl::StatusOr<size_t> TracefsInstance::Read(char* buffer, size_t size, absl::Duration timeout) {
  if (pipe_fd_ < 0) return 0;
  struct pollfd p = {pipe_fd_, POLLIN, 0};
  const int ms = static_cast<int>(absl::ToInt64Milliseconds(timeout));
  const int r = ::poll(&p, 1, ms);
  if (r < 0 && errno != EINTR) {
    return absl::UnavailableError(absl::StrCat("poll trace_pipe: ", std::strerror(errno)));
  }
  if (r <= 0) return 0;
  const ssize_t n = ::read(pipe_fd_, buffer, size);
  if (n < 0) {
    if (errno == EAGAIN || errno == EINTR) return 0;
    return absl::UnavailableError(absl::StrCat("read trace_pipe: ", std::strerror(errno)));
  }
  return static_cast<size_t>(n);
}

}  // namespace spintune
