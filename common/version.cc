#include "common/version.h"

namespace spintune {
const char* Version() { return SPINTUNE_VERSION; }
}  // namespace spintune
