// `spintune report`: the HTML from a profile with fitted keys, a key too
// small for an entry, dispatch histograms and hostile names; rendered in
// headless Chromium (Debian's chromium, installed by the Makefile): no
// console messages, one chart per key in the rendered DOM, and a screenshot
// kept as a build artifact (build/artifacts/report.png).
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <regex>

#include "absl/strings/str_cat.h"
#include "cli/report_writer.h"
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

Profile FittedProfile() {
  FitInputs in;
  in.board = "test-board <rev A>";
  CpuClassInfo cpu;
  cpu.name = "little";
  cpu.cpu_khz = 600'000;
  cpu.costs = {20000, 30000, 150, 4000, 60000};
  in.cpu_classes = {cpu};
  DeviceInfo dev;
  dev.name = "mmc<0>&";  // names come from agents: must be escaped
  dev.driver = "sdhci";
  DefaultRule rule;
  rule.wait = WaitParams::SleepThenSpin(5000);
  dev.default_rules = {rule};
  in.devices = {dev};
  const struct {
    uint32_t opcode;
    double fast_ns, slow_ns;
    int n;
  } keys[] = {{13, 8000, 400000, 3000}, {17, 40000, 900000, 2500}, {24, 300000, 2e6, 2000},
              {25, 9000, 20000, 20}};
  for (const auto& k : keys) {
    KeyEvidence e;
    e.key = {"little", dev.name, k.opcode, k.opcode == 13 ? 0u : 13u};
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
  d.device = dev.name;
  d.handler = Bimodal(7, 6000, 15000, 1000);
  d.wake = Bimodal(8, 25000, 80000, 1000);
  p.dispatch = {d};
  return p;
}

TEST(Report, OneChartPerKeySummarySortedBySavingAndEverythingEscaped) {
  const Profile p = FittedProfile();
  const std::string html = RenderHtmlReport(p, {"", "2026-11-30T00:00:00Z", "test"});
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

}  // namespace
}  // namespace spintune
