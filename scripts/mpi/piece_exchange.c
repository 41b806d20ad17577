/* Two ranks exchange N bytes as pieces, four ways, in alternated rounds
 * of the same run: what the keyed messages of the MPI engine
 * (src/engine/mpi/keyed.rs) chose between.
 *   contig    each piece sent from and received into its place, its
 *             receive posted before it comes (what the engine does for
 *             messages above 64 KiB since 2026-12-01, behind one 32-byte
 *             head message per message, on whose arrival it posts the
 *             receives of all pieces);
 *   copy      each piece copied behind a 32-byte head into a buffer, sent,
 *             received into a buffer and copied out (the engine until
 *             2026-11-30);
 *   hindexed  head and piece as one message of an MPI_Type_create_hindexed
 *             type (tried and measured 3-4x slower: MPI packs it);
 *   headed    a head per piece, each piece sent from its place right
 *             behind its head and received into its place by a receive
 *             posted only once its head arrived (the engine from
 *             2026-11-30 to 2026-12-01: its pieces arrive before their
 *             receives, as unexpected messages).
 * Pieces of 128 KiB and 512 KiB; all receives posted before the sends but
 * in the headed way.
 * Prints N,piece,way,median_us per line on rank 0.
 *
 *   mpicc -O2 -o piece_exchange scripts/mpi/piece_exchange.c
 *   scripts/mpi/hosts-run.sh 2 1 ./piece_exchange      # TCP between two hosts
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HEAD 32
#define MAXP 64

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static MPI_Datatype two(char *h, char *d, int dl) {
    MPI_Aint a, b;
    MPI_Get_address(h, &a);
    MPI_Get_address(d, &b);
    int l[2] = {HEAD, dl};
    MPI_Aint disp[2] = {0, b - a};
    MPI_Datatype t;
    MPI_Type_create_hindexed(2, l, disp, MPI_BYTE, &t);
    MPI_Type_commit(&t);
    return t;
}

enum { CONTIG, COPY, HINDEXED, HEADED, WAYS };
static const char *names[] = {"contig", "copy", "hindexed", "headed"};

static void exchange(char *s, char *r, long n, long P, int peer, int way, char *tmp) {
    static char hs[MAXP][HEAD], hr[MAXP][HEAD];
    int np = (int)((n + P - 1) / P);
    MPI_Request q[2 * MAXP];
    if (way == HEADED) {
        MPI_Request h[MAXP], d[MAXP], sh[MAXP], sd[MAXP];
        for (int i = 0; i < np; i++)
            MPI_Irecv(hr[i], HEAD, MPI_BYTE, peer, 2, MPI_COMM_WORLD, &h[i]);
        for (int i = 0; i < np; i++) {
            MPI_Isend(hs[i], HEAD, MPI_BYTE, peer, 2, MPI_COMM_WORLD, &sh[i]);
            MPI_Isend(s + i * P, (int)P, MPI_BYTE, peer, 1, MPI_COMM_WORLD, &sd[i]);
        }
        for (int got = 0; got < np;) {
            int f;
            MPI_Test(&h[got], &f, MPI_STATUS_IGNORE);
            if (f) {
                MPI_Irecv(r + got * P, (int)P, MPI_BYTE, peer, 1, MPI_COMM_WORLD, &d[got]);
                got++;
            }
        }
        MPI_Waitall(np, d, MPI_STATUSES_IGNORE);
        MPI_Waitall(np, sh, MPI_STATUSES_IGNORE);
        MPI_Waitall(np, sd, MPI_STATUSES_IGNORE);
        return;
    }
    for (int i = 0; i < np; i++) {
        if (way == HINDEXED) {
            MPI_Datatype t = two(hr[i], r + i * P, (int)P);
            MPI_Irecv(hr[i], 1, t, peer, 1, MPI_COMM_WORLD, &q[i]);
            MPI_Type_free(&t);
        } else if (way == COPY) {
            MPI_Irecv(tmp + i * (P + HEAD), (int)(P + HEAD), MPI_BYTE, peer, 1, MPI_COMM_WORLD, &q[i]);
        } else {
            MPI_Irecv(r + i * P, (int)P, MPI_BYTE, peer, 1, MPI_COMM_WORLD, &q[i]);
        }
    }
    for (int i = 0; i < np; i++) {
        if (way == HINDEXED) {
            MPI_Datatype t = two(hs[i], s + i * P, (int)P);
            MPI_Isend(hs[i], 1, t, peer, 1, MPI_COMM_WORLD, &q[np + i]);
            MPI_Type_free(&t);
        } else if (way == COPY) {
            char *b = tmp + (np + i) * (P + HEAD);
            memcpy(b, hs[i], HEAD);
            memcpy(b + HEAD, s + i * P, P);
            MPI_Isend(b, (int)(P + HEAD), MPI_BYTE, peer, 1, MPI_COMM_WORLD, &q[np + i]);
        } else {
            MPI_Isend(s + i * P, (int)P, MPI_BYTE, peer, 1, MPI_COMM_WORLD, &q[np + i]);
        }
    }
    MPI_Waitall(2 * np, q, MPI_STATUSES_IGNORE);
    if (way == COPY)
        for (int i = 0; i < np; i++) memcpy(r + i * P, tmp + i * (P + HEAD) + HEAD, P);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int me, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 2) {
        if (me == 0) fprintf(stderr, "piece_exchange: run with 2 ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int peer = 1 - me;
    const long sizes[] = {262144, 1048576, 4194304};
    const long pieces[] = {131072, 524288};
    const int iters = 40;
    char *s = malloc(4 << 20), *r = malloc(4 << 20), *tmp = malloc(10 << 20);
    for (long i = 0; i < (4 << 20); i++) s[i] = (char)(i * 7 + me);
    for (int round = 0; round < 3; round++)
        for (int si = 0; si < 3; si++)
            for (int pi = 0; pi < 2; pi++)
                for (int way = 0; way < WAYS; way++) {
                    long n = sizes[si], P = pieces[pi] < n ? pieces[pi] : n;
                    double t[iters];
                    for (int it = 0; it < iters + 3; it++) {
                        memset(r, 0, n);
                        MPI_Barrier(MPI_COMM_WORLD);
                        double t0 = MPI_Wtime();
                        exchange(s, r, n, P, peer, way, tmp);
                        if (it >= 3) t[it - 3] = (MPI_Wtime() - t0) * 1e6;
                        for (long i = 0; i < n; i += 4093)
                            if (r[i] != (char)(i * 7 + peer)) {
                                fprintf(stderr, "piece_exchange: wrong byte %ld (%s)\n", i, names[way]);
                                MPI_Abort(MPI_COMM_WORLD, 1);
                            }
                    }
                    qsort(t, iters, sizeof(double), cmp);
                    if (me == 0) printf("%ld,%ld,%s,%.1f\n", n, P, names[way], t[iters / 2]);
                }
    MPI_Finalize();
    return 0;
}
