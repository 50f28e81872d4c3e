#include "ui/frame_work.hpp"

namespace keel::app::ui {

void ingest_and_draw(Receiver& receiver, Model& model, Dashboard& dashboard,
                     std::vector<wire::Message>& inbox) {
  inbox.clear();
  receiver.drain(inbox);
  for (const wire::Message& message : inbox) model.ingest(message);
  dashboard.draw(model, receiver.endpoint_states(), receiver.queue_dropped());
}

}  // namespace keel::app::ui
