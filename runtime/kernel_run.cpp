// run_kernel: calls a kernel of the backend this library is built with from a
// KernelCall, unpacking each argument by the kernel's own parameter type.

#include <utility>

#include "runtime/kernel_call.h"
#include "runtime/kernel_params.h"
#include "runtime/ops.h"

namespace mplan::rt {
namespace {

template <typename... P, size_t... I>
void invoke(void (*fn)(const Context&, P...), const Context& ctx, const std::vector<Arg>& args, const Bindings& b,
            std::index_sequence<I...>) {
  fn(ctx, detail::Param<P>::get(args[I], b)...);
}

template <typename... P>
void invoke(void (*fn)(const Context&, P...), const Context& ctx, const std::vector<Arg>& args, const Bindings& b) {
  invoke(fn, ctx, args, b, std::index_sequence_for<P...>{});
}

using Runner = void (*)(const Context&, const std::vector<Arg>&, const Bindings&);

constexpr Runner kRunners[] = {
#define MPLAN_KERNEL(name, ...) \
  [](const Context& ctx, const std::vector<Arg>& args, const Bindings& b) { invoke(&name, ctx, args, b); },
#include "runtime/kernels.def"
#undef MPLAN_KERNEL
};
static_assert(std::size(kRunners) == kKernelCount);

}  // namespace

void run_kernel(const Context& ctx, const KernelCall& call, const Bindings& bindings) {
  const std::string why = check_kernel_call(call, bindings.slot_count);
  MPLAN_RT_CHECK(why.empty(), why.c_str());
  kRunners[static_cast<int>(call.kernel)](ctx, call.args, bindings);
}

}  // namespace mplan::rt
