//! Model check of the windows' locks: the MCS-RW-RP queue lock
//! (`mcs.rs`) alone, as the `McsRw` design uses it, and under the gate
//! word of the `TwoLevel` design (`gate.rs`). Loom runs every interleaving
//! (up to three preemptions) of a few members' `lock`, `lock_all` and
//! unlock calls, the protocols' own code, and checks that a writer is
//! alone inside (no reader, no `lock_all` holder, no other writer), that
//! every request is granted (no deadlock: loom fails a model whose threads
//! all wait), that a grant always finds its waiter blocked (the `replace`
//! errors), and that the words are back at rest after.
//!
//! The words sit behind one lock, each operation one linearizable step,
//! as each of the window's is (a CPU atomic, SeqCst, or a transport's
//! atomic that is complete when it returns). Loom's own atomics would be
//! weaker (it treats SeqCst as AcqRel, so a load may return an old value),
//! and a waiter that spins would let loom explore schedules that starve
//! the member that would wake it; so the model's waiters sleep on a
//! condition variable that every change wakes, as the window's sleep on
//! their node's futex word.
//!
//! Run (`.ci/run` does): `RUSTFLAGS="--cfg gaspi_loom"
//! CARGO_TARGET_DIR=target/loom cargo test --profile loom --lib
//! mcs_model`, about a minute after a build of a minute and a half on 2
//! cores; `LOOM_MAX_PREEMPTIONS=4` raises the bound (10 minutes).

use super::gate::{Class, Gate};
use super::mcs::{Acquired, ProtocolWords, QueueLock};
use crate::error::{Error, Result};
use crate::types::Deadline;
use loom::sync::atomic::AtomicU64;
use loom::sync::atomic::Ordering::SeqCst;
use loom::sync::{Arc, Condvar, Mutex};

/// Words: the lock's four, then each member's queue node (two each).
const LOCK: usize = 0;
const fn qnode(member: usize) -> usize {
    4 + 2 * member
}
/// `inside` counts a reader as 1 and a writer as this.
const WRITER: u64 = 1 << 32;

/// The words, each operation one step under a lock (linearizable, as the
/// window's are), and a wake-up of every waiter after each change (as
/// every hand-off wakes the node's sleepers): a waiter sleeps instead of
/// spinning, so loom sees a member that waits for ever as a deadlock, and
/// never starves the member that would wake it.
struct Model {
    words: Mutex<Vec<u64>>,
    changed: Condvar,
    inside: AtomicU64,
    /// The two-level design's gate word (after the queue nodes).
    gate: usize,
}

impl Model {
    fn change(&self, w: usize, f: impl FnOnce(u64) -> u64) -> Result<u64> {
        let mut words = self.words.lock().unwrap();
        let old = words[w];
        words[w] = f(old);
        self.changed.notify_all();
        Ok(old)
    }
}

impl ProtocolWords for Model {
    type Word = usize;

    fn plus(&self, w: usize, off: usize) -> usize {
        w + off / 8
    }

    fn fetch_add(&self, w: usize, v: u64) -> Result<u64> {
        self.change(w, |old| old.wrapping_add(v))
    }

    fn compare_swap(&self, w: usize, old: u64, new: u64) -> Result<u64> {
        self.change(w, |v| if v == old { new } else { v })
    }

    fn load(&self, w: usize) -> Result<u64> {
        Ok(self.words.lock().unwrap()[w])
    }

    fn store_own(&self, w: usize, v: u64) {
        let _ = self.change(w, |_| v);
    }

    /// `Deadline::Now` looks once (a request that times out at once);
    /// otherwise sleeps until the word satisfies `pred`.
    fn await_word(&self, w: usize, pred: impl Fn(u64) -> bool, deadline: Deadline) -> Result<u64> {
        let mut words = self.words.lock().unwrap();
        loop {
            if pred(words[w]) {
                return Ok(words[w]);
            }
            if matches!(deadline, Deadline::Now) {
                return Err(Error::Timeout);
            }
            words = self.changed.wait(words).unwrap();
        }
    }

    fn describe(&self, w: usize) -> String {
        format!("{w}")
    }
}

/// What a member asks for: `lock(Shared)`, `lock(Exclusive)` or
/// `lock_all`, on the one target of the model.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Read,
    Write,
    All,
}

/// One member's request, and whether its first wait times out (then it
/// waits again, as `lock` called again does).
#[derive(Clone, Copy)]
struct Request {
    kind: Kind,
    times_out: bool,
}

const W: Request = Request {
    kind: Kind::Write,
    times_out: false,
};
const R: Request = Request {
    kind: Kind::Read,
    times_out: false,
};
const A: Request = Request {
    kind: Kind::All,
    times_out: false,
};

/// The same requests, timing out at their first wait.
const fn timing_out(r: Request) -> Request {
    Request {
        times_out: true,
        ..r
    }
}
const WT: Request = timing_out(W);
const RT: Request = timing_out(R);
const AT: Request = timing_out(A);

/// The lock designs (`LockDesign`): `McsRw` takes the queue lock for
/// every request (`lock_all` as a reader); `TwoLevel` counts `lock_all`
/// and exclusive holders in the gate word, then takes the target's queue
/// lock for shared and exclusive requests.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Design {
    McsRw,
    TwoLevel,
}

/// Wait for a queued request's grant, timing out once first if asked.
fn await_grant(
    lock: &QueueLock<'_, Model, impl Fn(u64) -> Result<usize>>,
    writer: bool,
    r: Request,
) {
    // A request that times out at its first look waits again, as `lock`
    // called again does; one granted at it is done.
    let granted = r.times_out && lock.await_grant(writer, Deadline::Now).is_ok();
    if !granted {
        lock.await_grant(writer, Deadline::Never).unwrap();
    }
}

/// Member `me` runs `requests` in turn: lock, check who is inside, unlock.
fn member(m: &Model, design: Design, me: usize, requests: &[Request]) {
    let lock = QueueLock {
        words: m,
        lock: LOCK,
        me: me as u64 + 1,
        qnode: qnode(me),
        qnode_of: |ptr: u64| -> Result<usize> {
            match ptr {
                0 => Err(Error::RmaSync("nil queue pointer followed".into())),
                p => Ok(qnode(p as usize - 1)),
            }
        },
    };
    let gate = Gate {
        words: m,
        word: m.gate,
    };
    for &r in requests {
        let class = match (design, r.kind) {
            (Design::TwoLevel, Kind::All) => Some(Class::All),
            (Design::TwoLevel, Kind::Write) => Some(Class::Exclusive),
            _ => None,
        };
        if let Some(c) = class {
            // As for the grant below: a timed-out entry leaves nothing
            // behind, and entering again starts afresh.
            let entered = r.times_out && gate.enter(c, Deadline::Now).is_ok();
            if !entered {
                gate.enter(c, Deadline::Never).unwrap();
            }
        }
        // The queue lock: every request of McsRw, the targeted ones of
        // TwoLevel.
        let queued =
            (design == Design::McsRw || r.kind != Kind::All).then_some(r.kind == Kind::Write);
        if let Some(writer) = queued
            && lock.lock(writer).unwrap() == Acquired::Queued
        {
            await_grant(&lock, writer, r);
        }
        let me_inside = if r.kind == Kind::Write { WRITER } else { 1 };
        let before = m.inside.fetch_add(me_inside, SeqCst);
        if r.kind == Kind::Write {
            assert_eq!(before, 0, "a writer met someone inside");
        } else {
            assert_eq!(before / WRITER, 0, "a reader met a writer inside");
        }
        m.inside.fetch_sub(me_inside, SeqCst);
        if let Some(writer) = queued {
            lock.unlock(writer).unwrap();
        }
        if let Some(c) = class {
            gate.leave(c).unwrap();
        }
    }
}

/// Every interleaving of the members' scripts (`scripts[i]` for member i;
/// member 0 runs on the model's main thread) under `design`.
fn check_design(design: Design, scripts: &'static [&'static [Request]]) {
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(3);
    }
    builder.check(move || {
        let gate = qnode(scripts.len());
        let m = Arc::new(Model {
            words: Mutex::new(vec![0; gate + 1]),
            changed: Condvar::new(),
            inside: AtomicU64::new(0),
            gate,
        });
        let others: Vec<_> = (1..scripts.len())
            .map(|i| {
                let m = m.clone();
                loom::thread::spawn(move || member(&m, design, i, scripts[i]))
            })
            .collect();
        member(&m, design, 0, scripts[0]);
        for t in others {
            t.join().unwrap();
        }
        // The lock's words and the gate are at rest (a queue node's may
        // keep their last values).
        let words = m.words.lock().unwrap();
        assert_eq!(words[..4], [0; 4], "lock words not at rest");
        assert_eq!(words[gate], 0, "gate word not at rest");
    });
}

/// The queue lock alone (`LockDesign::McsRw`).
fn check(scripts: &'static [&'static [Request]]) {
    check_design(Design::McsRw, scripts);
}

#[test]
fn two_writers_and_a_reader() {
    check(&[&[W], &[W], &[R]]);
}

#[test]
fn a_writer_and_two_readers() {
    check(&[&[W], &[R], &[R]]);
}

#[test]
fn members_that_read_then_write_and_write_then_read() {
    check(&[&[R, W], &[W, R]]);
}

#[test]
fn three_members_that_read_and_write() {
    check(&[&[W, R], &[R, W], &[R, R]]);
}

#[test]
fn writers_in_turn() {
    check(&[&[W, W], &[W, W]]);
}

#[test]
fn requests_that_time_out_and_wait_again() {
    check(&[&[WT], &[RT], &[W]]);
    check(&[&[W], &[RT], &[RT]]);
}

#[test]
fn two_level_lock_all_beside_writers_and_a_reader() {
    check_design(Design::TwoLevel, &[&[A], &[W], &[R]]);
}

#[test]
fn two_level_writers_and_lock_all_in_turn() {
    check_design(Design::TwoLevel, &[&[W, A], &[A, W]]);
}

#[test]
fn two_level_requests_that_time_out_and_wait_again() {
    check_design(Design::TwoLevel, &[&[WT], &[AT], &[W]]);
}
