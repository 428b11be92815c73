#include "common/printable.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace spintune {

std::string Printable(absl::string_view text, size_t max_bytes) {
  std::string out;
  out.reserve(std::min(text.size(), max_bytes));
  size_t used = 0;
  for (; used < text.size() && out.size() < max_bytes; ++used) {
    const unsigned char c = static_cast<unsigned char>(text[used]);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\\') {
      out += "\\\\";
    } else if (c < 0x20 || c == 0x7f) {
      absl::StrAppendFormat(&out, "\\x%02x", c);
    } else {
      out += static_cast<char>(c);  // UTF-8 bytes pass through
    }
  }
  if (used < text.size()) absl::StrAppend(&out, "...[", text.size() - used, " more bytes]");
  return out;
}

}  // namespace spintune
