// Human-readable renderings of policy tables and target lists.
#ifndef SPINTUNE_CLI_TABLE_FORMAT_H_
#define SPINTUNE_CLI_TABLE_FORMAT_H_

#include <string>
#include <vector>

#include "models/cost_model.h"  // DescribeWait, FormatDurationNs
#include "policy/policy_table.h"

namespace spintune {

// Size class as its smallest length: "0", "512B", "4KiB".
std::string FormatSizeClass(uint32_t size_class);

// One line per entry: key, samples, p50/p99, chosen wait, expected CPU and
// latency, the driver default's, and the saving in cost J.
std::string RenderPolicyTable(const PolicyTable& table);

// Per entry, the cost of the best candidate of every strategy family.
std::string RenderFamilies(const PolicyTable& table);

// "-12.5us" for negative values.
std::string FormatSigned(double ns);

// Fixed-width columns; the first row is the header.
std::string RenderColumns(const std::vector<std::vector<std::string>>& rows);

}  // namespace spintune

#endif  // SPINTUNE_CLI_TABLE_FORMAT_H_
