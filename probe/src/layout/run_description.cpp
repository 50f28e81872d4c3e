#include "run_description.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>

#include <torch/version.h>

#include "keel/wire/codec.hpp"
#include "keel/wire/vocabulary.hpp"
#include "keel_version.hpp"
#include "module_ranges.hpp"

namespace keel::probe {
namespace {

// A rollup step of 1,024 modules x 6 metrics is 24 KB; of 8,192 (a model whose top level alone
// has that many modules), 192 KB. Beyond, the rollups save too little to be worth the gaps.
constexpr size_t kTargetModules = 1024;
constexpr size_t kMostModules = 8192;

}  // namespace


std::string dtype_name(torch::ScalarType type) {
  switch (type) {
    case torch::kFloat: return "float32";
    case torch::kDouble: return "float64";
    case torch::kHalf: return "float16";
    case torch::kBFloat16: return "bfloat16";
    case torch::kInt: return "int32";
    case torch::kLong: return "int64";
    default: return c10::toString(type);
  }
}

std::string default_run_id() {
  // Two probes of one process (a GAN's two models) may attach within the same millisecond:
  // the count keeps their ids apart, and a client keys runs by id (PROTOCOL §5).
  static std::atomic<uint64_t> probes_in_process{0};
  const uint64_t nth = ++probes_in_process;
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) != 0) host[0] = 0;
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count();
  std::string id = std::string(host[0] ? host : "host") + "-" + std::to_string(getpid()) + "-" + std::to_string(ms);
  if (nth > 1) id += "-" + std::to_string(nth);
  return id;
}

std::vector<std::string> policies_on(const ProbeOptions& options) {
  std::vector<std::string> on;
  if (options.skip_on_nonfinite) on.push_back(wire::policy::kSkipNonfinite);
  if (options.skip_on_spike) on.push_back(wire::policy::kSkipSpike);
  if (options.dump_on_nonfinite) on.push_back(wire::policy::kDumpNonfinite);
  return on;
}

wire::RunDescription describe_run(const ModelParameters& parameters, const ProbeOptions& options) {
  wire::RunDescription d;
  d.rank = options.rank;
  d.world_size = options.world_size;
  d.sharded = options.sharded;
  d.run_id = options.run_id.empty() ? default_run_id() : options.run_id;
  d.model = options.model;
  d.keel_version = kKeelVersion;
  d.torch_version = TORCH_VERSION;
  d.policies_on = policies_on(options);
  d.start_unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::system_clock::now().time_since_epoch())
                        .count();
  describe_layers(parameters, options.layer_detail_above, d);
  return d;
}

void describe_layers(const ModelParameters& parameters, int64_t layer_detail_above, wire::RunDescription& d) {
  const NamedParams& params = parameters.params;
  d.device = params.empty() ? "cpu" : params.front().second.device().str();
  d.layers.clear();
  for (size_t i = 0; i < params.size(); ++i) {
    const auto& [name, tensor] = params[i];
    wire::LayerInfo layer;
    layer.name = name;
    layer.shape = tensor.sizes().vec();
    layer.numel = tensor.numel();
    layer.dtype = dtype_name(tensor.scalar_type());
    // The wire's bound (kMaxAliases): a tensor under more names keeps the first of them.
    const auto& aliases = parameters.aliases[i];
    layer.aliases.assign(aliases.begin(), aliases.begin() + std::min<size_t>(aliases.size(), wire::kMaxAliases));
    d.layers.push_back(std::move(layer));
  }
  d.modules.clear();
  if (layer_detail_above > 0 && params.size() > static_cast<size_t>(layer_detail_above)) {
    std::vector<std::string> names;
    names.reserve(params.size());
    for (const auto& named : params) names.push_back(named.first);
    d.modules = plan_module_ranges(names, kTargetModules, kMostModules);
  }
}

}  // namespace keel::probe
