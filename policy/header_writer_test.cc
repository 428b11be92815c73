#include "policy/header_writer.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "gtest/gtest.h"
#include "tests/testing/policy_fixtures.h"

namespace spintune {
namespace {

namespace fs = std::filesystem;

std::string ReadFile(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteFile(const fs::path& p, const std::string& s) {
  std::ofstream out(p, std::ios::binary);
  out << s;
}

HeaderOptions Options() {
  HeaderOptions o;
  o.tool_version = "0.0.0-test";
  return o;
}

// A table whose names try to break out of identifiers, comments and strings.
PolicyTable HostileTable() {
  PolicyTable t = testing::SampleTable();
  t.board = "evil\"board */ #error\n\xC3\xA9t\xC3\xA9 ?\?/";
  const std::string dev0 = "mmc0\"*/x";
  const std::string dev1 = "9spi\\n */";
  for (auto& e : t.entries) e.key.device = e.key.device == "mmc0" ? dev0 : dev1;
  t.devices[0].name = dev0;
  t.devices[0].model = "*/ int x; /*";
  t.devices[1].name = dev1;
  t.devices[1].driver = "drv\n#define X";
  t.cpu_classes[0].name = "big */";
  for (auto& e : t.entries) {
    if (e.key.cpu_class == "big") e.key.cpu_class = "big */";
  }
  SortEntries(&t.entries);
  return t;
}

TEST(HeaderWriter, MatchesTheGoldenFile) {
  auto header = GenerateCHeader(testing::SampleTable(), Options());
  ASSERT_TRUE(header.ok()) << header.status();
  const fs::path golden = fs::path(SPINTUNE_SOURCE_DIR) / "tests/golden/sample_table.h";
  if (std::getenv("SPINTUNE_UPDATE_GOLDEN")) WriteFile(golden, *header);
  EXPECT_EQ(*header, ReadFile(golden)) << "regenerate with SPINTUNE_UPDATE_GOLDEN=1";
}

TEST(HeaderWriter, HostileNamesMatchTheGoldenFile) {
  auto header = GenerateCHeader(HostileTable(), Options());
  ASSERT_TRUE(header.ok()) << header.status();
  const fs::path golden = fs::path(SPINTUNE_SOURCE_DIR) / "tests/golden/hostile_table.h";
  if (std::getenv("SPINTUNE_UPDATE_GOLDEN")) WriteFile(golden, *header);
  EXPECT_EQ(*header, ReadFile(golden));
  // The input's newlines cannot start a directive: the only preprocessor
  // lines are the generator's own.
  std::istringstream lines(*header);
  std::string line;
  while (std::getline(lines, line)) {
    if (!line.empty() && line[0] == '#') {
      EXPECT_TRUE(line.rfind("#ifndef SPINTUNE_TABLE_", 0) == 0 ||
                  line.rfind("#define SPINTUNE_TABLE_", 0) == 0 ||
                  line == "#include \"spintune/policy.h\"" ||
                  line.rfind("#endif /* SPINTUNE_TABLE_", 0) == 0)
          << line;
    }
    // A comment opened on a line closes on it, once.
    const size_t open = line.find("/*");
    if (open != std::string::npos) {
      EXPECT_EQ(line.find("*/", open + 2), line.rfind("*/")) << line;
    }
  }
}

TEST(HeaderWriter, IsDeterministic) {
  auto a = GenerateCHeader(testing::SampleTable(), Options());
  auto b = GenerateCHeader(testing::SampleTable(), Options());
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*a, *b);
}

TEST(HeaderWriter, SanitizesIdentifiers) {
  EXPECT_EQ(SanitizeIdentifier("LiteX Rocket-50MHz"), "litex_rocket_50mhz");
  EXPECT_EQ(SanitizeIdentifier("9lives"), "n9lives");
  EXPECT_EQ(SanitizeIdentifier("\xC3\xA9\"*/"), "x");
  EXPECT_EQ(SanitizeText("a*/b/*c\"d\\e\n"), "a*_b/_c_d_e_");
}

TEST(HeaderWriter, ContextTreesMatchTheGoldenFile) {
  auto header = GenerateCHeader(testing::ContextTable(), Options());
  ASSERT_TRUE(header.ok()) << header.status();
  const fs::path golden = fs::path(SPINTUNE_SOURCE_DIR) / "tests/golden/context_table.h";
  if (std::getenv("SPINTUNE_UPDATE_GOLDEN")) WriteFile(golden, *header);
  EXPECT_EQ(*header, ReadFile(golden));
}

// Compiles the generated header with the project's compilers, as C (gnu11,
// hosted and freestanding) and C++, with warnings as errors, and runs a C
// program that looks entries up in it (with context: the three leaves).
enum class Kind { kPlain, kHostile, kContext, kTrial };
class HeaderCompiles : public ::testing::TestWithParam<Kind> {};

TEST_P(HeaderCompiles, AsCAndCxxWithWerror) {
  const bool hostile = GetParam() == Kind::kHostile;
  const bool context = GetParam() == Kind::kContext;
  const bool trial = GetParam() == Kind::kTrial;
  PolicyTable table = hostile   ? HostileTable()
                      : context ? testing::ContextTable()
                                : testing::SampleTable();
  for (auto& e : table.entries) {  // CMD23 keeps IRQ for 200 of 256 commands
    if (trial && !e.fallback && e.key.opcode == 23) e.trial = Trial{WaitParams::Irq(), 200};
  }
  auto header = GenerateCHeader(table, Options());
  ASSERT_TRUE(header.ok()) << header.status();
  const fs::path dir = fs::temp_directory_path() /
                       ("spintune_header_" + std::to_string(::getpid()) + "_" +
                        std::to_string(static_cast<int>(GetParam())));
  fs::create_directories(dir);
  WriteFile(dir / "table.h", *header);
  const std::string board = SanitizeIdentifier(table.board);
  const std::string mmc = "spintune_" + board + "_" + SanitizeIdentifier(table.devices[0].name);
  // CMD23 on class 0 must be SPIN_THEN_IRQ(12us); an unknown opcode must hit
  // the fallback (IRQ).
  WriteFile(dir / "main.c",
            "#include \"table.h\"\n"
            "int main(void) {\n"
            "  const struct spintune_entry *e = spintune_lookup(&" + mmc + ", 0, 23, 0);\n"
            "  if (e->strategy != SPINTUNE_SPIN_THEN_IRQ || e->spin_ns != 12000u) return 1;\n"
            "  e = spintune_lookup(&" + mmc + ", 0, 99, 0);\n"
            "  if (!(e->flags & SPINTUNE_ENTRY_FALLBACK) || e->strategy != SPINTUNE_IRQ) return 2;\n" +
                (context ? "  {\n"
                           "    struct spintune_features f = {{ 2000000u, 0u, 3u, 4096u }};\n"
                           "    if (spintune_lookup_ctx(&" + mmc + ", 0, 25, &f)->sleep_ns != 2000000u) return 3;\n"
                           "    f.value[SPINTUNE_FEATURE_INFLIGHT] = 1;\n"
                           "    if (spintune_lookup_ctx(&" + mmc + ", 0, 25, &f)->strategy != SPINTUNE_IRQ) return 4;\n"
                           "    f.value[SPINTUNE_FEATURE_PREV_WAIT_NS] = 5;\n"
                           "    if (spintune_lookup_ctx(&" + mmc + ", 0, 25, &f)->spin_ns != 300000u) return 5;\n"
                           "  }\n"
                         : "") +
                (trial ? "  {\n"
                         "    struct spintune_ab ab;\n"
                         "    unsigned i, incumbent = 0;\n"
                         "    spintune_ab_init(&ab, &" + mmc + ");\n"
                         "    if (" + "spintune_trial_count(&" + mmc + ") != 1u) return 6;\n"
                         "    e = spintune_lookup(&" + mmc + ", 0, 23, 0);\n"
                         "    for (i = 0; i < 256u; i++)\n"
                         "      incumbent += spintune_entry_is_incumbent(spintune_ab_pick(&" + mmc + ", e, &ab));\n"
                         "    if (incumbent < 150u || incumbent > 240u) return 7;\n"
                         "  }\n"
                       : "") +
                "  return 0;\n"
                "}\n");
  WriteFile(dir / "main.cc", "#include \"table.h\"\nint main() { return " + mmc + ".count == " +
                                 (context ? "8u" : "5u") + " ? 0 : 1; }\n");
  WriteFile(dir / "free.c", "#include \"table.h\"\nunsigned spintune_count(void) { return " +
                                mmc + ".count; }\n");
  const std::string inc = " -I" + std::string(SPINTUNE_SOURCE_DIR) + "/driver/include -I" +
                          dir.string() + " ";
  const std::string flags = " -Wall -Wextra -Werror ";
  const std::string cc = std::string(SPINTUNE_C_COMPILER) + " -std=gnu11" + flags + inc;
  const std::string cxx = std::string(SPINTUNE_CXX_COMPILER) + " -std=c++17" + flags + inc;
  ASSERT_EQ(std::system((cc + (dir / "main.c").string() + " -o " + (dir / "c.out").string())
                            .c_str()),
            0);
  EXPECT_EQ(std::system((dir / "c.out").string().c_str()), 0);
  ASSERT_EQ(std::system((cc + "-ffreestanding -c " + (dir / "free.c").string() + " -o " +
                         (dir / "free.o").string())
                            .c_str()),
            0);
  ASSERT_EQ(std::system((cxx + (dir / "main.cc").string() + " -o " + (dir / "cxx.out").string())
                            .c_str()),
            0);
  EXPECT_EQ(std::system((dir / "cxx.out").string().c_str()), 0);
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(PlainHostileContext, HeaderCompiles,
                         ::testing::Values(Kind::kPlain, Kind::kHostile, Kind::kContext,
                                           Kind::kTrial));

}  // namespace
}  // namespace spintune
