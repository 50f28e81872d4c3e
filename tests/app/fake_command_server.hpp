// FakeCommandServer: a ROUTER socket standing in for a probe's command thread.
//
// What it is for: app tests of the command path (CommandClient, late-attach backfill, keel-cli)
// without a trainer. A handler turns each decoded command into the messages sent back, in
// order (history: step records, then the ack), or none to stay silent. Binds loopback, on
// a port of ZeroMQ's choosing unless told which (a telemetry endpoint's port + 1).
// Threads: the server answers on a thread of its own; the handler runs there. received() may
// be called from the test thread.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <variant>
#include <vector>

#include <zmq.hpp>

#include "keel/wire/codec.hpp"
#include "keel/wire/messages.hpp"
#include "server_auth.hpp"

namespace keel::app::test_support {

class FakeCommandServer {
 public:
  using Handler = std::function<std::vector<keel::wire::Message>(const keel::wire::Command&)>;

  using Auth = ServerAuth;

  // Throws zmq::error_t when `bind_endpoint` is taken.
  explicit FakeCommandServer(Handler handler, const std::string& bind_endpoint = "tcp://127.0.0.1:*",
                             Auth auth = Auth::kNone)
      : socket_(context_, zmq::socket_type::router), handler_(std::move(handler)) {
    socket_.set(zmq::sockopt::linger, 0);
    socket_.set(zmq::sockopt::sndhwm, 0);
    serve_with(socket_, auth);
    socket_.bind(bind_endpoint);
    endpoint_ = socket_.get(zmq::sockopt::last_endpoint);
    thread_ = std::thread([this] { serve(); });
  }
  FakeCommandServer(const FakeCommandServer&) = delete;
  FakeCommandServer& operator=(const FakeCommandServer&) = delete;
  ~FakeCommandServer() {
    stop_.store(true);
    thread_.join();
  }

  const std::string& endpoint() const { return endpoint_; }

  std::vector<keel::wire::Command> received() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return received_;
  }

  // An ack of `command` with the given outcome.
  static keel::wire::Ack ack_for(const keel::wire::Command& command, bool ok, int64_t step) {
    keel::wire::Ack ack;
    ack.id = command.id;
    ack.ok = ok;
    ack.step = step;
    return ack;
  }

 private:
  void serve() {
    while (!stop_.load()) {
      zmq::pollitem_t item{socket_.handle(), 0, ZMQ_POLLIN, 0};
      zmq::poll(&item, 1, std::chrono::milliseconds(10));
      if (!(item.revents & ZMQ_POLLIN)) continue;
      std::vector<zmq::message_t> frames;
      zmq::message_t frame;
      while (socket_.recv(frame, zmq::recv_flags::dontwait)) {
        const bool more = frame.more();
        frames.push_back(std::move(frame));
        if (!more) break;
      }
      if (frames.size() != 3) continue;
      const keel::wire::DecodeResult decoded = keel::wire::decode(frames[2].data(), frames[2].size());
      const auto* command = decoded.ok ? std::get_if<keel::wire::Command>(&decoded.message) : nullptr;
      if (command == nullptr) continue;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        received_.push_back(*command);
      }
      for (const keel::wire::Message& reply : handler_(*command)) {
        const std::vector<char> payload = keel::wire::encode(reply);
        const std::string topic = keel::wire::topic_of(reply);
        socket_.send(zmq::buffer(frames[0].data(), frames[0].size()), zmq::send_flags::sndmore);
        socket_.send(zmq::buffer(topic), zmq::send_flags::sndmore);
        socket_.send(zmq::buffer(payload), zmq::send_flags::none);
      }
    }
  }

  zmq::context_t context_{1};
  zmq::socket_t socket_;
  Handler handler_;
  std::string endpoint_;
  std::atomic<bool> stop_{false};
  mutable std::mutex mutex_;
  std::vector<keel::wire::Command> received_;
  std::thread thread_;
};

}  // namespace keel::app::test_support
