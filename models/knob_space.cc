#include "models/knob_space.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"

namespace spintune {

std::string KnobCoordinate::Format(int64_t value) const {
  if (!labels.empty() && value >= 0 && static_cast<size_t>(value) < labels.size()) {
    return labels[static_cast<size_t>(value)];
  }
  return absl::StrCat(value);
}

uint64_t KnobSpace::Size() const {
  uint64_t n = 1;
  for (const auto& c : coordinates) {
    const uint64_t k = c.values.size();
    if (k == 0) return 0;
    if (n > std::numeric_limits<uint64_t>::max() / k) return std::numeric_limits<uint64_t>::max();
    n *= k;
  }
  return n;
}

std::string KnobSpace::ShortName(size_t coordinate) const {
  const std::string& full = coordinates[coordinate].name;
  const size_t dot = full.rfind('.');
  if (coordinates[coordinate].register_name.empty() || dot == std::string::npos) return full;
  const std::string tail = full.substr(dot + 1);
  for (size_t i = 0; i < coordinates.size(); ++i) {
    if (i == coordinate) continue;
    const std::string& other = coordinates[i].name;
    if (other == tail || (other.size() > tail.size() &&
                          other.compare(other.size() - tail.size() - 1, std::string::npos,
                                        "." + tail) == 0)) {
      return full;
    }
  }
  return tail;
}

std::string KnobSpace::Format(const KnobSetting& s) const {
  std::string out;
  for (size_t i = 0; i < coordinates.size() && i < s.size(); ++i) {
    absl::StrAppend(&out, i ? "," : "", ShortName(i), "=", coordinates[i].Format(s[i]));
  }
  return out;
}

std::vector<KnobSetting> KnobSpace::AllSettings() const {
  std::vector<KnobSetting> out;
  if (Size() == 0) return out;
  std::vector<size_t> index(coordinates.size(), 0);
  while (true) {
    KnobSetting s;
    for (size_t i = 0; i < coordinates.size(); ++i) s.push_back(coordinates[i].values[index[i]]);
    out.push_back(std::move(s));
    size_t i = coordinates.size();
    while (i > 0) {
      --i;
      if (++index[i] < coordinates[i].values.size()) break;
      index[i] = 0;
      if (i == 0) return out;
    }
    if (coordinates.empty()) return out;
  }
}

bool KnobSpace::Contains(const KnobSetting& s) const {
  if (s.size() != coordinates.size()) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    const auto& v = coordinates[i].values;
    if (std::find(v.begin(), v.end(), s[i]) == v.end()) return false;
  }
  return true;
}

}  // namespace spintune
