// keel app ImageTexture: an RGBA image that a view draws with ImDrawList::AddImage.
//
// What it is for: the heatmap draws as one texture instead of a rectangle per cell (a 1,000
// layer heatmap has a few hundred thousand cells on screen; as rectangles they cost the frame
// most of its time and the GL draw ~20 MB of vertices). Where the pixels go depends on the
// renderer, so views ask make_image_texture() and never see GL:
//   - the app's Window installs a GL factory (gl_image_texture.hpp) on its ImGui context;
//   - a context without one (headless tests, keel-bench-app) gets MemoryImageTexture, which
//     keeps a copy of the pixels: the CPU work of a texture upload, and something a test can
//     read back.
// Threads: the UI thread (the one that owns the ImGui context and, for GL, the GL context).
// Never: throws; update() allocates only when the image grows.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <imgui.h>

#include "ui/colormap.hpp"

namespace keel::app::ui {

class ImageTexture {
 public:
  virtual ~ImageTexture() = default;
  // Replaces the whole image with `pixels` (width x height, row-major, ImU32 byte order:
  // R, G, B, A in memory) and returns the id to pass to AddImage for this frame's draw. Sampled
  // nearest-texel: one texel is one heatmap cell, never blended with its neighbours.
  virtual ImTextureID update(const Rgba* pixels, int width, int height) = 0;
};

// The pixels kept in memory; the texture id is this object's address.
class MemoryImageTexture final : public ImageTexture {
 public:
  ImTextureID update(const Rgba* pixels, int width, int height) override;
  const std::vector<Rgba>& pixels() const { return pixels_; }
  int width() const { return width_; }
  int height() const { return height_; }

 private:
  std::vector<Rgba> pixels_;
  int width_ = 0, height_ = 0;
};

// How a renderer makes its textures; installed on one ImGui context, kept alive by the caller
// for as long as that context draws.
struct ImageTextureFactory {
  std::unique_ptr<ImageTexture> (*make)() = nullptr;
};

// Installs `factory` on the current ImGui context (nullptr uninstalls it).
void install_image_texture_factory(const ImageTextureFactory* factory);
// A texture for the current ImGui context: its installed factory's, else a MemoryImageTexture.
std::unique_ptr<ImageTexture> make_image_texture();

}  // namespace keel::app::ui
