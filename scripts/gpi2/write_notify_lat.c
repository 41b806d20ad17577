/* GPI-2 alone: the write_notify ping-pong of gaspi-bench write-notify-lat
 * (ranks 0 and 1: gaspi_write_notify + gaspi_wait, then
 * gaspi_notify_waitsome + gaspi_notify_reset on the way back), timed the
 * way gaspi-bench times it: 25 batches after a warm-up batch, one-way
 * microseconds per batch (its mean), the median of the batches. GPI-2's
 * own tests/microbenchmarks/write_notify_lat reports the median of single
 * round trips instead, which on a noisy machine is much lower than any
 * mean: this program prints that too (impl gpi2-op-median), so that both
 * statistics can be set side by side. Every message is checked (its first
 * and last byte carry the iteration).
 *
 *   write_notify_lat REPS BYTES...
 *
 * Prints gaspi-bench's CSV rows (without its header): bench
 * write-notify-lat, impl gpi2 (batch medians) and gpi2-op-median.
 * Build: cc -O2 write_notify_lat.c -I$GPI2_DIR/include -L$GPI2_DIR/lib64
 * -lGPI2 -lpthread (scripts/compare-gpi2.sh does). */
#include <GASPI.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#define BATCHES 25
#define CHECK(call) do { gaspi_return_t r_ = (call); if (r_ != GASPI_SUCCESS) { \
  fprintf(stderr, "%s failed: %d\n", #call, r_); exit(1); } } while (0)

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}
static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  CHECK(gaspi_proc_init(GASPI_BLOCK));
  gaspi_rank_t me, n;
  CHECK(gaspi_proc_rank(&me));
  CHECK(gaspi_proc_num(&n));
  int reps = argc > 1 ? atoi(argv[1]) : 1000;
  size_t max = 1;
  for (int a = 2; a < argc; a++) if ((size_t)atol(argv[a]) > max) max = (size_t)atol(argv[a]);
  /* Send buffer at 0, receive buffer at `max`. */
  CHECK(gaspi_segment_create(0, 2 * max, GASPI_GROUP_ALL, GASPI_BLOCK, GASPI_MEM_INITIALIZED));
  char *seg;
  CHECK(gaspi_segment_ptr(0, (void **)&seg));
  int per = reps / BATCHES < 1 ? 1 : reps / BATCHES;
  double *op = malloc(sizeof(double) * (size_t)per * BATCHES);
  for (int a = 2; a < argc && n >= 2; a++) {
    size_t size = (size_t)atol(argv[a]);
    if (size == 0) continue;
    double batch[BATCHES];
    int bad = 0;
    gaspi_rank_t peer = me == 0 ? 1 : 0;
    CHECK(gaspi_barrier(GASPI_GROUP_ALL, GASPI_BLOCK));
    if (me < 2) {
      for (int b = -1; b < BATCHES; b++) { /* batch -1 warms up */
        double t0 = now_us();
        for (int k = 0; k < per; k++) {
          char i = (char)(((b + 1) * per + k) % 251 + 1);
          double s = now_us();
          for (int leg = 0; leg < 2; leg++) {
            if (leg == me) { /* send: rank 0 first, rank 1 second */
              seg[0] = i;
              seg[size - 1] = i;
              CHECK(gaspi_write_notify(0, 0, peer, 0, max, size, (gaspi_notification_id_t)me, 1, 0, GASPI_BLOCK));
              CHECK(gaspi_wait(0, GASPI_BLOCK));
            } else {
              gaspi_notification_id_t got;
              gaspi_notification_t v;
              CHECK(gaspi_notify_waitsome(0, (gaspi_notification_id_t)peer, 1, &got, GASPI_BLOCK));
              CHECK(gaspi_notify_reset(0, got, &v));
              if (seg[max] != i || seg[max + size - 1] != i) bad++;
            }
          }
          if (b >= 0) op[b * per + k] = (now_us() - s) / 2;
        }
        if (b >= 0) batch[b] = (now_us() - t0) / (2.0 * per);
      }
    }
    /* Rank 1's verdict to rank 0: one more notification, value 1 + bad. */
    if (me == 1) {
      CHECK(gaspi_notify(0, 0, 2, (gaspi_notification_t)(1 + bad), 0, GASPI_BLOCK));
      CHECK(gaspi_wait(0, GASPI_BLOCK));
    }
    if (me == 0) {
      gaspi_notification_id_t got;
      gaspi_notification_t v;
      CHECK(gaspi_notify_waitsome(0, 2, 1, &got, GASPI_BLOCK));
      CHECK(gaspi_notify_reset(0, got, &v));
      bad += (int)v - 1;
      qsort(batch, BATCHES, sizeof batch[0], cmp);
      qsort(op, (size_t)per * BATCHES, sizeof op[0], cmp);
      const char *ok = bad ? "false" : "true";
      int total = per * BATCHES;
      printf("write-notify-lat,gpi2,%d,1,%zu,%d,%.3f,%.3f,%.3f,%.1f,%s\n", n, size, total,
             batch[0], batch[BATCHES / 2], batch[BATCHES - 1], size / batch[BATCHES / 2], ok);
      printf("write-notify-lat,gpi2-op-median,%d,1,%zu,%d,%.3f,%.3f,%.3f,%.1f,%s\n", n, size, total,
             op[0], op[total / 2], op[total - 1], size / op[total / 2], ok);
      fflush(stdout);
    }
  }
  CHECK(gaspi_barrier(GASPI_GROUP_ALL, GASPI_BLOCK));
  CHECK(gaspi_proc_term(GASPI_BLOCK));
  return 0;
}
