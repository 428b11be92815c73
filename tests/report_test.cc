// `spintune report`: the HTML from a profile with fitted keys, a key too
// small for an entry, dispatch histograms and hostile names; rendered in
// headless Chromium (Debian's chromium, installed by the Makefile): no
// console messages, one chart per key in the rendered DOM, and a screenshot
// kept as a build artifact (build/artifacts/report.png).
#include <signal.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <regex>

#include "absl/strings/str_cat.h"
#include "cli/report_writer.h"
#include "nlohmann/json.hpp"
#include "gtest/gtest.h"
#include "policy/policy_builder.h"
#include "storage/store.h"
#include "tests/testing/subprocess.h"
#include "tests/testing/temp_dir.h"

namespace spintune {
namespace {

size_t Count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

// Completion times: a fast mode around `fast_ns` and a slow tail.
LatencyHistogram Bimodal(uint64_t seed, double fast_ns, double slow_ns, int n) {
  std::mt19937_64 rng(seed);
  std::lognormal_distribution<double> fast(std::log(fast_ns), 0.2), slow(std::log(slow_ns), 0.5);
  std::bernoulli_distribution tail(0.2);
  LatencyHistogram h;
  for (int i = 0; i < n; ++i) h.Record(static_cast<uint64_t>(tail(rng) ? slow(rng) : fast(rng)));
  return h;
}

// A board of one CPU class "little" and device `name` whose driver's default
// rule is `default_wait`, without keys yet.
FitInputs LittleBoard(const std::string& board, const std::string& name,
                      const WaitParams& default_wait) {
  FitInputs in;
  in.board = board;
  CpuClassInfo cpu;
  cpu.name = "little";
  cpu.cpu_khz = 600'000;
  cpu.costs = {20000, 30000, 150, 4000, 60000};
  in.cpu_classes = {cpu};
  DeviceInfo dev;
  dev.name = name;
  dev.driver = "sdhci";
  DefaultRule rule;
  rule.wait = default_wait;
  dev.default_rules = {rule};
  in.devices = {dev};
  return in;
}

Profile FittedProfile() {
  // Names come from agents: must be escaped.
  FitInputs in = LittleBoard("test-board <rev A>", "mmc<0>&", WaitParams::SleepThenSpin(5000));
  const std::string device = in.devices[0].name;
  const struct {
    uint32_t opcode;
    double fast_ns, slow_ns;
    int n;
  } keys[] = {{13, 8000, 400000, 3000}, {17, 40000, 900000, 2500}, {24, 300000, 2e6, 2000},
              {25, 9000, 20000, 20}};
  for (const auto& k : keys) {
    KeyEvidence e;
    e.key = {"little", device, k.opcode, k.opcode == 13 ? 0u : 13u};
    e.histogram = Bimodal(k.opcode, k.fast_ns, k.slow_ns, k.n);
    in.keys.push_back(e);
  }
  FitConfig config;
  config.bootstrap_resamples = 50;
  auto table = BuildPolicyTable(in, config);
  EXPECT_TRUE(table.ok()) << table.status();
  Profile p;
  p.info.name = "report-test";
  p.info.target = "board-1";
  p.info.note = "<script>alert('note')</script>";
  p.table = *table;
  p.table.version = 3;
  p.keys = in.keys;
  DispatchRecord d;
  d.cpu_class = "little";
  d.device = device;
  d.handler = Bimodal(7, 6000, 15000, 1000);
  d.wake = Bimodal(8, 25000, 80000, 1000);
  p.dispatch = {d};
  return p;
}

TEST(Report, OneChartPerKeySummarySortedBySavingAndEverythingEscaped) {
  const Profile p = FittedProfile();
  ReportOptions options;
  options.generated_at = "2026-11-30T00:00:00Z";
  options.tool_version = "test";
  const std::string html = RenderHtmlReport(p, options);
  EXPECT_EQ(Count(html, "<svg class=\"key-chart\""), 4u);
  EXPECT_EQ(Count(html, "<svg class=\"dispatch-chart\""), 1u);
  EXPECT_EQ(html.find("<script"), std::string::npos) << "hostile text is escaped, no scripts";
  EXPECT_NE(html.find("&lt;script&gt;alert(&#39;note&#39;)"), std::string::npos);
  EXPECT_NE(html.find("mmc&lt;0&gt;&amp;"), std::string::npos);
  EXPECT_EQ(html.find("mmc<0>"), std::string::npos);
  // Self-contained: nothing to fetch (the only URL is the SVG namespace).
  EXPECT_EQ(std::regex_search(html, std::regex("(src|href)=\"(https?:|//)")), false);
  EXPECT_EQ(html.find("<link"), std::string::npos);
  EXPECT_EQ(Count(html, "http"), Count(html, "xmlns=\"http://www.w3.org/2000/svg\""));
  // Labelled axes with units, the chosen wait and the default marked.
  EXPECT_NE(html.find("completion time (log scale)"), std::string::npos);
  EXPECT_NE(html.find("CPU + 1 x latency per request"), std::string::npos);
  EXPECT_NE(html.find("driver default sleep_then_spin S=5.0us"), std::string::npos);
  EXPECT_GE(Count(html, ">chosen "), 3u);
  EXPECT_NE(html.find("no entry: fewer samples than the table&#39;s minimum"), std::string::npos);
  // The summary lists entries by expected saving, largest first.
  std::vector<double> gains;
  for (const auto& e : p.table.entries) gains.push_back(e.gain_ns);
  std::sort(gains.rbegin(), gains.rend());
  size_t last = 0;
  for (double g : gains) {
    for (const auto& e : p.table.entries) {
      if (e.gain_ns != g) continue;
      const std::string label =
          e.fallback ? "(fallback)" : absl::StrCat("opcode ", e.key.opcode, " / size");
      const size_t at = html.find(label, html.find("class=\"summary\""));
      ASSERT_NE(at, std::string::npos) << label;
      EXPECT_GE(at, last) << label << " out of order";
      last = at;
    }
  }
}

TEST(Report, ChartsTheBusiestKeysUpToTheLimit) {
  const Profile p = FittedProfile();
  ReportOptions options;
  options.max_key_charts = 2;
  const std::string html = RenderHtmlReport(p, options);
  EXPECT_EQ(Count(html, "<svg class=\"key-chart\""), 2u);
  EXPECT_NE(html.find("Charts for the 2 of 4 keys with the most samples"), std::string::npos);
  // Opcodes 13 (3000 samples) and 17 (2500) are charted, 24 (2000) is not,
  // but every entry is still summarised.
  EXPECT_NE(html.find("id=\"key-mmc_0__-little-13-0\""), std::string::npos);
  EXPECT_NE(html.find("opcode 17 / size 4KiB</h3>"), std::string::npos);
  EXPECT_EQ(html.find("opcode 24 / size 4KiB</h3>"), std::string::npos);
  EXPECT_NE(html.find("<td>mmc&lt;0&gt;&amp; / little / opcode 24 / size 4KiB</td>"),
            std::string::npos)
      << "summarised, without a link to a chart that is not there";
}

TEST(Report, VerificationsAreListedWithVerdictAndRollback) {
  const Profile p = FittedProfile();
  ReportOptions options;
  EXPECT_EQ(RenderHtmlReport(p, options).find("Verification: predicted against measured"),
            std::string::npos)
      << "no section without verifications";
  VerificationRecord worse;
  worse.key = {"little", "mmc<0>&", 17, 13};
  worse.version = 3;
  worse.verdict = "worse";
  worse.predicted_cost_ns = 41000;
  worse.measured = {52000, 50000, 54000};
  worse.requests = 1200;
  worse.incumbent_version = 2;
  worse.incumbent = {44000, 43000, 45000};
  worse.rollback_version = 4;
  VerificationRecord better = worse;
  better.key.opcode = 13;
  better.verdict = "better";
  better.rollback_version = 0;
  options.verifications = {worse, better};
  const std::string html = RenderHtmlReport(p, options);
  const size_t section = html.find("Verification: predicted against measured");
  ASSERT_NE(section, std::string::npos);
  const std::string table = html.substr(section, html.find("</table>", section) - section);
  EXPECT_EQ(Count(table, "<tr>"), 3u) << "header and one row per verification";
  EXPECT_NE(table.find("mmc&lt;0&gt;&amp; little op17"), std::string::npos) << table;
  EXPECT_NE(table.find("52.0us [50.0us, 54.0us]"), std::string::npos) << table;
  EXPECT_NE(table.find("v2 44.0us [43.0us, 45.0us]"), std::string::npos) << table;
  EXPECT_NE(table.find("<td>worse</td><td>v4</td>"), std::string::npos) << table;
  EXPECT_NE(table.find("<td>better</td><td>-</td>"), std::string::npos) << table;
}

std::string ChromiumBinary() {
  for (const char* c : {"/usr/bin/chromium", "/usr/bin/chromium-browser"}) {
    struct stat st;
    if (stat(c, &st) == 0) return c;
  }
  return "";
}

// Headless Chromium: the rendered DOM (stdout) and its log (stderr).
testing::RunResult Chromium(const std::vector<std::string>& extra, const std::string& url,
                            const std::string& dir) {
  std::vector<std::string> args = {ChromiumBinary(), "--headless", "--no-sandbox",
                                   "--disable-gpu", "--hide-scrollbars", "--enable-logging=stderr",
                                   "--v=0", "--user-data-dir=" + dir + "/chromium-profile"};
  args.insert(args.end(), extra.begin(), extra.end());
  args.push_back(url);
  return testing::Run(args, dir);
}

TEST(Report, RendersInHeadlessChromiumWithoutConsoleMessages) {
  // The Makefile installs chromium for `make test`; a bare build without it
  // fails here rather than skipping silently.
  ASSERT_NE(ChromiumBinary(), "") << "Debian's chromium is needed (make deps installs it)";
  testing::TempDir dir;
  const std::string db = dir.File("tuner.db");
  {
    auto store = Store::Open(db);
    ASSERT_TRUE(store.ok());
    ASSERT_TRUE((*store)->SaveProfile(FittedProfile()).ok());
  }
  const std::string html = dir.File("report.html");
  auto r = testing::Run({SPINTUNE_CLI_BIN, "--db", db, "report", "--profile", "report-test", "-o",
                         html},
                        dir.path().string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("4 keys (4 charted), 1 IRQ dispatch charts"), std::string::npos) << r.out;

  // The console check sees a broken page's messages...
  std::ofstream(dir.File("broken.html")) << "<!DOCTYPE html><script>missing();</script>";
  auto broken = Chromium({"--dump-dom"}, "file://" + dir.File("broken.html"), dir.path().string());
  EXPECT_NE(broken.err.find(":CONSOLE"), std::string::npos) << broken.err;
  // ...and the report has none; its rendered DOM holds one chart per key.
  auto dom = Chromium({"--dump-dom"}, "file://" + html, dir.path().string());
  ASSERT_EQ(dom.exit_code, 0) << dom.err;
  EXPECT_EQ(dom.err.find(":CONSOLE"), std::string::npos) << dom.err;
  EXPECT_EQ(Count(dom.out, "<svg class=\"key-chart\""), 4u);
  EXPECT_EQ(Count(dom.out, "<section class=\"key\""), 4u);

  const char* build = std::getenv("SPINTUNE_BUILD_DIR");
  const std::filesystem::path artifacts =
      std::filesystem::path(build ? build : dir.path().string()) / "artifacts";
  std::filesystem::create_directories(artifacts);
  const std::string png = (artifacts / "report.png").string();
  std::filesystem::remove(png);
  auto shot = Chromium({"--screenshot=" + png, "--window-size=1100,2400"}, "file://" + html,
                       dir.path().string());
  ASSERT_EQ(shot.exit_code, 0) << shot.err;
  std::ifstream in(png, std::ios::binary);
  std::string magic(8, '\0');
  in.read(magic.data(), 8);
  EXPECT_EQ(magic, "\x89PNG\r\n\x1a\n") << "screenshot at " << png;
  EXPECT_GT(std::filesystem::file_size(png), 20000u);
}

TEST(Report, BadRequestsAreClearErrors) {
  testing::TempDir dir;
  const std::string db = dir.File("tuner.db");
  auto run = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {SPINTUNE_CLI_BIN, "--db", db, "report"});
    return testing::Run(args, dir.path().string());
  };
  EXPECT_EQ(run({"-o", dir.File("x.html")}).exit_code, 2);
  EXPECT_EQ(run({"--profile", "nope", "-o", dir.File("x.html")}).exit_code, 2);
  EXPECT_EQ(run({"--target", "nope", "-o", dir.File("x.html")}).exit_code, 2);
  EXPECT_EQ(run({"--target", "a", "--profile", "b", "-o", dir.File("x.html")}).exit_code, 2);
  EXPECT_EQ(run({"--target", "a"}).exit_code, 2);
}

// Every integer captured by `re` (first group) in `text`, in order.
std::vector<uint64_t> All(const std::string& text, const std::string& re) {
  std::vector<uint64_t> out;
  const std::regex r(re);
  for (auto it = std::sregex_iterator(text.begin(), text.end(), r); it != std::sregex_iterator();
       ++it) {
    out.push_back(std::stoull((*it)[1].str()));
  }
  return out;
}

uint64_t Sum(const std::vector<uint64_t>& v) {
  uint64_t n = 0;
  for (uint64_t x : v) n += x;
  return n;
}

// A running tuner on a fresh database and the CLI and agent against it.
class ReportOfAVersion : public ::testing::Test {
 protected:
  void SetUp() override {
    tuner_ = testing::Spawn({SPINTUNE_TUNER_BIN, "--db", db_, "--listen", "127.0.0.1:0",
                             "--log-level", "warn"},
                            dir_.File("tuner.out"), dir_.File("tuner.err"));
    address_ = testing::WaitForLine(dir_.File("tuner.out"), "listening on ");
    ASSERT_NE(address_, "") << testing::Slurp(dir_.File("tuner.err"));
  }
  void TearDown() override {
    kill(tuner_, SIGTERM);
    testing::WaitExit(tuner_);
  }
  testing::RunResult Cli(std::vector<std::string> args) {
    args.insert(args.begin(), {SPINTUNE_CLI_BIN, "--db", db_});
    return testing::Run(args, dir_.path().string());
  }
  // Runs the simulated agent `id` until it reached `max_samples` and got its
  // final table (the spool in its state directory carries it across runs).
  void Measure(const std::string& id, const std::string& max_samples) {
    auto r = testing::Run({SPINTUNE_AGENT_BIN, "--tuner", address_, "--source",
                           "sim:microwatt-100mhz", "--agent-id", id, "--max-samples", max_samples,
                           "--state-dir", dir_.File("state-" + id), "--log-level", "warn"},
                          dir_.path().string());
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  // The report of `target`'s latest (pinned) version, and the samples its
  // table's keyed entries were fitted on (from `spintune policy`).
  std::string Report(const std::string& target, uint64_t* fitted) {
    auto r = Cli({"report", "--target", target, "-o", dir_.File(target + ".html")});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    auto policy = Cli({"policy", target, "--format", "json"});
    EXPECT_EQ(policy.exit_code, 0) << policy.err;
    *fitted = 0;
    const nlohmann::json table = nlohmann::json::parse(policy.out);
    for (const auto& e : table["entries"]) {
      if (!e.value("fallback", false)) *fitted += e["samples"].get<uint64_t>();
    }
    return testing::Slurp(dir_.File(target + ".html"));
  }

  testing::TempDir dir_;
  const std::string db_ = dir_.File("tuner.db");
  pid_t tuner_ = -1;
  std::string address_;
};

TEST_F(ReportOfAVersion, RolledBackVersionWithTodaysSamplesSaysSoWithOneSetOfCounts) {
  Measure("b", "3000");  // fit
  Measure("b", "6000");  // ingest more (and refit)
  auto rolled = Cli({"profiles", "rollback", "b", "--to", "1"});
  ASSERT_EQ(rolled.exit_code, 0) << rolled.err;
  Measure("b", "9000");  // pinned: stored, not fitted
  uint64_t fitted = 0;
  const std::string html = Report("b", &fitted);

  // The header, the notice, the summary's "shown" column, the key sections
  // and the charts state one count: today's samples.
  const auto header = All(html, R"(; (\d+) samples over \d+ keys shown \(today&#39;s samples)");
  ASSERT_EQ(header.size(), 1u) << html.substr(0, 3000);
  const uint64_t shown = header[0];
  EXPECT_NE(html.find("Not this version's own samples."), std::string::npos);
  EXPECT_EQ(All(html, R"(below show today&#39;s samples of target &#39;b&#39;: (\d+) samples)"),
            std::vector<uint64_t>{shown});
  EXPECT_EQ(All(html, R"(was fitted on (\d+) samples over)"), std::vector<uint64_t>{fitted});
  EXPECT_NE(fitted, shown) << "the pinned version was fitted before the last samples came";
  const auto rows = All(html, R"(</a></td><td class="n">\d+</td><td class="n">(\d+)</td>)");
  EXPECT_EQ(rows.size(), 4u);
  EXPECT_EQ(Sum(rows), shown) << "summary column 'shown'";
  EXPECT_EQ(Sum(All(html, R"(</a></td><td class="n">(\d+)</td><td class="n">\d+</td>)")), fitted)
      << "summary column 'fitted on'";
  EXPECT_EQ(Sum(All(html, R"((\d+) samples shown \(this version was fitted on \d+\))")), shown);
  EXPECT_EQ(Sum(All(html, R"(samples shown \(this version was fitted on (\d+)\))")), fitted);
  EXPECT_EQ(Sum(All(html, R"(CDF of (\d+) samples)")), shown) << "the charts";
}

TEST_F(ReportOfAVersion, RolledBackVersionWithASavedProfileShowsItsOwnSamples) {
  Measure("p", "3000");  // fit, and keep its evidence in a profile
  ASSERT_EQ(Cli({"profiles", "save", "at-fit", "--target", "p"}).exit_code, 0);
  Measure("p", "6000");
  ASSERT_EQ(Cli({"profiles", "rollback", "p", "--to", "at-fit"}).exit_code, 0);
  Measure("p", "9000");
  uint64_t fitted = 0;
  const std::string html = Report("p", &fitted);
  EXPECT_EQ(html.find("Not this version's own samples."), std::string::npos);
  EXPECT_EQ(All(html, R"(; (\d+) samples over \d+ keys: the samples this version was fitted on )"
                      R"(\(the samples saved with profile &#39;at-fit&#39;\))"),
            std::vector<uint64_t>{fitted})
      << html.substr(0, 3000);
  EXPECT_EQ(Sum(All(html, R"(</a></td><td class="n">(\d+)</td>)")), fitted) << "summary";
  EXPECT_EQ(Sum(All(html, R"(CDF of (\d+) samples)")), fitted) << "the charts";
}

TEST(Report, AFarCostlierDefaultDoesNotSetTheCostAxis) {
  // A fast device whose driver polls every 4 ms: its default costs about a
  // hundred times what the chosen wait does.
  FitInputs in = LittleBoard("slow-poll", "mmc0", WaitParams::PollSleep(4'000'000));
  KeyEvidence e;
  e.key = {"little", "mmc0", 17, 13};
  e.histogram = Bimodal(17, 8000, 40000, 3000);
  in.keys = {e};
  FitConfig config;
  config.bootstrap_resamples = 20;
  auto table = BuildPolicyTable(in, config);
  ASSERT_TRUE(table.ok()) << table.status();
  Profile p;
  p.info.name = "slow-poll";
  p.info.target = "board-1";
  p.table = *table;
  p.table.version = 1;
  p.keys = in.keys;
  const PolicyEntry* entry = nullptr;
  for (const auto& x : p.table.entries) {
    if (!x.fallback) entry = &x;
  }
  ASSERT_NE(entry, nullptr);
  ASSERT_TRUE(entry->default_wait.has_value());
  const double default_cost = entry->default_expected.Cost(p.table.latency_weight);
  ASSERT_GT(default_cost, 10 * entry->expected.Cost(p.table.latency_weight));

  testing::TempDir dir;
  const std::string db = dir.File("tuner.db");
  {
    auto store = Store::Open(db);
    ASSERT_TRUE(store.ok());
    ASSERT_TRUE((*store)->SaveProfile(p).ok());
  }
  auto r = testing::Run({SPINTUNE_CLI_BIN, "--db", db, "report", "--profile", "slow-poll", "-o",
                         dir.File("r.html")},
                        dir.path().string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string html = testing::Slurp(dir.File("r.html"));
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      html, m, std::regex(R"re(data-y-max="([0-9.]+)"><text[^>]*>Expected cost per request)re")));
  const double y_max = std::stod(m[1].str());
  EXPECT_LT(y_max, default_cost / 2) << "the axis is set by the candidates, not the default";
  EXPECT_NE(html.find("driver default poll_sleep I=4.00ms: "), std::string::npos);
  EXPECT_NE(html.find("(above the axis)"), std::string::npos) << "the default's cost in the legend";
  EXPECT_NE(html.find("y axis clipped: the driver default costs"), std::string::npos);
}

}  // namespace
}  // namespace spintune
