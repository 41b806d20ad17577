/* Notified 8-byte put ping-pong with MPI-3 RMA (the MPI counterpart of
 * gaspi-bench write-notify-lat): put data + flush, put flag
 * + flush; the target polls its own window (MPI_Win_sync) for the flag,
 * with MPI_Iprobe beside it: MPICH over UCX serves a put to a window only
 * when the target calls into MPI (without it, this program hangs there).
 * Prints the median one-way latency over batches, like gaspi-bench. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#define BATCHES 25
static void poll(MPI_Win win) { int f; MPI_Win_sync(win); MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &f, MPI_STATUS_IGNORE); }
static int cmp(const void *a, const void *b) { double x = *(double*)a, y = *(double*)b; return (x > y) - (x < y); }
int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int me; MPI_Comm_rank(MPI_COMM_WORLD, &me);
  int reps = argc > 1 ? atoi(argv[1]) : 20000;
  volatile int64_t *buf; MPI_Win win;
  MPI_Win_allocate(4 * sizeof(int64_t), sizeof(int64_t), MPI_INFO_NULL, MPI_COMM_WORLD, (void*)&buf, &win);
  buf[0] = buf[1] = buf[2] = buf[3] = 0;
  MPI_Win_lock_all(0, win);
  MPI_Barrier(MPI_COMM_WORLD);
  int peer = 1 - me, per = reps / BATCHES, bad = 0; double t[BATCHES];
  int64_t src[2];
  for (int b = -1; b < BATCHES; b++) {          /* batch -1 warms up */
    double t0 = MPI_Wtime();
    for (int k = 0; k < per; k++) {
      int64_t i = (int64_t)(b + 1) * per + k + 1;
      if (me == 0) {
        src[0] = i; MPI_Put(&src[0], 1, MPI_INT64_T, peer, 0, 1, MPI_INT64_T, win); MPI_Win_flush(peer, win);
        src[1] = i; MPI_Put(&src[1], 1, MPI_INT64_T, peer, 1, 1, MPI_INT64_T, win); MPI_Win_flush(peer, win);
        while (buf[1] != i) poll(win);
        if (buf[0] != i) bad++;
      } else {
        while (buf[1] != i) poll(win);
        if (buf[0] != i) bad++;
        src[0] = i; MPI_Put(&src[0], 1, MPI_INT64_T, peer, 0, 1, MPI_INT64_T, win); MPI_Win_flush(peer, win);
        src[1] = i; MPI_Put(&src[1], 1, MPI_INT64_T, peer, 1, 1, MPI_INT64_T, win); MPI_Win_flush(peer, win);
      }
    }
    if (b >= 0) t[b] = (MPI_Wtime() - t0) * 1e6 / (2.0 * per);
  }
  qsort(t, BATCHES, sizeof t[0], cmp);
  if (me == 0) printf("mpi-notified-put-8B one-way median %.3f us (min %.3f max %.3f) verified=%s\n", t[BATCHES/2], t[0], t[BATCHES-1], bad ? "NO" : "yes");
  MPI_Win_unlock_all(win); MPI_Win_free(&win); MPI_Finalize();
  return 0;
}
