// The complete example of docs/model-format.md parses, and means what the
// page says it means. The example is read from the page itself (the first
// ```yaml block after "## Complete example"), so the page cannot go stale.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "frontend/parse.h"

namespace mplan {
namespace {

std::string docs_example() {
  std::ifstream in(std::string(MPLAN_SOURCE_DIR) + "/docs/model-format.md");
  std::stringstream text;
  text << in.rdbuf();
  std::string page = text.str();
  size_t section = page.find("## Complete example");
  size_t begin = page.find("```yaml\n", section);
  size_t end = page.find("```\n", begin + 8);
  if (section == std::string::npos || begin == std::string::npos || end == std::string::npos)
    return "";
  return page.substr(begin + 8, end - begin - 8);
}

TEST(DocsExample, ParsesAndHasTheDocumentedShapes) {
  std::string yaml = docs_example();
  ASSERT_FALSE(yaml.empty()) << "no ```yaml block after '## Complete example' in docs/model-format.md";
  Result<Model> r = parse_model(yaml, "docs/model-format.md");
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  const Model& m = *r;
  EXPECT_EQ(m.name, "tiny_resnet");
  EXPECT_EQ(m.batch, 64);
  EXPECT_DOUBLE_EQ(m.optimizer.weight_decay, 5e-4);
  auto output = [&](const std::string& name) {
    LayerId id = m.find(name);
    EXPECT_GE(id, 0) << name;
    return id >= 0 ? m.layers[id].output : Shape{};
  };
  EXPECT_EQ(m.layers.front().name, "stem.conv");
  EXPECT_EQ(output("stem"), (Shape{{16, 32, 32}}));
  EXPECT_EQ(output("stage1.1.relu"), (Shape{{16, 32, 32}}));
  EXPECT_EQ(output("down2"), (Shape{{32, 16, 16}}));
  EXPECT_GE(m.find("stage2.1.a.conv"), 0);  // repeat "3 - 1" = 2
  EXPECT_LT(m.find("stage2.2.a.conv"), 0);
  EXPECT_EQ(output("join"), (Shape{{64, 16, 16}}));
  EXPECT_EQ(output("down3"), (Shape{{64, 8, 8}}));
  EXPECT_EQ(output("pool_1"), (Shape{{64, 4, 4}}));
  EXPECT_EQ(output("flatten_1"), (Shape{{64}}));
  EXPECT_EQ(m.layers.back().name, "loss");
  EXPECT_EQ(m.layers.back().inputs, std::vector<LayerId>{m.find("fc")});
}

}  // namespace
}  // namespace mplan
