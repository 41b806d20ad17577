/* MPI_Finalize that never returns: MPICH 4.0.2 (Debian, ch4:ucx) with
 * UCX 1.13 over its tcp transport, 3 ranks or more, no gaspi involved.
 * Every rank puts to every other through a dynamic window (as the MPI
 * engine does; or, with mode 4, only exchanges MPI messages), ends its
 * epoch, frees the window and finalises. In about a third to a half of the
 * runs one rank stays in MPI_Finalize (ucp_worker_progress, waiting for
 * an endpoint's disconnect) while the others wait for it in the process
 * manager's barrier.
 *
 *   mpicc -O2 scripts/mpi/finalize_hang.c -o finalize_hang
 *   for i in 1 2 3 4 5 6; do UCX_TLS=tcp,self timeout 10 mpirun -n 4 ./finalize_hang 1; echo $?; done
 *   (124: it hung; with 2 ranks, or UCX_TLS unset on one machine, it did not.)
 *
 * Modes (bits): 1 puts and flushes, 2 a fetch-and-op each, 4 messages only.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    int provided, rank, n;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    int mode = argc > 1 ? atoi(argv[1]) : 1;
    static long buf[1024];
    MPI_Win win;
    MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    MPI_Win_attach(win, buf, sizeof buf);
    MPI_Aint mine, *base = malloc(n * sizeof(MPI_Aint));
    MPI_Get_address(buf, &mine);
    MPI_Allgather(&mine, 1, MPI_AINT, base, 1, MPI_AINT, MPI_COMM_WORLD);
    MPI_Win_lock_all(0, win);
    for (int k = 0; (mode & 1) && k < 100; k++)
        for (int t = 0; t < n; t++)
            if (t != rank) {
                long x = rank;
                MPI_Put(&x, 1, MPI_LONG, t, base[t] + 8 * rank, 1, MPI_LONG, win);
                MPI_Win_flush(t, win);
            }
    for (int t = 0; (mode & 2) && t < n; t++)
        if (t != rank) {
            long x = rank, y;
            MPI_Fetch_and_op(&x, &y, MPI_LONG, t, base[t], MPI_SUM, win);
            MPI_Win_flush(t, win);
        }
    for (int k = 0; (mode & 4) && k < 100; k++)
        for (int d = 1; d < n; d++) {
            long x = rank, y;
            MPI_Sendrecv(&x, 1, MPI_LONG, (rank + d) % n, 0, &y, 1, MPI_LONG, (rank - d + n) % n, 0,
                         MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_unlock_all(win);
    MPI_Win_detach(win, buf);
    MPI_Win_free(&win);
    free(base);
    printf("rank %d: finalising\n", rank);
    fflush(stdout);
    MPI_Finalize();
    return 0;
}
