// SideCopy where keel is built without the CUDA probe: none (side_copy.hpp).
#include "side_copy.hpp"

namespace keel::probe {

std::unique_ptr<SideCopy> make_side_copy(int /*device_index*/) { return nullptr; }

}  // namespace keel::probe
