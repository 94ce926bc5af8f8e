/*
 * Where a rank runs: its device (--device, --math, --cuda-graphs checked
 * against it) from its node-local rank, and how many OpenMP threads its
 * loader thread may take without oversubscribing the host's cores.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#ifdef SR_USE_OMP
#include <omp.h>
#endif

#include "shardrec/comm.h"
#include "shardrec/error.h"
#include "train/trainer_internal.h"

/* How many ranks share this host's cores, from the launcher's environment
 * (Open MPI, MPICH, torchrun, Slurm), else 1. */
static int host_ranks(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS",
                                       "LOCAL_WORLD_SIZE",           "SLURM_NTASKS_PER_NODE",
                                       "SLURM_STEP_TASKS_PER_NODE",  NULL};
    for (int i = 0; vars[i]; i++) {
        const char *v = getenv(vars[i]);
        if (v && atoi(v) > 0)
            return atoi(v);
    }
    return 1;
}

int sr_trainer_loader_threads(const struct sr_trainer *t)
{
    if (t->cfg->loader_threads > 0)
        return t->cfg->loader_threads;
#ifdef SR_USE_OMP
    /* a GPU rank's compute thread only issues work: its share of the cores
     * but two (the compute thread, the communicators' workers) makes batches.
     * The host's r ranks each see `procs` of its `online` cores; as many as
     * ceil(procs r / online) of them may share one set (bound to a socket, a
     * shared cpuset, or not bound at all), so each takes that part of it. */
    long procs = omp_get_num_procs(), online = sysconf(_SC_NPROCESSORS_ONLN);
    long r = host_ranks();
    if (online < procs)
        online = procs;
    long sharing = (procs * r + online - 1) / online;
    long share = procs / (sharing > 0 ? sharing : 1);
    if (t->dev->kind == SR_DEVICE_CUDA && share > 3)
        return (int)(share - 2);
#endif
    return 1; /* the CPU devices: the cores compute */
}

void sr_trainer_warn_loader_threads(const struct sr_trainer *t)
{
#ifdef SR_USE_OMP
    int cores = omp_get_num_procs(); /* the cores this process may run on */
    if (!t->log || t->cfg->loader_threads <= cores)
        return;
    fprintf(t->log,
            "warning: --loader-threads %d is more than the %d cores this rank may run on: "
            "the threads would take turns on them; HINT: at most %d, or 0 (automatic)\n",
            t->cfg->loader_threads, cores, cores);
#else
    (void)t; /* no OpenMP: the loader makes batches on its own thread, whatever the count */
#endif
}

/* --device: a GPU (this rank's node-local rank modulo the GPUs visible), the
 * CPU, or auto: a GPU when one is visible. The math mode goes with it. */
int sr_trainer_select_device(struct sr_trainer *t)
{
    const struct sr_train_config *cfg = t->cfg;
    struct sr_device *dev = sr_device_cpu();
    if (cfg->device != SR_DEVICE_CHOICE_CPU) {
        struct sr_device *gpu = NULL;
        int n = sr_device_count(SR_DEVICE_CUDA);
        if (n > 0)
            gpu = sr_device_get(SR_DEVICE_CUDA, sr_comm_launch_local_rank(t->rank) % n);
        else if (cfg->device == SR_DEVICE_CHOICE_CUDA)
            sr_device_get(SR_DEVICE_CUDA, 0); /* for its message: what is missing */
        if (!gpu && cfg->device == SR_DEVICE_CHOICE_CUDA)
            return sr_error_set(SR_ERR_UNSUPPORTED, "--device cuda: %s", sr_error_message());
        sr_error_clear();
        if (gpu)
            dev = gpu;
    }
    if (cfg->math != SR_MATH_FP32 && dev->kind != SR_DEVICE_CUDA)
        return sr_error_set(SR_ERR_UNSUPPORTED,
                            "--math %s needs a CUDA device; the CPU computes in fp32 only "
                            "(HINT: --math fp32, or --device cuda on a machine with a GPU)",
                            cfg->math == SR_MATH_TF32 ? "tf32" : "bf16");
    if (cfg->cuda_graphs > 0 && !sr_dev_has_graphs(dev))
        return sr_error_set(SR_ERR_UNSUPPORTED,
                            "--cuda-graphs needs a CUDA device (%s has no graphs); HINT: "
                            "--device cuda, or leave --cuda-graphs out",
                            dev->name);
    if (cfg->cuda_graphs > 0 && cfg->pipeline == SR_PIPELINE_NONE)
        return sr_error_set(SR_ERR_UNSUPPORTED,
                            "--cuda-graphs replays the pipelined step: it needs --pipeline "
                            "sparse-dist (or auto, the default)");
    dev->math = (enum sr_math)cfg->math;
    t->dev = dev;
    /* auto resolved: the memory estimate sizes the workspace by the device */
    t->cfg->device = dev->kind == SR_DEVICE_CUDA ? SR_DEVICE_CHOICE_CUDA : SR_DEVICE_CHOICE_CPU;
    return SR_OK;
}
