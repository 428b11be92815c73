// KnobSpace: the discrete search space of a knob experiment.
//
// A knob experiment varies driver settings that no model can predict (the
// ahci_sunxi DMA transaction sizes of seed 003, a block queue's depth) and
// measures each one. Its space is a list of coordinates: one per integer or
// enum knob, one per bit field of a register knob (so "P0DMACR.TXTS" and
// "P0DMACR.RXTS" are two coordinates of one register). Every coordinate has
// a finite list of candidate values; a setting is one value per coordinate.
// Enum coordinates carry labels: value i prints as labels[i].
//
// Plain values; thread-compatible.
#ifndef SPINTUNE_MODELS_KNOB_SPACE_H_
#define SPINTUNE_MODELS_KNOB_SPACE_H_

#include <cstdint>
#include <string>
#include <vector>

namespace spintune {

// One value per coordinate of a KnobSpace, in coordinate order.
using KnobSetting = std::vector<int64_t>;

struct KnobCoordinate {
  std::string name;             // "nr_requests", "P0DMACR.TXTS"
  std::vector<int64_t> values;  // candidates, in domain order, distinct
  // Enum knobs: value v prints as labels[v] (values are then 0..n-1).
  std::vector<std::string> labels;
  // Bit fields of a register knob: the register's name and the field's
  // place in it (empty register: an ordinary knob).
  std::string register_name;
  uint32_t shift = 0;
  uint32_t width = 0;

  // "3", or the label of an enum value.
  std::string Format(int64_t value) const;
};

struct KnobSpace {
  std::vector<KnobCoordinate> coordinates;

  // Number of settings (the product of the value counts), saturating at
  // UINT64_MAX.
  uint64_t Size() const;
  // "TXTS=3,RXTS=3" (coordinate names without their register prefix when
  // that is unambiguous: see ShortName). REQUIRES: s.size() == coordinates.size().
  std::string Format(const KnobSetting& s) const;
  // The name a coordinate is printed with: the part after the register
  // prefix ("P0DMACR.TXTS" -> "TXTS") when no other coordinate has it.
  std::string ShortName(size_t coordinate) const;
  // Every setting, the last coordinate varying fastest. REQUIRES: Size() is
  // small (the caller bounds it).
  std::vector<KnobSetting> AllSettings() const;
  // True when s has one candidate value per coordinate.
  bool Contains(const KnobSetting& s) const;
};

}  // namespace spintune

#endif  // SPINTUNE_MODELS_KNOB_SPACE_H_
