/* Notified put ping-pong with MPI-3 RMA (the MPI counterpart of
 * gaspi-bench write-notify-lat): put the data + flush, put a flag + flush;
 * the target polls its own window (MPI_Win_sync) for the flag, with
 * MPI_Iprobe beside it: MPICH over UCX serves a put to a window only when
 * the target calls into MPI (without it, this program hangs there).
 *
 *   notified_put_lat [REPS] [BYTES] [dynamic|allocate|create] [put|acc] [single|multiple] [progress|idle]
 *
 * `put` (the default) writes the flag with MPI_Put; `acc` as the engine
 * notifies: two element-atomic MPI_Accumulate (a 32-bit value with
 * MPI_REPLACE, a 64-bit summary word with MPI_BOR; the flag is the
 * summary word) before the flush. MPI promises nothing about a put that
 * meets a concurrent local load or store (the engine's mover swaps landed
 * values to 0), an accumulate is atomic per element: `acc` is the
 * cheapest sequence with the engine's guarantee, `put` the fastest.
 *
 * `dynamic` (the default) is the window the MPI engine uses: one
 * MPI_Win_create_dynamic with the memory attached, puts of at most 64 KiB
 * (as the engine issues them: MPICH moves longer ones by a slower
 * protocol). `allocate` is MPI_Win_allocate, whose memory MPI places
 * itself (on one machine MPICH maps it shared), with single puts; with
 * MPICH 4.0.2 here it hangs from 64 KiB on (not understood), so the
 * comparison script runs it at 8 B only. `create` is MPI_Win_create over
 * memory of the program's (as a window made over each segment would be),
 * single puts.
 *
 * `idle`: the waiting side spins on its flag without calling MPI at all,
 * to learn whether the library completes a put without the target's help
 * (true RMA). The program then gives up after 5 s with exit status 3 and
 * says so. MPICH 4.0.2 ch4:ucx on one machine (UCX_TLS default, sm,
 * self,cma,posix or self,tcp): every window kind gives up, `create` too.
 *
 * `multiple` starts MPI with MPI_THREAD_MULTIPLE, as the engine does (its
 * relay thread calls MPI beside the rank): every MPI call then takes the
 * library's lock, a cost any threaded runtime pays on top of `single`.
 * Prints the median one-way latency over batches, like gaspi-bench. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <signal.h>
#include <unistd.h>
#define BATCHES 25
#define CHUNK 65536
static int idle;
static void no_progress(int sig) {
  (void)sig;
  static const char m[] = "notified_put_lat: no put completed in 5 s while the target did not call MPI (no progress without the target)\n";
  if (write(2, m, sizeof m - 1) < 0) {}
  _exit(3);
}
static void poll(MPI_Win win) {
  if (idle) { __sync_synchronize(); return; } int f; MPI_Win_sync(win); MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &f, MPI_STATUS_IGNORE); }
static int cmp(const void *a, const void *b) { double x = *(double*)a, y = *(double*)b; return (x > y) - (x < y); }
int main(int argc, char **argv) {
  int multiple = argc > 5 && strcmp(argv[5], "multiple") == 0, provided;
  MPI_Init_thread(&argc, &argv, multiple ? MPI_THREAD_MULTIPLE : MPI_THREAD_SINGLE, &provided);
  if (multiple && provided != MPI_THREAD_MULTIPLE) { fprintf(stderr, "no MPI_THREAD_MULTIPLE\n"); MPI_Abort(MPI_COMM_WORLD, 1); }
  int me; MPI_Comm_rank(MPI_COMM_WORLD, &me);
  int reps = argc > 1 ? atoi(argv[1]) : 20000;
  size_t size = argc > 2 ? (size_t)atol(argv[2]) : 8;
  const char *kind = argc > 3 ? argv[3] : "dynamic";
  int dynamic = strcmp(kind, "allocate") != 0 && strcmp(kind, "create") != 0;
  int create = strcmp(kind, "create") == 0;
  idle = argc > 6 && strcmp(argv[6], "idle") == 0;
  int acc = argc > 4 && strcmp(argv[4], "acc") == 0;
  size_t chunk = dynamic ? CHUNK : size;
  if (chunk == 0) chunk = 1;
  /* data, a 32-bit value word (acc), then the flag in its own aligned word */
  size_t value_at = (size + 7) / 8 * 8, flag_at = value_at + 8, bytes = flag_at + 8;
  char *buf; MPI_Win win; MPI_Aint base = 0, peer_base;
  if (dynamic) {
    buf = malloc(bytes);
    MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    MPI_Win_attach(win, buf, bytes);
    MPI_Get_address(buf, &base);
  } else if (create) {
    buf = malloc(bytes);
    MPI_Win_create(buf, bytes, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win);
  } else {
    MPI_Win_allocate(bytes, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &buf, &win);
  }
  memset(buf, 0, bytes);
  int peer = 1 - me, per = reps / BATCHES, bad = 0; double t[BATCHES];
  MPI_Sendrecv(&base, sizeof base, MPI_BYTE, peer, 0, &peer_base, sizeof peer_base, MPI_BYTE, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  MPI_Win_lock_all(0, win);
  MPI_Barrier(MPI_COMM_WORLD);
  char *src = malloc(size + 1);
  volatile int64_t *flag = (volatile int64_t *)(buf + flag_at);
  int64_t v;
  if (idle) { signal(SIGALRM, no_progress); alarm(5); }
  for (int b = -1; b < BATCHES; b++) {          /* batch -1 warms up */
    double t0 = MPI_Wtime();
    for (int k = 0; k < per; k++) {
      int64_t i = (int64_t)(b + 1) * per + k + 1;
      if (me == 1) {
        while (*flag != i) poll(win);
        if (size && buf[size - 1] != (char)i) bad++;
      }
      memset(src, (char)i, size);
      for (size_t o = 0; o < size; o += chunk) {
        int n = (int)(size - o < chunk ? size - o : chunk);
        MPI_Put(src + o, n, MPI_BYTE, peer, peer_base + o, n, MPI_BYTE, win);
      }
      MPI_Win_flush(peer, win);
      v = i;
      if (acc) {
        /* the summary word carries the message number here (MPI_REPLACE)
         * for the poller to see; the engine's MPI_BOR costs the same */
        uint32_t value = 1;
        MPI_Accumulate(&value, 1, MPI_UINT32_T, peer, peer_base + value_at, 1, MPI_UINT32_T, MPI_REPLACE, win);
        MPI_Accumulate(&v, 1, MPI_INT64_T, peer, peer_base + flag_at, 1, MPI_INT64_T, MPI_REPLACE, win);
      } else {
        MPI_Put(&v, 1, MPI_INT64_T, peer, peer_base + flag_at, 1, MPI_INT64_T, win);
      }
      MPI_Win_flush(peer, win);
      if (me == 0) {
        while (*flag != i) poll(win);
        if (size && buf[size - 1] != (char)i) bad++;
      }
    }
    if (b >= 0) t[b] = (MPI_Wtime() - t0) * 1e6 / (2.0 * per);
  }
  qsort(t, BATCHES, sizeof t[0], cmp);
  if (me == 0) printf("mpi-notified-%s%s %zu B %s one-way median %.3f us (min %.3f max %.3f) verified=%s\n", acc ? "acc" : "put", multiple ? "-mt" : "", size, kind, t[BATCHES/2], t[0], t[BATCHES-1], bad ? "NO" : "yes");
  MPI_Win_unlock_all(win); MPI_Win_free(&win); MPI_Finalize();
  return 0;
}
