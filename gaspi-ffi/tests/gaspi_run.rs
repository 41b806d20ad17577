//! Jobs of 2 and 3 ranks started by GPI-2's own `gaspi_run`: init, rank
//! and size, a `gaspi_write_notify` ring with its data checked, a barrier,
//! `gaspi_allreduce`, term. `gaspi_run` starts every rank with
//! `ssh HOST CMD`; the test puts a stand-in `ssh` first on PATH that drops
//! the host and runs the command here (and refuses the `killall` lines
//! gaspi_run sends after a failure).

use gpi2_sys::*;
use std::process::Command;

/// Set in the ranks this test starts.
const RANK_VAR: &str = "GPI2_SYS_TEST_RANK";
/// The directory where each rank that got to the end leaves a file (the
/// ranks' output is not reliable: gaspi_run may return, closing it, while
/// ranks other than 0 are still finishing).
const DONE_DIR: &str = "GPI2_SYS_TEST_DONE";

fn ok(rc: gaspi_return_t, call: &str) {
    assert_eq!(rc, GASPI_SUCCESS, "{call}: {:?}", return_name(rc));
}

fn rank_body() {
    // SAFETY: every call gets valid pointers and lengths: out parameters
    // are locals, the segment is 4 KiB and every offset stays inside it;
    // this is the only thread using GPI-2.
    unsafe {
        ok(gaspi_proc_init(GASPI_BLOCK), "gaspi_proc_init");
        let (mut me, mut n) = (0, 0);
        ok(gaspi_proc_rank(&mut me), "gaspi_proc_rank");
        ok(gaspi_proc_num(&mut n), "gaspi_proc_num");
        ok(
            gaspi_segment_create(0, 4096, GASPI_GROUP_ALL, GASPI_BLOCK, GASPI_MEM_INITIALIZED),
            "gaspi_segment_create",
        );
        let mut base: gaspi_pointer_t = std::ptr::null_mut();
        ok(gaspi_segment_ptr(0, &mut base), "gaspi_segment_ptr");
        let words = base.cast::<u64>();
        // Send area at word 0, receive area at word 256.
        for i in 0..8 {
            words.add(i).write_volatile(u64::from(me) << 32 | i as u64);
        }
        let right = (me + 1) % n;
        let left = (me + n - 1) % n;
        ok(
            gaspi_write_notify(
                0,
                0,
                right,
                0,
                2048,
                64,
                7,
                u32::from(me) + 1,
                0,
                GASPI_BLOCK,
            ),
            "gaspi_write_notify",
        );
        let mut id = 0;
        ok(
            gaspi_notify_waitsome(0, 7, 1, &mut id, GASPI_BLOCK),
            "gaspi_notify_waitsome",
        );
        let mut value = 0;
        ok(gaspi_notify_reset(0, id, &mut value), "gaspi_notify_reset");
        assert_eq!((id, value), (7, u32::from(left) + 1));
        for i in 0..8 {
            assert_eq!(
                words.add(256 + i).read_volatile(),
                u64::from(left) << 32 | i as u64
            );
        }
        ok(gaspi_wait(0, GASPI_BLOCK), "gaspi_wait");
        ok(gaspi_barrier(GASPI_GROUP_ALL, GASPI_BLOCK), "gaspi_barrier");
        let mut send = [u64::from(me) + 1, 1];
        let mut sum = [0u64; 2];
        ok(
            gaspi_allreduce(
                send.as_mut_ptr().cast(),
                sum.as_mut_ptr().cast(),
                2,
                GASPI_OP_SUM,
                GASPI_TYPE_ULONG,
                GASPI_GROUP_ALL,
                GASPI_BLOCK,
            ),
            "gaspi_allreduce",
        );
        let n64 = u64::from(n);
        assert_eq!(sum, [n64 * (n64 + 1) / 2, n64]);
        ok(gaspi_proc_term(GASPI_BLOCK), "gaspi_proc_term");
        let dir = std::env::var(DONE_DIR).expect("set by the test");
        std::fs::write(format!("{dir}/rank{me}"), b"done").expect("mark done");
    }
}

#[test]
fn ring_through_gaspi_run() {
    if std::env::var_os(RANK_VAR).is_some() {
        return rank_body();
    }
    assert!(
        !env!("GPI2_SYS_BIN").is_empty(),
        "built without GPI-2 (DOCS_RS): nothing to run"
    );
    let dir = std::env::temp_dir().join(format!("gpi2-sys-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ssh = dir.join("ssh");
    std::fs::write(
        &ssh,
        "#!/bin/sh\n# Stand-in: drop the host, run the command here; never killall.\nshift\n\
         case \"$*\" in *killall*) exit 1 ;; esac\nexec /bin/sh -c \"$*\"\n",
    )
    .unwrap();
    Command::new("chmod").arg("+x").arg(&ssh).status().unwrap();
    let path = format!(
        "{}:{}",
        dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let exe = std::env::current_exe().unwrap();
    for n in [2usize, 3] {
        let done = dir.join(format!("done{n}"));
        std::fs::create_dir_all(&done).unwrap();
        let mfile = dir.join(format!("machines{n}"));
        std::fs::write(&mfile, "localhost\n".repeat(n)).unwrap();
        // gaspi_run is a bash script (whatever /bin/sh is).
        let out = Command::new("bash")
            .arg(format!("{}/gaspi_run", env!("GPI2_SYS_BIN")))
            .arg("-m")
            .arg(&mfile)
            .arg(&exe)
            .args([
                "--exact",
                "ring_through_gaspi_run",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("PATH", &path)
            .env(RANK_VAR, "1")
            .env(DONE_DIR, &done)
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "gaspi_run -n {n} failed:\n{text}");
        // Every rank leaves its mark (ranks other than 0 may finish after
        // gaspi_run returned): wait for them, a minute at most.
        let start = std::time::Instant::now();
        let marks = || std::fs::read_dir(&done).map_or(0, |d| d.count());
        while marks() < n && start.elapsed() < std::time::Duration::from_secs(60) {
            std::thread::yield_now();
        }
        assert_eq!(marks(), n, "not every rank finished:\n{text}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
