/* OpenSHMEM counterpart of `gaspi-bench allreduce` and `gaspi-bench
 * allgatherv --dist regular` (and of scripts/mpi/coll_bench.c): the same
 * data, sizes, verification and statistics (median over 25 batches of PE
 * 0's time per call), printed as gaspi-bench CSV rows.
 *
 *   coll_bench allreduce  SIZES...   shmem_double_sum_to_all (bytes of f64 per PE)
 *   coll_bench allgatherv SIZES...   shmem_fcollect64 (bytes of u64 per PE)
 *
 * The source and the result are symmetric arrays the program owns, so the
 * result is already in the program's own buffer (SHMEM's model): the peer
 * of our private results. OpenSHMEM 1.4's active-set collectives (what
 * Open MPI 4.1's OSHMEM implements; its 1.5 team calls are missing there).
 * Open MPI 4.1.4's shmem_finalize crashes on Debian: the program flushes
 * its output and leaves with _exit after a last barrier. */
#include <shmem.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define BATCHES 25
static int me, n;
static long psync[SHMEM_REDUCE_SYNC_SIZE > SHMEM_COLLECT_SYNC_SIZE ? SHMEM_REDUCE_SYNC_SIZE
                                                                    : SHMEM_COLLECT_SYNC_SIZE];
static long psync2[SHMEM_REDUCE_SYNC_SIZE > SHMEM_COLLECT_SYNC_SIZE ? SHMEM_REDUCE_SYNC_SIZE
                                                                     : SHMEM_COLLECT_SYNC_SIZE];
static int ok_sym, all_ok;
static int iwork[SHMEM_REDUCE_MIN_WRKDATA_SIZE];

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static long reps_for(long bytes, long def, long budget) {
  long r = bytes > 0 && budget / bytes < def ? budget / bytes : def;
  if (r < BATCHES) r = BATCHES;
  return (r + BATCHES - 1) / BATCHES * BATCHES;
}

static void reset_psync(void) {
  for (size_t i = 0; i < sizeof psync / sizeof psync[0]; i++) psync[i] = psync2[i] = SHMEM_SYNC_VALUE;
  shmem_barrier_all();
}

static void row(const char *bench, const char *impl, long bytes, long reps, double *t, int ok) {
  ok_sym = ok;
  shmem_barrier_all();
  shmem_int_min_to_all(&all_ok, &ok_sym, 1, 0, 0, n, iwork, psync);
  shmem_barrier_all();
  if (me != 0) return;
  qsort(t, BATCHES, sizeof t[0], cmp);
  printf("%s,%s,%d,%d,%ld,%ld,%.3f,%.3f,%.3f,0,%s\n", bench, impl, n, n, bytes, reps, t[0],
         t[BATCHES / 2], t[BATCHES - 1], all_ok ? "true" : "false");
  fflush(stdout);
}

static double reduce_input(int r, long j, long len, long it) {
  double base = (double)((r + 1) * (j % 1000 + 1));
  return (j == 0 || j + 1 == len) ? base + (double)it : base;
}

static double reduce_expected(long j, long len, long it) {
  double s = 0;
  for (int r = 0; r < n; r++) s += reduce_input(r, j, len, it);
  return s;
}

static void allreduce(long size) {
  long len = size / 8 > 0 ? size / 8 : 1, bytes = len * 8;
  long reps = reps_for(bytes, 20000, 1L << 30), per = reps / BATCHES, warm = reps / 10;
  /* The work array: max(nreduce / 2 + 1, SHMEM_REDUCE_MIN_WRKDATA_SIZE). */
  long wlen = len / 2 + 1 > SHMEM_REDUCE_MIN_WRKDATA_SIZE ? len / 2 + 1 : SHMEM_REDUCE_MIN_WRKDATA_SIZE;
  double *send = shmem_malloc(bytes), *recv = shmem_malloc(bytes), *work = shmem_malloc(wlen * 8);
  double t[BATCHES];
  for (long j = 0; j < len; j++) send[j] = reduce_input(me, j, len, 0);
  int ok = 1;
  long it = 0;
  reset_psync();
  for (long b = -1; b < BATCHES; b++) {
    long count = b < 0 ? warm : per;
    double t0 = now_us();
    for (long k = 0; k < count; k++, it++) {
      send[0] = reduce_input(me, 0, len, it);
      send[len - 1] = reduce_input(me, len - 1, len, it);
      /* Alternate pSync arrays so back-to-back calls need no barrier. */
      shmem_double_sum_to_all(recv, send, (int)len, 0, 0, n, work, it % 2 ? psync2 : psync);
      ok &= recv[0] == reduce_expected(0, len, it) && recv[len / 2] == reduce_expected(len / 2, len, it) &&
            recv[len - 1] == reduce_expected(len - 1, len, it);
    }
    if (b >= 0) t[b] = (now_us() - t0) / per;
  }
  send[0] = reduce_input(me, 0, len, it);
  send[len - 1] = reduce_input(me, len - 1, len, it);
  shmem_double_sum_to_all(recv, send, (int)len, 0, 0, n, work, it % 2 ? psync2 : psync);
  for (long j = 0; j < len; j++) ok &= recv[j] == reduce_expected(j, len, it);
  reset_psync();
  row("allreduce", "shmem", bytes, reps, t, ok);
  shmem_free(send);
  shmem_free(recv);
  shmem_free(work);
}

static uint64_t gather_value(int r, long i, long count, long it) {
  if (i == 0 || i + 1 == count) return (uint64_t)(r + 1) * (uint64_t)(it + 1);
  return (uint64_t)r << 40 | (uint64_t)i;
}

static void allgather(long size) {
  long k = size / 8 > 0 ? size / 8 : 1, total = k * n;
  uint64_t *send = shmem_malloc(k * 8), *recv = shmem_malloc(total * 8);
  for (long i = 0; i < k; i++) send[i] = gather_value(me, i, k, 0);
  long reps = reps_for(total * 8, 5000, 1L << 30), per = reps / BATCHES, warm = reps / 10;
  double t[BATCHES];
  int ok = 1;
  long it = 0;
  reset_psync();
  for (long b = -1; b <= BATCHES; b++) {
    long count = b < 0 ? warm : b == BATCHES ? 1 : per;
    double t0 = now_us();
    for (long x = 0; x < count; x++, it++) {
      send[0] = gather_value(me, 0, k, it);
      send[k - 1] = gather_value(me, k - 1, k, it);
      shmem_fcollect64(recv, send, (size_t)k, 0, 0, n, it % 2 ? psync2 : psync);
      for (int r = 0; r < n; r++) {
        if (b == BATCHES) { /* the last call: every element */
          for (long i = 0; i < k; i++) ok &= recv[r * k + i] == gather_value(r, i, k, it);
        } else {
          ok &= recv[r * k] == gather_value(r, 0, k, it) && recv[r * k + k - 1] == gather_value(r, k - 1, k, it);
        }
      }
    }
    if (b >= 0 && b < BATCHES) t[b] = (now_us() - t0) / per;
  }
  reset_psync();
  row("allgatherv-regular", "shmem", k * 8, reps, t, ok);
  shmem_free(send);
  shmem_free(recv);
}

int main(int argc, char **argv) {
  shmem_init();
  me = shmem_my_pe();
  n = shmem_n_pes();
  if (argc < 3) {
    if (me == 0) fprintf(stderr, "usage: coll_bench allreduce SIZES... | allgatherv SIZES...\n");
    fflush(stderr);
    _exit(2);
  }
  int gather = !strcmp(argv[1], "allgatherv");
  for (int a = 2; a < argc; a++) {
    long size = atol(argv[a]);
    if (gather) allgather(size);
    else allreduce(size);
  }
  shmem_barrier_all();
  fflush(stdout);
  _exit(0);
}
