#include "common/file_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"

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

}  // namespace

absl::Status WriteFileAtomically(const std::string& path, const std::string& bytes, int mode) {
  const std::string tmp = absl::StrCat(path, ".tmp.", ::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return ErrnoError("cannot create", tmp);
  ::fchmod(fd, static_cast<mode_t>(mode));  // whatever the umask says
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

std::string SafeFileName(const std::string& name) {
  std::string out;
  for (char ch : name) {
    out.push_back(std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' ? ch : '_');
  }
  return out;
}

bool PathExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

absl::Status CheckNotDirectory(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(path, " is a directory, expected a file"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadFileToString(const std::string& path, uint64_t max_bytes) {
  if (absl::Status s = CheckNotDirectory(path); !s.ok()) return s;
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open: ", std::strerror(errno)));
  std::string text;
  char buf[1 << 16];
  while (in.read(buf, sizeof(buf)) || in.gcount() > 0) {
    text.append(buf, static_cast<size_t>(in.gcount()));
    if (text.size() > max_bytes) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": larger than ", max_bytes, " bytes"));
    }
  }
  if (in.bad()) return absl::UnavailableError(absl::StrCat(path, ": read error"));
  return text;
}

}  // namespace spintune
