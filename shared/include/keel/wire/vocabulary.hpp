// keel wire vocabulary: the strings that travel as values, defined once: event kinds, command
// kinds, policy names and skip reasons (PROTOCOL §3.3-§3.5, §6). The cause kinds are
// kCauseKinds in messages.hpp.
//
// What it is for: the probe raises and the app matches these by the same constant, so a kind
// renamed or added is one line here (and PROTOCOL.md, which tests/shared/protocol_doc_test.cpp
// checks against the lists below). Clients show a kind they do not know as it is.
// Threads: constants.
#pragma once

namespace keel::wire {

// Event::kind (PROTOCOL §3.4).
namespace event_kind {
inline constexpr const char kFirstNonfinite[] = "first_nonfinite";
inline constexpr const char kFirstNonfiniteWatch[] = "first_nonfinite_watch";
inline constexpr const char kNonfiniteBuffer[] = "nonfinite_buffer";
inline constexpr const char kSkip[] = "skip";
inline constexpr const char kSpike[] = "spike";
inline constexpr const char kDump[] = "dump";
inline constexpr const char kDumpFailed[] = "dump_failed";
inline constexpr const char kDumpsCleaned[] = "dumps_cleaned";
inline constexpr const char kTelemetryReset[] = "telemetry_reset";
inline constexpr const char kProbeError[] = "probe_error";
inline constexpr const char kRecordDropped[] = "record_dropped";
inline constexpr const char kLayoutChanged[] = "layout_changed";
inline constexpr const char kPolicy[] = "policy";
inline constexpr const char kAuthRefused[] = "auth_refused";
inline constexpr const char kRewind[] = "rewind";
inline constexpr const char kRewindStopped[] = "rewind_stopped";
inline constexpr const char kWarning[] = "warning";
}  // namespace event_kind
inline constexpr const char* kEventKinds[] = {
    event_kind::kFirstNonfinite, event_kind::kFirstNonfiniteWatch, event_kind::kNonfiniteBuffer,
    event_kind::kSkip,           event_kind::kSpike,               event_kind::kDump,
    event_kind::kDumpFailed,     event_kind::kDumpsCleaned,        event_kind::kTelemetryReset,
    event_kind::kProbeError,     event_kind::kRecordDropped,       event_kind::kLayoutChanged,
    event_kind::kPolicy,         event_kind::kAuthRefused,         event_kind::kRewind,
    event_kind::kRewindStopped,  event_kind::kWarning};

// Command::kind (PROTOCOL §3.5, §6).
namespace command_kind {
inline constexpr const char kSkip[] = "skip";
inline constexpr const char kDump[] = "dump";
inline constexpr const char kPolicy[] = "policy";
inline constexpr const char kDescribe[] = "describe";
inline constexpr const char kHistory[] = "history";
inline constexpr const char kRewind[] = "rewind";
}  // namespace command_kind
inline constexpr const char* kCommandKinds[] = {command_kind::kSkip,     command_kind::kDump,    command_kind::kPolicy,
                                                command_kind::kDescribe, command_kind::kHistory, command_kind::kRewind};

// Command::policy and RunDescription::policies_on (PROTOCOL §6).
namespace policy {
inline constexpr const char kSkipNonfinite[] = "skip_nonfinite";
inline constexpr const char kSkipSpike[] = "skip_spike";
inline constexpr const char kDumpNonfinite[] = "dump_nonfinite";
}  // namespace policy
inline constexpr const char* kPolicyNames[] = {policy::kSkipNonfinite, policy::kSkipSpike, policy::kDumpNonfinite};

}  // namespace keel::wire
