// CsvSource: completion samples from a CSV file (the `spintune tune` format,
// docs/csv-formats.md) with platform costs from a platform JSON, streamed as
// if measured live. For boards that export measurements and for tools (the
// io_uring reference driver) that record their own completion times.
//
// Thread-safety: one thread.
#ifndef SPINTUNE_AGENT_CSV_SOURCE_H_
#define SPINTUNE_AGENT_CSV_SOURCE_H_

#include <map>
#include <memory>
#include <string>

#include "agent/sample_source.h"
#include "policy/platform_json.h"
#include "policy/samples_csv.h"

namespace spintune {

class CsvSource : public SampleSource {
 public:
  // Reads the whole CSV once to learn its devices and CPU classes (and to
  // report bad rows before anything is sent), then reopens it to stream.
  static absl::StatusOr<std::unique_ptr<CsvSource>> Open(const std::string& csv_path,
                                                         const std::string& platform_path);

  void Describe(v1::Hello* hello) const override { *hello = hello_; }
  absl::StatusOr<size_t> Fill(size_t max_completions, v1::SampleBatch* batch) override;
  bool exhausted() const override { return exhausted_; }

 private:
  bool exhausted_ = false;
  CsvSource() = default;
  std::string path_;
  v1::Hello hello_;
  std::map<std::string, uint32_t> device_index_, class_index_;
  std::unique_ptr<CompletionsCsvReader> reader_;
};

}  // namespace spintune

#endif  // SPINTUNE_AGENT_CSV_SOURCE_H_
