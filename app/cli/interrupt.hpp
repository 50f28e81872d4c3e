// Ctrl-C handling for keel-cli's long-running subcommands (tail, record, watch).
//
// What it is for: SIGINT and SIGTERM end a subcommand cleanly (exit 0, output flushed)
// instead of killing it mid-line. The handler only sets a flag; it is installed without
// SA_RESTART so a blocking ZeroMQ wait returns at once (Subscriber reports kInterrupted),
// and with SA_RESETHAND so a second Ctrl-C still kills a process that does not stop.
// Threads: install from the main thread before other threads start; query from any thread.
#pragma once

namespace keel::app {

void install_interrupt_handler();
bool interrupt_requested();

}  // namespace keel::app
