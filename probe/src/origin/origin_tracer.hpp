// OriginTracer: where a step's first non-finite value was born, found by running the step
// again with an ATen RecordFunction callback armed.
//
// What it is for: a NaN born in the forward pass (log of 0, a norm over a constant row, an
// overflowing logit) makes the loss NaN and with it every gradient, so "the first non-finite
// gradient in backward order" names the layer nearest the loss. Only the ops know where it
// was born. Armed, the callback checks each op's floating inputs as it starts and its
// floating outputs as it ends. The origin is the first op whose output holds a NaN or Inf:
// - produced: its inputs were finite. The op named is the outermost one that encloses it with
//   finite inputs (aten::layer_norm rather than aten::native_layer_norm, the op a user wrote);
//   in the backward pass autograd's node is named too ("LogBackward0").
// - read: an input was already non-finite, and no traced op made it so: the value came from
//   outside, a parameter or buffer (the weights) or the batch (the input).
// The module is the parameter's the op reads, or else the one of the nearest op before it
// that read a parameter; in the backward pass, the module of the forward op whose node it
// runs in (autograd's sequence number ties the two) (DESIGN §2.1).
// Not origins: views (they compute nothing), ops that only allocate (aten::empty_like and its
// kind hand out whatever bytes the allocator held, a freed NaN tensor's included), and the
// infinities the code means: a buffer that held -inf when the probe planned it (an attention
// mask), a constant the code writes (torch::full(..., -inf), masked_fill(mask, -inf)), and the
// Infs that carry them on (scores + mask). A NaN made from them is an origin.
//
// Why RecordFunction: it sees every ATen op, in the forward and the backward pass, with no
// change to the model; a thread-local callback costs nothing when it is not armed (it is
// registered only for the re-run) and travels with autograd's thread-local state to the
// threads that run the backward. A module-level check would see modules, not ops; a
// dispatcher fallback would need a dispatch key on every tensor.
// Cost: armed, a read of each op's floating outputs (finite_check.hpp; on a GPU an isfinite
// pass and a wait per op) until the origin is found, and of an op's inputs only when its
// output is non-finite (a buffer's at its start: batch_norm writes them in place); after the
// origin, nothing but the ops that enclose it. It runs only when a step is run again.
// Threads: trace() on the training thread; the callbacks on whichever threads run the ops.
// The callback's own checks run with recording off on their thread, so they never re-enter it.
// Never: throws from a callback (a failed check reads as finite).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <ATen/ATen.h>

namespace keel::probe {

struct Origin {
  enum class Kind { kNone, kProduced, kRead };
  Kind kind = Kind::kNone;
  bool backward = false;   // found in the backward pass
  std::string op;          // "aten::log"
  std::string node;        // backward: autograd's node the op ran in ("LogBackward0"), or ""
  std::string module;      // layer-name prefix ("blocks.2.route"), "" when no parameter was read before it
  std::string read_from;   // kRead: the parameter or buffer read, "" when it was the batch
  std::string layer;       // the parameter it is about, when one: read_from, or the one whose gradient it wrote
  std::string evidence;    // op_evidence(), or for kRead how many values were non-finite
  bool nan = false;        // the value was a NaN (else an Inf)
  int64_t ops_seen = 0;    // ops traced in all (for the test that the trace saw the step)
};

class OriginTracer {
 public:
  using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;
  // The model's parameters and buffers by name: an op reading one of them (or a view of one)
  // reads that module's state. `nonfinite_by_design`: the buffers that held a NaN or Inf when
  // the probe planned them (an attention mask of -inf).
  OriginTracer(const NamedTensors& parameters, const NamedTensors& buffers, std::vector<at::Tensor> nonfinite_by_design);

  // Runs `run` with the callback armed on this thread, and says what it saw. Exceptions of
  // `run` propagate, with the callback disarmed. One trace at a time in a process.
  Origin trace(const std::function<void()>& run);

  // The module of a parameter's name: "blocks.2.route.weight" -> "blocks.2.route".
  static std::string module_of(const std::string& name);

 private:
  std::unordered_map<const void*, std::string> names_by_storage_;
  std::unordered_set<const void*> buffers_;
  NamedTensors parameters_;
  std::vector<at::Tensor> designed_;
};

}  // namespace keel::probe
