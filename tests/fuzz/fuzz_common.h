#pragma once
// Shared by the fuzz targets: the small model the plan and
// profile targets check their inputs against. Each target is built twice:
// as a libFuzzer binary (bench/fuzz.sh, clang) and as a replay test over its
// regression inputs and seed corpus (ctest, any compiler; replay_main.cpp).

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "frontend/parse.h"
#include "tdfg/tdfg.h"

namespace mplan::fuzz {

inline constexpr const char* kTinyModel =
    "name: tiny\ninput: [3, 8, 8]\nbatch: 4\nclasses: 10\nlayers:\n"
    "  - {name: c1, op: conv, out: 4, kernel: 3, pad: 1}\n  - {name: r1, op: relu}\n"
    "  - {name: p1, op: pool, mode: max, kernel: 2}\n  - {name: f, op: flatten}\n"
    "  - {name: fc, op: linear, out: 10}\n  - {name: loss, op: softmax_xent}\n";

// The tiny model and its TDFG, built once.
struct Tiny {
  std::unique_ptr<Model> model;
  Tdfg tdfg;
};
inline const Tiny& tiny() {
  static const Tiny t = [] {
    Tiny out;
    out.model = std::make_unique<Model>(parse_model(kTinyModel, "tiny.yaml").value());
    out.tdfg = build_tdfg(*out.model);
    return out;
  }();
  return t;
}

}  // namespace mplan::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
