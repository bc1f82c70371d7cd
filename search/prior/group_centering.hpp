// Per-group centring (docs/prior_study.md 5.3, 5.5): the cost model ranks candidates within a group
// g = (campaign, shape), so each group's level is a nuisance parameter. Subtracting the group's
// weighted mean from y and from every feature column is the fixed-effects estimator (an
// unpenalized intercept per group, by Frisch-Waugh-Lovell), and least squares on the centred
// data equals least-squares pairwise ranking within the groups.
#pragma once

#include <Eigen/Dense>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace ptxevo::search::prior {

// One set of rows ranked against each other, e.g. one (campaign, shape) pair; the caller numbers
// the pairs (any distinct integers).
using GroupId = std::int64_t;

class GroupCentering {
 public:
  // Finds the distinct groups (dense indices in order of first appearance) and their total
  // weights. Throws std::invalid_argument on a size mismatch or a negative/non-finite weight.
  GroupCentering(std::span<const GroupId> groups, const Eigen::VectorXd& w);

  std::size_t n_rows() const { return row_group_.size(); }
  std::size_t n_groups() const { return ids_.size(); }
  // Groups with positive total weight: the number of levels the data actually pins down.
  std::size_t n_weighted_groups() const;
  const std::vector<GroupId>& ids() const { return ids_; }
  const std::vector<std::size_t>& row_group() const { return row_group_; }  // dense index per row
  const Eigen::VectorXd& group_weight() const { return group_weight_; }

  // Weighted mean per group (a group of zero total weight uses the plain mean of its rows, so
  // its centred rows still read as deviations even though they carry no weight).
  Eigen::VectorXd target_means(const Eigen::VectorXd& y) const;
  Eigen::MatrixXd feature_means(const Eigen::MatrixXd& X) const;  // n_groups x columns

  Eigen::VectorXd center_target(const Eigen::VectorXd& y) const;
  Eigen::MatrixXd center_features(const Eigen::MatrixXd& X) const;

 private:
  Eigen::VectorXd effective_weights() const;  // w, or 1 for the rows of zero-weight groups

  std::vector<GroupId> ids_;
  std::vector<std::size_t> row_group_;
  Eigen::VectorXd w_;
  Eigen::VectorXd group_weight_;
};

}  // namespace ptxevo::search::prior
