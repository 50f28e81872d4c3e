// short_number: a value as the probe's event texts show it, three significant digits
// ("1.8e+19", "0.5", "nan"). One spelling for the op evidence here and, in step/, the causes
// and the step health (origin/ stands alone; step/ may include it).
// Threads: any. Never: throws but for std::bad_alloc.
#pragma once

#include <cstdio>
#include <string>

namespace keel::probe {

inline std::string short_number(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g", v);
  return text;
}

}  // namespace keel::probe
