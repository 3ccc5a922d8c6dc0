#pragma once
// Pieces of the generated program's text shared by the emitter's parts
// (codegen-internal): named constants for shapes and micro-batch lists, and
// the C++ text of a kernel argument.

#include <map>
#include <string>
#include <vector>

#include "runtime/kernel_call.h"

namespace mplan::codegen {

// Constants that calls share, each written once at the top of the program:
// `constexpr ConvShape kConv3 = {...};  // n=32 c=64 ...`.
class SharedConstants {
 public:
  std::string conv_shape(const rt::ConvShape& shape);
  std::string pool_shape(const rt::PoolShape& shape);
  std::string micro_batches(const std::vector<rt::ConvMicroBatch>& micro, const std::vector<std::string>& names);
  // Every definition, in the order of first use.
  const std::string& text() const { return text_; }

 private:
  std::map<std::string, std::string> names_;  // definition body -> name
  std::string text_;
  int conv_count_ = 0, pool_count_ = 0, micro_count_ = 0;
};

// A float as a C++ literal that reads back as the same float: 2 -> "2.0f".
std::string float_literal(double value);

// The text of one kernel argument (not a tensor: the caller prints those).
// `first_sample` is the expression of the round's first sample.
std::string scalar_argument(const rt::Arg& arg, rt::ParamType type, SharedConstants& constants,
                            const std::vector<std::string>& algorithm_names, const std::string& first_sample);

}  // namespace mplan::codegen
