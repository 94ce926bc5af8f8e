/*
 * Fault injection for tests (off unless the environment variable SR_FAULT is
 * set; docs/user-guide.md, "Fault injection"). `shardrec train` reads it at
 * start-up (sr_fault_init); the hooks below are no-ops without it.
 *
 *   SR_FAULT = FAULT[,FAULT...]
 *   FAULT    = kill:rank=R:step=S          SIGKILL itself at the start of step S
 *            | kill:rank=R:write=SUB       SIGKILL itself as an atomic write whose
 *                                          target path contains SUB is about to be
 *                                          committed (its temporary file written)
 *            | stop:rank=R:step=S          SIGSTOP itself at the start of step S
 *            | delay:rank=R:ms=M[:step=S]  sleep M ms before each collective (of
 *                                          step S only, when given)
 *            | delay:rank=R:ms=M:write=SUB sleep M ms before committing each
 *                                          atomic write whose path contains SUB
 *                                          (a slow disk; no collective waits)
 *            | fail-write:nth=N[:rank=R]   the Nth atomic write (commit) fails
 *            | fail-write:path=SUB[:rank=R]
 *            | fail-write:SUB[:rank=R]     an atomic write whose target path
 *                                          contains SUB fails
 *            | hold-write:write=SUB:step=S[:rank=R]  an atomic write whose
 *                                          path contains SUB waits, before its
 *                                          commit, until this process's
 *                                          training has begun step S (at most
 *                                          60 s): a write still in flight
 *                                          while training goes on, in order
 *
 * R is a world rank (kill, stop and delay need one; fail-write and
 * hold-write without it apply on every rank); S, N >= 1; M in [0, 600000]; SUB holds no ',' or
 * ':' and is not empty. Keys may come in any order, each once.
 * Not thread-safe to init; the hooks may run on any thread.
 */
#ifndef SHARDREC_FAULT_H
#define SHARDREC_FAULT_H

#include <stdint.h>

/* Parse `spec` (NULL or "" = no faults) for world rank `rank`. SR_ERR_INVALID_ARG
 * naming the fault and what is wrong with it; no faults are then active. */
int sr_fault_init(const char *spec, int rank);
/* Whether any fault is active on this rank. */
int sr_fault_active(void);

/* The hooks. At the start of training step `step` (kill, stop; noted for
 * hold-write). */
void sr_fault_step(int64_t step);
/* Before a collective, at step `step` (delay without write=). */
void sr_fault_collective(int64_t step);
/* Before an atomic write of `path` is committed: SR_OK (after a delay with
 * write=), or SR_ERR_IO with its message set, naming the path (fail-write);
 * may not return (kill). */
int sr_fault_write(const char *path);

#endif
