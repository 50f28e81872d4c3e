#include "net/message_bytes.hpp"

#include <type_traits>
#include <variant>

#include "keel/wire/message_fields.hpp"

namespace keel::app {
namespace {

// What a value holds beyond its own sizeof: a string's characters, a vector's elements (with
// what each of those holds), an optional's or a nested map's fields.
template <typename T>
size_t held_bytes(const T& value);

struct HeldByFields {
  size_t& bytes;
  template <typename T>
  void operator()(const wire::Field<T>& f) const {
    bytes += held_bytes(*f.value);
  }
};

template <typename T>
size_t held_bytes(const T& value) {
  if constexpr (std::is_same_v<T, std::string>) {
    return value.size();
  } else if constexpr (wire::is_vector_v<T>) {
    size_t bytes = value.size() * sizeof(typename T::value_type);
    if constexpr (!std::is_arithmetic_v<typename T::value_type>) {
      for (const auto& item : value) bytes += held_bytes(item);
    }
    return bytes;
  } else if constexpr (wire::is_optional_v<T>) {
    return value ? held_bytes(*value) : 0;
  } else if constexpr (wire::has_fields_v<T>) {
    size_t bytes = 0;
    wire::for_each_field(value, HeldByFields{bytes});
    return bytes;
  } else {
    return 0;   // a number: inside its struct's sizeof
  }
}

}  // namespace

size_t message_bytes(const wire::Message& message) {
  return sizeof(wire::Message) + std::visit([](const auto& m) { return held_bytes(m); }, message);
}

}  // namespace keel::app
