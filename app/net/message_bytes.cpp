#include "net/message_bytes.hpp"

#include <type_traits>
#include <variant>

namespace keel::app {

size_t message_bytes(const wire::Message& message) {
  return sizeof(wire::Message) +
         std::visit(
             [](const auto& m) -> size_t {
               using T = std::decay_t<decltype(m)>;
               size_t bytes = 0;
               if constexpr (std::is_same_v<T, wire::StepRecord>) {
                 bytes += (m.layer_values.size() + m.module_values.size()) * sizeof(float) +
                          m.buffer_absmax.size() * sizeof(float) +
                          (m.frozen_layers.size() + m.unused_layers.size()) * sizeof(uint32_t) +
                          m.group_lrs.size() * sizeof(double) + m.run.size() + m.model.size() + m.skip_reason.size();
                 for (const wire::WatchStats& watch : m.watches) bytes += sizeof(watch) + watch.name.size();
               } else if constexpr (std::is_same_v<T, wire::RunDescription>) {
                 for (const wire::LayerInfo& layer : m.layers) {
                   bytes += sizeof(layer) + layer.name.size() + layer.dtype.size() + layer.shape.size() * sizeof(int64_t);
                   for (const std::string& alias : layer.aliases) bytes += sizeof(alias) + alias.size();
                 }
                 for (const std::string& watch : m.watches) bytes += sizeof(watch) + watch.size();
                 for (const std::string& buffer : m.buffers) bytes += sizeof(buffer) + buffer.size();
                 for (const wire::ModuleRange& module : m.modules) bytes += sizeof(module) + module.name.size();
                 bytes += m.run_id.size() + m.model.size() + m.recording.size();
               } else if constexpr (std::is_same_v<T, wire::Event>) {
                 bytes += m.kind.size() + m.layer.size() + m.detail.size() + m.run.size() + m.model.size();
                 if (m.cause) bytes += sizeof(*m.cause) + m.cause->sentence.size() + m.cause->op.size() + m.cause->module.size();
               } else if constexpr (std::is_same_v<T, wire::Ack>) {
                 bytes += m.error.size() + m.path.size();
               }
               return bytes;
             },
             message);
}

}  // namespace keel::app
