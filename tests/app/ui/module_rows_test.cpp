// ModuleRows: the rule for what starts folded, rows that follow the shared fold state (so the
// layer list and the heatmap agree), folded modules skipped with their layers, and a layer's
// row found (its own, or the folded module holding it).
#include "ui/module_rows.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "model/module_tree.hpp"
#include "ui/app_state.hpp"

namespace keel::app::ui {
namespace {

// embed.weight, then `blocks` blocks of `experts` experts of two matrices, then head.weight.
std::vector<std::string> moe_names(int blocks, int experts) {
  std::vector<std::string> names = {"embed.weight"};
  for (int b = 0; b < blocks; ++b) {
    for (int e = 0; e < experts; ++e) {
      for (const char* w : {"w1.weight", "w2.weight"}) {
        names.push_back("blocks." + std::to_string(b) + ".experts." + std::to_string(e) + "." + w);
      }
    }
  }
  names.push_back("head.weight");
  return names;
}

TEST(ModuleRows, AModelOfMoreThanAThousandTensorsStartsFolded) {
  ModuleTree small, large;
  small.build(moe_names(2, 4));
  large.build(moe_names(4, 200));
  EXPECT_TRUE(modules_start_open(small));
  EXPECT_FALSE(modules_start_open(large));
  AppState state;
  ModuleRows heatmap(false);
  const std::vector<ModuleRow>& rows = heatmap.rows(large, state);
  ASSERT_EQ(rows.size(), 3u) << "embed.weight, blocks (folded), head.weight";
  EXPECT_FALSE(rows[0].module);
  EXPECT_TRUE(rows[1].module);
  EXPECT_FALSE(rows[1].open);
  EXPECT_EQ(rows[1].first_layer, 1u);
  EXPECT_EQ(rows[1].end_layer, 1601u);
  EXPECT_EQ(rows[2].index, 1601u);
  // A small model: every layer its own row, as before folding existed.
  EXPECT_EQ(ModuleRows(false).rows(small, state).size(), small.layer_count());
}

TEST(ModuleRows, OpeningAModuleShowsItsChildrenFoldedInBothViews) {
  ModuleTree tree;
  tree.build(moe_names(4, 200));
  AppState state;
  ModuleRows list(true), heatmap(false);
  list.rows(tree, state);
  heatmap.rows(tree, state);
  const uint64_t before = heatmap.version();
  state.set_module_open("blocks", true);
  const std::vector<ModuleRow>& list_rows = list.rows(tree, state);
  const std::vector<ModuleRow>& heat_rows = heatmap.rows(tree, state);
  EXPECT_NE(heatmap.version(), before) << "the fold change reached the heatmap";
  // The list keeps the open module's header; the heatmap has rows for its four blocks only.
  ASSERT_EQ(list_rows.size(), 7u);
  EXPECT_TRUE(list_rows[1].module && list_rows[1].open);
  EXPECT_EQ(tree.module(list_rows[2].index).path, "blocks.0");
  EXPECT_EQ(list_rows[2].depth, 1);
  ASSERT_EQ(heat_rows.size(), 6u);
  EXPECT_EQ(tree.module(heat_rows[1].index).path, "blocks.0");
  EXPECT_FALSE(heat_rows[1].open);
  // Unchanged folds: the same rows, not recomputed.
  const uint64_t now = heatmap.version();
  heatmap.rows(tree, state);
  EXPECT_EQ(heatmap.version(), now);
}

TEST(ModuleRows, ALayerIsFoundInItsRowOrItsFoldedModule) {
  ModuleTree tree;
  tree.build(moe_names(4, 200));
  AppState state;
  state.set_module_open("blocks", true);
  ModuleRows list(true);
  list.rows(tree, state);
  EXPECT_EQ(list.row_of_layer(0), 0);
  EXPECT_EQ(list.row_of_layer(1), 2) << "blocks.0, folded";
  EXPECT_EQ(list.row_of_layer(450), 3) << "blocks.1, folded";
  EXPECT_EQ(list.row_of_layer(1601), 6);

  open_modules_of(tree, 450, state);   // blocks.1.experts.24.w2.weight
  const std::vector<ModuleRow>& rows = list.rows(tree, state);
  const int row = list.row_of_layer(450);
  ASSERT_GE(row, 0);
  EXPECT_FALSE(rows[size_t(row)].module) << "its own row now shows";
  EXPECT_EQ(rows[size_t(row)].index, 450u);
  EXPECT_EQ(rows[size_t(row)].depth, 4);
  EXPECT_TRUE(state.module_open("blocks.1.experts.24", false));
  EXPECT_FALSE(state.module_open("blocks.2", false)) << "only the modules holding it opened";
}

TEST(ModuleRows, FoldingASmallModelsModuleGivesItOneRow) {
  ModuleTree tree;
  tree.build(moe_names(2, 4));
  AppState state;
  ModuleRows heatmap(false);
  EXPECT_EQ(heatmap.rows(tree, state).size(), 18u);
  state.set_module_open("blocks.1.experts", false);
  const std::vector<ModuleRow>& rows = heatmap.rows(tree, state);
  ASSERT_EQ(rows.size(), 11u);
  EXPECT_TRUE(rows[9].module);
  EXPECT_EQ(rows[9].end_layer - rows[9].first_layer, 8u);
}

}  // namespace
}  // namespace keel::app::ui
