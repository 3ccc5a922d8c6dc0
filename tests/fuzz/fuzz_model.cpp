// Fuzz target: the model parser (frontend/parse.h), then what every command
// does with a parsed model: the TDFG and its memory bounds at the model's
// batch (tdfg/bounds.h).

#include "tdfg/bounds.h"
#include "tests/fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  mplan::Result<mplan::Model> model = mplan::parse_model(text, "fuzz.yaml");
  if (!model.ok()) {
    (void)model.error().to_string();
    return 0;
  }
  const mplan::Tdfg tdfg = mplan::build_tdfg(*model);
  (void)mplan::compute_bounds(tdfg, model->batch);
  return 0;
}
