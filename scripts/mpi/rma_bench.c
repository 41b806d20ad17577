/* The MPI twin of gaspi-bench's fence and lock benchmarks.
 * fence: epochs of MPI_Put of BYTES to the right neighbour (pattern
 * "single") or none ("zero"), closed by MPI_Win_fence.
 * lock: ranks 0..C-1 each loop MPI_Win_lock + MPI_Put of BYTES into a slot
 * of their own + MPI_Win_unlock (MODE excl-same: exclusive on the last
 * rank; excl-distinct: exclusive on the next rank; shared-same: shared on
 * the last rank; lock-all: MPI_Win_lock_all / unlock_all, put to the last
 * rank).
 * Both: 25 batches, the median time per iteration on rank 0, the last
 * iteration's data checked on every rank.
 * Usage: rma_bench fence zero|single BYTES...
 *        rma_bench lock MODE C BYTES...          (CSV on stdout) */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BATCHES 25

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static uint64_t tag(int o, int it) { return ((uint64_t)o << 40) | (uint64_t)it; }

static int lock_bench(int me, int n, const char *mode, int c, int argc, char **argv) {
    int distinct = strcmp(mode, "excl-distinct") == 0;
    int shared = strcmp(mode, "shared-same") == 0;
    int all = strcmp(mode, "lock-all") == 0;
    for (int a = 4; a < argc; a++) {
        size_t bytes = (size_t)atol(argv[a]);
        size_t elems = bytes / 8 ? bytes / 8 : 1;
        uint64_t *base, *data = calloc(elems, 8);
        MPI_Win win;
        MPI_Win_allocate(n * elems * 8, 8, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
        memset(base, 0, n * elems * 8);
        MPI_Barrier(MPI_COMM_WORLD);
        int t = distinct ? (me + 1) % n : n - 1;
        int reps = 5000, per = reps / BATCHES, it = 0;
        double samples[BATCHES] = {0};
        if (me < c) {
            for (int w = 0; w < reps / 10 + BATCHES; w++) {
                double t0 = MPI_Wtime();
                int count = w < reps / 10 ? 1 : per;
                for (int k = 0; k < count; k++) {
                    it++;
                    for (size_t i = 0; i < elems; i++) data[i] = tag(me, it);
                    if (all) MPI_Win_lock_all(0, win);
                    else MPI_Win_lock(shared ? MPI_LOCK_SHARED : MPI_LOCK_EXCLUSIVE, t, 0, win);
                    MPI_Put(data, (int)(bytes / 8), MPI_UINT64_T, t, (MPI_Aint)(me * elems), (int)(bytes / 8), MPI_UINT64_T, win);
                    if (all) MPI_Win_unlock_all(win);
                    else MPI_Win_unlock(t, win);
                }
                if (w >= reps / 10) samples[w - reps / 10] = (MPI_Wtime() - t0) * 1e6 / per;
            }
        }
        int last = reps / 10 + per * BATCHES;
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_Win_lock(MPI_LOCK_SHARED, me, 0, win);
        int ok = 1;
        for (int o = 0; o < c; o++) {
            int to = distinct ? (o + 1) % n : n - 1;
            if (to != me) continue;
            for (size_t i = 0; i < bytes / 8; i++) ok &= base[o * elems + i] == tag(o, last);
        }
        MPI_Win_unlock(me, win);
        int okall;
        MPI_Allreduce(&ok, &okall, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
        qsort(samples, BATCHES, sizeof(double), cmp);
        if (me == 0)
            printf("lock,impi:%s:c%d,%d,%zu,%.3f,%s\n", mode, c, n, bytes, samples[BATCHES / 2],
                   okall ? "true" : "false");
        MPI_Win_free(&win);
        free(data);
    }
    return 0;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int me, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    if (argc >= 5 && strcmp(argv[1], "lock") == 0) {
        int rc = lock_bench(me, n, argv[2], atoi(argv[3]), argc, argv);
        MPI_Finalize();
        return rc;
    }
    if (argc < 4 || strcmp(argv[1], "fence") != 0) {
        if (me == 0)
            fprintf(stderr, "usage: rma_bench fence zero|single BYTES...\n"
                            "       rma_bench lock MODE C BYTES...\n");
        MPI_Finalize();
        return 2;
    }
    int single = strcmp(argv[2], "single") == 0;
    for (int a = 3; a < argc; a++) {
        size_t bytes = (size_t)atol(argv[a]);
        size_t elems = bytes / 8 ? bytes / 8 : 1;
        uint64_t *base, *data = calloc(elems, 8);
        MPI_Win win;
        MPI_Win_allocate(elems * 8, 8, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
        memset(base, 0, elems * 8);
        int right = (me + 1) % n, left = (me + n - 1) % n;
        int reps = 2000, per = reps / BATCHES, it = 0;
        double samples[BATCHES];
        MPI_Win_fence(MPI_MODE_NOPRECEDE, win);
        for (int w = 0; w < reps / 10 + reps; w++) {
            double t0 = MPI_Wtime();
            int count = w < reps / 10 ? 1 : per;
            for (int k = 0; k < count; k++) {
                it++;
                for (size_t i = 0; i < elems; i++) data[i] = ((uint64_t)me << 40) | (uint64_t)it;
                if (single && bytes) MPI_Put(data, (int)(bytes / 8), MPI_UINT64_T, right, 0, (int)(bytes / 8), MPI_UINT64_T, win);
                MPI_Win_fence(0, win);
            }
            if (w >= reps / 10) {
                int b = (w - reps / 10);
                if (b < BATCHES) samples[b] = (MPI_Wtime() - t0) * 1e6 / per;
                if (b + 1 == BATCHES) break;
            }
        }
        int ok = 1;
        if (single && bytes)
            for (size_t i = 0; i < bytes / 8; i++) ok &= base[i] == (((uint64_t)left << 40) | (uint64_t)it);
        int all;
        MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
        MPI_Win_fence(MPI_MODE_NOSUCCEED, win);
        qsort(samples, BATCHES, sizeof(double), cmp);
        if (me == 0)
            printf("fence,%s:impi,%d,%zu,%.3f,%s\n", argv[2], n, single ? bytes : 0,
                   samples[BATCHES / 2], all ? "true" : "false");
        MPI_Win_free(&win);
        free(data);
    }
    MPI_Finalize();
    return 0;
}
