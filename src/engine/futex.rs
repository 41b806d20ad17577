//! Process-shared futex wait and wake on a 32-bit word in shared memory.
//!
//! The words live in `MAP_SHARED` mappings used by several processes, so the
//! calls use the shared (not `FUTEX_PRIVATE_FLAG`) variants: the kernel keys
//! them by the underlying page, not by the virtual address.

use std::sync::atomic::AtomicU32;
use std::time::Duration;

/// Sleep while `*word == expected`, at most `timeout` (forever if `None`).
/// Returns early on a wake, a signal, or when the word already differs.
pub(crate) fn wait(word: &AtomicU32, expected: u32, timeout: Option<Duration>) {
    let ts = timeout.map(|d| libc::timespec {
        tv_sec: d.as_secs().min(i64::MAX as u64) as libc::time_t,
        tv_nsec: d.subsec_nanos() as libc::c_long,
    });
    let ts_ptr = ts
        .as_ref()
        .map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: `word` is a valid, aligned 32-bit atomic for the duration of
    // the call; FUTEX_WAIT only reads it; ts_ptr is null or points to a live
    // timespec. Errors (EAGAIN, EINTR, ETIMEDOUT) all mean "check again".
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT,
            expected,
            ts_ptr,
            std::ptr::null::<u32>(),
            0u32,
        );
    }
}

/// Wake every thread, in any process, sleeping on `word`.
pub(crate) fn wake_all(word: &AtomicU32) {
    // SAFETY: `word` is a valid, aligned 32-bit atomic; FUTEX_WAKE does not
    // access memory beyond using its address as a key.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE,
            i32::MAX,
            std::ptr::null::<libc::timespec>(),
            std::ptr::null::<u32>(),
            0u32,
        );
    }
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
