/* MPI counterpart of `gaspi-bench allreduce`, `allgatherv` and `alltoallv`:
 * the same data, sizes, verification and statistics (median over 25
 * batches of rank 0's time per call), printed as gaspi-bench CSV rows so
 * that scripts can put both side by side.
 *
 *   coll_bench allreduce  IMPL SIZES...            (bytes of f64 per rank)
 *   coll_bench allgatherv IMPL DIST SIZES...       (mean bytes of u64 per rank)
 *   coll_bench alltoallv  IMPL DIST SIZES...       (mean bytes of u64 per pair)
 *
 * IMPL only labels the rows (e.g. impi-3 for I_MPI_ADJUST_ALLREDUCE=3);
 * DIST is regular, decreasing or bcast (Al Ahad et al. 2018) for
 * allgatherv, regular, random or sparse for alltoallv (gaspi-bench's
 * pair_counts: src/bin/gaspi-bench/alltoallv.rs). */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BATCHES 25
static int me, n;

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Repetitions like gaspi-bench: `def`, shrunk to move at most `budget`
 * bytes, at least one per batch, a multiple of BATCHES. */
static long reps_for(long bytes, long def, long budget) {
  long r = bytes > 0 && budget / bytes < def ? budget / bytes : def;
  if (r < BATCHES) r = BATCHES;
  return (r + BATCHES - 1) / BATCHES * BATCHES;
}

static void row(const char *bench, const char *impl, long bytes, long reps, double *t, int ok) {
  int all_ok;
  MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
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

static void allreduce(const char *impl, long size) {
  long len = size / 8 > 0 ? size / 8 : 1, bytes = len * 8;
  long reps = reps_for(bytes, 20000, 1L << 30), per = reps / BATCHES, warm = reps / 10;
  double *send = malloc(bytes), *recv = malloc(bytes), t[BATCHES];
  for (long j = 0; j < len; j++) send[j] = reduce_input(me, j, len, 0);
  int ok = 1;
  long it = 0;
  MPI_Barrier(MPI_COMM_WORLD);
  for (long b = -1; b < BATCHES; b++) {
    long count = b < 0 ? warm : per;
    double t0 = MPI_Wtime();
    for (long k = 0; k < count; k++, it++) {
      send[0] = reduce_input(me, 0, len, it);
      send[len - 1] = reduce_input(me, len - 1, len, it);
      MPI_Allreduce(send, recv, (int)len, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
      ok &= recv[0] == reduce_expected(0, len, it) && recv[len / 2] == reduce_expected(len / 2, len, it) &&
            recv[len - 1] == reduce_expected(len - 1, len, it);
    }
    if (b >= 0) t[b] = (MPI_Wtime() - t0) * 1e6 / per;
  }
  send[0] = reduce_input(me, 0, len, it);
  send[len - 1] = reduce_input(me, len - 1, len, it);
  MPI_Allreduce(send, recv, (int)len, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  for (long j = 0; j < len; j++) ok &= recv[j] == reduce_expected(j, len, it);
  row("allreduce", impl, bytes, reps, t, ok);
  free(send);
  free(recv);
}

static long count_of(const char *dist, int i, long c) {
  if (!strcmp(dist, "decreasing") && n > 1) return 2 * c * (n - 1 - i) / (n - 1);
  if (!strcmp(dist, "bcast")) return i == 0 ? (long)n * c : 0;
  return c;
}

static uint64_t gather_value(int r, long i, long count, long it) {
  if (i == 0 || i + 1 == count) return (uint64_t)(r + 1) * (uint64_t)(it + 1);
  return (uint64_t)r << 40 | (uint64_t)i;
}

static void allgatherv(const char *impl, const char *dist, long size) {
  long c = size / 8 > 0 ? size / 8 : 1;
  int *counts = malloc(n * sizeof(int)), *displs = malloc(n * sizeof(int));
  long total = 0;
  for (int r = 0; r < n; r++) {
    counts[r] = (int)count_of(dist, r, c);
    displs[r] = (int)total;
    total += counts[r];
  }
  long k = counts[me];
  uint64_t *send = malloc((k > 0 ? k : 1) * 8), *recv = malloc(total * 8);
  for (long i = 0; i < k; i++) send[i] = gather_value(me, i, k, 0);
  long reps = reps_for(total * 8, 5000, 1L << 30), per = reps / BATCHES, warm = reps / 10;
  double t[BATCHES];
  int ok = 1;
  long it = 0;
  MPI_Barrier(MPI_COMM_WORLD);
  for (long b = -1; b <= BATCHES; b++) {
    long count = b < 0 ? warm : b == BATCHES ? 1 : per;
    double t0 = MPI_Wtime();
    for (long x = 0; x < count; x++, it++) {
      if (k > 0) {
        send[0] = gather_value(me, 0, k, it);
        send[k - 1] = gather_value(me, k - 1, k, it);
      }
      MPI_Allgatherv(send, (int)k, MPI_UINT64_T, recv, counts, displs, MPI_UINT64_T, MPI_COMM_WORLD);
      for (int r = 0; r < n; r++) {
        long kr = counts[r];
        if (kr == 0) continue;
        if (b == BATCHES) { /* the last call: every element */
          for (long i = 0; i < kr; i++) ok &= recv[displs[r] + i] == gather_value(r, i, kr, it);
        } else {
          ok &= recv[displs[r]] == gather_value(r, 0, kr, it) &&
                recv[displs[r] + kr - 1] == gather_value(r, kr - 1, kr, it);
        }
      }
    }
    if (b >= 0 && b < BATCHES) t[b] = (MPI_Wtime() - t0) * 1e6 / per;
  }
  char bench[64];
  snprintf(bench, sizeof bench, "allgatherv-%s", dist);
  row(bench, impl, c * 8, reps, t, ok);
  free(send);
  free(recv);
  free(counts);
  free(displs);
}

/* gaspi-bench's alltoallv counts and values (alltoallv.rs: mix, pair_counts,
 * value). */
static uint64_t mix(uint64_t a) {
  uint64_t x = a * 0x9E3779B97F4A7C15ull;
  x ^= x >> 29;
  x *= 0xBF58476D1CE4E5B9ull;
  return x ^ (x >> 32);
}

static long a2a_count(const char *dist, long i, long c) {
  uint64_t h = mix((uint64_t)i + 1);
  if (!strcmp(dist, "random")) return (long)(h % (uint64_t)(2 * c + 1));
  int ring = i % n == (i / n + 1) % n;
  if (!strcmp(dist, "sparse")) return ring || h % 8 == 0 ? 8 * c : 0;
  return c;
}

static uint64_t a2a_value(int s, int t, long i, long k, long it) {
  uint64_t pair = (uint64_t)s << 48 | (uint64_t)t << 32;
  if (i == 0 || i + 1 == k) return pair | (uint64_t)it;
  return pair | 1ull << 31 | (uint64_t)i;
}

static void alltoallv(const char *impl, const char *dist, long size) {
  long c = size / 8 > 0 ? size / 8 : 1, total = 0;
  int *sc = malloc(n * sizeof(int)), *sd = malloc(n * sizeof(int));
  int *rc = malloc(n * sizeof(int)), *rd = malloc(n * sizeof(int));
  long sent = 0, got = 0;
  for (long i = 0; i < (long)n * n; i++) total += a2a_count(dist, i, c);
  for (int r = 0; r < n; r++) {
    sc[r] = (int)a2a_count(dist, (long)me * n + r, c);
    sd[r] = (int)sent;
    sent += sc[r];
    rc[r] = (int)a2a_count(dist, (long)r * n + me, c);
    rd[r] = (int)got;
    got += rc[r];
  }
  uint64_t *send = malloc((sent > 0 ? sent : 1) * 8), *recv = malloc((got > 0 ? got : 1) * 8);
  for (int t = 0; t < n; t++)
    for (long i = 0; i < sc[t]; i++) send[sd[t] + i] = a2a_value(me, t, i, sc[t], 0);
  long reps = reps_for(total * 8 / n, 5000, 1L << 30), per = reps / BATCHES, warm = reps / 10;
  double t[BATCHES];
  int ok = 1;
  long it = 0;
  MPI_Barrier(MPI_COMM_WORLD);
  for (long b = -1; b <= BATCHES; b++) {
    long count = b < 0 ? warm : b == BATCHES ? 1 : per;
    double t0 = MPI_Wtime();
    for (long x = 0; x < count; x++, it++) {
      for (int q = 0; q < n; q++) {
        long k = sc[q];
        if (k == 0) continue;
        send[sd[q]] = a2a_value(me, q, 0, k, it);
        send[sd[q] + k - 1] = a2a_value(me, q, k - 1, k, it);
      }
      MPI_Alltoallv(send, sc, sd, MPI_UINT64_T, recv, rc, rd, MPI_UINT64_T, MPI_COMM_WORLD);
      for (int s = 0; s < n; s++) {
        long k = rc[s];
        if (k == 0) continue;
        if (b == BATCHES) { /* the last call: every element */
          for (long i = 0; i < k; i++) ok &= recv[rd[s] + i] == a2a_value(s, me, i, k, it);
        } else {
          ok &= recv[rd[s]] == a2a_value(s, me, 0, k, it) && recv[rd[s] + k - 1] == a2a_value(s, me, k - 1, k, it);
        }
      }
    }
    if (b >= 0 && b < BATCHES) t[b] = (MPI_Wtime() - t0) * 1e6 / per;
  }
  char bench[64];
  snprintf(bench, sizeof bench, "alltoallv-%s", dist);
  row(bench, impl, c * 8, reps, t, ok);
  free(send);
  free(recv);
  free(sc);
  free(sd);
  free(rc);
  free(rd);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  if (argc < 4) {
    if (me == 0)
      fprintf(stderr, "usage: coll_bench allreduce IMPL SIZES... | allgatherv|alltoallv IMPL DIST SIZES...\n");
    MPI_Finalize();
    return 2;
  }
  int gather = !strcmp(argv[1], "allgatherv"), a2a = !strcmp(argv[1], "alltoallv");
  for (int a = gather || a2a ? 4 : 3; a < argc; a++) {
    long size = atol(argv[a]);
    if (gather) allgatherv(argv[2], argv[3], size);
    else if (a2a) alltoallv(argv[2], argv[3], size);
    else allreduce(argv[2], size);
  }
  MPI_Finalize();
  return 0;
}
