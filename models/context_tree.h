// ContextTree: a small binary decision tree over the context features
// (context_features.h) whose leaves are ordinary wait entries (issue 16).
// Each internal node sends a command left when feature < threshold, right
// otherwise; a tree of depth <= kMaxContextDepth selects its leaf in as many
// comparisons, which is what a driver does (spintune_lookup_ctx()).
//
// FitContextTree() grows one for a key from its samples in time order:
//
//   1. The first (1 - validation_fraction) of the samples train, the rest
//      (the latest ones) validate: the tree is judged on commands it did not
//      see, later in time, as a table is used after it was fitted.
//   2. At a node, every feature and every candidate threshold (15
//      quantiles of the node's training values, dense in the tails: 1%, 2%,
//      5%, 10%, 20% ... 90%, 95%, 98%, 99%; both sides with at least
//      min_leaf_samples training samples) is tried: each side's wait
//      is fitted exactly as a table entry is (OptimizeWait() over the
//      histogram of the side's samples), and the split with the lowest
//      training cost J is the candidate.
//   3. The candidate is kept only if it pays on the node's validation
//      samples: with d_i = J(parent's wait, x_i) - J(side's wait, x_i), the
//      mean gain must exceed z_score standard errors (a one-sided paired
//      test) and the total gain must exceed split_penalty x the parent's
//      validation cost. On an i.i.d. key the candidate's gain is noise, so
//      the test fails and the key keeps one leaf.
//   4. Kept splits recurse, to depth max_depth.
//
// The caller refits every leaf on all of its samples (training and
// validation), as a table entry.
//
// Pure functions; thread-safe.
#ifndef SPINTUNE_MODELS_CONTEXT_TREE_H_
#define SPINTUNE_MODELS_CONTEXT_TREE_H_

#include <cstdint>
#include <array>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "models/context_features.h"
#include "models/platform_model.h"
#include "models/wait_optimizer.h"

namespace spintune {

// The depth a driver accepts (SPINTUNE_MAX_CONTEXT_DEPTH).
inline constexpr int kMaxContextDepth = 3;

// min <= feature < max; an absent bound is unbounded (min absent: from 0;
// max absent: through the largest value, kNoWriteYet included).
struct ContextCondition {
  ContextFeature feature = ContextFeature::kPrevWaitNs;
  std::optional<uint64_t> min;
  std::optional<uint64_t> max;

  bool Holds(uint64_t value) const {
    return (!min || value >= *min) && (!max || value < *max);
  }
  friend bool operator==(const ContextCondition& a, const ContextCondition& b) {
    return a.feature == b.feature && a.min == b.min && a.max == b.max;
  }
};

// Conditions that must all hold: at most one per feature, in feature order.
using ContextConditions = std::vector<ContextCondition>;

// "prev_wait_ns>=1ms inflight<2" for humans ("-" when empty).
std::string DescribeContext(const ContextConditions& conditions);

class ContextTree {
 public:
  // A child: a node index (>= 0) or a leaf, ~leaf index (< 0).
  struct Node {
    ContextFeature feature = ContextFeature::kPrevWaitNs;
    uint64_t threshold = 1;  // left: feature < threshold; >= 1
    int left = -1;
    int right = -1;
  };

  // One leaf, no node.
  ContextTree() = default;
  // REQUIRES: `nodes` in the layout of nodes() below.
  explicit ContextTree(std::vector<Node> nodes) : nodes_(std::move(nodes)) {}

  // Nodes in preorder (node 0 is the root), leaves numbered left to right:
  // the layout of the blob (docs/policy-format.md). Empty: one leaf.
  const std::vector<Node>& nodes() const { return nodes_; }
  int leaf_count() const { return static_cast<int>(nodes_.size()) + 1; }
  // Edges from the root to the deepest leaf (0 for one leaf).
  int depth() const;
  // The leaf `context` selects.
  int Route(const ContextVector& context) const;
  // Per leaf, the conditions of its path (one per feature it depends on).
  std::vector<ContextConditions> LeafConditions() const;

  // The tree whose leaves are exactly the boxes `leaves` (in this order:
  // leaf i of the result is leaves[i]), or InvalidArgument when the boxes do
  // not tile the feature space as a tree's leaves do, in that order, with
  // depth <= kMaxContextDepth. The inverse of LeafConditions().
  static absl::StatusOr<ContextTree> FromLeafConditions(
      const std::vector<ContextConditions>& leaves);

  // Adds a split of leaf `leaf` (the new leaves: `leaf`, then leaf + 1 on
  // the right; later leaves move up by one). For building trees by hand.
  // REQUIRES: 0 <= leaf < leaf_count(), threshold >= 1.
  void Split(int leaf, ContextFeature feature, uint64_t threshold);

  friend bool operator==(const ContextTree& a, const ContextTree& b);

 private:
  std::vector<Node> nodes_;
};

// One sample of a key: its completion time and the context it had.
struct ContextSample {
  uint64_t x_ns = 0;
  ContextVector context{};
};

struct ContextOptions {
  int max_depth = kMaxContextDepth;  // 0: never split
  size_t min_leaf_samples = 50;      // training samples per side of a split
  double validation_fraction = 0.3;
  double z_score = 2.5;
  double split_penalty = 0.002;      // of the parent's validation cost
  // Features the tree may use (index ContextFeature).
  std::array<bool, kContextFeatureCount> features = {true, true, true, true};
  // For upper bounds only (spintune-bench's oracle): no held-out part, every
  // sample trains and splits are judged on the samples they were fitted on
  // (validation_fraction ignored). Never for a table that is used.
  bool in_sample = false;
  // Candidate thresholds: 0: the 15 quantiles of step 2; n >= 2: every
  // 1/n quantile (n - 1 candidates per feature and node).
  size_t dense_cuts = 0;
};

struct ContextFit {
  ContextTree tree;
  // Per leaf, the indexes (into the samples) of all samples it selects.
  std::vector<std::vector<size_t>> leaf_samples;
};

// The tree for one key. `samples` in time order. Options as OptimizeWait().
// Errors: those of OptimizeWait() on the whole key (InvalidArgument,
// FailedPrecondition).
absl::StatusOr<ContextFit> FitContextTree(absl::Span<const ContextSample> samples,
                                          const PlatformModel& model,
                                          const OptimizerOptions& options,
                                          const ContextOptions& context_options);

}  // namespace spintune

#endif  // SPINTUNE_MODELS_CONTEXT_TREE_H_
