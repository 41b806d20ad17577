#!/usr/bin/env bash
# The engine's raw-memory modules under checkers (needs a nightly
# toolchain; not part of CI, whose stable toolchain has neither):
#   - AddressSanitizer over every engine unit test (epoch reclamation,
#     notification tables, segment/group/job/inbox objects in real
#     shared memory, waits);
#   - Miri over the tests that touch no system call Miri lacks: epoch
#     reclamation and the notification table's bit summaries (its
#     concurrent-posts test is skipped: over 15 minutes under Miri).
# ThreadSanitizer is left out: without an instrumented std (build-std) it
# reports std's own synchronisation as races.
#
#   scripts/sanitize.sh            # both
#   scripts/sanitize.sh asan|miri  # one
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:-all}
target=$(rustc -vV | sed -n 's/^host: //p')
if [ "$what" = all ] || [ "$what" = asan ]; then
    echo "== AddressSanitizer: engine unit tests"
    RUSTFLAGS="-Zsanitizer=address" CARGO_TARGET_DIR=target/asan \
        cargo +nightly test --lib --target "$target" -- engine:: extent
fi
if [ "$what" = all ] || [ "$what" = miri ]; then
    echo "== Miri: epoch reclamation and notification tables"
    rustup component add miri rust-src --toolchain nightly >/dev/null
    MIRIFLAGS="-Zmiri-disable-isolation" CARGO_TARGET_DIR=target/miri \
        cargo +nightly miri test --lib -- engine::epoch engine::notify --skip concurrent_posts
fi
