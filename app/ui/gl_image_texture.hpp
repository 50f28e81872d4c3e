// keel app GL image textures: ImageTexture on the OpenGL context of the app's Window.
//
// What it is for: the renderer side of image_texture.hpp. The Window installs
// gl_image_texture_factory() on its ImGui context; the ImGui OpenGL3 backend then draws an
// AddImage with the GL texture name as ImTextureID.
// Threads: the UI thread, with the Window's GL context current; textures are deleted when
// their owner is destroyed, which must happen before the context is (the Window outlives the
// views in keel's main).
// Never: throws. Uses GL 1.1 texture calls only, present on the 3.3 core and 3.0 contexts.
#pragma once

#include "ui/image_texture.hpp"

namespace keel::app::ui {

const ImageTextureFactory& gl_image_texture_factory();

}  // namespace keel::app::ui
