// One path from a trace (or a CSV) to a table: `spintune tune` offline and
// an agent streaming the same input into a real tuner fit the same table;
// the completions-CSV codec keeps every column.
#include <fstream>
#include <sstream>

#include "agent/agent.h"
#include "agent/policy_sink.h"
#include "cli/commands.h"
#include "cli/extract_command.h"
#include "gtest/gtest.h"
#include "policy/header_writer.h"
#include "policy/policy_json.h"
#include "policy/samples_csv.h"
#include "storage/store.h"
#include "tests/testing/temp_dir.h"
#include "tuner/tuner_server.h"

namespace spintune {
namespace {

const std::string kTrace =
    std::string(SPINTUNE_SOURCE_DIR) + "/tests/fixtures/trace/virtio-6.18-trace.txt";

void WritePlatform(const std::string& path) {
  std::ofstream(path) << R"({"irq_cpu_ns": 8000, "irq_wake_ns": 40000, "poll_read_ns": 200,
                            "timer_cpu_ns": 20000, "timer_wake_ns": 30000, "board": "this-vm"})";
}

// Streams `source` (a MakeSampleSource spec) as agent "a-1" into a fresh
// tuner without hysteresis or A/B trials and returns the table it stored (and, with
// `keys`, the evidence it stored).
PolicyTable TunerTable(const testing::TempDir& dir, const std::string& source,
                       const SourceOptions& source_options,
                       std::vector<KeyEvidence>* keys = nullptr) {
  TunerOptions tuner_options;
  tuner_options.db_path = dir.File("tuner.db");
  tuner_options.fit.hysteresis = 0;
  // No A/B trials: a trial is the incumbent's wait the tuner attaches to a
  // changed key for verification, not part of the fit compared here.
  tuner_options.verify.ab_share = 0;
  auto tuner = TunerServer::Start("127.0.0.1:0", tuner_options);
  EXPECT_TRUE(tuner.ok()) << tuner.status();
  if (!tuner.ok()) return {};
  auto src = MakeSampleSource(source, source_options);
  EXPECT_TRUE(src.ok()) << src.status();
  auto sink = MakePolicySink("none", {"vda"});
  if (!src.ok() || !sink.ok()) return {};
  AgentOptions options;
  options.tuner_address = (*tuner)->address();
  options.agent_id = "a-1";
  options.batch_size = 20;
  options.state_dir = "";
  options.give_up_after = absl::Seconds(20);
  Agent agent(options, std::move(*src), std::move(*sink));
  absl::Status s = agent.Run();
  EXPECT_TRUE(s.ok()) << s;
  Repository repo;
  repo.tuner = (*tuner)->address();
  std::ostringstream json;
  s = RunPolicy(repo, "a-1", 0, "json", false, json);
  EXPECT_TRUE(s.ok()) << s;
  (*tuner)->Shutdown(absl::Seconds(2));
  if (keys != nullptr) {
    auto store = Store::Open(dir.File("tuner.db"));
    EXPECT_TRUE(store.ok()) << store.status();
    auto target = store.ok() ? (*store)->FindTarget("a-1") : store.status();
    if (target.ok() && target->has_value()) {
      auto loaded = (*store)->LoadKeys((*target)->id);
      EXPECT_TRUE(loaded.ok()) << loaded.status();
      if (loaded.ok()) *keys = std::move(*loaded);
    }
  }
  auto table = ParsePolicyJson(json.str());
  EXPECT_TRUE(table.ok()) << table.status();
  return table.ok() ? *table : PolicyTable{};
}

PolicyTable OfflineTable(TuneFlags flags) {
  flags.fit.hysteresis = 0;
  flags.context = "off";  // the tuner fits no context leaves
  std::ostringstream json, notes;
  absl::Status s = RunTune(flags, json, notes);
  EXPECT_TRUE(s.ok()) << s;
  auto table = ParsePolicyJson(json.str());
  EXPECT_TRUE(table.ok()) << table.status();
  return table.ok() ? *table : PolicyTable{};
}

// Every fitted number: the CPU classes' costs and every entry (decision,
// evidence, prices, gain interval).
void ExpectSameFit(const PolicyTable& offline, const PolicyTable& tuner) {
  nlohmann::json a = PolicyTableToJson(offline), b = PolicyTableToJson(tuner);
  ASSERT_FALSE(b["entries"].empty());
  EXPECT_EQ(a["cpu_classes"], b["cpu_classes"]);
  ASSERT_EQ(a["entries"].size(), b["entries"].size());
  for (size_t i = 0; i < a["entries"].size(); ++i) {
    EXPECT_EQ(a["entries"][i], b["entries"][i]) << i;
  }
}

TEST(CsvPath, OfflineTuneOfAnExtractedTraceEqualsTheTunersTableOfItsReplay) {
  testing::TempDir dir;
  WritePlatform(dir.File("platform.json"));
  ExtractFlags extract;
  extract.trace = kTrace;
  extract.block_dev = {"254:0=vda"};
  extract.completions_csv = dir.File("c.csv");
  extract.dispatch_csv = dir.File("d.csv");
  std::ostringstream out, err;
  ASSERT_TRUE(RunExtract(extract, out, err).ok()) << err.str();

  TuneFlags flags;
  flags.samples_csv = dir.File("c.csv");
  flags.platform_json = dir.File("platform.json");
  flags.dispatch_csv = dir.File("d.csv");
  const PolicyTable offline = OfflineTable(flags);

  SourceOptions source;
  source.platform = dir.File("platform.json");
  source.block_dev = {"254:0=vda"};
  const PolicyTable tuner = TunerTable(dir, "replay:" + kTrace, source);
  ExpectSameFit(offline, tuner);
  // The trace's wake-ups, not the declared 40 us, priced the IRQ path.
  ASSERT_EQ(tuner.cpu_classes.size(), 1u);
  EXPECT_NE(tuner.cpu_classes[0].costs.irq_wake_ns, 40000);
  flags.dispatch_csv.clear();
  EXPECT_EQ(OfflineTable(flags).cpu_classes[0].costs.irq_wake_ns, 40000);
}

TEST(CsvPath, TuneAndTheCsvSourceFitOneTableFromEveryOptionalColumn) {
  testing::TempDir dir;
  WritePlatform(dir.File("platform.json"));
  {
    // Two CPU classes, both paths, errors, timeouts (a spin timeout rules
    // spinning out for opcode 1), issue times and CPU numbers; a BOM.
    std::ofstream csv(dir.File("all.csv"));
    csv << "\xEF\xBB\xBF" "device,opcode,bytes,wait_ns,cpu_class,path,error,timeout,issue_ns,cpu\n";
    uint64_t t = 1'000'000;
    for (int i = 0; i < 400; ++i) {
      const int opcode = i % 2;
      const uint64_t wait = opcode == 0 ? 3000 + (i * 37) % 4000 : 20000 + (i * 101) % 90000;
      const bool spin = i % 3 == 0;
      csv << "vda," << opcode << ',' << (opcode ? 4096 : 512) << ',' << wait << ','
          << (i % 4 == 0 ? "big" : "little") << ',' << (spin ? "spin" : "irq") << ','
          << (i % 50 == 7 ? 1 : 0) << ',' << (opcode == 1 && spin && i % 30 == 3 ? 1 : 0) << ','
          << t << ',' << i % 2 << '\n';
      t += wait + 5000;
    }
  }
  TuneFlags flags;
  flags.samples_csv = dir.File("all.csv");
  flags.platform_json = dir.File("platform.json");
  flags.fit.min_samples = 10;
  const PolicyTable offline = OfflineTable(flags);

  SourceOptions source;
  source.platform = dir.File("platform.json");
  std::vector<KeyEvidence> keys;
  const PolicyTable tuner = TunerTable(dir, "csv:" + dir.File("all.csv"), source, &keys);
  ExpectSameFit(offline, tuner);
  // The tuner's evidence has every column's counts, as the offline reader's.
  auto samples = ReadSamplesCsv(dir.File("all.csv"));
  ASSERT_TRUE(samples.ok()) << samples.status();
  ASSERT_EQ(keys.size(), samples->keys.size());
  uint64_t spin_timeouts = 0;
  for (size_t i = 0; i < keys.size(); ++i) {
    const KeyEvidence& a = samples->keys[i];
    const KeyEvidence& b = keys[i];
    EXPECT_EQ(std::tie(a.errors, a.irq_path, a.spin_path, a.irq_timeouts, a.spin_timeouts),
              std::tie(b.errors, b.irq_path, b.spin_path, b.irq_timeouts, b.spin_timeouts))
        << i;
    spin_timeouts += b.spin_timeouts;
  }
  EXPECT_GT(spin_timeouts, 0u) << "the csv: source sends timeouts";
}

TEST(CsvPath, CodecWritesAndReadsEveryColumn) {
  testing::TempDir dir;
  const std::string path = dir.File("rows.csv");
  CompletionRow a;
  a.device = "mmc,0";  // quoted on the way out
  a.opcode = 18;
  a.bytes = 4096;
  a.wait_ns = 227800;
  a.cpu_class = "rocket";
  a.path = "spin";
  a.error = true;
  a.timeout = true;
  a.issue_ns = 123456789;
  a.cpu = 3;
  CompletionRow b = a;
  b.path = "irq";
  b.error = b.timeout = false;
  b.cpu.reset();
  {
    auto w = CompletionsCsvWriter::Open(path, {/*issue_ns=*/true, /*cpu=*/true});
    ASSERT_TRUE(w.ok()) << w.status();
    (*w)->Write(a);
    (*w)->Write(b);
    ASSERT_TRUE((*w)->Flush().ok());
  }
  auto r = CompletionsCsvReader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE((*r)->has_issue_ns());
  for (const CompletionRow& want : {a, b}) {
    CompletionRow got;
    ASSERT_TRUE(*(*r)->Next(&got));
    EXPECT_EQ(got.device, want.device);
    EXPECT_EQ(got.opcode, want.opcode);
    EXPECT_EQ(got.bytes, want.bytes);
    EXPECT_EQ(got.wait_ns, want.wait_ns);
    EXPECT_EQ(got.cpu_class, want.cpu_class);
    EXPECT_EQ(got.path, want.path);
    EXPECT_EQ(got.error, want.error);
    EXPECT_EQ(got.timeout, want.timeout);
    EXPECT_EQ(got.issue_ns, want.issue_ns);
    EXPECT_EQ(got.cpu, want.cpu);
  }
  CompletionRow end;
  EXPECT_FALSE(*(*r)->Next(&end));

  // Appending keeps the rows, and refuses a file of another header.
  auto again = CompletionsCsvWriter::Open(path, {true, true}, /*append=*/true);
  ASSERT_TRUE(again.ok()) << again.status();
  (*again)->Write(a);
  ASSERT_TRUE((*again)->Flush().ok());
  auto samples = ReadSamplesCsv(path);
  ASSERT_TRUE(samples.ok()) << samples.status();
  EXPECT_EQ(samples->samples, 3u);
  auto other = CompletionsCsvWriter::Open(path, {}, /*append=*/true);
  EXPECT_EQ(other.status().code(), absl::StatusCode::kFailedPrecondition) << other.status();
}

TEST(CsvPath, CsvReaderAcceptsAUtf8ByteOrderMark) {
  for (const std::string first : {"device", "\"device\""}) {
    std::istringstream in("\xEF\xBB\xBF" + first + ",opcode\r\nmmc0,18\r\n");
    auto csv = CsvReader::FromStream(&in, "bom.csv");
    ASSERT_TRUE(csv.ok()) << csv.status();
    EXPECT_EQ((*csv)->ColumnIndex("device"), 0) << first;
    std::vector<std::string> fields;
    ASSERT_TRUE(*(*csv)->Next(&fields));
    EXPECT_EQ(fields, (std::vector<std::string>{"mmc0", "18"}));
  }
  // Only at the start of the file: elsewhere it is data.
  std::istringstream in("device\n\xEF\xBB\xBFmmc0\n");
  auto csv = CsvReader::FromStream(&in, "bom.csv");
  ASSERT_TRUE(csv.ok());
  std::vector<std::string> fields;
  ASSERT_TRUE(*(*csv)->Next(&fields));
  EXPECT_EQ(fields[0], "\xEF\xBB\xBFmmc0");
}

TEST(CsvPath, TuneBoardNamesTheTable) {
  testing::TempDir dir;
  WritePlatform(dir.File("platform.json"));
  std::ofstream(dir.File("s.csv")) << "device,opcode,bytes,wait_ns\nmmc0,18,4096,200000\n";
  TuneFlags flags;
  flags.samples_csv = dir.File("s.csv");
  flags.platform_json = dir.File("platform.json");
  EXPECT_EQ(OfflineTable(flags).board, "this-vm");
  flags.board = "imx28-evk";
  const PolicyTable named = OfflineTable(flags);
  EXPECT_EQ(named.board, "imx28-evk");
  auto header = GenerateCHeader(named, HeaderOptions());
  ASSERT_TRUE(header.ok()) << header.status();
  EXPECT_NE(header->find("SPINTUNE_TABLE_IMX28_EVK_H"), std::string::npos) << *header;
}

}  // namespace
}  // namespace spintune
