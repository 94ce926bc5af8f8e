/*
 * The comm deadline (comm.h) on cases the CLI test does not pin down; run by
 * tests/check_mpi_stuck.sh under mpirun, which checks the exit status and the
 * message. The last rank is the late one; usage: mpi_stuck MODE
 *   elsewhere  timeout 2 s; the last rank sleeps outside any collective while
 *              the others wait in a barrier at step 7: the job must end,
 *              naming the last rank as alive but not arrived (exit non-zero)
 *   scaled     timeout 1 s; the last rank joins an all_reduce of 100 MB of
 *              payload 1.5 s late: the payload's 2 s extend the deadline, so
 *              the call completes (exit 0)
 *   off        timeout 1 s, then 0: the last rank joins a barrier 2 s late
 *              and it completes (exit 0)
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "shardrec/alloc.h"
#include "shardrec/comm.h"
#include "shardrec/error.h"

static void late(sr_comm_t c, double seconds)
{
    if (sr_comm_rank(c) == sr_comm_size(c) - 1)
        usleep((useconds_t)(seconds * 1e6));
}

int main(int argc, char **argv)
{
    sr_comm_t world;
    if (argc != 2 || sr_comm_init_mpi(&world, &argc, &argv, 0) != SR_OK) {
        fprintf(stderr, "usage: mpirun -np W mpi_stuck elsewhere|scaled|off (%s)\n",
                sr_error_message());
        return 2;
    }
    const char *mode = argv[1];
    sr_comm_t c = sr_comm_dup(world);
    sr_comm_set_name(c, "test");
    int rc = 0;
    if (strcmp(mode, "elsewhere") == 0) {
        sr_comm_set_timeout(c, 2);
        sr_comm_set_step(7);
        late(c, 60);
        sr_comm_barrier(c);
        rc = 1; /* not reached on the others: the deadline ends the job */
    } else if (strcmp(mode, "scaled") == 0) {
        size_t n = (size_t)50e6 / sizeof(float); /* 50 MB buffer: 100 MB payload */
        float *x = sr_calloc(n, sizeof(float));
        sr_comm_set_timeout(c, 1);
        late(c, 1.5);
        sr_comm_all_reduce(c, x, x, n, SR_DTYPE_F32, SR_REDUCE_SUM, NULL, NULL);
        sr_free(x);
    } else if (strcmp(mode, "off") == 0) {
        sr_comm_set_timeout(c, 1);
        sr_comm_set_timeout(c, 0);
        late(c, 2);
        sr_comm_barrier(c);
    } else {
        rc = 2;
    }
    sr_comm_free(c);
    sr_comm_free(world);
    sr_comm_finalize();
    if (rc == 0 && sr_get_rank() == 0)
        printf("mpi_stuck %s: completed\n", mode);
    return rc;
}
