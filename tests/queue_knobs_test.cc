// A short knob experiment on this machine's real block queue (issue 13):
// nr_requests, max_sectors_kb, read_ahead_kb and the scheduler of the root
// disk, measured with spintune-ioload, through the agent binary and the
// tuner. The agent is killed (-9) while a trial setting is in force; the
// restarted agent writes the start values back before anything else and
// the experiment finishes; every knob ends as it was. Root only; a guard
// restores the knobs however the test ends.
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "storage/store.h"
#include "tests/testing/subprocess.h"
#include "tests/testing/temp_dir.h"
#include "tuner/tuner_server.h"

namespace spintune {
namespace {

constexpr const char* kKnobs[] = {"nr_requests", "max_sectors_kb", "read_ahead_kb", "scheduler"};
constexpr int kMaxTrials = 36;

// The disk "/" is on ("vda"), or "" when it is not a block device.
std::string RootDisk() {
  struct stat st;
  if (stat("/", &st) != 0) return "";
  std::error_code ec;
  std::filesystem::path dev = std::filesystem::canonical(
      absl::StrCat("/sys/dev/block/", major(st.st_dev), ":", minor(st.st_dev)), ec);
  if (ec) return "";
  if (std::filesystem::exists(dev / "partition")) dev = dev.parent_path();
  return dev.filename().string();
}

// The value in force ("none [mq-deadline] kyber" -> "mq-deadline").
std::string ReadKnob(const std::string& path) {
  auto text = ReadFileToString(path);
  if (!text.ok()) return "";
  const size_t open = text->find('['), close = text->find(']');
  if (open != std::string::npos && close > open) return text->substr(open + 1, close - open - 1);
  return std::string(absl::StripAsciiWhitespace(*text));
}

// Puts every knob back however the test ends.
class QueueGuard {
 public:
  explicit QueueGuard(std::string dir) : dir_(std::move(dir)) {
    for (const char* k : kKnobs) original_[k] = ReadKnob(Path(k));
  }
  ~QueueGuard() {
    for (const auto& [k, v] : original_) {
      if (ReadKnob(Path(k)) != v) std::ofstream(Path(k)) << v;
    }
  }
  std::string Path(const std::string& knob) const { return dir_ + "/" + knob; }
  const std::map<std::string, std::string>& original() const { return original_; }
  bool AnyChanged() const {
    for (const auto& [k, v] : original_) {
      if (ReadKnob(Path(k)) != v) return true;
    }
    return false;
  }

 private:
  std::string dir_;
  std::map<std::string, std::string> original_;
};

// Exit code, or -1 (killed) / -2 (still running after `limit`: killed now).
int WaitExitWithin(pid_t pid, absl::Duration limit) {
  const absl::Time deadline = absl::Now() + limit;
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (absl::Now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -2;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(QueueKnobs, ShortExperimentRestoresEveryKnobAlsoAfterKillNine) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to write /sys/block/*/queue";
  const std::string disk = RootDisk();
  const std::string queue = "/sys/block/" + disk + "/queue";
  if (disk.empty() || access((queue + "/nr_requests").c_str(), W_OK) != 0) {
    GTEST_SKIP() << "the root file system is not on a block device with a writable queue";
  }
  QueueGuard guard(queue);
  testing::TempDir dir;
  const nlohmann::json declaration = {
      {"name", "root-queue"},
      {"device", disk},
      {"knobs",
       {{{"name", "nr_requests"}, {"file", guard.Path("nr_requests")}, {"values", {64, 128}}},
        {{"name", "max_sectors_kb"}, {"file", guard.Path("max_sectors_kb")},
         {"values", {128, 1024}}, {"unit", "KiB"}},
        {{"name", "read_ahead_kb"}, {"file", guard.Path("read_ahead_kb")},
         {"values", {0, 512}}, {"unit", "KiB"}},
        {{"name", "scheduler"}, {"file", guard.Path("scheduler")},
         {"enum", {"none", "mq-deadline"}}}}},
      {"workload",
       {{"ioload",
         {{"file", dir.File("ioload.bin")}, {"file_mb", 32}, {"seconds", 0.12},
          {"sizes", {4096, 262144}}, {"write_share", 0.3}, {"threads", 2}}}}},
      {"metric", "mib_per_s"},
      {"metric_unit", "MiB/s"},
      {"constraints", {{{"metric", "errors"}, {"max", 0}}}},
      {"max_trials", kMaxTrials},
      {"on_finish", "restore"}};
  std::ofstream(dir.File("queue.json")) << declaration.dump(2);

  TunerOptions options;
  options.db_path = dir.File("tuner.db");
  auto tuner = TunerServer::Start("127.0.0.1:0", options);
  ASSERT_TRUE(tuner.ok()) << tuner.status();
  const std::vector<std::string> agent = {
      SPINTUNE_AGENT_BIN, "--tuner", (*tuner)->address(), "--agent-id", "root-queue",
      "--knobs", dir.File("queue.json"), "--state-dir", dir.File("state"), "--give-up-after", "30"};

  // kill -9 while a trial setting is in force.
  const pid_t victim = testing::Spawn(agent, dir.File("a1.out"), dir.File("a1.err"));
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (!guard.AnyChanged() && absl::Now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_EQ(kill(victim, SIGKILL), 0);
  EXPECT_EQ(testing::WaitExit(victim), -1);
  ASSERT_TRUE(guard.AnyChanged()) << "no trial setting came within 30 s: "
                                  << testing::Slurp(dir.File("a1.err"));
  ASSERT_TRUE(PathExists(dir.File("state/root-queue.knobs.json")));

  // The restarted agent restores first, then the experiment finishes.
  const pid_t again = testing::Spawn(agent, dir.File("a2.out"), dir.File("a2.err"));
  const int code = WaitExitWithin(again, absl::Seconds(120));
  const std::string log = testing::Slurp(dir.File("a2.err"));
  EXPECT_EQ(code, 0) << log;
  EXPECT_NE(log.find("start values restored (the agent restarted mid-experiment)"),
            std::string::npos) << log;
  for (const auto& [knob, value] : guard.original()) {
    EXPECT_EQ(ReadKnob(guard.Path(knob)), value) << knob;
  }
  EXPECT_FALSE(PathExists(dir.File("state/root-queue.knobs.json")));

  auto store = Store::Open(options.db_path, {}, OpenMode::kReadOnly);
  ASSERT_TRUE(store.ok());
  auto all = (*store)->ListExperiments(0);
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 1u);
  const ExperimentRecord& r = (*all)[0];
  EXPECT_EQ(r.state, "finished");
  // Either a setting beats the start with 95% confidence, or honestly not.
  EXPECT_TRUE(r.verdict == "better" || r.verdict == "no_significant_difference" ||
              r.verdict == "start_is_best")
      << r.verdict;
  if (r.verdict == "better") {
    EXPECT_GT(r.ci_low, 1.0);
  }
  EXPECT_LE(r.trials, static_cast<uint64_t>(kMaxTrials));
  EXPECT_EQ(r.applied, r.start) << "on_finish restore";
  EXPECT_EQ(r.end_result, "ok");
  std::cout << "experiment on " << disk << ": " << r.statement << "\n";
  (*tuner)->Shutdown(absl::Seconds(2));
}

}  // namespace
}  // namespace spintune
