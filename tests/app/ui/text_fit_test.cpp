// Layer names and paths shortened to fit a column (issue 29): cut in the middle, or without the
// components every row shares, never at the end, where layers differ.
#include "ui/text_fit.hpp"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace keel::app::ui {
namespace {

// One unit per character, the ellipsis counting one.
float chars(const std::string& text) {
  float width = 0;
  for (size_t i = 0; i < text.size(); ++i) width += (uint8_t(text[i]) & 0xC0) != 0x80;
  return width;
}
const std::string kEllipsis = "\u2026";

TEST(TextFit, ElidesTheMiddleKeepingMoreOfTheEnd) {
  EXPECT_EQ(elide_middle("blocks.0.mlp.fc.weight", 30, chars, kEllipsis), "blocks.0.mlp.fc.weight");
  const std::string cut = elide_middle("blocks.0.mlp.fc.weight", 12, chars, kEllipsis);
  EXPECT_EQ(chars(cut), 12);
  EXPECT_EQ(cut, "blo" + kEllipsis + "c.weight");
  EXPECT_EQ(elide_middle("abc", 0, chars, kEllipsis), kEllipsis);
  // A path with a non-ASCII folder is never cut inside a character.
  const std::string path = "/home/r\u00e9my/keel-dumps/step-200-nonfinite";
  for (float w = 2; w < 40; ++w) {
    const std::string fitted = elide_middle(path, w, chars, kEllipsis);
    EXPECT_LE(chars(fitted), w);
    for (size_t i = 0; i + 1 < fitted.size(); ++i) {
      EXPECT_FALSE(uint8_t(fitted[i]) == 0xC3 && (uint8_t(fitted[i + 1]) & 0xC0) != 0x80) << fitted;
    }
    EXPECT_NE(fitted.back() & 0xC0, 0xC0) << "ends inside a character: " << fitted;
  }
}

TEST(TextFit, SharedLeadingPartsNeverIncludeTheLast) {
  EXPECT_EQ(shared_leading_parts({"blocks.0.mlp.fc.weight", "blocks.2.mlp.proj.bias"}), 1u);
  EXPECT_EQ(shared_leading_parts({"blocks.0.mlp.fc.weight", "blocks.0.mlp.fc.bias"}), 4u);
  EXPECT_EQ(shared_leading_parts({"blocks.0.mlp.fc.weight"}), 4u);
  EXPECT_EQ(shared_leading_parts({"tok.weight", "blocks.0.ln1.bias"}), 0u);
  EXPECT_EQ(shared_leading_parts({"a.b", "a"}), 0u);
  EXPECT_EQ(shared_leading_parts({}), 0u);
}

// Filtering "mlp" gave twelve rows that all read "blocks.0.m": each now shows its block and
// its parameter.
TEST(TextFit, AFilteredListShowsWhatTellsTheRowsApart) {
  std::vector<std::string> names;
  for (const char* block : {"0", "1", "2"}) {
    for (const char* param : {"fc.weight", "fc.bias", "proj.weight", "proj.bias"}) {
      names.push_back(std::string("blocks.") + block + ".mlp." + param);
    }
  }
  const size_t shared = shared_leading_parts(names);
  ASSERT_EQ(shared, 1u);
  std::vector<std::string> shown;
  for (const std::string& name : names) {
    EXPECT_EQ(fit_layer_name(name, shared, 40, chars, kEllipsis), name) << "it fits: whole";
    shown.push_back(fit_layer_name(name, shared, 17, chars, kEllipsis));
  }
  EXPECT_EQ(shown[0], kEllipsis + "0.mlp.fc.weight");
  EXPECT_EQ(shown[11], kEllipsis + "2.mlp.proj.bias");
  for (size_t i = 0; i < shown.size(); ++i) {
    EXPECT_LE(chars(shown[i]), 17);
    for (size_t j = 0; j < i; ++j) EXPECT_NE(shown[i], shown[j]) << "two rows read the same";
  }
  // Narrower still: the middle goes, the block's start and the parameter stay.
  const std::string narrow = fit_layer_name(names[6], shared, 12, chars, kEllipsis);
  EXPECT_EQ(chars(narrow), 12);
  EXPECT_EQ(narrow.rfind(kEllipsis + "1.m", 0), 0u) << narrow;
  EXPECT_EQ(narrow.substr(narrow.size() - 6), "weight") << narrow;
}

}  // namespace
}  // namespace keel::app::ui
