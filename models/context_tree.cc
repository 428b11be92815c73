#include "models/context_tree.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "models/latency_histogram.h"
#include "models/wait_distribution.h"

namespace spintune {
namespace {

// A tree while it is built or rearranged; serialized into nodes in preorder.
struct Draft {
  bool leaf = true;
  ContextFeature feature = ContextFeature::kPrevWaitNs;
  uint64_t threshold = 1;
  std::unique_ptr<Draft> left, right;
  std::vector<size_t> samples;  // FitContextTree: the leaf's samples
};

// Appends `d`'s subtree in preorder; returns its child reference.
int Serialize(Draft* d, std::vector<ContextTree::Node>* nodes, int* leaves,
              std::vector<std::vector<size_t>>* leaf_samples) {
  if (d->leaf) {
    if (leaf_samples != nullptr) leaf_samples->push_back(std::move(d->samples));
    return ~(*leaves)++;
  }
  const int at = static_cast<int>(nodes->size());
  nodes->push_back({d->feature, d->threshold, 0, 0});
  const int left = Serialize(d->left.get(), nodes, leaves, leaf_samples);
  const int right = Serialize(d->right.get(), nodes, leaves, leaf_samples);
  (*nodes)[at].left = left;
  (*nodes)[at].right = right;
  return at;
}

std::unique_ptr<Draft> Deserialize(const std::vector<ContextTree::Node>& nodes, int child) {
  auto d = std::make_unique<Draft>();
  if (child < 0) return d;
  const ContextTree::Node& n = nodes[child];
  d->leaf = false;
  d->feature = n.feature;
  d->threshold = n.threshold;
  d->left = Deserialize(nodes, n.left);
  d->right = Deserialize(nodes, n.right);
  return d;
}

// The in-order `*leaf`-th leaf of `d`, or nullptr.
Draft* FindLeaf(Draft* d, int* leaf) {
  if (d->leaf) return (*leaf)-- == 0 ? d : nullptr;
  if (Draft* l = FindLeaf(d->left.get(), leaf)) return l;
  return FindLeaf(d->right.get(), leaf);
}

int Depth(const std::vector<ContextTree::Node>& nodes, int child) {
  if (child < 0) return 0;
  return 1 + std::max(Depth(nodes, nodes[child].left), Depth(nodes, nodes[child].right));
}

// One box of the feature space: per feature [lo, hi), hi absent = unbounded.
struct Cell {
  std::array<uint64_t, kContextFeatureCount> lo{};
  std::array<std::optional<uint64_t>, kContextFeatureCount> hi{};
};

ContextConditions ConditionsOf(const Cell& cell) {
  ContextConditions out;
  for (int f = 0; f < kContextFeatureCount; ++f) {
    if (cell.lo[f] == 0 && !cell.hi[f]) continue;
    ContextCondition c;
    c.feature = static_cast<ContextFeature>(f);
    if (cell.lo[f] > 0) c.min = cell.lo[f];
    c.max = cell.hi[f];
    out.push_back(c);
  }
  return out;
}

Cell CellOf(const ContextConditions& conditions) {
  Cell cell;
  for (const auto& c : conditions) {
    const int f = static_cast<int>(c.feature);
    cell.lo[f] = c.min.value_or(0);
    cell.hi[f] = c.max;
  }
  return cell;
}

bool SameCell(const Cell& a, const Cell& b) { return a.lo == b.lo && a.hi == b.hi; }

void CollectConditions(const std::vector<ContextTree::Node>& nodes, int child, Cell cell,
                       std::vector<ContextConditions>* out) {
  if (child < 0) {
    out->push_back(ConditionsOf(cell));
    return;
  }
  const ContextTree::Node& n = nodes[child];
  const int f = static_cast<int>(n.feature);
  Cell left = cell, right = cell;
  left.hi[f] = n.threshold;
  right.lo[f] = n.threshold;
  CollectConditions(nodes, n.left, left, out);
  CollectConditions(nodes, n.right, right, out);
}

int DraftDepth(const Draft& d) {
  return d.leaf ? 0 : 1 + std::max(DraftDepth(*d.left), DraftDepth(*d.right));
}

// Rebuilds leaves [first, last) of `leaves` inside `cell`: of the trees
// whose leaves they are, in order, one of least depth.
absl::StatusOr<std::unique_ptr<Draft>> Rebuild(const std::vector<Cell>& leaves, size_t first,
                                               size_t last, const Cell& cell) {
  auto d = std::make_unique<Draft>();
  if (last - first == 1) {
    if (!SameCell(leaves[first], cell)) {
      return absl::InvalidArgumentError(
          absl::StrCat("context leaf ", first,
                       " is not the cell its neighbours leave it (leaves must tile the "
                       "feature space as a tree's leaves do, in tree order)"));
    }
    return d;
  }
  // A cut between leaf k - 1 and leaf k: every leaf before k ends at or
  // below t on feature f, every leaf from k on starts at or above it.
  absl::Status refusal = absl::InvalidArgumentError(absl::StrCat(
      "context leaves ", first, "..", last - 1,
      " cannot be split by one threshold (leaves must tile the feature space as a tree's "
      "leaves do, in tree order)"));
  std::unique_ptr<Draft> best;
  for (int f = 0; f < kContextFeatureCount; ++f) {
    for (size_t k = first + 1; k < last; ++k) {
      const uint64_t t = leaves[k].lo[f];
      if (t <= cell.lo[f] || (cell.hi[f] && t >= *cell.hi[f])) continue;
      bool ok = true;
      for (size_t i = first; ok && i < k; ++i) ok = leaves[i].hi[f] && *leaves[i].hi[f] <= t;
      for (size_t i = k; ok && i < last; ++i) ok = leaves[i].lo[f] >= t;
      if (!ok) continue;
      Cell left = cell, right = cell;
      left.hi[f] = t;
      right.lo[f] = t;
      auto l = Rebuild(leaves, first, k, left);
      auto r = l.ok() ? Rebuild(leaves, k, last, right) : l.status();
      if (!r.ok()) {
        refusal = r.status();
        continue;
      }
      auto cut = std::make_unique<Draft>();
      cut->leaf = false;
      cut->feature = static_cast<ContextFeature>(f);
      cut->threshold = t;
      cut->left = std::move(*l);
      cut->right = std::move(*r);
      if (!best || DraftDepth(*cut) < DraftDepth(*best)) best = std::move(cut);
    }
  }
  if (!best) return refusal;
  return best;
}

// ---- Fitting ----

// Candidate thresholds: these quantiles of a node's training values, dense
// in the tails so that a rare state (a busy episode, 2-5% of the commands)
// can have a leaf of its own.
constexpr double kCutQuantiles[] = {0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5,
                                    0.6,  0.7,  0.8,  0.9, 0.95, 0.98, 0.99};

class Grower {
 public:
  Grower(absl::Span<const ContextSample> samples, const PlatformModel& model,
         const OptimizerOptions& options, const ContextOptions& copt)
      : samples_(samples), model_(model), options_(options), copt_(copt) {
    if (copt.dense_cuts > 0) {
      for (size_t k = 1; k < copt.dense_cuts; ++k) {
        quantiles_.push_back(static_cast<double>(k) / static_cast<double>(copt.dense_cuts));
      }
    } else {
      quantiles_.assign(std::begin(kCutQuantiles), std::end(kCutQuantiles));
    }
  }

  // The wait fitted on `idx`, as a table entry is fitted; its mean cost J.
  absl::StatusOr<OptimizerResult> Fit(const std::vector<size_t>& idx) {
    std::vector<uint64_t> x;
    x.reserve(idx.size());
    for (size_t i : idx) x.push_back(samples_[i].x_ns);
    std::sort(x.begin(), x.end());
    LatencyHistogram h;
    for (uint64_t v : x) h.Record(v);
    return OptimizeWait(WaitDistribution::FromHistogram(h), model_, options_);
  }

  double Cost(uint64_t x_ns, const WaitParams& w) const {
    const RequestCost c = ExpectedRequestCost(static_cast<double>(x_ns), w, model_);
    return c.cpu_ns + options_.objective.latency_weight * c.latency_ns;
  }

  // Grows `node` (a leaf holding `train` and `valid`) at `depth`.
  absl::Status Grow(Draft* node, std::vector<size_t> train, std::vector<size_t> valid,
                    int depth) {
    node->samples = train;
    if (!copt_.in_sample) node->samples.insert(node->samples.end(), valid.begin(), valid.end());
    if (depth >= copt_.max_depth || train.size() < 2 * copt_.min_leaf_samples ||
        valid.empty()) {
      return absl::OkStatus();
    }
    auto parent = Fit(train);
    if (!parent.ok()) return parent.status();

    struct Candidate {
      int feature = -1;
      uint64_t threshold = 0;
      double train_cost = 0;
      WaitParams left, right;
    } best;
    best.train_cost = parent->cost_ns * static_cast<double>(train.size());
    for (int f = 0; f < kContextFeatureCount; ++f) {
      if (!copt_.features[f]) continue;
      std::vector<uint64_t> values;
      values.reserve(train.size());
      for (size_t i : train) values.push_back(samples_[i].context[f]);
      std::sort(values.begin(), values.end());
      uint64_t last_cut = values.front();  // a cut must leave something on the left
      for (double q : quantiles_) {
        const size_t at = std::min(values.size() - 1,
                                   static_cast<size_t>(q * static_cast<double>(values.size())));
        const uint64_t t = values[at];
        if (t <= last_cut) continue;
        last_cut = t;
        const size_t left_count =
            static_cast<size_t>(std::lower_bound(values.begin(), values.end(), t) -
                                values.begin());
        if (left_count < copt_.min_leaf_samples ||
            values.size() - left_count < copt_.min_leaf_samples) {
          continue;
        }
        std::vector<size_t> l, r;
        for (size_t i : train) (samples_[i].context[f] < t ? l : r).push_back(i);
        auto fl = Fit(l);
        auto fr = Fit(r);
        if (!fl.ok() || !fr.ok()) continue;  // e.g. a side with no feasible wait
        const double cost = fl->cost_ns * static_cast<double>(l.size()) +
                            fr->cost_ns * static_cast<double>(r.size());
        if (cost < best.train_cost) best = {f, t, cost, fl->params, fr->params};
      }
    }
    if (best.feature < 0) return absl::OkStatus();

    // Does the split pay on commands it was not fitted on?
    double sum = 0, sum_sq = 0, parent_cost = 0;
    std::vector<size_t> valid_left, valid_right;
    for (size_t i : valid) {
      const bool left = samples_[i].context[best.feature] < best.threshold;
      (left ? valid_left : valid_right).push_back(i);
      const double before = Cost(samples_[i].x_ns, parent->params);
      const double d = before - Cost(samples_[i].x_ns, left ? best.left : best.right);
      sum += d;
      sum_sq += d * d;
      parent_cost += before;
    }
    const double n = static_cast<double>(valid.size());
    const double mean = sum / n;
    const double variance = n > 1 ? std::max(0.0, (sum_sq - n * mean * mean) / (n - 1)) : 0;
    const bool significant = mean > copt_.z_score * std::sqrt(variance / n);
    if (!significant || sum <= copt_.split_penalty * parent_cost) return absl::OkStatus();

    std::vector<size_t> train_left, train_right;
    for (size_t i : train) {
      (samples_[i].context[best.feature] < best.threshold ? train_left : train_right)
          .push_back(i);
    }
    node->leaf = false;
    node->samples.clear();
    node->feature = static_cast<ContextFeature>(best.feature);
    node->threshold = best.threshold;
    node->left = std::make_unique<Draft>();
    node->right = std::make_unique<Draft>();
    absl::Status s =
        Grow(node->left.get(), std::move(train_left), std::move(valid_left), depth + 1);
    if (!s.ok()) return s;
    return Grow(node->right.get(), std::move(train_right), std::move(valid_right), depth + 1);
  }

 private:
  absl::Span<const ContextSample> samples_;
  const PlatformModel& model_;
  const OptimizerOptions& options_;
  const ContextOptions& copt_;
  std::vector<double> quantiles_;  // candidate thresholds, quantiles of a node's values
};

std::string FormatBound(ContextFeature f, uint64_t v) {
  if (f == ContextFeature::kInflight || f == ContextFeature::kBytes) return absl::StrCat(v);
  if (v >= 1'000'000) return absl::StrFormat("%gms", static_cast<double>(v) / 1e6);
  if (v >= 1'000) return absl::StrFormat("%gus", static_cast<double>(v) / 1e3);
  return absl::StrCat(v, "ns");
}

}  // namespace

std::string DescribeContext(const ContextConditions& conditions) {
  std::string out;
  for (const auto& c : conditions) {
    const absl::string_view name = ContextFeatureName(c.feature);
    if (!out.empty()) out += ' ';
    if (c.min && c.max) {
      absl::StrAppend(&out, FormatBound(c.feature, *c.min), "<=", name, "<",
                      FormatBound(c.feature, *c.max));
    } else if (c.min) {
      absl::StrAppend(&out, name, ">=", FormatBound(c.feature, *c.min));
    } else if (c.max) {
      absl::StrAppend(&out, name, "<", FormatBound(c.feature, *c.max));
    }
  }
  return out.empty() ? "-" : out;
}

int ContextTree::depth() const { return nodes_.empty() ? 0 : Depth(nodes_, 0); }

int ContextTree::Route(const ContextVector& context) const {
  if (nodes_.empty()) return 0;
  int child = 0;
  while (child >= 0) {
    const Node& n = nodes_[child];
    child = context[static_cast<int>(n.feature)] < n.threshold ? n.left : n.right;
  }
  return ~child;
}

std::vector<ContextConditions> ContextTree::LeafConditions() const {
  std::vector<ContextConditions> out;
  CollectConditions(nodes_, nodes_.empty() ? -1 : 0, Cell{}, &out);
  return out;
}

absl::StatusOr<ContextTree> ContextTree::FromLeafConditions(
    const std::vector<ContextConditions>& leaves) {
  if (leaves.empty()) return absl::InvalidArgumentError("no context leaves");
  // A tree a driver walks (depth <= 3) has at most 8 leaves; the rebuild
  // tries every cut, which stays cheap at that size.
  if (leaves.size() > (size_t{1} << kMaxContextDepth)) {
    return absl::InvalidArgumentError(absl::StrCat(
        leaves.size(), " context leaves: a tree of depth ", kMaxContextDepth, " has at most ",
        1 << kMaxContextDepth));
  }
  std::vector<Cell> cells;
  for (const auto& l : leaves) cells.push_back(CellOf(l));
  auto root = Rebuild(cells, 0, cells.size(), Cell{});
  if (!root.ok()) return root.status();
  ContextTree tree;
  int count = 0;
  Serialize(root->get(), &tree.nodes_, &count, nullptr);
  if (tree.depth() > kMaxContextDepth) {
    return absl::InvalidArgumentError(absl::StrCat(
        "context leaves need a tree of depth ", tree.depth(), ", more than ", kMaxContextDepth));
  }
  return tree;
}

void ContextTree::Split(int leaf, ContextFeature feature, uint64_t threshold) {
  auto root = Deserialize(nodes_, nodes_.empty() ? -1 : 0);
  int k = leaf;
  Draft* d = FindLeaf(root.get(), &k);
  d->leaf = false;
  d->feature = feature;
  d->threshold = threshold;
  d->left = std::make_unique<Draft>();
  d->right = std::make_unique<Draft>();
  nodes_.clear();
  int count = 0;
  Serialize(root.get(), &nodes_, &count, nullptr);
}

bool operator==(const ContextTree& a, const ContextTree& b) {
  if (a.nodes_.size() != b.nodes_.size()) return false;
  for (size_t i = 0; i < a.nodes_.size(); ++i) {
    const auto& x = a.nodes_[i];
    const auto& y = b.nodes_[i];
    if (x.feature != y.feature || x.threshold != y.threshold || x.left != y.left ||
        x.right != y.right) {
      return false;
    }
  }
  return true;
}

absl::StatusOr<ContextFit> FitContextTree(absl::Span<const ContextSample> samples,
                                          const PlatformModel& model,
                                          const OptimizerOptions& options,
                                          const ContextOptions& context_options) {
  if (samples.empty()) return absl::InvalidArgumentError("no samples to fit a context tree on");
  const size_t n = samples.size();
  const double share =
      context_options.in_sample ? 0.0 : std::clamp(context_options.validation_fraction, 0.0, 0.9);
  const size_t train_count =
      n - std::min(n, static_cast<size_t>(std::floor(share * static_cast<double>(n))));
  std::vector<size_t> train(train_count), valid(n - train_count);
  for (size_t i = 0; i < n; ++i) (i < train_count ? train[i] : valid[i - train_count]) = i;
  if (context_options.in_sample) valid = train;  // judged on the samples it fits
  Grower grower(samples, model, options, context_options);
  // The whole key must have a feasible wait, as for a plain entry.
  std::vector<size_t> all(n);
  for (size_t i = 0; i < n; ++i) all[i] = i;
  auto whole = grower.Fit(all);
  if (!whole.ok()) return whole.status();

  Draft root;
  absl::Status s = grower.Grow(&root, std::move(train), std::move(valid), 0);
  if (!s.ok()) return s;
  ContextFit fit;
  std::vector<ContextTree::Node> nodes;
  int leaves = 0;
  Serialize(&root, &nodes, &leaves, &fit.leaf_samples);
  fit.tree = ContextTree(std::move(nodes));
  return fit;
}

}  // namespace spintune
