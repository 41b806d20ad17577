/* Counts the MPI calls of a process through the PMPI interface: preload it
 * into an MPI program (ours or the bare ones here) and each process prints
 * its counts as it exits. Used to compare what a notified write costs in
 * MPI calls (docs/guide/mpi.md, "write_notify's own cost").
 *
 *   gcc -O2 -shared -fPIC -I$I/include -L$I/lib -o libpmpi_count.so \
 *       scripts/mpi/pmpi_count.c -lmpi           (I: the MPI's prefix)
 *   mpirun -n 2 -genv LD_PRELOAD $PWD/libpmpi_count.so -genv GASPI_ENGINE mpi \
 *       -genv GASPI_HOST_RANKS 1 target/release/gaspi-bench write-notify-lat --sizes 8
 */
#include <mpi.h>
#include <stdatomic.h>
#include <stdio.h>
#include <unistd.h>
static _Atomic long n_iprobe, n_sync, n_put, n_acc, n_flush, n_test;
int MPI_Iprobe(int s, int t, MPI_Comm c, int *f, MPI_Status *st) { n_iprobe++; return PMPI_Iprobe(s, t, c, f, st); }
int MPI_Win_sync(MPI_Win w) { n_sync++; return PMPI_Win_sync(w); }
int MPI_Put(const void *a, int b, MPI_Datatype c, int d, MPI_Aint e, int f, MPI_Datatype g, MPI_Win w) { n_put++; return PMPI_Put(a, b, c, d, e, f, g, w); }
int MPI_Accumulate(const void *a, int b, MPI_Datatype c, int d, MPI_Aint e, int f, MPI_Datatype g, MPI_Op o, MPI_Win w) { n_acc++; return PMPI_Accumulate(a, b, c, d, e, f, g, o, w); }
int MPI_Win_flush(int r, MPI_Win w) { n_flush++; return PMPI_Win_flush(r, w); }
int MPI_Test(MPI_Request *r, int *f, MPI_Status *s) { n_test++; return PMPI_Test(r, f, s); }
int MPI_Testall(int n, MPI_Request *r, int *f, MPI_Status *s) { n_test++; return PMPI_Testall(n, r, f, s); }
__attribute__((destructor)) static void report(void) {
  fprintf(stderr, "pmpi_count pid %d: Iprobe %ld Win_sync %ld Put %ld Accumulate %ld Win_flush %ld Test %ld\n",
          (int)getpid(), n_iprobe, n_sync, n_put, n_acc, n_flush, n_test);
}
