//! Read-mostly publication with deferred reclamation (sleepable-RCU style),
//! for the segment tables that every operation reads and only segment
//! creation and deletion change.
//!
//! A reader [`Epochs::pin`]s for the length of one operation: it counts
//! itself in one of two reader counters, chosen by the parity of a global
//! epoch, on a stripe chosen by its thread (so threads of one rank do not
//! share a cache line). While pinned it may follow pointers loaded from a
//! [`Published`] cell. A writer replaces a pointer, then calls
//! [`Epochs::synchronize`], which flips the epoch and waits until the
//! counters of the old parity drain, twice (once per parity), before it
//! frees the old value: every reader that could have loaded the old
//! pointer has left by then.
//!
//! A reader re-checks the epoch after counting itself; if it changed, it
//! moves to the new parity. With `SeqCst` on both sides, a writer that sees
//! the old-parity counter at zero after its flip knows that any reader not
//! yet counted will see the new epoch and count itself there.
//!
//! Pins must be short and must never block (a blocking wait clones an
//! `Arc` first), and a thread must not synchronize while pinned.

use std::cell::Cell;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};

const STRIPES: usize = 16;

#[repr(align(64))]
#[derive(Default)]
struct Counter(AtomicUsize);

/// The reader registry of one context.
#[derive(Default)]
pub(crate) struct Epochs {
    epoch: AtomicUsize,
    readers: [[Counter; STRIPES]; 2],
    writer: Mutex<()>,
}

impl std::fmt::Debug for Epochs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Epochs")
            .field("epoch", &self.epoch)
            .finish()
    }
}

thread_local! {
    static STRIPE: Cell<usize> = const { Cell::new(usize::MAX) };
}

static NEXT_STRIPE: AtomicUsize = AtomicUsize::new(0);

fn stripe() -> usize {
    STRIPE.with(|s| {
        if s.get() == usize::MAX {
            s.set(NEXT_STRIPE.fetch_add(1, SeqCst) % STRIPES);
        }
        s.get()
    })
}

/// Proof that the current thread is counted as a reader.
pub(crate) struct Pin<'a> {
    counter: &'a AtomicUsize,
}

impl Drop for Pin<'_> {
    fn drop(&mut self) {
        self.counter.fetch_sub(1, SeqCst);
    }
}

impl Epochs {
    /// Enter a read section.
    #[inline]
    pub(crate) fn pin(&self) -> Pin<'_> {
        let s = stripe();
        loop {
            let e = self.epoch.load(SeqCst) & 1;
            let counter = &self.readers[e][s].0;
            counter.fetch_add(1, SeqCst);
            if self.epoch.load(SeqCst) & 1 == e {
                return Pin { counter };
            }
            counter.fetch_sub(1, SeqCst);
        }
    }

    /// Wait until every read section entered before this call has ended.
    /// Must not be called while the calling thread is pinned.
    pub(crate) fn synchronize(&self) {
        let _w = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        for _ in 0..2 {
            let old = self.epoch.fetch_add(1, SeqCst) & 1;
            let mut spins = 0u32;
            while self.readers[old]
                .iter()
                .map(|c| c.0.load(SeqCst))
                .sum::<usize>()
                != 0
            {
                spins += 1;
                if spins < 64 {
                    std::hint::spin_loop();
                } else {
                    std::thread::yield_now();
                }
            }
        }
    }
}

/// A cell holding an optional `Arc<T>` that pinned readers can borrow
/// without touching its reference count.
pub(crate) struct Published<T> {
    ptr: AtomicPtr<T>,
}

impl<T> Default for Published<T> {
    fn default() -> Self {
        Published {
            ptr: AtomicPtr::new(std::ptr::null_mut()),
        }
    }
}

impl<T> std::fmt::Debug for Published<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Published({:p})", self.ptr.load(SeqCst))
    }
}

// SAFETY: the cell owns an Arc<T> (as a raw pointer); sharing it lets
// threads obtain &T and clones of Arc<T>, which needs T: Send + Sync.
unsafe impl<T: Send + Sync> Send for Published<T> {}
// SAFETY: see Send.
unsafe impl<T: Send + Sync> Sync for Published<T> {}

impl<T> Published<T> {
    /// The current value, borrowed for as long as the pin lasts.
    #[inline]
    pub(crate) fn get<'p>(&self, _pin: &'p Pin<'_>) -> Option<&'p T> {
        let p = self.ptr.load(SeqCst);
        // SAFETY: a non-null pointer came from Arc::into_raw in `replace`;
        // `replace` frees a removed value only after `synchronize`, which
        // waits for every pin that may have loaded it, including `_pin`.
        unsafe { p.as_ref() }
    }

    /// The current value as a new `Arc` (to keep it beyond the pin).
    pub(crate) fn get_arc(&self, pin: &Pin<'_>) -> Option<Arc<T>> {
        let p = self.ptr.load(SeqCst);
        if p.is_null() {
            return None;
        }
        let _ = pin;
        // SAFETY: as in `get`, the pointee is alive while pinned; we add a
        // strong count before making an Arc from the raw pointer, so the
        // cell's own count is untouched.
        unsafe {
            Arc::increment_strong_count(p);
            Some(Arc::from_raw(p))
        }
    }

    /// Put `value` in the cell and drop the previous one once no reader
    /// can see it. Callers serialize writers of one cell, and must not be
    /// pinned.
    pub(crate) fn replace(&self, value: Option<Arc<T>>, epochs: &Epochs) -> Option<Arc<T>> {
        let new = value.map_or(std::ptr::null_mut(), |a| Arc::into_raw(a).cast_mut());
        let old = self.ptr.swap(new, SeqCst);
        if old.is_null() {
            return None;
        }
        epochs.synchronize();
        // SAFETY: `old` came from Arc::into_raw and was removed from the
        // cell; after synchronize no reader holds a borrow of it.
        Some(unsafe { Arc::from_raw(old) })
    }
}

impl<T> Drop for Published<T> {
    fn drop(&mut self) {
        let p = *self.ptr.get_mut();
        if !p.is_null() {
            // SAFETY: `&mut self` proves no reader borrows the value.
            drop(unsafe { Arc::from_raw(p) });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;

    struct Canary(Arc<AtomicBool>, u64);
    impl Drop for Canary {
        fn drop(&mut self) {
            self.0.store(true, SeqCst);
        }
    }

    #[test]
    fn readers_keep_values_alive_until_they_unpin() {
        let e = Epochs::default();
        let c: Published<Canary> = Published::default();
        let dropped = Arc::new(AtomicBool::new(false));
        assert!(
            c.replace(Some(Arc::new(Canary(dropped.clone(), 7))), &e)
                .is_none()
        );
        let pin = e.pin();
        assert_eq!(c.get(&pin).unwrap().1, 7);
        let kept = c.get_arc(&pin).unwrap();
        drop(pin);
        let old = c.replace(None, &e).unwrap();
        drop(old);
        assert!(!dropped.load(SeqCst), "an Arc taken under the pin keeps it");
        drop(kept);
        assert!(dropped.load(SeqCst));
    }

    #[test]
    fn replace_waits_for_pinned_readers_of_other_threads() {
        let e = Arc::new(Epochs::default());
        let c = Arc::new(Published::<Canary>::default());
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::new(AtomicBool::new(false));
        c.replace(Some(Arc::new(Canary(flag.clone(), 1))), &e);
        let readers: Vec<_> = (0..4)
            .map(|_| {
                let (e, c, stop) = (e.clone(), c.clone(), stop.clone());
                std::thread::spawn(move || {
                    let mut seen = 0u64;
                    while !stop.load(SeqCst) {
                        let pin = e.pin();
                        if let Some(v) = c.get(&pin) {
                            // The value must never be dropped while we look at it.
                            assert!(!v.0.load(SeqCst));
                            seen += v.1;
                        }
                    }
                    seen
                })
            })
            .collect();
        for i in 2..2000u64 {
            let f = Arc::new(AtomicBool::new(false));
            c.replace(Some(Arc::new(Canary(f, i))), &e);
        }
        stop.store(true, SeqCst);
        for r in readers {
            r.join().unwrap();
        }
    }
}
