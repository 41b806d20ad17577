//! Process-shared futex wait and wake on a 32-bit word in shared memory.
//!
//! The words live in `MAP_SHARED` mappings used by several processes, so the
//! calls use the shared (not `FUTEX_PRIVATE_FLAG`, rustix's
//! `Flags::PRIVATE`) variants: the kernel keys them by the underlying page,
//! not by the virtual address.

use rustix::thread::futex::{self, Flags, Timespec};
use std::sync::atomic::AtomicU32;
use std::time::Duration;

/// Sleep while `*word == expected`, at most `timeout` (forever if `None`).
/// Returns early on a wake, a signal, or when the word already differs.
pub(crate) fn wait(word: &AtomicU32, expected: u32, timeout: Option<Duration>) {
    // A timeout too large for a timespec is as good as none.
    let ts = timeout.and_then(|d| Timespec::try_from(d).ok());
    // Errors (EAGAIN: the word differs, EINTR, ETIMEDOUT) all mean "check
    // again", which every caller does.
    let _ = futex::wait(word, Flags::empty(), expected, ts.as_ref());
}

/// Wake every thread, in any process, sleeping on `word`.
pub(crate) fn wake_all(word: &AtomicU32) {
    let _ = futex::wake(word, Flags::empty(), i32::MAX as u32);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::Ordering;

    #[test]
    fn wait_returns_on_mismatch_timeout_and_wake() {
        let w = Arc::new(AtomicU32::new(1));
        wait(&w, 0, None); // value differs: returns at once
        wait(&w, 1, Some(Duration::from_millis(1))); // times out
        let w2 = w.clone();
        let t = std::thread::spawn(move || {
            while w2.load(Ordering::SeqCst) == 1 {
                wait(&w2, 1, Some(Duration::from_secs(5)));
            }
        });
        w.store(2, Ordering::SeqCst);
        wake_all(&w);
        t.join().unwrap();
    }
}
