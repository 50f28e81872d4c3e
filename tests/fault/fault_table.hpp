// The fault report's table: one row per fault, as RELIABILITY.md shows it.
// Threads: any. Never: reads anything but its arguments.
#pragma once

#include <string>
#include <vector>

#include "fault_scenarios.hpp"

namespace keel::fault {

std::string table_header();
std::string table_row(const FaultOutcome& outcome);
// One paragraph per outcome with everything measured (the ctest log and the report's tail).
std::string outcome_text(const FaultOutcome& outcome);

}  // namespace keel::fault
