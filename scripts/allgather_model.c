/* A model of a one-node allgather with private results, in two designs,
 * for the notes on the private allgatherv in docs/guide/benchmarking.md:
 *   twocopy  barrier, each rank copies its block into a shared window,
 *            barrier, each copies the whole result out (what
 *            Allgatherv::run_into does on one node);
 *   ring     a ring through small double-buffered slots per neighbour
 *            pair, chunk by chunk (what an MPI ring over shared-memory
 *            cells does), the own block copied directly.
 * Copies by an AVX2 loop (glibc's memcpy is slow on AMD Zen 4 when the
 * destination is 1-31 bytes off the source's alignment; the receive
 * buffer here starts 16 bytes into a page, as a large Vec does).
 * Every call's data differs; each batch's last call is checked.
 *
 * gcc -O2 -o /tmp/allgather_model scripts/allgather_model.c
 * /tmp/allgather_model RANKS BYTES_PER_RANK CALLS [SLOT_BYTES]
 * Rank r is pinned to CPU r % CPUs; prints each design's median of 5
 * batch means, 3 times, alternating the designs. */
#define SPINS 200
#include "model_common.h"
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

static size_t B, SLOT = 16384;
static char *win;                 /* [n][B]: the result */
static char *slots;               /* [n senders][2][SLOT] */
static line_t *posted, *consumed; /* per sender: chunks posted / taken */

__attribute__((target("avx2"))) static void cp(void *dv, const void *sv, size_t len) {
    char *d = dv;
    const char *s = sv;
    size_t i = 0;
    for (; i + 128 <= len; i += 128) {
        __m256i a = _mm256_loadu_si256((const __m256i *)(s + i));
        __m256i b = _mm256_loadu_si256((const __m256i *)(s + i + 32));
        __m256i c = _mm256_loadu_si256((const __m256i *)(s + i + 64));
        __m256i e = _mm256_loadu_si256((const __m256i *)(s + i + 96));
        _mm256_storeu_si256((__m256i *)(d + i), a);
        _mm256_storeu_si256((__m256i *)(d + i + 32), b);
        _mm256_storeu_si256((__m256i *)(d + i + 64), c);
        _mm256_storeu_si256((__m256i *)(d + i + 96), e);
    }
    for (; i < len; i++) d[i] = s[i];
}

static uint64_t word(uint64_t call, int rank, size_t i) {
    return (call << 40) | ((uint64_t)rank << 20) | (i & 0xfffff);
}

static void fill(uint64_t *send, uint64_t call) {
    for (size_t i = 0; i < B / 8; i++) send[i] = word(call, me, i);
}

static int check(const uint64_t *recv, uint64_t call) {
    for (int s = 0; s < n; s++)
        for (size_t i = 0; i < B / 8; i++)
            if (recv[s * B / 8 + i] != word(call, s, i)) return 1;
    return 0;
}

/* Step j sends block me-j to the next rank (from send at j = 0, else from
 * what came in step j-1) and receives block me-j-1 from the previous one,
 * chunk by chunk, through the sender's two slots. */
static void run_ring(const char *send, char *recv) {
    cp(recv + me * B, send, B);
    int prev = (me - 1 + n) % n;
    size_t chunks = (B + SLOT - 1) / SLOT, total = chunks * (n - 1), sent = 0, got = 0;
    line_t *p_out = &posted[me], *c_out = &consumed[me];
    line_t *p_in = &posted[prev], *c_in = &consumed[prev];
    char *out = slots + (size_t)me * 2 * SLOT, *in = slots + (size_t)prev * 2 * SLOT;
    uint64_t out0 = atomic_load_explicit(&p_out->v, memory_order_relaxed);
    uint64_t in0 = atomic_load_explicit(&c_in->v, memory_order_relaxed);
    int idle = 0;
    while (sent < total || got < total) {
        int moved = 0;
        int slot_free = out0 + sent - atomic_load_explicit(&c_out->v, memory_order_acquire) < 2;
        if (sent < total && slot_free && (sent < chunks || got >= sent - chunks + 1)) {
            size_t j = sent / chunks, off = sent % chunks * SLOT;
            size_t len = B - off < SLOT ? B - off : SLOT;
            int block = (me - (int)j + n) % n;
            cp(out + (out0 + sent) % 2 * SLOT, j == 0 ? send + off : recv + block * B + off, len);
            atomic_store_explicit(&p_out->v, out0 + ++sent, memory_order_release);
            moved = 1;
        }
        if (got < total && atomic_load_explicit(&p_in->v, memory_order_acquire) > in0 + got) {
            size_t j = got / chunks, off = got % chunks * SLOT;
            size_t len = B - off < SLOT ? B - off : SLOT;
            int block = (me - (int)j - 1 + 2 * n) % n;
            cp(recv + block * B + off, in + (in0 + got) % 2 * SLOT, len);
            atomic_store_explicit(&c_in->v, in0 + ++got, memory_order_release);
            moved = 1;
        }
        if (!moved && ++idle > 200) { sched_yield(); idle = 0; }
    }
}

static int run(const char *design, int calls, double *us) {
    uint64_t *send = aligned_alloc(4096, B + 4096);
    char *recv_page = aligned_alloc(4096, n * B + 4096), *recv = recv_page + 16;
    memset(recv_page, 0, n * B + 4096);
    barrier();
    int bad = 0, per = calls / BATCHES;
    double t[BATCHES];
    uint64_t call = 0;
    for (int b = -1; b < BATCHES; b++) {
        double t0 = now();
        for (int k = 0; k < per; k++, call++) {
            fill(send, call);
            if (!strcmp(design, "ring")) {
                run_ring((char *)send, recv);
            } else {
                barrier();
                cp(win + me * B, send, B);
                barrier();
                cp(recv, win, n * B);
            }
            if (k == per - 1) bad |= check((uint64_t *)recv, call);
        }
        if (b >= 0) t[b] = (now() - t0) / per * 1e6;
        barrier();
    }
    *us = batch_median(t);
    free(send);
    free(recv_page);
    return bad;
}

int main(int argc, char **argv) {
    if (argc < 4) { fprintf(stderr, "usage: %s RANKS BYTES_PER_RANK CALLS [SLOT_BYTES]\n", argv[0]); return 2; }
    n = atoi(argv[1]);
    B = (size_t)atol(argv[2]) / 8 * 8;
    int calls = atoi(argv[3]);
    if (argc > 4) SLOT = (size_t)atol(argv[4]);
    const char *designs[] = {"twocopy", "ring"};
    size_t wl = (size_t)n * B;
    char *m = mmap(0, wl + (size_t)(3 * n) * LINE + (size_t)n * 2 * SLOT, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) { perror("mmap"); return 1; }
    win = m;
    bar = (line_t *)(m + wl);
    posted = bar + n;
    consumed = posted + n;
    slots = (char *)(consumed + n);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    for (me = 0; me < n; me++) {
        if (fork() == 0) {
            cpu_set_t c;
            CPU_ZERO(&c);
            CPU_SET(me % cpus, &c);
            sched_setaffinity(0, sizeof c, &c);
            barrier();
            for (int round = 0; round < 3; round++)
                for (int i = 0; i < 2; i++) {
                    double us = 0;
                    int bad = run(designs[i], calls, &us);
                    if (me == 0)
                        printf("%s, %d ranks, %zu B each, slot %zu: %.2f us %s\n", designs[i], n, B, SLOT,
                               us, bad ? "BAD" : "verified");
                    fflush(stdout);
                }
            _exit(0);
        }
    }
    int st, rc = 0;
    while (wait(&st) > 0) rc |= !WIFEXITED(st) || WEXITSTATUS(st);
    return rc;
}
