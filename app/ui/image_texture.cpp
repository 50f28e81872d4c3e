#include "ui/image_texture.hpp"

#include <cstring>

namespace keel::app::ui {

ImTextureID MemoryImageTexture::update(const Rgba* pixels, int width, int height) {
  width_ = width;
  height_ = height;
  pixels_.resize(size_t(width) * size_t(height));
  if (!pixels_.empty()) std::memcpy(pixels_.data(), pixels, pixels_.size() * sizeof(Rgba));
  return static_cast<ImTextureID>(this);
}

// ImGuiIO::UserData is the application's slot on the context; keel uses it for this alone.
void install_image_texture_factory(const ImageTextureFactory* factory) {
  ImGui::GetIO().UserData = const_cast<ImageTextureFactory*>(factory);
}

std::unique_ptr<ImageTexture> make_image_texture() {
  const auto* factory = static_cast<const ImageTextureFactory*>(ImGui::GetIO().UserData);
  if (factory && factory->make) return factory->make();
  return std::make_unique<MemoryImageTexture>();
}

}  // namespace keel::app::ui
