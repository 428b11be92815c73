// CsvReader: a streaming reader of comma-separated files with a header row.
//
// Accepts RFC 4180 quoting ("a,b" and "" inside quotes), CRLF or LF line
// ends, a UTF-8 byte order mark before the header, and ignores blank lines. Every error names the file and line.
// Memory is constant in the file size (one record at a time).
//
// Thread-safety: none; one reader per thread.
#ifndef SPINTUNE_COMMON_CSV_READER_H_
#define SPINTUNE_COMMON_CSV_READER_H_

#include <cstdint>
#include <fstream>
#include <istream>
#include <memory>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace spintune {

class CsvReader {
 public:
  // Opens `path` and reads its header row. NotFound when the file cannot be
  // opened; InvalidArgument when it is empty or the header is malformed.
  static absl::StatusOr<std::unique_ptr<CsvReader>> Open(const std::string& path);
  // Reads from `in` (which must outlive the reader); `name` is used in errors.
  static absl::StatusOr<std::unique_ptr<CsvReader>> FromStream(std::istream* in,
                                                                std::string name);

  const std::vector<std::string>& header() const { return header_; }
  // Index of the column named `name`, or -1.
  int ColumnIndex(absl::string_view name) const;
  // InvalidArgument naming every missing column.
  absl::Status RequireColumns(const std::vector<std::string>& names) const;

  // Reads the next record into `fields`. Returns false at end of file.
  // InvalidArgument (with file:line) for a malformed record or a record whose
  // field count differs from the header's.
  absl::StatusOr<bool> Next(std::vector<std::string>* fields);

  // Line number of the record last returned by Next() (1 = header).
  int64_t line_number() const { return record_line_; }
  const std::string& name() const { return name_; }
  // "name:line: message" as an InvalidArgument error.
  absl::Status ErrorAt(absl::string_view message) const;

  // Field parsers with errors that name the column and line.
  absl::StatusOr<uint64_t> ParseUint(absl::string_view field, absl::string_view column) const;
  absl::StatusOr<double> ParseDouble(absl::string_view field, absl::string_view column) const;

 private:
  CsvReader(std::istream* in, std::string name) : in_(in), name_(std::move(name)) {}
  absl::StatusOr<bool> ReadRecord(std::vector<std::string>* fields);

  std::unique_ptr<std::ifstream> owned_;
  std::istream* in_;
  std::string name_;
  std::vector<std::string> header_;
  int64_t line_ = 0;         // physical lines consumed
  int64_t record_line_ = 0;  // first physical line of the last record
};

}  // namespace spintune

#endif  // SPINTUNE_COMMON_CSV_READER_H_
