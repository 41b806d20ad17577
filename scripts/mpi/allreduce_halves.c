/* Two ranks allreduce (sum) N bytes of doubles, six ways, in alternated
 * rounds of the same run: the ways the MPI engine's large calls of nodes
 * of one rank each chose between (src/collectives/hierarchical/scatter.rs).
 *   mpi             MPI_Allreduce (the MPI's own choice of algorithm);
 *   full            what the engine did until 2026-12-01: the input copied
 *                   whole into a buffer (its window), sent to the peer as a
 *                   32-byte head and pieces of 512 KiB, their receives
 *                   posted once the head came; all of it reduced;
 *   halves          reduce-scatter + allgather: the half the peer reduces
 *                   copied into the buffer and sent; this rank's half
 *                   reduced from its input and the peer's half, into a
 *                   result buffer (the window's shared result), sent to
 *                   the peer, whose half lands there too (each message a
 *                   head and pieces, as in full);
 *   halves-private  halves, then the result copied into the caller's
 *                   buffer (a private result);
 *   halves-whole    halves with each chunk one message, its receive posted
 *                   before the send (no head);
 *   halves-preposted  halves with the pieces' receives posted before the
 *                   sends (no head): what the engine's receives posted
 *                   before the head do (2026-12-01, twentieth session).
 * Every result is checked. Prints round,bytes,way,median_us on rank 0.
 *
 *   mpicc -O2 -o allreduce_halves scripts/mpi/allreduce_halves.c
 *   scripts/mpi/hosts-run.sh 2 1 ./allreduce_halves      # TCP between two hosts
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PIECE (512 * 1024)
#define MAXN (4L << 20)

enum { MPI_WAY, FULL, HALVES, HALVES_PRIVATE, WHOLE, PREPOSTED, WAYS };
static const char *names[] = {"mpi", "full", "halves", "halves-private", "halves-whole", "halves-preposted"};

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* out = a + b in rank order (rank 0's value first), n doubles */
static void reduce(double *out, const double *mine, const double *theirs, size_t n, int me) {
    if (me == 0)
        for (size_t i = 0; i < n; i++) out[i] = mine[i] + theirs[i];
    else
        for (size_t i = 0; i < n; i++) out[i] = theirs[i] + mine[i];
}

/* n bytes from s to the peer as a head and pieces; into r, whose receives
 * are posted once the peer's head came */
static void exchange(const char *s, char *r, size_t n, int peer, int tag) {
    long hs[4] = {1, 0, 0, (long)n}, hr[4];
    int np = (int)((n + PIECE - 1) / PIECE);
    MPI_Request hq, sq[1 + MAXN / PIECE], rq[MAXN / PIECE];
    MPI_Irecv(hr, 32, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &hq);
    MPI_Isend(hs, 32, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &sq[0]);
    for (int i = 0; i < np; i++) {
        size_t at = (size_t)i * PIECE, len = n - at < PIECE ? n - at : PIECE;
        MPI_Isend(s + at, (int)len, MPI_BYTE, peer, tag + 1, MPI_COMM_WORLD, &sq[1 + i]);
    }
    MPI_Wait(&hq, MPI_STATUS_IGNORE);
    for (int i = 0; i < np; i++) {
        size_t at = (size_t)i * PIECE, len = n - at < PIECE ? n - at : PIECE;
        MPI_Irecv(r + at, (int)len, MPI_BYTE, peer, tag + 1, MPI_COMM_WORLD, &rq[i]);
    }
    MPI_Waitall(np, rq, MPI_STATUSES_IGNORE);
    MPI_Waitall(np + 1, sq, MPI_STATUSES_IGNORE);
}

/* one message, receive posted first */
static void whole(const char *s, char *r, size_t n, int peer, int tag) {
    MPI_Request q[2];
    MPI_Irecv(r, (int)n, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &q[0]);
    MPI_Isend(s, (int)n, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &q[1]);
    MPI_Waitall(2, q, MPI_STATUSES_IGNORE);
}
/* pieces, receives posted before the sends (no head) */
static void preposted(const char *s, char *r, size_t n, int peer, int tag) {
    int np = (int)((n + PIECE - 1) / PIECE);
    MPI_Request q[2 * (MAXN / PIECE)];
    for (int i = 0; i < np; i++) {
        size_t at = (size_t)i * PIECE, len = n - at < PIECE ? n - at : PIECE;
        MPI_Irecv(r + at, (int)len, MPI_BYTE, peer, tag + 1, MPI_COMM_WORLD, &q[i]);
    }
    for (int i = 0; i < np; i++) {
        size_t at = (size_t)i * PIECE, len = n - at < PIECE ? n - at : PIECE;
        MPI_Isend(s + at, (int)len, MPI_BYTE, peer, tag + 1, MPI_COMM_WORLD, &q[np + i]);
    }
    MPI_Waitall(2 * np, q, MPI_STATUSES_IGNORE);
}

int main(int argc, char **argv) {
    int provided, me, size;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 2) {
        if (me == 0) fprintf(stderr, "allreduce_halves: run with 2 ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int peer = 1 - me;
    double *in = malloc(MAXN), *out = malloc(MAXN);
    char *window = malloc(MAXN), *landed = malloc(MAXN), *result = malloc(MAXN);
    memset(window, 0, MAXN);
    memset(landed, 0, MAXN);
    memset(result, 0, MAXN);
    const size_t sizes[] = {262144, 524288, 1048576, 2097152, 4194304};
    const int iters = 40;
    for (int round = 0; round < 4; round++)
        for (int si = 0; si < 5; si++)
            for (int way = 0; way < WAYS; way++) {
                size_t n = sizes[si], len = n / 8;
                double t[iters];
                for (int it = 0; it < iters + 3; it++) {
                    for (size_t i = 0; i < len; i++) in[i] = (double)(i % 1000) + me + it;
                    MPI_Barrier(MPI_COMM_WORLD);
                    double t0 = MPI_Wtime();
                    double *res = out;
                    if (way == MPI_WAY) {
                        MPI_Allreduce(in, out, (int)len, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
                    } else if (way == FULL) {
                        memcpy(window, in, n);
                        exchange(window, landed, n, peer, 10);
                        reduce(out, (double *)window, (double *)landed, len, me);
                    } else {
                        void (*ex)(const char *, char *, size_t, int, int) =
                            way == WHOLE ? whole : way == PREPOSTED ? preposted : exchange;
                        size_t h = n / 2, mine = me * h, other = (1 - me) * h;
                        memcpy(window + other, (char *)in + other, h);
                        ex(window + other, landed + mine, h, peer, 20);
                        reduce((double *)(result + mine), (double *)((char *)in + mine),
                               (double *)(landed + mine), h / 8, me);
                        ex(result + mine, result + other, h, peer, 30);
                        if (way == HALVES_PRIVATE)
                            memcpy(out, result, n);
                        else
                            res = (double *)result;
                    }
                    if (it >= 3) t[it - 3] = (MPI_Wtime() - t0) * 1e6;
                    for (size_t i = 0; i < len; i++)
                        if (res[i] != 2.0 * (double)(i % 1000) + 1 + 2 * it) {
                            fprintf(stderr, "allreduce_halves: wrong element %zu (%s)\n", i, names[way]);
                            MPI_Abort(MPI_COMM_WORLD, 1);
                        }
                }
                qsort(t, iters, sizeof(double), cmp);
                if (me == 0) printf("%d,%zu,%s,%.1f\n", round, n, names[way], t[iters / 2]);
                fflush(stdout);
            }
    MPI_Finalize();
    return 0;
}
