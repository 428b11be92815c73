// The project version string ("0.1.0"), from CMakeLists.txt.
#ifndef SPINTUNE_COMMON_VERSION_H_
#define SPINTUNE_COMMON_VERSION_H_

namespace spintune {
const char* Version();
}  // namespace spintune

#endif  // SPINTUNE_COMMON_VERSION_H_
