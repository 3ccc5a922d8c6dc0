#pragma once
// Small models for the profiler's tests, written as model YAML.

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "frontend/parse.h"
#include "profiler/device.h"

namespace mplan::test {

// A shipped device file by name; the test stops where it does not load.
inline Device device_or_die(const std::string& name) {
  Result<Device> device = load_device(name);
  EXPECT_TRUE(device.ok()) << (device.ok() ? "" : device.error().to_string());
  if (!device.ok()) std::abort();
  return *device;
}

// A CIFAR-size CNN: every op kind the analytic model costs, two identical
// 3x3 convs (one signature), a max-pool, batchnorm, dropout, a residual add,
// a concat and the classifier.
inline const char* kSmallCnn = R"(
name: small_cnn
input: [3, 32, 32]
batch: 16
classes: 10
layers:
  - {name: conv1, op: conv, out: 16, kernel: 3, pad: 1}
  - {name: bn1, op: batchnorm}
  - {name: relu1, op: relu}
  - {name: conv2, op: conv, out: 16, kernel: 3, pad: 1}
  - {name: relu2, op: relu}
  - {name: conv3, op: conv, out: 16, kernel: 3, pad: 1}
  - {name: add, op: add, in: [conv3, relu1]}
  - {name: conv4, op: conv, out: 16, kernel: 3, pad: 1, in: relu1}
  - {name: cat, op: concat, in: [add, conv4]}
  - {name: pool, op: pool, mode: max, kernel: 2}
  - {name: lrn, op: lrn}
  - {name: conv5, op: conv, out: 32, kernel: 5, stride: 2, pad: 2}
  - {name: gap, op: global_avgpool}
  - {name: flat, op: flatten}
  - {name: drop, op: dropout}
  - {name: fc, op: linear, out: 10}
  - {name: loss, op: softmax_xent}
)";

inline Model parse_or_die(const std::string& yaml, const std::string& name = "test.yaml") {
  Result<Model> model = parse_model(yaml, name);
  EXPECT_TRUE(model.ok()) << (model.ok() ? "" : model.error().to_string());
  if (!model.ok()) std::abort();
  return std::move(model).value();
}

}  // namespace mplan::test
