// plan_module_ranges: the modules whose rollups a wide model's step records carry between its
// per-layer records (PROTOCOL §3.3, ProbeOptions::layer_detail_above).
//
// What it is for: a step record of 50,000 layers x 6 metrics is 1.2 MB. Most steps of a wide
// model go out as one value per module and metric instead (its worst layer), a few kilobytes,
// and the per-layer values every few steps and at every unsafe step. The modules are the
// layer-name prefixes at one depth: the deepest at which there are at most `target` of them
// ("blocks.17.experts" for a mixture of experts, not each of its 256 experts). A layer named
// with fewer components than that depth counts under its own module (its name less the last
// component; "" for a parameter of the model itself). Layers are in model order, where a
// module's parameters are consecutive (named_parameters() lists them depth first); a prefix
// seen again later is another range of the same name.
// Threads: any. Never: touches tensors (no torch include).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "keel/wire/messages.hpp"

namespace keel::probe {

// Ranges covering every layer of `names`, at the deepest depth with at most `target` of them.
// When even the top level has more than `target`, the top level, if it has at most `most`
// ranges; otherwise none (such a model is sent in full every step).
std::vector<wire::ModuleRange> plan_module_ranges(const std::vector<std::string>& names, size_t target, size_t most);

}  // namespace keel::probe
