/*
 * The emulated inter-node link, for tests and benchmarks on one host: ranks
 * declared on different nodes (--ranks-per-node) talk over shared memory or
 * loopback TCP, far faster than a NIC; this module makes their inter-node
 * collectives complete no earlier than a link of a given bandwidth and
 * latency would deliver them (comm.h, sr_comm_set_link, states the model).
 * It only delays: data still moves through the real transport, untouched.
 *
 * State: per process, one FIFO per direction and other node, each reduced to
 * the time it is next free (a message occupies it for bytes / bandwidth from
 * max(its start, free), then arrives `latency` later). Nothing polls: the
 * worker that ran the collective sleeps until the arrival.
 *
 *   free_at[OUT][n]  this rank's sends to node n
 *   free_at[IN][n]   node n's sends to this rank, as this rank mirrors them
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "shardrec/alloc.h"
#include "shardrec/clock.h"
#include "shardrec/error.h"
#include "comm/comm_internal.h"
#include "comm/comm_link.h"

#define MAX_GB_S       1e6 /* accepted bandwidths, GB/s */
#define MAX_LATENCY_US 1e7 /* accepted latencies: 10 s */

struct sr_link {
    atomic_int refs;
    pthread_mutex_t mu;
    double s_per_byte, latency_s;
    int nodes;
    double *free_at; /* (2, nodes) sr_clock seconds when each direction is next free */
};

/* ---- configuration ------------------------------------------------------------ */

static int parse_number(const char *what, const char *text, const char *s, double lo, double hi,
                        int lo_open, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    int ok = !errno && end != s && *end == '\0' && isfinite(v) && v <= hi &&
             (lo_open ? v > lo : v >= lo);
    if (!ok)
        return sr_error_set(SR_ERR_INVALID_ARG,
                            "%s: '%s' is not BW_GB_S[,LATENCY_US] (bandwidth in 1e9 bytes/s, "
                            "> 0 and <= %g; latency in microseconds, 0 to %g)",
                            what, text, MAX_GB_S, MAX_LATENCY_US);
    *out = v;
    return SR_OK;
}

int sr_comm_link_parse(const char *what, const char *text, struct sr_comm_link *link)
{
    char bw[64];
    const char *comma = strchr(text, ',');
    size_t len = comma ? (size_t)(comma - text) : strlen(text);
    struct sr_comm_link l = {0, 0};
    if (len >= sizeof bw)
        return sr_error_set(SR_ERR_INVALID_ARG, "%s: '%s' is too long", what, text);
    memcpy(bw, text, len);
    bw[len] = '\0';
    int rc = parse_number(what, text, bw, 0, MAX_GB_S, 1, &l.gb_per_s);
    if (!rc && comma)
        rc = parse_number(what, text, comma + 1, 0, MAX_LATENCY_US, 0, &l.latency_us);
    if (!rc)
        *link = l;
    return rc;
}

void sr_comm_set_link(sr_comm_t c, const struct sr_comm_link *cfg)
{
    sr_link_unref(c->link);
    sr_link_msgs_free(&c->link_msgs);
    c->link = NULL;
    if (!cfg || cfg->gb_per_s <= 0)
        return;
    int nodes = 0;
    for (int p = 0; p < c->size; p++)
        if (c->node_of[p] + 1 > nodes)
            nodes = c->node_of[p] + 1;
    c->link = sr_link_new(cfg, nodes);
    sr_link_msgs_init(&c->link_msgs, nodes);
}

int sr_comm_link(sr_comm_t c, struct sr_comm_link *cfg)
{
    if (!c->link)
        return 0;
    cfg->gb_per_s = 1e-9 / c->link->s_per_byte;
    cfg->latency_us = 1e6 * c->link->latency_s;
    return 1;
}

/* ---- the link ----------------------------------------------------------------- */

struct sr_link *sr_link_new(const struct sr_comm_link *cfg, int nodes)
{
    SR_ASSERT(cfg->gb_per_s > 0 && cfg->latency_us >= 0 && nodes > 0);
    struct sr_link *l = sr_calloc(1, sizeof *l);
    atomic_init(&l->refs, 1);
    pthread_mutex_init(&l->mu, NULL);
    l->s_per_byte = 1.0 / (cfg->gb_per_s * 1e9);
    l->latency_s = 1e-6 * cfg->latency_us;
    l->nodes = nodes;
    l->free_at = sr_calloc(2 * (size_t)nodes, sizeof *l->free_at);
    return l;
}

struct sr_link *sr_link_ref(struct sr_link *l)
{
    if (l)
        atomic_fetch_add(&l->refs, 1);
    return l;
}

void sr_link_unref(struct sr_link *l)
{
    if (!l || atomic_fetch_sub(&l->refs, 1) != 1)
        return;
    pthread_mutex_destroy(&l->mu);
    sr_free(l->free_at);
    sr_free(l);
}

int sr_link_nodes(const struct sr_link *l)
{
    return l->nodes;
}

double sr_link_reserve(struct sr_link *l, const struct sr_link_msgs *m, double t)
{
    SR_ASSERT(m->nodes == l->nodes);
    double last = 0;
    pthread_mutex_lock(&l->mu);
    for (int i = 0; i < 2 * l->nodes; i++) {
        if (m->bytes[i] < 0)
            continue;
        double start = l->free_at[i] > t ? l->free_at[i] : t;
        l->free_at[i] = start + (double)m->bytes[i] * l->s_per_byte;
        double arrival = l->free_at[i] + l->latency_s;
        if (arrival > last)
            last = arrival;
    }
    pthread_mutex_unlock(&l->mu);
    return last;
}

void sr_link_sleep_until(double t)
{
    int64_t ns = (int64_t)ceil(t * 1e9);
    struct timespec ts = {(time_t)(ns / 1000000000), (long)(ns % 1000000000)};
    /* sr_clock is CLOCK_MONOTONIC: sleep to an absolute time, again after a signal */
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

/* ---- message lists ------------------------------------------------------------- */

void sr_link_msgs_init(struct sr_link_msgs *m, int nodes)
{
    m->nodes = nodes;
    m->bytes = sr_calloc(2 * (size_t)nodes, sizeof *m->bytes);
    sr_link_msgs_clear(m);
}

void sr_link_msgs_free(struct sr_link_msgs *m)
{
    sr_free(m->bytes);
    m->bytes = NULL;
    m->nodes = 0;
}

void sr_link_msgs_clear(struct sr_link_msgs *m)
{
    for (int i = 0; i < 2 * m->nodes; i++)
        m->bytes[i] = -1;
}

void sr_link_msgs_add(struct sr_link_msgs *m, enum sr_link_dir dir, int node, uint64_t bytes)
{
    SR_ASSERT(node >= 0 && node < m->nodes);
    int64_t *b = &m->bytes[(int)dir * m->nodes + node];
    *b = (*b < 0 ? 0 : *b) + (int64_t)bytes;
}

void sr_link_msgs_copy(struct sr_link_msgs *dst, const struct sr_link_msgs *src)
{
    if (dst->nodes != src->nodes) {
        sr_link_msgs_free(dst);
        sr_link_msgs_init(dst, src->nodes);
    }
    memcpy(dst->bytes, src->bytes, 2 * (size_t)src->nodes * sizeof *src->bytes);
}

int sr_link_msgs_any(const struct sr_link_msgs *m)
{
    for (int i = 0; i < 2 * m->nodes; i++)
        if (m->bytes[i] >= 0)
            return 1;
    return 0;
}
