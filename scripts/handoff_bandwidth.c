/* Hand-off of freshly written data between two cores: thread A (CPU 0)
 * copies N bytes into a shared buffer, thread B (CPU 1) then copies them
 * out into its own buffer, and so on in turn; prints microseconds per
 * round (one write and one read of N bytes) and the bytes moved per second.
 * MODE 0: A's copy uses ordinary stores (B reads lines that are dirty in
 * A's caches); MODE 1: non-temporal stores (the lines go to memory first).
 * The collectives' large calls hand data between cores this way (an input
 * put into the node window, reduced by another rank).
 *
 *   gcc -O2 -mavx2 -pthread -o /tmp/handoff scripts/handoff_bandwidth.c
 *   /tmp/handoff N MODE      e.g. /tmp/handoff 1048576 0; /tmp/handoff 1048576 1
 *
 * On the project's 2-vCPU VM (AMD EPYC) the ordinary hand-off of 1 MiB
 * takes ~100 us in some minutes and ~500 us in others, the non-temporal
 * one ~80 us throughout (docs/guide/benchmarking.md).
 */
#define _GNU_SOURCE
#include <immintrin.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static size_t n;
static int nt;
static long reps = 2000;
static char *shared, *src, *dst;
static _Atomic long turn;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void pin(int cpu) {
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    pthread_setaffinity_np(pthread_self(), sizeof s, &s);
}

/* n is a multiple of 32 and the buffers are page-aligned. */
static void put(char *d, const char *s, size_t len) {
    if (!nt) {
        memcpy(d, s, len);
        return;
    }
    for (size_t i = 0; i < len; i += 32)
        _mm256_stream_si256((void *)(d + i), _mm256_load_si256((const void *)(s + i)));
    _mm_sfence();
}

static void *reader(void *arg) {
    (void)arg;
    pin(1);
    for (long r = 0; r < reps; r++) {
        while (atomic_load(&turn) != 2 * r + 1) {}
        memcpy(dst, shared, n);
        atomic_store(&turn, 2 * r + 2);
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s N MODE\n", argv[0]);
        return 2;
    }
    n = (size_t)atol(argv[1]) / 32 * 32;
    nt = atoi(argv[2]);
    if (n == 0) return 2;
    shared = aligned_alloc(4096, n);
    src = aligned_alloc(4096, n);
    dst = aligned_alloc(4096, n);
    memset(src, 7, n);
    memset(shared, 0, n);
    memset(dst, 0, n);
    pthread_t t;
    pthread_create(&t, NULL, reader, NULL);
    pin(0);
    double t0 = now();
    for (long r = 0; r < reps; r++) {
        while (atomic_load(&turn) != 2 * r) {}
        memset(src, (int)(r % 251) + 1, 64); /* each round's data differs */
        put(shared, src, n);
        atomic_store(&turn, 2 * r + 1);
    }
    while (atomic_load(&turn) != 2 * reps) {}
    double el = now() - t0;
    pthread_join(t, NULL);
    if (memcmp(dst, src, n) != 0) {
        fprintf(stderr, "hand-off: the reader's copy differs\n");
        return 1;
    }
    printf("%.1f us per round (%.1f GB/s written and read), %s stores, %zu bytes\n",
           el / reps * 1e6, 2.0 * n * reps / el / 1e9, nt ? "non-temporal" : "ordinary", n);
    return 0;
}
