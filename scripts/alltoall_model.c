/* A model of a one-node alltoall with private results, in five designs, to
 * choose the design of Alltoallv's one-node private path (see
 * docs/guide/benchmarking.md, "alltoallv with a core per rank"):
 *   shared   every rank copies its piece for rank d into d's section of a
 *            node window, barrier: the result in place (what
 *            Alltoallv::run does on one node);
 *   twocopy  shared, then each rank copies its section out into a private
 *            buffer, barrier (what Alltoallv::run_into does today);
 *   nt       twocopy with non-temporal stores into the window;
 *   cma      one copy: each rank reads its pieces straight out of the other
 *            ranks' private send buffers with process_vm_readv (Linux
 *            cross-memory attach; needs ptrace rights between the ranks),
 *            barrier before (sends ready) and after (sends reusable);
 *   roundsR  twocopy in R rounds (e.g. rounds16) through a window R
 *            times smaller, a barrier per round: the window's lines stay
 *            in the caches between the copy in and the copy out;
 *   slots    pairwise exchange through small slots that stay in the
 *            caches: per ordered pair two slots of SLOT bytes with a
 *            posted and a consumed counter; in step j rank r sends to
 *            r+j and receives from r-j, chunk by chunk, both at once.
 * Every rank checks every byte it received after the timed calls (each
 * call's data differs: the call number is in every word).
 *
 * gcc -O2 -o /tmp/alltoall_model scripts/alltoall_model.c
 * /tmp/alltoall_model RANKS BYTES_PER_PAIR CALLS [designs, default all]
 * Prints one line per design: median of 5 batch means, us per call.
 * Ranks are pinned to cores 0..RANKS-1 when there are that many. */
#include "model_common.h"
#include <immintrin.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#define SLOT 16384

static size_t B;
static char *win;          /* [2 parities][n dst][n src][B] */
static line_t *posted, *consumed; /* [n src][n dst] */
static char *slots;        /* [n src][n dst][2][SLOT] */
static pid_t *pids;
static uintptr_t *sendaddr;

__attribute__((target("avx2"))) static void copy_nt(char *d, const char *s, size_t len) {
    size_t i = 0;
    for (; i + 32 <= len; i += 32)
        _mm256_stream_si256((__m256i *)(d + i), _mm256_loadu_si256((const __m256i *)(s + i)));
    memcpy(d + i, s + i, len - i);
    _mm_sfence();
}

static char *area(int parity, int dst, int src) {
    return win + (((size_t)parity * n + dst) * n + src) * B;
}

static void fill(uint64_t *send, uint64_t call) {
    size_t w = B / 8;
    for (int d = 0; d < n; d++)
        for (size_t i = 0; i < w; i++) send[d * w + i] = (call << 40) | ((uint64_t)me << 20) | (uint64_t)d << 8 | (i & 255);
}

static int check(const uint64_t *recv, uint64_t call) {
    size_t w = B / 8;
    for (int s = 0; s < n; s++)
        for (size_t i = 0; i < w; i++)
            if (recv[s * w + i] != ((call << 40) | ((uint64_t)s << 20) | (uint64_t)me << 8 | (i & 255))) return 1;
    return 0;
}

static void run_slots(const char *send, char *recv) {
    memcpy(recv + me * B, send + me * B, B);
    size_t chunks = (B + SLOT - 1) / SLOT;
    for (int j = 1; j < n; j++) {
        int d = (me + j) % n, s = (me - j + n) % n;
        line_t *p_out = &posted[me * n + d], *c_out = &consumed[me * n + d];
        line_t *p_in = &posted[s * n + me], *c_in = &consumed[s * n + me];
        uint64_t out0 = atomic_load_explicit(&p_out->v, memory_order_relaxed);
        uint64_t in0 = atomic_load_explicit(&c_in->v, memory_order_relaxed);
        size_t sent = 0, got = 0;
        int idle = 0;
        while (sent < chunks || got < chunks) {
            int moved = 0;
            if (sent < chunks && out0 + sent - atomic_load_explicit(&c_out->v, memory_order_acquire) < 2) {
                size_t off = sent * SLOT, len = B - off < SLOT ? B - off : SLOT;
                memcpy(slots + ((size_t)(me * n + d) * 2 + (out0 + sent) % 2) * SLOT, send + d * B + off, len);
                atomic_store_explicit(&p_out->v, out0 + ++sent, memory_order_release);
                moved = 1;
            }
            if (got < chunks && atomic_load_explicit(&p_in->v, memory_order_acquire) > in0 + got) {
                size_t off = got * SLOT, len = B - off < SLOT ? B - off : SLOT;
                memcpy(recv + s * B + off, slots + ((size_t)(s * n + me) * 2 + (in0 + got) % 2) * SLOT, len);
                atomic_store_explicit(&c_in->v, in0 + ++got, memory_order_release);
                moved = 1;
            }
            if (!moved && ++idle > 2000) { sched_yield(); idle = 0; }
        }
    }
}

static int run(const char *design, int calls, double *us) {
    uint64_t *send = aligned_alloc(4096, n * B), *recv = aligned_alloc(4096, n * B);
    memset(recv, 0, n * B);
    sendaddr[me] = (uintptr_t)send;
    barrier();
    int bad = 0;
    double t[BATCHES];
    int per = calls / BATCHES > 0 ? calls / BATCHES : 1;
    uint64_t call = 0;
    for (int b = -1; b < BATCHES; b++) {
        double t0 = now();
        for (int k = 0; k < per; k++, call++) {
            int parity = call & 1;
            if (k == per - 1) fill(send, call);
            if (!strcmp(design, "slots")) {
                run_slots((char *)send, (char *)recv);
            } else if (!strncmp(design, "rounds", 6)) {
                int R = atoi(design + 6) > 0 ? atoi(design + 6) : 1;
                size_t L = B / R; /* B a multiple of 8 * R */
                for (int q = 0; q < R; q++) {
                    int par = (int)((call * R + q) & 1);
                    for (int j = 0; j < n; j++) {
                        int d = (me + j) % n;
                        memcpy(win + (((size_t)par * n + d) * n + me) * L, (char *)send + d * B + q * L, L);
                    }
                    barrier();
                    for (int s = 0; s < n; s++)
                        memcpy((char *)recv + s * B + q * L, win + (((size_t)par * n + me) * n + s) * L, L);
                }
            } else if (!strcmp(design, "cma")) {
                barrier();
                for (int j = 0; j < n; j++) {
                    int s = (me + j) % n;
                    struct iovec l = {(char *)recv + s * B, B}, r = {(char *)sendaddr[s] + me * B, B};
                    if (s == me) memcpy(l.iov_base, r.iov_base, B);
                    else if (process_vm_readv(pids[s], &l, 1, &r, 1, 0) != (ssize_t)B) { perror("process_vm_readv"); return 2; }
                }
                barrier();
            } else {
                int nt = !strcmp(design, "nt");
                for (int j = 0; j < n; j++) {
                    int d = (me + j) % n;
                    if (nt) copy_nt(area(parity, d, me), (char *)send + d * B, B);
                    else memcpy(area(parity, d, me), (char *)send + d * B, B);
                }
                barrier();
                if (strcmp(design, "shared")) memcpy(recv, area(parity, me, 0), n * B);
                else if (k == per - 1) memcpy(recv, area(parity, me, 0), n * B); /* to check it */
            }
            if (k == per - 1) bad |= check(recv, call);
        }
        if (b >= 0) t[b] = (now() - t0) / per * 1e6;
        barrier();
    }
    *us = batch_median(t);
    free(send);
    free(recv);
    return bad;
}

int main(int argc, char **argv) {
    if (argc < 4) { fprintf(stderr, "usage: %s RANKS BYTES CALLS [designs]\n", argv[0]); return 2; }
    n = atoi(argv[1]);
    B = (size_t)atol(argv[2]) / 8 * 8;
    int calls = atoi(argv[3]);
    const char *all[] = {"shared", "twocopy", "nt", "cma", "slots"};
    const char **designs = argc > 4 ? (const char **)argv + 4 : all;
    int nd = argc > 4 ? argc - 4 : 5;
    size_t wl = 2 * (size_t)n * n * B;
    size_t extra = (size_t)(n + 1 + 2 * n * n) * LINE + (size_t)n * n * 2 * SLOT + n * (sizeof(pid_t) + sizeof(uintptr_t));
    char *m = mmap(0, wl + extra, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) { perror("mmap"); return 1; }
    win = m;
    bar = (line_t *)(m + wl);
    posted = bar + n + 1;
    consumed = posted + n * n;
    slots = (char *)(consumed + n * n);
    pids = (pid_t *)(slots + (size_t)n * n * 2 * SLOT);
    sendaddr = (uintptr_t *)(pids + n);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    for (me = 0; me < n; me++) {
        pid_t p = fork();
        if (p == 0) {
            if (cpus >= n) { cpu_set_t c; CPU_ZERO(&c); CPU_SET(me, &c); sched_setaffinity(0, sizeof c, &c); }
            pids[me] = getpid();
            barrier();
            for (int i = 0; i < nd; i++) {
                double us = 0;
                int bad = run(designs[i], calls, &us);
                if (me == 0) printf("alltoall-model,%s,%d,%zu,%.3f,%s\n", designs[i], n, B, us, bad ? "BAD" : "verified");
                if (bad) fprintf(stderr, "rank %d: %s wrong data\n", me, designs[i]);
                fflush(stdout);
            }
            _exit(0);
        }
    }
    int rc = 0, st;
    while (wait(&st) > 0) rc |= !WIFEXITED(st) || WEXITSTATUS(st);
    return rc;
}
