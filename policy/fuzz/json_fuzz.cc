// libFuzzer target: arbitrary bytes as each JSON input the tools read: a
// policy table (`spintune header --json`), a profile (`spintune profiles
// import`), a platform file (`--platform`) and user-defined event pairs
// (`--pairs`).
#include <cstdint>
#include <string>

#include "agent/trace/trace_correlator.h"
#include "policy/fuzz/scratch_file.h"
#include "policy/platform_json.h"
#include "policy/policy_json.h"
#include "storage/profile.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto table = spintune::ParsePolicyJson(text);
  if (table.ok()) {
    // What parses must survive a round trip.
    auto again = spintune::ParsePolicyJson(spintune::PolicyTableToJson(*table).dump());
    if (!again.ok()) __builtin_trap();
  }
  auto profile = spintune::ParseProfileJson(text);
  if (profile.ok()) {
    auto again = spintune::ParseProfileJson(spintune::ProfileToJson(*profile).dump());
    if (!again.ok()) __builtin_trap();
  }
  (void)spintune::ParseEventPairs(text);
  static const spintune::FuzzScratchFile file(".json");
  if (!file.Write(data, size)) return 0;
  (void)spintune::ReadPlatformFile(file.path());
  return 0;
}
