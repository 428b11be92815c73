// Runs a binary of the build as a child process (tests of the CLIs).
#ifndef SPINTUNE_TESTS_TESTING_SUBPROCESS_H_
#define SPINTUNE_TESTS_TESTING_SUBPROCESS_H_

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace spintune::testing {

struct RunResult {
  int exit_code = -1;  // -1: killed by a signal
  std::string out;
  std::string err;
};

// Starts `argv` with stdout/stderr redirected to files; returns the pid.
inline pid_t Spawn(const std::vector<std::string>& argv, const std::string& out_path,
                   const std::string& err_path) {
  const pid_t pid = fork();
  if (pid == 0) {
    const int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(out, 1);
    dup2(err, 2);
    // Children must not inherit a blocked signal mask.
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  return pid;
}

inline int WaitExit(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

inline std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Whether child `pid` has exited (it stays to be reaped by WaitExit).
inline bool Exited(pid_t pid) {
  siginfo_t info{};
  return waitid(P_PID, pid, &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid;
}

// The rest of the first complete line of file `path` that starts with
// `prefix` ("listening on " -> "127.0.0.1:43211"), waiting up to 60 s for
// it (a loaded machine starts a process slowly); "" when it never came, or
// when child `writer` (if given) exited without writing it.
inline std::string WaitForLine(const std::string& path, const std::string& prefix,
                               pid_t writer = -1) {
  for (int i = 0; i < 2400; ++i) {
    const bool exited = writer > 0 && Exited(writer);  // before the read: no line lost
    std::istringstream in(Slurp(path));
    for (std::string line; std::getline(in, line);) {
      if (line.rfind(prefix, 0) == 0 && !in.eof()) return line.substr(prefix.size());
    }
    if (exited) return "";
    usleep(25'000);
  }
  return "";
}

// Runs to completion and captures the output (via files in `scratch_dir`).
inline RunResult Run(const std::vector<std::string>& argv, const std::string& scratch_dir) {
  const std::string out = scratch_dir + "/run.out", err = scratch_dir + "/run.err";
  RunResult r;
  r.exit_code = WaitExit(Spawn(argv, out, err));
  r.out = Slurp(out);
  r.err = Slurp(err);
  return r;
}

}  // namespace spintune::testing

#endif  // SPINTUNE_TESTS_TESTING_SUBPROCESS_H_
