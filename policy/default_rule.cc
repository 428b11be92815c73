#include "policy/default_rule.h"

namespace spintune {

uint64_t SizeClassLowerBytes(uint32_t size_class) {
  if (size_class == 0) return 0;
  if (size_class > 64) return ~uint64_t{0};
  return uint64_t{1} << (size_class - 1);
}

uint32_t SizeClassOf(uint64_t bytes) {
  return bytes == 0 ? 0 : 64 - static_cast<uint32_t>(__builtin_clzll(bytes));
}

std::optional<WaitParams> MatchDefault(const std::vector<DefaultRule>& rules,
                                       uint32_t opcode, uint32_t size_class) {
  const uint64_t bytes = SizeClassLowerBytes(size_class);
  for (const auto& rule : rules) {
    if (rule.Matches(opcode, bytes)) return rule.wait;
  }
  return std::nullopt;
}

}  // namespace spintune
