/* Copy bandwidth with ordinary and with non-temporal (streaming) AVX2 stores:
 * THREADS threads, each copying N bytes between NBUF buffer pairs in turn
 * (NBUF 1: the buffers stay in the caches; NBUF 8 with N = 4 MiB: they go to
 * memory). Prints GB/s copied, summed over the threads.
 *
 *   gcc -O2 -mavx2 -pthread -o /tmp/copy_bw scripts/copy_bandwidth.c
 *   /tmp/copy_bw N MODE NBUF THREADS    (MODE 0: ordinary stores, 1: streaming)
 *   e.g. /tmp/copy_bw 4194304 0 8 2; /tmp/copy_bw 4194304 1 8 2
 */
#define _GNU_SOURCE
#include <immintrin.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static size_t n;
static int mode, nbuf;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* n is a multiple of 128 and both buffers are page-aligned. */
static void copy(char *d, const char *s, size_t len, int nt) {
    for (size_t i = 0; i < len; i += 128) {
        __m256i a = _mm256_loadu_si256((const void *)(s + i));
        __m256i b = _mm256_loadu_si256((const void *)(s + i + 32));
        __m256i c = _mm256_loadu_si256((const void *)(s + i + 64));
        __m256i e = _mm256_loadu_si256((const void *)(s + i + 96));
        if (nt) {
            _mm256_stream_si256((void *)(d + i), a);
            _mm256_stream_si256((void *)(d + i + 32), b);
            _mm256_stream_si256((void *)(d + i + 64), c);
            _mm256_stream_si256((void *)(d + i + 96), e);
        } else {
            _mm256_store_si256((void *)(d + i), a);
            _mm256_store_si256((void *)(d + i + 32), b);
            _mm256_store_si256((void *)(d + i + 64), c);
            _mm256_store_si256((void *)(d + i + 96), e);
        }
    }
    if (nt) _mm_sfence();
}

static void *run(void *out) {
    char **b = malloc(sizeof(char *) * 2 * nbuf);
    for (int i = 0; i < 2 * nbuf; i++) {
        b[i] = aligned_alloc(4096, n);
        memset(b[i], i, n);
    }
    long reps = (long)(2e9 / n);
    if (reps > 2000) reps = 2000;
    if (reps < 10) reps = 10;
    double t = now();
    for (long r = 0; r < reps; r++) copy(b[2 * (r % nbuf) + 1], b[2 * (r % nbuf)], n, mode);
    t = now() - t;
    for (int i = 0; i < nbuf; i++)
        if (memcmp(b[2 * i], b[2 * i + 1], n) != 0 && (long)i < reps) {
            fprintf(stderr, "copy %d differs\n", i);
            exit(1);
        }
    *(double *)out = (double)n * reps / t / 1e9;
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: %s N MODE NBUF THREADS\n", argv[0]);
        return 2;
    }
    n = (size_t)atol(argv[1]) / 128 * 128;
    mode = atoi(argv[2]);
    nbuf = atoi(argv[3]);
    int threads = atoi(argv[4]);
    if (n == 0 || nbuf < 1 || threads < 1 || threads > 64) return 2;
    pthread_t p[64];
    double gbs[64], total = 0;
    for (int i = 0; i < threads; i++) pthread_create(&p[i], NULL, run, &gbs[i]);
    for (int i = 0; i < threads; i++) {
        pthread_join(p[i], NULL);
        total += gbs[i];
    }
    printf("N=%zu %s nbuf=%d threads=%d: %.1f GB/s copied\n", n, mode ? "streaming" : "ordinary", nbuf,
           threads, total);
    return 0;
}
