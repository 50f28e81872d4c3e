// Where the flight recorder writes a run: "<dir>/<run_id>[-<model>]-rank<R>.keelrec".
//
// What it is for: one name per run and rank, readable in a directory listing, that no two
// probes share (the run id is unique per probe, and the rank and model tell a job's files
// apart). A run id from the user may hold anything: characters outside letters, digits, '.',
// '_' and '-' become '_', and a leading '.' does too, so the name stays in `dir`.
// Threads: pure functions.
#pragma once

#include <cstdint>
#include <string>

namespace keel::probe {

inline constexpr const char* kRecordingExtension = ".keelrec";

// The file name (no directory) for the n-th attempt: n = 1 is the plain name; n > 1 adds
// "-n" before the extension (a file of that name was already there: a job restarted with
// the same run id keeps its earlier recording).
std::string recording_file_name(const std::string& run_id, const std::string& model, int32_t rank, int attempt);

}  // namespace keel::probe
