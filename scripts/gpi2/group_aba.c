/* GPI-2 alone: groups of other members taking turns on one group id, as
 * the GPI-2 engine's groups did before every commit waited for the
 * members' word (src/engine/gpi2/twin.rs). Three ranks, rounds of: a
 * barrier of all ranks, then for culprit in 1, 2, 0, everyone but the
 * culprit makes a group (GPI-2 hands out id 1 every time), commits it,
 * barrier, allreduce (checked). With DEFERRED = 1 a rank deletes its last
 * group only when it makes the next one (the way the engine kept its
 * twins); with 0, right after its allreduce.
 *
 *   group_aba DEFERRED ROUNDS
 *
 * With 1 it hangs within a few rounds (seen: rank 2 in gaspi_group_commit,
 * rank 1 in gaspi_allreduce, rank 0 in gaspi_barrier, all timing out after
 * 60 s): a rank's commit passes GPI-2's check (member count and xor of the
 * members) against a peer's *older* group of the same members, takes that
 * group's buffer address, and the peer frees it when it makes its new
 * group. With 0 it passes here (the barrier of all ranks orders every
 * delete before the next commit), but nothing in GPI-2 stops the same
 * mix-up whenever a peer deletes late.
 *
 * Build and run (a stand-in ssh as in scripts/compare-gpi2.sh):
 *   cc -O2 -o group_aba group_aba.c -I$GPI2_DIR/include -L$GPI2_DIR/lib64 \
 *      -lGPI2 -lpthread -Wl,-rpath,$GPI2_DIR/lib64
 *   printf 'localhost\nlocalhost\nlocalhost\n' > machines
 *   printf '#!/bin/sh\nexec %s/group_aba 1 30\n' "$PWD" > run.sh; chmod +x run.sh
 *   PATH=<dir of the stand-in ssh>:$PATH bash $GPI2_DIR/bin/gaspi_run -m machines -n 3 "$PWD/run.sh"
 */
#include <GASPI.h>
#include <stdio.h>
#include <stdlib.h>
#define TIMEOUT_MS 60000
#define CHECK(call) do { gaspi_return_t r_ = (call); if (r_ != GASPI_SUCCESS) { \
  printf("rank %u: %s failed: %d\n", me, #call, r_); fflush(stdout); exit(1); } } while (0)

int main(int argc, char **argv) {
  gaspi_rank_t me = 0, n;
  const int deferred = argc > 1 ? atoi(argv[1]) : 1;
  const int rounds = argc > 2 ? atoi(argv[2]) : 20;
  CHECK(gaspi_proc_init(GASPI_BLOCK));
  CHECK(gaspi_proc_rank(&me));
  CHECK(gaspi_proc_num(&n));
  gaspi_group_t g = 0;
  int kept = 0;
  for (int round = 0; round < rounds; round++) {
    CHECK(gaspi_barrier(GASPI_GROUP_ALL, TIMEOUT_MS));
    const int culprits[3] = {1, n - 1, 0};
    for (int c = 0; c < 3; c++) {
      const int culprit = culprits[c];
      if (me == culprit) continue;
      if (kept) {
        CHECK(gaspi_group_delete(g));
        kept = 0;
      }
      CHECK(gaspi_group_create(&g));
      for (gaspi_rank_t i = 0; i < n; i++)
        if (i != culprit) CHECK(gaspi_group_add(g, i));
      CHECK(gaspi_group_commit(g, TIMEOUT_MS));
      CHECK(gaspi_barrier(g, TIMEOUT_MS));
      unsigned long v = me + round, out = 0, want = 0;
      for (gaspi_rank_t i = 0; i < n; i++)
        if (i != culprit) want += i + round;
      CHECK(gaspi_allreduce(&v, &out, 1, GASPI_OP_SUM, GASPI_TYPE_ULONG, g, TIMEOUT_MS));
      if (out != want) {
        printf("rank %u round %d culprit %d: got %lu, want %lu\n", me, round, culprit, out, want);
        return 2;
      }
      if (deferred) kept = 1;
      else CHECK(gaspi_group_delete(g));
    }
  }
  CHECK(gaspi_barrier(GASPI_GROUP_ALL, TIMEOUT_MS));
  if (me == 0) printf("ok: %d rounds, deferred %d\n", rounds, deferred);
  CHECK(gaspi_proc_term(GASPI_BLOCK));
  return 0;
}
