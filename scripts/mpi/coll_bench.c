/* MPI counterpart of `gaspi-bench allreduce`, `allgatherv` and `alltoallv`:
 * the same data, sizes, verification and statistics (median over 25
 * batches of rank 0's time per call), printed as gaspi-bench CSV rows so
 * that scripts can put both side by side.
 *
 *   coll_bench allreduce  IMPL SIZES...            (bytes of f64 per rank)
 *   coll_bench allgatherv IMPL DIST SIZES...       (mean bytes of u64 per rank)
 *   coll_bench alltoallv  IMPL DIST SIZES...       (mean bytes of u64 per pair)
 *   coll_bench alltoallv-unknown IMPL DIST SIZES... (the same, counts learned
 *                                                   in each call)
 *   coll_bench alltoallv-varying IMPL DIST SIZES... (the same, counts that
 *                                                   change every call)
 *
 * IMPL only labels the rows (e.g. impi-3 for I_MPI_ADJUST_ALLREDUCE=3);
 * DIST is regular, decreasing or bcast (Al Ahad et al. 2018) for
 * allgatherv, regular, random or sparse for alltoallv (gaspi-bench's
 * pair_counts: src/bin/gaspi-bench/alltoallv.rs).
 *
 * alltoallv-unknown is the MPI twin of `gaspi-bench alltoallv --impl
 * unknown-private` (sizes unknown in advance): each call first learns what
 * it receives with an MPI_Alltoall of the send counts, computes the
 * receive displacements, then calls MPI_Alltoallv into a buffer sized for
 * the most any rank receives (what an MPI code that does not know its
 * counts must do); its rows are named alltoallv-unknown-DIST.
 * alltoallv-varying (rows alltoallv-varying-DIST) is the twin of
 * unknown-varying: every other call adds an element to every other
 * non-empty piece. */
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

/* Run `reps` calls like gaspi-bench: reps / 10 warm-up calls, BATCHES
 * timed batches of reps / BATCHES (rank 0's time per call into t), then one
 * more call checked element by element. call(arg, it, full) runs call
 * number `it` and says whether its result checked out (every element if
 * `full`, else the ones that change every call). */
static int timed(long reps, int (*call)(void *, long, int), void *arg, double *t) {
  long per = reps / BATCHES, warm = reps / 10, it = 0;
  int ok = 1;
  MPI_Barrier(MPI_COMM_WORLD);
  for (long b = -1; b <= BATCHES; b++) {
    long count = b < 0 ? warm : b == BATCHES ? 1 : per;
    double t0 = MPI_Wtime();
    for (long x = 0; x < count; x++, it++) ok &= call(arg, it, b == BATCHES);
    if (b >= 0 && b < BATCHES) t[b] = (MPI_Wtime() - t0) * 1e6 / per;
  }
  return ok;
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

struct reduce { double *send, *recv; long len; };

static int reduce_call(void *arg, long it, int full) {
  struct reduce *a = arg;
  long len = a->len;
  a->send[0] = reduce_input(me, 0, len, it);
  a->send[len - 1] = reduce_input(me, len - 1, len, it);
  MPI_Allreduce(a->send, a->recv, (int)len, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  int ok = 1;
  if (full) {
    for (long j = 0; j < len; j++) ok &= a->recv[j] == reduce_expected(j, len, it);
  } else {
    ok = a->recv[0] == reduce_expected(0, len, it) && a->recv[len / 2] == reduce_expected(len / 2, len, it) &&
         a->recv[len - 1] == reduce_expected(len - 1, len, it);
  }
  return ok;
}

static void allreduce(const char *impl, long size) {
  long len = size / 8 > 0 ? size / 8 : 1, bytes = len * 8;
  long reps = reps_for(bytes, 20000, 1L << 30);
  struct reduce a = {malloc(bytes), malloc(bytes), len};
  double t[BATCHES];
  for (long j = 0; j < len; j++) a.send[j] = reduce_input(me, j, len, 0);
  int ok = timed(reps, reduce_call, &a, t);
  row("allreduce", impl, bytes, reps, t, ok);
  free(a.send);
  free(a.recv);
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

struct gather { uint64_t *send, *recv; int *counts, *displs; };

static int gather_call(void *arg, long it, int full) {
  struct gather *a = arg;
  long k = a->counts[me];
  int ok = 1;
  if (k > 0) {
    a->send[0] = gather_value(me, 0, k, it);
    a->send[k - 1] = gather_value(me, k - 1, k, it);
  }
  MPI_Allgatherv(a->send, (int)k, MPI_UINT64_T, a->recv, a->counts, a->displs, MPI_UINT64_T, MPI_COMM_WORLD);
  for (int r = 0; r < n; r++) {
    long kr = a->counts[r], at = a->displs[r];
    if (kr == 0) continue;
    if (full) {
      for (long i = 0; i < kr; i++) ok &= a->recv[at + i] == gather_value(r, i, kr, it);
    } else {
      ok &= a->recv[at] == gather_value(r, 0, kr, it) && a->recv[at + kr - 1] == gather_value(r, kr - 1, kr, it);
    }
  }
  return ok;
}

static void allgatherv(const char *impl, const char *dist, long size) {
  long c = size / 8 > 0 ? size / 8 : 1;
  struct gather a = {NULL, NULL, malloc(n * sizeof(int)), malloc(n * sizeof(int))};
  long total = 0;
  for (int r = 0; r < n; r++) {
    a.counts[r] = (int)count_of(dist, r, c);
    a.displs[r] = (int)total;
    total += a.counts[r];
  }
  long k = a.counts[me];
  a.send = malloc((k > 0 ? k : 1) * 8);
  a.recv = malloc((total > 0 ? total : 1) * 8);
  for (long i = 0; i < k; i++) a.send[i] = gather_value(me, i, k, 0);
  long reps = reps_for(total * 8, 5000, 1L << 30);
  double t[BATCHES];
  int ok = timed(reps, gather_call, &a, t);
  char bench[64];
  snprintf(bench, sizeof bench, "allgatherv-%s", dist);
  row(bench, impl, c * 8, reps, t, ok);
  free(a.send);
  free(a.recv);
  free(a.counts);
  free(a.displs);
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

/* unknown-varying's odd calls: one element more in every non-empty piece
 * at an odd index i = s * n + t (alltoallv.rs: varied). */
static long a2a_turn_count(const char *dist, long i, long c, int turn) {
  long k = a2a_count(dist, i, c);
  return k + (turn && k > 0 && i % 2 == 1);
}

/* A call's counts and buffers: one turn, or two in alternation (counts
 * that vary); recv is shared. rc/rd are what the call receives (learned in
 * the call where sizes are unknown), expect what it should. */
struct turn { uint64_t *send; int *sc, *sd, *expect, *ed; };
struct a2a { struct turn t[2]; int turns; uint64_t *recv; int *rc, *rd; int unknown; };

static int a2a_call(void *arg, long it, int full) {
  struct a2a *a = arg;
  struct turn *u = &a->t[it % a->turns];
  int ok = 1;
  for (int q = 0; q < n; q++) {
    long k = u->sc[q];
    if (k == 0) continue;
    u->send[u->sd[q]] = a2a_value(me, q, 0, k, it);
    u->send[u->sd[q] + k - 1] = a2a_value(me, q, k - 1, k, it);
  }
  if (a->unknown) {
    /* The counts first, then the places they give. */
    MPI_Alltoall(u->sc, 1, MPI_INT, a->rc, 1, MPI_INT, MPI_COMM_WORLD);
    int at = 0;
    for (int s = 0; s < n; s++) {
      ok &= a->rc[s] == u->expect[s];
      a->rd[s] = at;
      at += a->rc[s];
    }
  } else {
    memcpy(a->rc, u->expect, n * sizeof(int));
    memcpy(a->rd, u->ed, n * sizeof(int));
  }
  MPI_Alltoallv(u->send, u->sc, u->sd, MPI_UINT64_T, a->recv, a->rc, a->rd, MPI_UINT64_T, MPI_COMM_WORLD);
  for (int s = 0; s < n; s++) {
    long k = a->rc[s], at = a->rd[s];
    if (k == 0) continue;
    if (full) {
      for (long i = 0; i < k; i++) ok &= a->recv[at + i] == a2a_value(s, me, i, k, it);
    } else {
      ok &= a->recv[at] == a2a_value(s, me, 0, k, it) && a->recv[at + k - 1] == a2a_value(s, me, k - 1, k, it);
    }
  }
  return ok;
}

/* unknown: counts learned in each call; turns: 2 where they vary. */
static void alltoallv(const char *impl, const char *dist, long size, int unknown, int turns) {
  long c = size / 8 > 0 ? size / 8 : 1, total = 0, most = 0;
  struct a2a a = {.turns = turns, .rc = malloc(n * sizeof(int)), .rd = malloc(n * sizeof(int)), .unknown = unknown};
  for (long i = 0; i < (long)n * n; i++) total += a2a_count(dist, i, c);
  for (int v = 0; v < turns; v++) {
    struct turn *u = &a.t[v];
    long sent = 0, got = 0;
    u->sc = malloc(n * sizeof(int));
    u->sd = malloc(n * sizeof(int));
    u->expect = malloc(n * sizeof(int));
    u->ed = malloc(n * sizeof(int));
    for (int r = 0; r < n; r++) {
      long in = 0;
      for (int s = 0; s < n; s++) in += a2a_turn_count(dist, (long)s * n + r, c, v);
      if (in > most) most = in;
      u->sc[r] = (int)a2a_turn_count(dist, (long)me * n + r, c, v);
      u->sd[r] = (int)sent;
      sent += u->sc[r];
      u->expect[r] = (int)a2a_turn_count(dist, (long)r * n + me, c, v);
      u->ed[r] = (int)got;
      got += u->expect[r];
    }
    u->send = malloc((sent > 0 ? sent : 1) * 8);
    for (int t = 0; t < n; t++)
      for (long i = 0; i < u->sc[t]; i++) u->send[u->sd[t] + i] = a2a_value(me, t, i, u->sc[t], 0);
  }
  /* Room for the most any rank receives (sizes unknown: what a code that
   * does not know its counts must allocate). */
  a.recv = malloc((most > 0 ? most : 1) * 8);
  long reps = reps_for(total * 8 / n, 5000, 1L << 30);
  double t[BATCHES];
  int ok = timed(reps, a2a_call, &a, t);
  char bench[64];
  snprintf(bench, sizeof bench, "alltoallv-%s%s", turns > 1 ? "varying-" : unknown ? "unknown-" : "", dist);
  row(bench, impl, c * 8, reps, t, ok);
  for (int v = 0; v < turns; v++) {
    free(a.t[v].send);
    free(a.t[v].sc);
    free(a.t[v].sd);
    free(a.t[v].expect);
    free(a.t[v].ed);
  }
  free(a.recv);
  free(a.rc);
  free(a.rd);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  if (argc < 4) {
    if (me == 0)
      fprintf(stderr,
              "usage: coll_bench allreduce IMPL SIZES... | allgatherv|alltoallv|alltoallv-unknown|alltoallv-varying IMPL DIST SIZES...\n");
    MPI_Finalize();
    return 2;
  }
  int gather = !strcmp(argv[1], "allgatherv"), varying = !strcmp(argv[1], "alltoallv-varying");
  int unknown = varying || !strcmp(argv[1], "alltoallv-unknown");
  int a2a = unknown || !strcmp(argv[1], "alltoallv");
  for (int a = gather || a2a ? 4 : 3; a < argc; a++) {
    long size = atol(argv[a]);
    if (gather) allgatherv(argv[2], argv[3], size);
    else if (a2a) alltoallv(argv[2], argv[3], size, unknown, varying ? 2 : 1);
    else allreduce(argv[2], size);
  }
  MPI_Finalize();
  return 0;
}
