#pragma once
// The 16-bit kernels of a 16-bit program (runtime/ops_sixteen_bit.h;
// docs/generated-program.md, "16-bit kernels"): a call of a 16-bit op's
// convolution or linear kernel, which the casts of ops/sixteen_bit_casts.h
// bracket with float scratch, runs instead as the kernel's 16-bit form on
// the blocks themselves, as autocast's cuDNN and cuBLAS calls do:
//
//   - a 16-bit operand (a 16-bit block, or a W block's 16-bit copy) is
//     passed as it is;
//   - a float32 input (the image, weights whose copy is made where used) is
//     first rounded into 16-bit scratch (cast_from_float);
//   - a result is written into its 16-bit block where the block takes it
//     as it is; otherwise (a float32 block, or one the task adds to) into
//     16-bit scratch, widened and stored, or added, by the casts.
//
// It computes what the bracketed call computes: bit for bit on the CPU
// backend (whose 16-bit kernels are those casts), in float with one
// rounding on CUDA. A call without a 16-bit form (micro-batched
// convolutions, a kernel that both reads and writes an operand, a result
// added in place) keeps the casts.

#include <cstdint>
#include <optional>
#include <vector>

#include "ops/sixteen_bit_casts.h"
#include "runtime/kernel_call.h"

namespace mplan {

// How the 16-bit kernel gets one operand of the bracketed call.
struct SixteenBitOperand {
  bool direct = false;          // the kernel reads or writes the block itself
  int64_t half_offset = 0;      // else: bytes into the scratch of its 16-bit values
  int64_t float_offset = -1;    // a result through scratch: bytes into the float scratch it is widened into
};

struct SixteenBitForm {
  rt::Kernel kernel = rt::Kernel::conv_forward_16;
  std::vector<size_t> args;  // the bracketed call's arguments the 16-bit kernel takes, in order (its type last)
  std::vector<SixteenBitOperand> operands;  // one per CallCasts::operands
  int64_t scratch_bytes = 0;
};

// The 16-bit form of `call`, whose casts are `casts`, in a model whose
// 16-bit type is `low`; none where the call has none.
std::optional<SixteenBitForm> sixteen_bit_form(const rt::KernelCall& call, const CallCasts& casts, DataType low);

}  // namespace mplan
