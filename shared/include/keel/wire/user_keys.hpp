// The user's own key pair: what makes commands authenticated by default, with no set-up.
//
// What it is for: on a shared machine every local user can reach 127.0.0.1, so loopback is no
// boundary. A probe that is given no command keys serves its command socket as a CURVE server
// with the key pair of the user who runs it, and accepts only that same key as a client's. The
// dashboard and keel-cli, run by the same user, read the same pair and present it, with no
// flag; another user holds another pair, and the probe refuses it (PROTOCOL §6).
//
// One pair per user, kept across runs, rather than one per run: a dashboard reconnects to a
// restarted trainer, and several runs need no file each to find or clean up. It lives in a
// directory only the user can enter: $KEEL_KEY_DIR when set, else ~/.keel (not
// $XDG_RUNTIME_DIR, which a trainer started by cron or under nohup may lack, and would then
// disagree with the dashboard's). The directory is mode 0700, the secret key file 0600, both
// owned by the user; anything looser is refused with a message saying how to fix it, never
// used.
// Threads: free functions, any thread; creation is atomic (two processes starting at once
// agree on one pair). Never: prints the secret key.
#pragma once

#include <string>

#include "keel/wire/curve_keys.hpp"

namespace keel::wire {

// $KEEL_KEY_DIR, else $HOME/.keel (the passwd entry's home when HOME is unset).
std::string user_key_dir();

// The user's key pair from user_key_dir()/user.key, created (with the directory) on first use.
// Throws std::runtime_error with a sentence that names the path and the fix: the directory or
// the file is open to other users or owned by another, the file does not hold a key, or it
// cannot be created (a read-only home: set KEEL_KEY_DIR).
CurveKeyPair user_key_pair();

}  // namespace keel::wire
