#pragma once
// Tiny models built in code for the TDFG tests: layers are written as a table
// with their inputs by name, then validated (shapes inferred) by the frontend.

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "ops/model.h"
#include "frontend/parse.h"
#include "tdfg/tdfg.h"

namespace mplan::testing {

struct LayerSpec {
  Layer layer;
  std::vector<std::string> in;  // empty: the previous layer (or the input)
};

inline LayerSpec conv(std::string name, int64_t out, int64_t kernel, int64_t pad,
                      std::vector<std::string> in = {}) {
  LayerSpec spec{{}, std::move(in)};
  spec.layer.name = std::move(name);
  spec.layer.op = Op::conv;
  spec.layer.out = out;
  spec.layer.window = Window{kernel, kernel, 1, 1, pad, pad};
  return spec;
}

inline LayerSpec linear(std::string name, int64_t out, std::vector<std::string> in = {}) {
  LayerSpec spec{{}, std::move(in)};
  spec.layer.name = std::move(name);
  spec.layer.op = Op::linear;
  spec.layer.out = out;
  return spec;
}

inline LayerSpec pool(std::string name, PoolMode mode, int64_t kernel,
                      std::vector<std::string> in = {}) {
  LayerSpec spec{{}, std::move(in)};
  spec.layer.name = std::move(name);
  spec.layer.op = Op::pool;
  spec.layer.pool_mode = mode;
  spec.layer.window = Window{kernel, kernel, kernel, kernel, 0, 0};
  return spec;
}

// Any op whose fields keep their defaults (relu, batchnorm, add, loss, ...).
inline LayerSpec plain(std::string name, Op op, std::vector<std::string> in = {}) {
  LayerSpec spec{{}, std::move(in)};
  spec.layer.name = std::move(name);
  spec.layer.op = op;
  return spec;
}

// A validated model; aborts the test binary when the table is not a valid model.
inline Model make_model(Shape input, int64_t classes, std::vector<LayerSpec> specs,
                        int64_t batch = 2, double momentum = 0.0) {
  Model model;
  model.name = "tiny";
  model.input = std::move(input);
  model.classes = classes;
  model.batch = batch;
  model.optimizer.momentum = momentum;
  for (size_t i = 0; i < specs.size(); ++i) {
    Layer layer = specs[i].layer;
    if (specs[i].in.empty()) {
      layer.inputs = {static_cast<LayerId>(i) - 1};  // the previous layer; -1 is the input
    } else {
      for (const std::string& name : specs[i].in) {
        LayerId from = name == "input" ? kModelInput : model.find(name);
        MPLAN_CHECK(name == "input" || from >= 0, "tiny model: unknown input " + name);
        layer.inputs.push_back(from);
      }
    }
    model.layers.push_back(std::move(layer));
  }
  Status status = validate_model(model);
  MPLAN_CHECK(status.ok(), status.ok() ? "" : status.error().to_string());
  return model;
}

// Names of the blocks a task reads / writes, as a set (order is checked elsewhere).
inline std::set<std::string> block_names(const Tdfg& tdfg, const std::vector<BlockId>& ids) {
  std::set<std::string> names;
  for (BlockId b : ids) names.insert(tdfg.blocks.at(b).name);
  return names;
}

inline TaskId find_task(const Tdfg& tdfg, const std::string& name) {
  for (TaskId t = 0; t < static_cast<TaskId>(tdfg.tasks.size()); ++t)
    if (tdfg.tasks[t].name == name) return t;
  return kNoTask;
}

inline BlockId find_block(const Tdfg& tdfg, const std::string& name) {
  for (BlockId b = 0; b < static_cast<BlockId>(tdfg.blocks.size()); ++b)
    if (tdfg.blocks[b].name == name) return b;
  return kNoBlock;
}

}  // namespace mplan::testing
