// Direct tests of the small shared helpers (file_util, printable,
// fingerprint, csv_reader).
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/csv_reader.h"
#include "common/file_util.h"
#include "common/fingerprint.h"
#include "common/printable.h"
#include "gtest/gtest.h"

namespace spintune {
namespace {

namespace fs = std::filesystem;

fs::path Scratch(const std::string& name) {
  fs::path p = fs::path(::testing::TempDir()) / (name + "_" + std::to_string(getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

TEST(FileUtil, WritesAtomicallyWithItsModeAndReadsBack) {
  const fs::path dir = Scratch("file_util");
  const std::string path = (dir / "token").string();
  ASSERT_TRUE(WriteFileAtomically(path, "old").ok());
  ASSERT_TRUE(WriteFileAtomically(path, "secret", 0600).ok());
  auto back = ReadFileToString(path);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, "secret");
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(dir)) files += e.is_regular_file();
  EXPECT_EQ(files, 1u) << "no temporary file is left behind";
  EXPECT_FALSE(WriteFileAtomically((dir / "missing" / "x").string(), "x").ok());
  fs::remove_all(dir);
}

TEST(FileUtil, ReadRefusesMissingDirectoriesAndOversizedFiles) {
  const fs::path dir = Scratch("file_read");
  const std::string path = (dir / "f").string();
  { std::ofstream(path) << "0123456789"; }
  EXPECT_EQ(ReadFileToString((dir / "nope").string()).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(ReadFileToString(dir.string()).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadFileToString(path, 9).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(ReadFileToString(path, 10).ok());
  EXPECT_TRUE(PathExists(path));
  EXPECT_FALSE(PathExists((dir / "nope").string()));
  EXPECT_TRUE(CheckNotDirectory(path).ok());
  EXPECT_TRUE(CheckNotDirectory((dir / "nope").string()).ok());
  auto is_dir = CheckNotDirectory(dir.string());
  EXPECT_NE(is_dir.message().find("is a directory"), std::string::npos) << is_dir;
  fs::remove_all(dir);
}

TEST(FileUtil, SafeFileNameIsOnePathComponent) {
  EXPECT_EQ(SafeFileName("host/sim:x"), "host_sim_x");
  EXPECT_EQ(SafeFileName("board-7"), "board-7");
  EXPECT_EQ(SafeFileName("../etc"), "___etc");
}

TEST(Printable, EscapesControlCharactersAndCuts) {
  EXPECT_EQ(Printable("plain text"), "plain text");
  const std::string escaped = Printable("a\nb\tc\x1b[2J");
  EXPECT_EQ(escaped.find('\n'), std::string::npos);
  EXPECT_EQ(escaped.find('\x1b'), std::string::npos);
  EXPECT_NE(escaped.find("\\n"), std::string::npos) << escaped;
  EXPECT_NE(escaped.find("\\t"), std::string::npos) << escaped;
  const std::string cut = Printable(std::string(2000, 'x'), 100);
  EXPECT_LT(cut.size(), 200u);
  EXPECT_EQ(cut.substr(0, 50), std::string(50, 'x'));
}

TEST(Fingerprint, SameBytesSameValueOtherBytesOtherValue) {
  EXPECT_EQ(Fingerprint64("batch 1"), Fingerprint64("batch 1"));
  EXPECT_NE(Fingerprint64("batch 1"), Fingerprint64("batch 2"));
  EXPECT_NE(Fingerprint64(""), Fingerprint64(std::string(1, '\0')));
}

TEST(CsvReader, QuotedFieldsColumnsAndErrorsWithTheLine) {
  std::istringstream in("a,\"b,c\",d\n1,\"x \"\"y\"\"\",3\n4,5\n");
  auto r = CsvReader::FromStream(&in, "t.csv");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)->header(), (std::vector<std::string>{"a", "b,c", "d"}));
  EXPECT_EQ((*r)->ColumnIndex("d"), 2);
  EXPECT_EQ((*r)->ColumnIndex("zz"), -1);
  EXPECT_FALSE((*r)->RequireColumns({"a", "zz"}).ok());
  std::vector<std::string> f;
  auto more = (*r)->Next(&f);
  ASSERT_TRUE(more.ok() && *more) << more.status();
  EXPECT_EQ(f, (std::vector<std::string>{"1", "x \"y\"", "3"}));
  auto n = (*r)->ParseUint("18446744073709551616", "a");
  EXPECT_FALSE(n.ok());
  EXPECT_NE(std::string(n.status().message()).find("t.csv"), std::string::npos) << n.status();
  EXPECT_FALSE((*r)->ParseDouble("abc", "a").ok());
}

}  // namespace
}  // namespace spintune
