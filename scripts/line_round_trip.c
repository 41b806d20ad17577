/* Round trip of one cache line between two cores: thread A (CPU 0)
 * stores an odd value, thread B (CPU 1) sees it and stores the next even
 * one, and so on; prints the nanoseconds per round trip (the median of 9
 * batches). It tells how far apart the two cores are now: on the 2-core
 * AMD EPYC Zen 4 VM it is 50-65 ns in some minutes (cores that share a
 * level-3 cache) and 320-360 ns in others (cores of different complexes,
 * as the host moves the VM's vCPUs), and every hand-off of data between
 * ranks on the two cores costs accordingly (docs/guide/benchmarking.md).
 * scripts/ab-bench.sh records it beside each run (AB_PROBE).
 *
 *   gcc -O2 -pthread -o /tmp/line_round_trip scripts/line_round_trip.c
 *   /tmp/line_round_trip [CPU_A CPU_B]
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

enum { BATCHES = 9, REPS = 20000 };
static _Atomic long line __attribute__((aligned(64)));
static int cpu[2] = {0, 1};

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void pin(int c) {
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(c, &s);
    if (pthread_setaffinity_np(pthread_self(), sizeof s, &s) != 0) {
        fprintf(stderr, "line_round_trip: cannot run on CPU %d\n", c);
        exit(2);
    }
}

static void *pong(void *arg) {
    (void)arg;
    pin(cpu[1]);
    for (long r = 0; r < (long)BATCHES * REPS; r++) {
        while (atomic_load(&line) != 2 * r + 1) {}
        atomic_store(&line, 2 * r + 2);
    }
    return NULL;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (argc == 3) {
        cpu[0] = atoi(argv[1]);
        cpu[1] = atoi(argv[2]);
    } else if (argc != 1) {
        fprintf(stderr, "usage: %s [CPU_A CPU_B]\n", argv[0]);
        return 2;
    }
    pthread_t t;
    pthread_create(&t, NULL, pong, NULL);
    pin(cpu[0]);
    double ns[BATCHES];
    long r = 0;
    for (int b = 0; b < BATCHES; b++) {
        double t0 = now();
        for (long k = 0; k < REPS; k++, r++) {
            while (atomic_load(&line) != 2 * r) {}
            atomic_store(&line, 2 * r + 1);
        }
        while (atomic_load(&line) != 2 * r) {}
        ns[b] = (now() - t0) / REPS * 1e9;
    }
    pthread_join(t, NULL);
    qsort(ns, BATCHES, sizeof ns[0], by_value);
    printf("%.0f\n", ns[BATCHES / 2]);
    return 0;
}
