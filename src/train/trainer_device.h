/*
 * Where a rank runs (trainer_device.c): its device and its loader's threads.
 */
#ifndef SHARDREC_TRAIN_TRAINER_DEVICE_H
#define SHARDREC_TRAIN_TRAINER_DEVICE_H


struct sr_trainer;

/* t->dev from --device and --math; called by init_comms once the rank is
 * known, before the communicators are bound to the device. */
int sr_trainer_select_device(struct sr_trainer *t);
/* The loader thread's OpenMP threads: --loader-threads, else on a GPU this
 * rank's share of the cores it sees (divided among the ranks of the host that
 * may see the same ones) but two, else 1. */
int sr_trainer_loader_threads(const struct sr_trainer *t);
/* Rank 0 warns (t->log) when --loader-threads asks for more threads than the
 * cores this process may run on: they would only take turns on them. */
void sr_trainer_warn_loader_threads(const struct sr_trainer *t);

#endif
