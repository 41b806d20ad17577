/* A model of the alltoallv's private results between two ranks (processes
 * on CPUs 0 and 1): each call, each rank copies its piece for itself
 * (send -> recv), its piece for the other into the other's window area,
 * sets a flag, waits for the other's flag, and copies its piece out of its
 * own window area into recv. The window areas are used by the calls in
 * turn, COPIES of them (call k copy k % COPIES), as
 * `AlltoallvOptions::copies` turns the alltoallv's data areas; a sender
 * writes copy k only once the other rank is done reading call k - COPIES.
 *
 *   gcc -O2 -mavx512f -o /tmp/window_copies scripts/window_copies.c
 *   /tmp/window_copies BYTES MODE CALLS [COPIES]
 *
 * MODE 0: ordinary copies (glibc memcpy); 1: the copy into the other's
 * area with non-temporal stores; 2: results left in the window (no copy
 * out: the in-place call nobody reads). Prints us per call and its parts
 * (self copy, copy into the other's area, wait, copy out), after a tenth
 * of the calls as warm-up, and checks the last result.
 *
 * On a 2-core AMD EPYC (Zen 5) VM, 16 KiB, 3 runs: MODE 0 with 2 copies
 * 3.3-3.6 us (1.8-2.1 of them the copy into lines the other rank had
 * read, 0.5-0.6 the copy out), with 64 copies 2.5-2.7; MODE 2 (the same
 * copy into lines nobody read: 0.33-0.43) 1.1-1.2 us with 2 copies,
 * 1.15-1.5 with 64; MODE 1 3.4-3.6. The VM had stretches of seconds in
 * which a first version of the model (without the send buffer rewritten
 * each call) took 11-12 us in MODE 0 and kept 3.0-3.8 in MODE 1.
 */
#define _GNU_SOURCE
#include <immintrin.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

typedef struct {
    _Alignas(64) _Atomic long ready;
    _Alignas(64) _Atomic long done;
} flags_t;

static void nt_copy(void *d, const void *s, size_t n) {
    char *dd = d;
    const char *ss = s;
    for (size_t i = 0; i < n; i += 64)
        _mm512_stream_si512((void *)(dd + i), _mm512_loadu_si512(ss + i));
    _mm_sfence();
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s BYTES MODE CALLS [COPIES]\n", argv[0]);
        return 2;
    }
    size_t n = (size_t)atol(argv[1]) / 64 * 64;
    int mode = atoi(argv[2]);
    long calls = atol(argv[3]);
    int copies = argc > 4 ? atoi(argv[4]) : 2;
    if (n == 0 || calls < 10 || copies < 1) {
        fprintf(stderr, "BYTES >= 64, CALLS >= 10, COPIES >= 1\n");
        return 2;
    }
    size_t areas = 2 * (size_t)copies * n;
    char *shm = mmap(0, areas + 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (shm == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    flags_t *fl = (flags_t *)(shm + areas);
    memset(fl, 0, 2 * sizeof(flags_t));
    pid_t child = fork();
    int me = child == 0, other = 1 - me;
    cpu_set_t cs;
    CPU_ZERO(&cs);
    CPU_SET(me, &cs);
    sched_setaffinity(0, sizeof cs, &cs);
    char *send = aligned_alloc(4096, 2 * n), *recv = aligned_alloc(4096, 2 * n);
    memset(recv, 0, 2 * n);
#define AREA(r, c) (shm + ((size_t)(r) * copies + (c)) * n)
    double t0 = 0, part[4] = {0}, a, b;
    long first = calls / 10;
    for (long k = 0; k < calls; k++) {
        int c = k % copies, timed = k >= first;
        if (k == first)
            t0 = now_us();
        memset(send, (int)(k + me), 2 * n);
        a = now_us();
        memcpy(recv + me * n, send + me * n, n);
        b = now_us();
        part[0] += timed * (b - a);
        a = b;
        while (atomic_load_explicit(&fl[other].done, memory_order_acquire) < k + 1 - copies)
            _mm_pause();
        if (mode == 1)
            nt_copy(AREA(other, c), send + other * n, n);
        else
            memcpy(AREA(other, c), send + other * n, n);
        b = now_us();
        part[1] += timed * (b - a);
        a = b;
        atomic_store_explicit(&fl[me].ready, k + 1, memory_order_release);
        while (atomic_load_explicit(&fl[other].ready, memory_order_acquire) < k + 1)
            _mm_pause();
        b = now_us();
        part[2] += timed * (b - a);
        a = b;
        if (mode != 2)
            memcpy(recv + other * n, AREA(me, c), n);
        b = now_us();
        part[3] += timed * (b - a);
        atomic_store_explicit(&fl[me].done, k + 1, memory_order_release);
    }
    double per = (now_us() - t0) / (calls - first);
    long last = calls - 1;
    char want = (char)(last + other);
    const char *got = mode == 2 ? AREA(me, last % copies) : recv + other * n;
    int ok = got[0] == want && got[n - 1] == want;
    if (me == 1)
        return !ok;
    int status = 0;
    waitpid(child, &status, 0);
    ok = ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
    long m = calls - first;
    printf("bytes %zu mode %d copies %d: %.3f us/call (self %.3f, into other %.3f, wait %.3f, out %.3f) %s\n",
           n, mode, copies, per, part[0] / m, part[1] / m, part[2] / m, part[3] / m,
           ok ? "verified" : "WRONG");
    return !ok;
}
