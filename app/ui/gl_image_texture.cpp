#include "ui/gl_image_texture.hpp"

#include <cstdint>

#include <GL/gl.h>

namespace keel::app::ui {
namespace {

class GlImageTexture final : public ImageTexture {
 public:
  ~GlImageTexture() override {
    if (name_ != 0) glDeleteTextures(1, &name_);
  }

  ImTextureID update(const Rgba* pixels, int width, int height) override {
    GLint previous = 0;
    glGetIntegerv(GL_TEXTURE_BINDING_2D, &previous);
    if (name_ == 0) {
      glGenTextures(1, &name_);
      glBindTexture(GL_TEXTURE_2D, name_);
      // Nearest: a texel is a cell; blending neighbours would invent colours no cell has.
      glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MIN_FILTER, GL_NEAREST);
      glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MAG_FILTER, GL_NEAREST);
      glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_WRAP_S, GL_CLAMP_TO_EDGE);
      glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_WRAP_T, GL_CLAMP_TO_EDGE);
    } else {
      glBindTexture(GL_TEXTURE_2D, name_);
    }
    glPixelStorei(GL_UNPACK_ALIGNMENT, 4);
    glPixelStorei(GL_UNPACK_ROW_LENGTH, 0);
    if (width != width_ || height != height_) {
      glTexImage2D(GL_TEXTURE_2D, 0, GL_RGBA, width, height, 0, GL_RGBA, GL_UNSIGNED_BYTE, pixels);
      width_ = width;
      height_ = height;
    } else {
      glTexSubImage2D(GL_TEXTURE_2D, 0, 0, 0, width, height, GL_RGBA, GL_UNSIGNED_BYTE, pixels);
    }
    glBindTexture(GL_TEXTURE_2D, GLuint(previous));
    return reinterpret_cast<ImTextureID>(static_cast<intptr_t>(name_));
  }

 private:
  GLuint name_ = 0;
  int width_ = 0, height_ = 0;
};

std::unique_ptr<ImageTexture> make_gl_image_texture() { return std::make_unique<GlImageTexture>(); }

}  // namespace

const ImageTextureFactory& gl_image_texture_factory() {
  static const ImageTextureFactory factory{&make_gl_image_texture};
  return factory;
}

}  // namespace keel::app::ui
