#pragma once
// How a C++ parameter type of a kernel maps to a ParamType and takes its value
// from an Arg (runtime-internal: kernel_call.cpp and kernel_run.cpp).

#include <cstddef>
#include <type_traits>

#include "runtime/check.h"
#include "runtime/kernel_call.h"

namespace mplan::rt::detail {

template <typename T>
struct Param;

template <typename T, ParamType kType>
struct PointerParam {
  static constexpr ParamType type = kType;
  static T get(const Arg& a, const Bindings& b) {
    if (a.kind == ArgKind::null_pointer) return nullptr;
    using Element = std::remove_pointer_t<T>;
    auto* base = static_cast<std::conditional_t<std::is_const_v<Element>, const std::byte*, std::byte*>>(
        b.slots[a.slot]);
    const int64_t size = std::is_void_v<Element> ? 1 : sizeof(std::conditional_t<std::is_void_v<Element>, char, Element>);
    return reinterpret_cast<T>(base + a.offset_elements * size);
  }
};
template <> struct Param<const float*> : PointerParam<const float*, ParamType::const_f32> {};
template <> struct Param<float*> : PointerParam<float*, ParamType::f32> {};
template <> struct Param<const int32_t*> : PointerParam<const int32_t*, ParamType::const_i32> {};
template <> struct Param<int32_t*> : PointerParam<int32_t*, ParamType::i32> {};
template <> struct Param<const uint8_t*> : PointerParam<const uint8_t*, ParamType::const_u8> {};
template <> struct Param<uint8_t*> : PointerParam<uint8_t*, ParamType::u8> {};
template <> struct Param<void*> : PointerParam<void*, ParamType::bytes> {};

inline int64_t variable_integer(const Arg& a, const Bindings& b) {
  switch (a.variable) {
    case Variable::seed: return static_cast<int64_t>(b.seed);
    case Variable::step: return static_cast<int64_t>(b.step);
    case Variable::first_sample: return b.first_sample;
    case Variable::first_update: return b.first_update ? 1 : 0;
    case Variable::lr: break;
  }
  MPLAN_RT_CHECK(false, "a real variable bound to an integer parameter");
  return 0;
}

template <>
struct Param<int64_t> {
  static constexpr ParamType type = ParamType::i64;
  static int64_t get(const Arg& a, const Bindings& b) {
    return a.kind == ArgKind::variable ? variable_integer(a, b) : a.integer;
  }
};
template <>
struct Param<ConvAlgoId> {
  static constexpr ParamType type = ParamType::algorithm;
  static ConvAlgoId get(const Arg& a, const Bindings&) { return static_cast<ConvAlgoId>(a.integer); }
};
template <>
struct Param<uint64_t> {
  static constexpr ParamType type = ParamType::u64;
  static uint64_t get(const Arg& a, const Bindings& b) {
    return static_cast<uint64_t>(a.kind == ArgKind::variable ? variable_integer(a, b) : a.integer);
  }
};
template <>
struct Param<float> {
  static constexpr ParamType type = ParamType::real;
  static float get(const Arg& a, const Bindings& b) {
    if (a.kind == ArgKind::variable) {
      MPLAN_RT_CHECK(a.variable == Variable::lr, "an integer variable bound to a float parameter");
      return b.lr;
    }
    return static_cast<float>(a.real);
  }
};
template <>
struct Param<bool> {
  static constexpr ParamType type = ParamType::flag;
  static bool get(const Arg& a, const Bindings& b) {
    return a.kind == ArgKind::variable ? variable_integer(a, b) != 0 : a.flag;
  }
};
template <>
struct Param<const ConvShape&> {
  static constexpr ParamType type = ParamType::conv_shape;
  static const ConvShape& get(const Arg& a, const Bindings&) { return a.conv; }
};
template <>
struct Param<const PoolShape&> {
  static constexpr ParamType type = ParamType::pool_shape;
  static const PoolShape& get(const Arg& a, const Bindings&) { return a.pool; }
};
template <>
struct Param<MicroBatches> {
  static constexpr ParamType type = ParamType::micro_batches;
  static MicroBatches get(const Arg& a, const Bindings&) {
    return MicroBatches{a.micro.data(), static_cast<int32_t>(a.micro.size())};
  }
};

}  // namespace mplan::rt::detail
