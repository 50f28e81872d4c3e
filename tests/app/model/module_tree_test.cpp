// ModuleTree: layers grouped by module path, each module one contiguous range of layers, in
// pre-order, with the leaf (the last two components) left to the layer.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "model/module_tree.hpp"

namespace keel::app {
namespace {

TEST(ModuleTree, ModulesNestByPathAndCoverTheirLayers) {
  ModuleTree tree;
  tree.build({"embed.weight", "blocks.0.experts.0.w1.weight", "blocks.0.experts.0.w2.weight",
              "blocks.0.experts.1.w1.weight", "blocks.0.router.weight", "blocks.1.router.weight", "head.weight"});
  // blocks, blocks.0, blocks.0.experts, blocks.0.experts.0, blocks.0.experts.1, blocks.1 (router.weight is a leaf).
  ASSERT_EQ(tree.module_count(), 6u);
  const ModuleNode& blocks = tree.module(0);
  EXPECT_EQ(blocks.path, "blocks");
  EXPECT_EQ(blocks.parent, ModuleTree::kNone);
  EXPECT_EQ(blocks.first_layer, 1u);
  EXPECT_EQ(blocks.end_layer, 6u);
  EXPECT_EQ(blocks.end_module, 6u) << "every other module is inside blocks";
  const ModuleNode& experts = tree.module(2);
  EXPECT_EQ(experts.path, "blocks.0.experts");
  EXPECT_EQ(experts.name(), "experts");
  EXPECT_EQ(experts.depth, 2);
  EXPECT_EQ(experts.parent, 1u);
  EXPECT_EQ(experts.first_layer, 1u);
  EXPECT_EQ(experts.end_layer, 4u);
  EXPECT_EQ(experts.end_module, 5u);
  EXPECT_EQ(tree.module(3).path, "blocks.0.experts.0");
  EXPECT_EQ(tree.module(3).layers(), 2u);
  EXPECT_EQ(tree.module(5).path, "blocks.1");
  EXPECT_EQ(tree.layer_parent(0), ModuleTree::kNone);
  EXPECT_EQ(tree.layer_parent(2), 3u);
  EXPECT_EQ(tree.layer_parent(4), 1u) << "blocks.0.router.weight: its leaf is router.weight";
  EXPECT_EQ(tree.leaf_offset(2), std::string("blocks.0.experts.0.").size());
  EXPECT_EQ(tree.leaf_offset(6), 0u);
}

TEST(ModuleTree, APathThatComesBackIsASecondModuleSoEachIsOneRange) {
  ModuleTree tree;
  tree.build({"a.x.weight", "b.x.weight", "a.y.weight"});
  ASSERT_EQ(tree.module_count(), 3u);
  EXPECT_EQ(tree.module(0).path, "a");
  EXPECT_EQ(tree.module(2).path, "a");
  EXPECT_EQ(tree.module(2).first_layer, 2u);
  EXPECT_EQ(tree.module(2).end_layer, 3u);
}

// A publisher naming tensors with hundreds of components cannot make the module series
// outweigh the layers': past max_modules() the rest of a path stays in the leaf.
TEST(ModuleTree, ModulesAreCappedAtTheLayerCount) {
  std::vector<std::string> names;
  for (int layer = 0; layer < 5000; ++layer) {
    std::string name = "m" + std::to_string(layer);
    for (int part = 0; part < 10; ++part) name += ".p" + std::to_string(part);
    names.push_back(name + ".weight");
  }
  ModuleTree tree;
  tree.build(names);
  EXPECT_EQ(tree.module_count(), ModuleTree::max_modules(names.size()));
  EXPECT_EQ(tree.module_count(), 5000u);
  const size_t last = names.size() - 1;
  EXPECT_EQ(tree.layer_parent(last), ModuleTree::kNone) << "no module left for the last layer";
  EXPECT_EQ(tree.leaf_offset(last), 0u) << "its whole name is its leaf";
  EXPECT_EQ(tree.module(0).end_layer, 1u);
}

TEST(ModuleTree, EveryBuildHasItsOwnVersion) {
  ModuleTree one, two;
  one.build({"a.b.weight"});
  two.build({"a.b.weight"});
  const uint64_t first = one.version();
  EXPECT_NE(first, two.version());
  one.build({"a.b.weight"});
  EXPECT_NE(one.version(), first);
}

}  // namespace
}  // namespace keel::app
