/* MPI's own asynchronous progress beside one-sided operations to a
 * dynamic window (the window the MPI engine uses): rank 0 does REPS
 * MPI_Fetch_and_op + MPI_Win_flush on a word attached by rank 1, which
 * only waits in a barrier. Run it with the MPI library's progress thread
 * turned on:
 *
 *   mpicc -O2 -o apr scripts/mpi/async_progress_rma.c
 *   mpirun -n 2 -genv MPIR_CVAR_ASYNC_PROGRESS 1 ./apr      # MPICH
 *   mpirun -n 2 -genv I_MPI_ASYNC_PROGRESS 1 ./apr          # Intel MPI
 *   mpirun -n 2 -genv I_MPI_ASYNC_PROGRESS 1 ./apr errors   # + MPI_Win_set_errhandler
 *
 * It prints "ok: 1000" when the counter holds every add. Measured
 * 2026-11-30 (2-core AMD EPYC VM): MPICH 4.0.2 ok, with and without the
 * error handler; Intel MPI 2021.18 (I_MPI_FABRICS=shm): from run to run
 * a segmentation fault in its progress thread
 * (MPIDIG_get_acc_ack_target_msg_cb) or a hang, and with `errors` both
 * ranks hang in MPI_Win_set_errhandler. Without I_MPI_ASYNC_PROGRESS
 * both run. docs/guide/mpi.md, "A target that
 * computes", says what follows for the engine. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
    int level, me, reps = 1000;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &level);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Win win;
    MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    if (argc > 1 && strcmp(argv[1], "errors") == 0)
        MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);
    static uint64_t word[8];
    MPI_Aint mine, all[2];
    MPI_Win_attach(win, word, sizeof word);
    MPI_Get_address(word, &mine);
    MPI_Allgather(&mine, 1, MPI_AINT, all, 1, MPI_AINT, MPI_COMM_WORLD);
    MPI_Win_lock_all(0, win);
    if (me == 0) {
        uint64_t one = 1, old = 0;
        for (int i = 0; i < reps; i++) {
            MPI_Fetch_and_op(&one, &old, MPI_UINT64_T, 1, all[1], MPI_SUM, win);
            MPI_Win_flush(1, win);
        }
        if (old + 1 != (uint64_t)reps) {
            printf("wrong: %llu\n", (unsigned long long)(old + 1));
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        printf("ok: %d (thread level %d)\n", reps, level);
    }
    MPI_Win_unlock_all(win);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_detach(win, word);
    MPI_Win_free(&win);
    MPI_Finalize();
    return 0;
}
