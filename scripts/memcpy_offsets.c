/* glibc's memcpy by size and by the destination's offset past the
 * source's within a cache line: the case that made the runtime copy with
 * its own loop (src/engine/memcopy.rs). On AMD Zen 4 with glibc 2.36,
 * copies of 4 KiB to 256 KiB whose destination lies 1..31 bytes past the
 * source's line offset run 20-30x slower (`rep movsb`).
 *
 *   gcc -O2 -o /tmp/memcpy_offsets scripts/memcpy_offsets.c && /tmp/memcpy_offsets
 *
 * Prints GB/s, the best of 5 batches, per size and relative offset; every
 * copy is checked against the source. Compare with
 * GLIBC_TUNABLES=glibc.cpu.x86_rep_movsb_threshold=4294967295 (no rep movsb).
 * Both buffers start on pages, so the first table's offsets are offsets
 * within a page too. The second table (64 KiB copies) moves the
 * destination's page by 64 to 2048 bytes besides: on an AMD EPYC VM (Zen
 * 3, family 25 model 1) only a destination 1..31 bytes past the source's
 * offset within a 4 KiB page was slow (22.6 us at +16, 1.3-1.9 us at
 * +64+16 and beyond), not those offsets within a cache line alone; on
 * an AMD EPYC Zen 5 VM (family 26 model 2) only 1..15 bytes past (3-4
 * GB/s, against 36-58 from +16), which the runtime measures too
 * (sys::slow_copy_offsets).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

/* GB/s of memcpy(dst, src, n), the best of 5 batches; 0 if the copy is wrong. */
static double best_gbps(unsigned char *dst, const unsigned char *src, size_t n) {
    long reps = 20000000 / (long)n + 1;
    double best = 1e30;
    for (int r = 0; r < 5; r++) {
        double t = now_us();
        for (long i = 0; i < reps; i++) {
            memcpy(dst, src, n);
            __asm__ volatile("" ::"r"(dst) : "memory");
        }
        double per = (now_us() - t) / reps;
        if (per < best) best = per;
    }
    return memcmp(dst, src, n) == 0 ? n / best / 1e3 : 0;
}

int main(void) {
    const size_t sizes[] = {2048, 4096, 16384, 65536, 262144, 1 << 20, 4 << 20};
    const int offsets[] = {0, 1, 8, 16, 31, 32, 40, 63};
    const int noff = sizeof offsets / sizeof offsets[0];
    printf("%9s", "bytes");
    for (int k = 0; k < noff; k++) printf("  +%-4d", offsets[k]);
    printf("  (GB/s by destination offset past the source's)\n");
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        size_t n = sizes[s], map = n + 4096;
        unsigned char *a = mmap(0, map, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        unsigned char *b = mmap(0, map, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (a == MAP_FAILED || b == MAP_FAILED) { perror("mmap"); return 1; }
        for (size_t i = 0; i < map; i++) a[i] = (unsigned char)(i * 7 + 3);
        memset(b, 0, map);
        printf("%9zu", n);
        for (int k = 0; k < noff; k++) {
            int o = offsets[k];
            double gbps = best_gbps(b + o, a, n);
            if (gbps == 0) { fprintf(stderr, "copy of %zu at +%d differs\n", n, o); return 1; }
            printf("  %5.1f", gbps);
        }
        printf("\n");
        munmap(a, map);
        munmap(b, map);
    }
    const int pages[] = {0, 64, 512, 2048};
    const size_t n = 65536, map = n + 8192;
    unsigned char *a = mmap(0, map, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    unsigned char *b = mmap(0, map, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (a == MAP_FAILED || b == MAP_FAILED) { perror("mmap"); return 1; }
    for (size_t i = 0; i < map; i++) a[i] = (unsigned char)(i * 7 + 3);
    memset(b, 0, map);
    printf("\n%9s", "page+");
    for (int k = 0; k < noff; k++) printf("  +%-4d", offsets[k]);
    printf("  (GB/s, 64 KiB, the destination's page moved by page+ bytes)\n");
    for (size_t p = 0; p < sizeof pages / sizeof pages[0]; p++) {
        printf("%9d", pages[p]);
        for (int k = 0; k < noff; k++) {
            int o = pages[p] + offsets[k];
            double gbps = best_gbps(b + o, a, n);
            if (gbps == 0) { fprintf(stderr, "copy at +%d differs\n", o); return 1; }
            printf("  %5.1f", gbps);
        }
        printf("\n");
    }
    return 0;
}
