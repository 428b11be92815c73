// DefaultRule: one rule of a driver's built-in wait choice, used to price
// "what the driver does today" next to every fitted entry.
//
// Rules are tried in order; the first whose opcode and byte range match
// decides. A key's size class c stands for its smallest length, 2^(c-1)
// bytes (0 for class 0): drivers see power-of-two transfers, so this is the
// length a rule such as "spin if <= 1024 bytes" is asked about.
//
// Plain values; thread-safe.
#ifndef SPINTUNE_POLICY_DEFAULT_RULE_H_
#define SPINTUNE_POLICY_DEFAULT_RULE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "models/cost_model.h"

namespace spintune {

struct DefaultRule {
  bool any_opcode = true;
  uint32_t opcode = 0;
  uint64_t min_bytes = 0;
  uint64_t max_bytes = 0;  // 0: unbounded
  WaitParams wait;
  std::string note;  // where the rule comes from

  bool Matches(uint32_t opcode_value, uint64_t bytes) const {
    return (any_opcode || opcode == opcode_value) && bytes >= min_bytes &&
           (max_bytes == 0 || bytes <= max_bytes);
  }
};

// Smallest length of size class `size_class`: 0 for 0, else 2^(c-1).
uint64_t SizeClassLowerBytes(uint32_t size_class);

// Bit width of `bytes` (the size class of docs/policy-format.md: 0 for no data).
uint32_t SizeClassOf(uint64_t bytes);

// The wait the first matching rule prescribes, if any rule matches.
std::optional<WaitParams> MatchDefault(const std::vector<DefaultRule>& rules,
                                       uint32_t opcode, uint32_t size_class);

}  // namespace spintune

#endif  // SPINTUNE_POLICY_DEFAULT_RULE_H_
