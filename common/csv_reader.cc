#include "common/csv_reader.h"

#include <cerrno>
#include <cstring>
#include <cmath>
#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace spintune {

absl::StatusOr<std::unique_ptr<CsvReader>> CsvReader::Open(const std::string& path) {
  auto file = std::make_unique<std::ifstream>(path, std::ios::binary);
  if (!file->is_open()) {
    return absl::NotFoundError(
        absl::StrCat(path, ": cannot open: ", std::strerror(errno)));
  }
  std::istream* in = file.get();
  auto reader = FromStream(in, path);
  if (!reader.ok()) return reader.status();
  (*reader)->owned_ = std::move(file);
  return reader;
}

absl::StatusOr<std::unique_ptr<CsvReader>> CsvReader::FromStream(std::istream* in,
                                                                 std::string name) {
  std::unique_ptr<CsvReader> reader(new CsvReader(in, std::move(name)));
  auto got = reader->ReadRecord(&reader->header_);
  if (!got.ok()) return got.status();
  if (!*got) {
    return absl::InvalidArgumentError(
        absl::StrCat(reader->name_, ": empty file (expected a header row)"));
  }
  for (auto& column : reader->header_) {
    column = std::string(absl::StripAsciiWhitespace(column));
    if (column.empty()) return reader->ErrorAt("empty column name in header");
  }
  return reader;
}

int CsvReader::ColumnIndex(absl::string_view name) const {
  for (size_t i = 0; i < header_.size(); ++i) {
    if (header_[i] == name) return static_cast<int>(i);
  }
  return -1;
}

absl::Status CsvReader::RequireColumns(const std::vector<std::string>& names) const {
  std::vector<std::string> missing;
  for (const auto& n : names) {
    if (ColumnIndex(n) < 0) missing.push_back(n);
  }
  if (missing.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(name_, ":1: missing column(s) ", absl::StrJoin(missing, ", "),
                   " (header has: ", absl::StrJoin(header_, ","), ")"));
}

absl::Status CsvReader::ErrorAt(absl::string_view message) const {
  return absl::InvalidArgumentError(absl::StrCat(name_, ":", record_line_, ": ", message));
}

absl::StatusOr<bool> CsvReader::ReadRecord(std::vector<std::string>* fields) {
  fields->clear();
  std::string line;
  while (true) {
    if (!std::getline(*in_, line)) return false;
    ++line_;
    // A UTF-8 byte order mark (spreadsheets write one) opens the file, not
    // the first column's name.
    if (line_ == 1 && absl::StartsWith(line, "\xEF\xBB\xBF")) line.erase(0, 3);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!absl::StripAsciiWhitespace(line).empty()) break;
  }
  record_line_ = line_;
  if (line.find('\0') != std::string::npos) return ErrorAt("NUL byte in record");
  std::string field;
  bool quoted = false;
  bool field_was_quoted = false;
  size_t i = 0;
  while (true) {
    if (i == line.size()) {
      if (!quoted) break;
      // A quoted field spans lines.
      std::string next;
      if (!std::getline(*in_, next)) return ErrorAt("unterminated quoted field");
      ++line_;
      if (!next.empty() && next.back() == '\r') next.pop_back();
      field.push_back('\n');
      line = std::move(next);
      i = 0;
      continue;
    }
    const char ch = line[i++];
    if (quoted) {
      if (ch == '"') {
        if (i < line.size() && line[i] == '"') {
          field.push_back('"');
          ++i;
        } else {
          quoted = false;
        }
      } else {
        field.push_back(ch);
      }
    } else if (ch == '"') {
      if (!field.empty() || field_was_quoted) {
        return ErrorAt("quote in the middle of an unquoted field");
      }
      quoted = true;
      field_was_quoted = true;
    } else if (ch == ',') {
      fields->push_back(std::move(field));
      field.clear();
      field_was_quoted = false;
    } else {
      if (field_was_quoted) return ErrorAt("text after a closing quote");
      field.push_back(ch);
    }
  }
  fields->push_back(std::move(field));
  return true;
}

absl::StatusOr<bool> CsvReader::Next(std::vector<std::string>* fields) {
  auto got = ReadRecord(fields);
  if (!got.ok() || !*got) return got;
  if (fields->size() != header_.size()) {
    return ErrorAt(absl::StrCat("expected ", header_.size(), " fields, found ",
                                fields->size()));
  }
  return true;
}

absl::StatusOr<uint64_t> CsvReader::ParseUint(absl::string_view field,
                                              absl::string_view column) const {
  absl::string_view s = absl::StripAsciiWhitespace(field);
  uint64_t value = 0;
  if (s.empty()) return ErrorAt(absl::StrCat("column ", column, ": empty value"));
  if (s[0] == '-') {
    return ErrorAt(absl::StrCat("column ", column, ": negative value '", s, "'"));
  }
  if (!absl::SimpleAtoi(s, &value)) {
    return ErrorAt(absl::StrCat("column ", column,
                                ": not a non-negative integer: '", s, "'"));
  }
  return value;
}

absl::StatusOr<double> CsvReader::ParseDouble(absl::string_view field,
                                              absl::string_view column) const {
  absl::string_view s = absl::StripAsciiWhitespace(field);
  double value = 0;
  if (s.empty()) return ErrorAt(absl::StrCat("column ", column, ": empty value"));
  if (!absl::SimpleAtod(s, &value) || !std::isfinite(value)) {
    return ErrorAt(absl::StrCat("column ", column, ": not a finite number: '", s, "'"));
  }
  return value;
}

}  // namespace spintune
