#include "search/prior/group_centering.hpp"

#include <stdexcept>
#include <unordered_map>

namespace ptxevo::search::prior {

GroupCentering::GroupCentering(std::span<const GroupId> groups, const Eigen::VectorXd& w) : w_(w) {
  if (static_cast<Eigen::Index>(groups.size()) != w.size())
    throw std::invalid_argument("GroupCentering: groups and weights differ in size");
  if (!w.allFinite() || (w.array() < 0).any()) throw std::invalid_argument("GroupCentering: bad weight");
  std::unordered_map<GroupId, std::size_t> index;
  row_group_.reserve(groups.size());
  for (const GroupId g : groups) {
    const auto [it, inserted] = index.try_emplace(g, ids_.size());
    if (inserted) ids_.push_back(g);
    row_group_.push_back(it->second);
  }
  group_weight_ = Eigen::VectorXd::Zero(static_cast<Eigen::Index>(ids_.size()));
  for (std::size_t i = 0; i < row_group_.size(); ++i)
    group_weight_(static_cast<Eigen::Index>(row_group_[i])) += w_(static_cast<Eigen::Index>(i));
}

std::size_t GroupCentering::n_weighted_groups() const {
  return static_cast<std::size_t>((group_weight_.array() > 0).count());
}

Eigen::VectorXd GroupCentering::effective_weights() const {
  Eigen::VectorXd e = w_;
  for (std::size_t i = 0; i < row_group_.size(); ++i)
    if (!(group_weight_(static_cast<Eigen::Index>(row_group_[i])) > 0)) e(static_cast<Eigen::Index>(i)) = 1.0;
  return e;
}

Eigen::MatrixXd GroupCentering::feature_means(const Eigen::MatrixXd& X) const {
  if (X.rows() != static_cast<Eigen::Index>(n_rows())) throw std::invalid_argument("GroupCentering: row count differs");
  const Eigen::VectorXd e = effective_weights();
  Eigen::MatrixXd sums = Eigen::MatrixXd::Zero(static_cast<Eigen::Index>(n_groups()), X.cols());
  Eigen::VectorXd totals = Eigen::VectorXd::Zero(static_cast<Eigen::Index>(n_groups()));
  for (std::size_t i = 0; i < n_rows(); ++i) {
    const auto g = static_cast<Eigen::Index>(row_group_[i]);
    const auto r = static_cast<Eigen::Index>(i);
    sums.row(g) += e(r) * X.row(r);
    totals(g) += e(r);
  }
  return sums.array().colwise() / totals.array();
}

Eigen::VectorXd GroupCentering::target_means(const Eigen::VectorXd& y) const { return feature_means(y); }

Eigen::MatrixXd GroupCentering::center_features(const Eigen::MatrixXd& X) const {
  const Eigen::MatrixXd means = feature_means(X);
  Eigen::MatrixXd out = X;
  for (std::size_t i = 0; i < n_rows(); ++i)
    out.row(static_cast<Eigen::Index>(i)) -= means.row(static_cast<Eigen::Index>(row_group_[i]));
  return out;
}

Eigen::VectorXd GroupCentering::center_target(const Eigen::VectorXd& y) const { return center_features(y); }

}  // namespace ptxevo::search::prior
