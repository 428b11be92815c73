// Internal to storage/: the row helpers of the Store's files (store.cc and
// store_*.cc: targets and ingest, evidence and compaction, versions,
// profiles, tokens).
#ifndef SPINTUNE_STORAGE_STORE_ROWS_H_
#define SPINTUNE_STORAGE_STORE_ROWS_H_

#include <cstdint>
#include <initializer_list>
#include <string>

#include "absl/strings/string_view.h"
#include "policy/policy_table.h"
#include "storage/sql_db.h"

namespace spintune::store_rows {

// uint64 counters in INTEGER (int64) columns.
inline int64_t I(uint64_t v) { return static_cast<int64_t>(v); }
inline uint64_t U(int64_t v) { return v < 0 ? 0 : static_cast<uint64_t>(v); }

// The key in columns first..first+3 (cpu_class, device, opcode, size_class).
inline PolicyKey KeyAt(const Statement& q, int first) {
  return {q.ColumnText(first), q.ColumnText(first + 1),
          static_cast<uint32_t>(q.ColumnInt(first + 2)),
          static_cast<uint32_t>(q.ColumnInt(first + 3))};
}

// INSERT of every column of `table` (bound as ?1..?N in order) that
// replaces the row with the same first `key_columns` columns: an upsert both
// engines take.
std::string Upsert(absl::string_view table, std::initializer_list<absl::string_view> columns,
                   size_t key_columns);

}  // namespace spintune::store_rows

#endif  // SPINTUNE_STORAGE_STORE_ROWS_H_
