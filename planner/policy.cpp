#include "planner/policy.h"

#include <string>

namespace mplan {
namespace {

struct NamedPolicy {
  PolicyKind kind;
  const char* name;
};
constexpr NamedPolicy kPolicies[] = {
    {PolicyKind::ideal, "ideal"},
    {PolicyKind::vdnn_all_m, "vdnn-all-m"},
    {PolicyKind::vdnn_all_p, "vdnn-all-p"},
    {PolicyKind::vdnn_conv_m, "vdnn-conv-m"},
    {PolicyKind::vdnn_conv_p, "vdnn-conv-p"},
    {PolicyKind::vdnn_dyn, "vdnn-dyn"},
    {PolicyKind::vdnn_plus, "vdnn+"},
    {PolicyKind::superneurons, "superneurons"},
    {PolicyKind::checkpoint, "checkpoint"},
    {PolicyKind::dtr, "dtr"},
    {PolicyKind::checkmate, "checkmate"},
    {PolicyKind::modnn, "modnn"},
    {PolicyKind::mplan, "mplan"},
};

}  // namespace

const char* policy_name(PolicyKind kind) {
  for (const NamedPolicy& p : kPolicies)
    if (p.kind == kind) return p.name;
  return "?";
}

bool parse_policy(const std::string& name, PolicyKind* kind) {
  for (const NamedPolicy& p : kPolicies) {
    if (name == p.name) {
      *kind = p.kind;
      return true;
    }
  }
  return false;
}

bool is_vdnn_policy(PolicyKind kind) {
  return kind == PolicyKind::vdnn_all_m || kind == PolicyKind::vdnn_all_p || kind == PolicyKind::vdnn_conv_m ||
         kind == PolicyKind::vdnn_conv_p || kind == PolicyKind::vdnn_dyn || kind == PolicyKind::vdnn_plus;
}

std::vector<PolicyKind> all_policies() {
  std::vector<PolicyKind> out;
  for (const NamedPolicy& p : kPolicies) out.push_back(p.kind);
  return out;
}

std::vector<PolicyKind> baseline_policies() {
  std::vector<PolicyKind> out;
  for (const NamedPolicy& p : kPolicies)
    if (p.kind != PolicyKind::ideal && p.kind != PolicyKind::mplan) out.push_back(p.kind);
  return out;
}

}  // namespace mplan
