// The IRQ dispatch CSV `spintune extract --dispatch` writes and `spintune
// tune --dispatch` reads (docs/csv-formats.md): one row per IRQ dispatch,
// columns cpu, irq, device, handler_ns (handler entry to exit) and wake_ns
// (hardware completion to the waiter running; empty when not measured),
// optionally cpu_class (default "default", the class a replay sends).
//
// Thread-safety: pure functions.
#ifndef SPINTUNE_CLI_DISPATCH_CSV_H_
#define SPINTUNE_CLI_DISPATCH_CSV_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "storage/profile.h"

namespace spintune {

inline constexpr char kDispatchCsvHeader[] = "cpu,irq,device,handler_ns,wake_ns";

// The rows as the tuner stores a replay's dispatch samples: one record per
// (cpu class, device); rows without a device (an IRQ tied to none) are left
// out, as the agent leaves them out, and an empty or 0 wake_ns is not a
// sample. InvalidArgument naming file and line for a bad value; NotFound
// when the file cannot be opened.
absl::StatusOr<std::vector<DispatchRecord>> ReadDispatchCsv(const std::string& path);

}  // namespace spintune

#endif  // SPINTUNE_CLI_DISPATCH_CSV_H_
