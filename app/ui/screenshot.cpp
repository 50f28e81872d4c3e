#include "ui/screenshot.hpp"

#include <algorithm>
#include <cstdint>
#include <vector>

#include <GLFW/glfw3.h>

// The one definition of stb_image_write in the program. Its C-style `= { 0 }` initialisers
// trip -Wextra; that is stb's business, not a fault worth a warning in every build.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#define STB_IMAGE_WRITE_IMPLEMENTATION
#include <stb_image_write.h>
#pragma GCC diagnostic pop

namespace keel::app::ui {

bool write_framebuffer_png(int width, int height, const std::string& path, std::string& error) {
  if (width <= 0 || height <= 0) {
    error = "the window has no pixels";
    return false;
  }
  const size_t row_bytes = size_t(width) * 3;
  std::vector<uint8_t> pixels(row_bytes * size_t(height));
  glPixelStorei(GL_PACK_ALIGNMENT, 1);
  glReadBuffer(GL_BACK);
  glReadPixels(0, 0, width, height, GL_RGB, GL_UNSIGNED_BYTE, pixels.data());
  // GL's first row is the bottom of the image; PNG's is the top.
  std::vector<uint8_t> flipped(pixels.size());
  for (int y = 0; y < height; ++y) {
    const uint8_t* src = pixels.data() + size_t(height - 1 - y) * row_bytes;
    std::copy(src, src + row_bytes, flipped.data() + size_t(y) * row_bytes);
  }
  if (!stbi_write_png(path.c_str(), width, height, 3, flipped.data(), int(row_bytes))) {
    error = "cannot write '" + path + "'";
    return false;
  }
  return true;
}

}  // namespace keel::app::ui
