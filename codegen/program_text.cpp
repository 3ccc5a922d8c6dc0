#include "codegen/program_text.h"

#include <fmt/format.h>

#include "codegen/names.h"
#include "core/error.h"

namespace mplan::codegen {

std::string SharedConstants::conv_shape(const rt::ConvShape& s) {
  // Dilation only where it is not 1 (designated initialisers keep the default).
  const std::string dilation = s.dilation_h == 1 && s.dilation_w == 1
                                   ? ""
                                   : fmt::format(", .dilation_h = {}, .dilation_w = {}", s.dilation_h, s.dilation_w);
  const std::string body = fmt::format(
      "{{.n = {}, .c = {}, .h = {}, .w = {}, .k = {}, .r = {}, .s = {}, .stride_h = {}, .stride_w = {}, "
      ".pad_h = {}, .pad_w = {}, .groups = {}{}}}",
      s.n, s.c, s.h, s.w, s.k, s.r, s.s, s.stride_h, s.stride_w, s.pad_h, s.pad_w, s.groups, dilation);
  auto [it, inserted] = names_.emplace("conv" + body, "kConv" + std::to_string(conv_count_));
  if (inserted) {
    ++conv_count_;
    text_ += fmt::format("constexpr ConvShape {} = {};  // ({}, {}, {}, {}) -> ({}, {}, {}, {})\n", it->second, body,
                         s.n, s.c, s.h, s.w, s.n, s.k, s.p(), s.q());
  }
  return it->second;
}

std::string SharedConstants::pool_shape(const rt::PoolShape& s) {
  const std::string body = fmt::format(
      "{{.n = {}, .c = {}, .h = {}, .w = {}, .kernel_h = {}, .kernel_w = {}, .stride_h = {}, .stride_w = {}, "
      ".pad_h = {}, .pad_w = {}, .ceil_mode = {}}}",
      s.n, s.c, s.h, s.w, s.kernel_h, s.kernel_w, s.stride_h, s.stride_w, s.pad_h, s.pad_w, s.ceil_mode);
  auto [it, inserted] = names_.emplace("pool" + body, "kPool" + std::to_string(pool_count_));
  if (inserted) {
    ++pool_count_;
    text_ += fmt::format("constexpr PoolShape {} = {};  // ({}, {}, {}, {}) -> ({}, {}, {}, {})\n", it->second, body,
                         s.n, s.c, s.h, s.w, s.n, s.c, s.p(), s.q());
  }
  return it->second;
}

std::string SharedConstants::micro_batches(const std::vector<rt::ConvMicroBatch>& micro,
                                           const std::vector<std::string>& names) {
  std::string body, comment;
  for (size_t i = 0; i < micro.size(); ++i) {
    body += fmt::format("{}{{{}, {}}}", i ? ", " : "", micro[i].n, micro[i].algo);
    comment += fmt::format("{}{} x {}", i ? ", " : "", micro[i].n, i < names.size() ? names[i] : "?");
  }
  auto [it, inserted] = names_.emplace("micro" + body, "kMicro" + std::to_string(micro_count_));
  if (inserted) {
    ++micro_count_;
    text_ += fmt::format("constexpr ConvMicroBatch {}[] = {{{}}};  // {}\n", it->second, body,
                         comment_text(comment, 100));
  }
  return fmt::format("MicroBatches{{{}, {}}}", it->second, micro.size());
}

std::string float_literal(double v) {
  std::string text = fmt::format("{:.9g}", static_cast<float>(v));
  if (text.find_first_of(".e") == std::string::npos) text += ".0";
  return text + "f";
}

std::string scalar_argument(const rt::Arg& arg, rt::ParamType type, SharedConstants& constants,
                            const std::vector<std::string>& algorithm_names, const std::string& first_sample) {
  switch (arg.kind) {
    case rt::ArgKind::null_pointer: return "nullptr";
    case rt::ArgKind::integer:
      if (type == rt::ParamType::algorithm)
        return fmt::format("{} /*{}*/", arg.integer, algorithm_names.empty() ? "?" : comment_text(algorithm_names[0]));
      return std::to_string(arg.integer);
    case rt::ArgKind::real: return float_literal(arg.real);
    case rt::ArgKind::flag: return arg.flag ? "true" : "false";
    case rt::ArgKind::conv_shape: return constants.conv_shape(arg.conv);
    case rt::ArgKind::pool_shape: return constants.pool_shape(arg.pool);
    case rt::ArgKind::micro_batches: return constants.micro_batches(arg.micro, algorithm_names);
    case rt::ArgKind::variable:
      switch (arg.variable) {
        case rt::Variable::seed: return "p.seed()";
        case rt::Variable::step: return "p.step()";
        case rt::Variable::lr: return "p.lr()";
        case rt::Variable::first_update: return "p.first_update()";
        case rt::Variable::first_sample: return first_sample;
      }
      break;
    case rt::ArgKind::tensor: break;
  }
  MPLAN_CHECK(false, "scalar_argument: a tensor argument");
  return "";
}

}  // namespace mplan::codegen
