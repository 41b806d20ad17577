/* What the C models of scripts/ (alltoall_model.c, allgather_model.c)
 * share: processes of one job ("ranks") forked from one parent, with a
 * barrier over words in shared memory, timed in batches.
 *
 * A model defines SPINS (tries before a sched_yield) if it wants other
 * than 2000, includes this file, points `bar` at n lines of shared memory
 * and sets n and me in each rank before its first barrier. */
#define _GNU_SOURCE
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#define LINE 64
#define BATCHES 5
#ifndef SPINS
#define SPINS 2000
#endif

typedef struct { _Atomic uint64_t v; char pad[LINE - 8]; } line_t;

static int n, me;          /* ranks, this rank */
static line_t *bar;        /* n arrival words */
static uint64_t epoch;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* Spin briefly, then yield: ranks may share a core. */
static void spin_until(_Atomic uint64_t *w, uint64_t at_least) {
    int k = 0;
    while (atomic_load_explicit(w, memory_order_acquire) < at_least)
        if (++k > SPINS) { sched_yield(); k = 0; }
}

/* Every rank bumps its word and waits for all. */
static void barrier(void) {
    epoch++;
    atomic_store_explicit(&bar[me].v, epoch, memory_order_release);
    for (int r = 0; r < n; r++) spin_until(&bar[r].v, epoch);
}

/* The median of the BATCHES batch means in t (sorted in place). */
static double batch_median(double *t) {
    for (int i = 0; i < BATCHES; i++)
        for (int j = i + 1; j < BATCHES; j++)
            if (t[j] < t[i]) { double x = t[i]; t[i] = t[j]; t[j] = x; }
    return t[BATCHES / 2];
}
