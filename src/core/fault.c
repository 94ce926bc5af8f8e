/*
 * Fault injection for tests (contract and grammar in include/shardrec/fault.h).
 *
 * SR_FAULT is parsed once into a small table of faults; only those for this
 * rank (or for every rank: fail-write without rank=) are kept. The hooks
 * walk the table: at a step's start (kill, stop; noting the step), before
 * each collective (delay), before an atomic write is committed (kill, delay,
 * fail-write, hold-write; the writes
 * are counted here, per process, for nth=). Nothing allocates.
 */
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "shardrec/error.h"
#include "shardrec/fault.h"

#define MAX_FAULTS 8
#define SUB_MAX    256
#define SPEC_MAX   1024

enum action { KILL, STOP, DELAY, FAIL_WRITE, HOLD_WRITE };

struct fault {
    enum action action;
    int64_t rank, step, ms, nth; /* -1: not given */
    char sub[SUB_MAX];           /* path substring, or "" */
};

static struct fault faults[MAX_FAULTS];
static int n_faults;
static atomic_long writes;  /* atomic writes committed or failed so far */
static atomic_long started; /* the training step this process last began (hold-write) */

#define HOLD_MAX_MS 60000 /* a hold-write gives up after this long */

/* A decimal in [lo, hi], digits only. */
static int parse_num(const char *fault, const char *key, const char *v, int64_t lo, int64_t hi,
                     int64_t *out)
{
    char *end;
    errno = 0;
    long long x = (v[0] >= '0' && v[0] <= '9') ? strtoll(v, &end, 10) : 0;
    if (!(v[0] >= '0' && v[0] <= '9') || *end || errno || x < lo || x > hi)
        return sr_error_set(SR_ERR_INVALID_ARG,
                            "SR_FAULT '%s': %s=%s is not a whole number in [%lld, %lld]", fault,
                            key, v, (long long)lo, (long long)hi);
    *out = x;
    return SR_OK;
}

static int parse_action(const char *fault, const char *word, enum action *a)
{
    static const char *const names[] = {"kill", "stop", "delay", "fail-write", "hold-write"};
    for (int k = 0; k < 5; k++)
        if (!strcmp(word, names[k])) {
            *a = (enum action)k;
            return SR_OK;
        }
    return sr_error_set(SR_ERR_INVALID_ARG,
                        "SR_FAULT '%s': unknown fault '%s'; HINT: kill, stop, delay, "
                        "fail-write or hold-write (docs/user-guide.md, \"Fault injection\")",
                        fault, word);
}

static int set_sub(const char *fault, struct fault *f, const char *v)
{
    if (f->sub[0])
        return sr_error_set(SR_ERR_INVALID_ARG, "SR_FAULT '%s': two paths", fault);
    if (!v[0] || strlen(v) >= SUB_MAX)
        return sr_error_set(SR_ERR_INVALID_ARG, "SR_FAULT '%s': a path substring must hold 1 "
                                                "to %d characters", fault, SUB_MAX - 1);
    snprintf(f->sub, sizeof f->sub, "%s", v);
    return SR_OK;
}

/* One key=value (or, for fail-write, a bare path substring) into f. */
static int parse_field(const char *fault, struct fault *f, char *field)
{
    char *eq = strchr(field, '=');
    if (!eq)
        return f->action == FAIL_WRITE
                   ? set_sub(fault, f, field)
                   : sr_error_set(SR_ERR_INVALID_ARG, "SR_FAULT '%s': '%s' is not KEY=VALUE",
                                  fault, field);
    *eq = '\0';
    const char *key = field, *v = eq + 1;
    int64_t *slot = !strcmp(key, "rank")   ? &f->rank
                    : !strcmp(key, "step") ? &f->step
                    : !strcmp(key, "ms")   ? &f->ms
                    : !strcmp(key, "nth")  ? &f->nth
                                           : NULL;
    if (!strcmp(key, "path") || !strcmp(key, "write"))
        return set_sub(fault, f, v);
    if (!slot)
        return sr_error_set(SR_ERR_INVALID_ARG, "SR_FAULT '%s': unknown key '%s'", fault, key);
    if (*slot >= 0)
        return sr_error_set(SR_ERR_INVALID_ARG, "SR_FAULT '%s': %s given twice", fault, key);
    int64_t lo = slot == &f->rank || slot == &f->ms ? 0 : 1;
    return parse_num(fault, key, v, lo, slot == &f->ms ? 600000 : INT64_MAX / 4, slot);
}

/* The keys each action takes: what must be there and what may not. */
static int check_fault(const char *fault, const struct fault *f)
{
    const char *why = NULL;
    if (f->action == HOLD_WRITE && (f->step < 0 || !f->sub[0] || f->ms >= 0 || f->nth >= 0))
        why = "needs step=S and write=SUB, and takes only rank= besides";
    else if (f->action != FAIL_WRITE && f->action != HOLD_WRITE && f->rank < 0)
        why = "needs rank=R";
    else if ((f->action == KILL || f->action == STOP) && (f->step < 0) == (f->sub[0] == 0))
        why = f->action == KILL ? "needs one of step=S and write=SUB" : "needs step=S";
    else if (f->action == STOP && f->sub[0])
        why = "takes step=S, not a path";
    else if ((f->action == KILL || f->action == STOP) && (f->ms >= 0 || f->nth >= 0))
        why = "takes no ms= or nth=";
    else if (f->action == DELAY && (f->ms < 0 || f->nth >= 0 || (f->sub[0] && f->step >= 0)))
        why = "needs ms=M and takes only rank=, ms= and one of step= and write=";
    else if (f->action == FAIL_WRITE && (f->nth >= 0) == (f->sub[0] != 0))
        why = "needs one of nth=N and path=SUB";
    else if (f->action == FAIL_WRITE && (f->step >= 0 || f->ms >= 0))
        why = "takes no step= or ms=";
    if (why)
        return sr_error_set(SR_ERR_INVALID_ARG, "SR_FAULT '%s': %s (docs/user-guide.md, \"Fault "
                                                "injection\")", fault, why);
    return SR_OK;
}

static int parse_fault(const char *text, struct fault *f)
{
    char buf[SPEC_MAX], *save = NULL;
    snprintf(buf, sizeof buf, "%s", text);
    *f = (struct fault){.rank = -1, .step = -1, .ms = -1, .nth = -1};
    size_t n = strlen(text);
    if (strstr(text, "::") || text[n - 1] == ':')
        return sr_error_set(SR_ERR_INVALID_ARG, "SR_FAULT '%s': an empty field", text);
    char *word = strtok_r(buf, ":", &save);
    int rc = word ? parse_action(text, word, &f->action)
                  : sr_error_set(SR_ERR_INVALID_ARG, "SR_FAULT: an empty fault");
    for (char *field; !rc && (field = strtok_r(NULL, ":", &save));)
        rc = parse_field(text, f, field);
    return rc ? rc : check_fault(text, f);
}

int sr_fault_init(const char *spec, int rank)
{
    char buf[SPEC_MAX], *save = NULL;
    n_faults = 0;
    atomic_store(&writes, 0);
    atomic_store(&started, 0);
    if (!spec || !spec[0])
        return SR_OK;
    if (strlen(spec) >= sizeof buf)
        return sr_error_set(SR_ERR_INVALID_ARG, "SR_FAULT: longer than %d characters", SPEC_MAX - 1);
    snprintf(buf, sizeof buf, "%s", spec);
    struct fault all[MAX_FAULTS];
    int n = 0, rc = SR_OK;
    for (char *one = strtok_r(buf, ",", &save); one && !rc; one = strtok_r(NULL, ",", &save)) {
        if (n == MAX_FAULTS)
            return sr_error_set(SR_ERR_INVALID_ARG, "SR_FAULT: more than %d faults", MAX_FAULTS);
        rc = parse_fault(one, &all[n++]);
    }
    if (rc)
        return rc;
    if (!n || spec[strlen(spec) - 1] == ',' || strstr(spec, ",,") || spec[0] == ',')
        return sr_error_set(SR_ERR_INVALID_ARG, "SR_FAULT '%s': an empty fault", spec);
    for (int k = 0; k < n; k++)
        if (all[k].rank < 0 || all[k].rank == rank)
            faults[n_faults++] = all[k];
    return SR_OK;
}

int sr_fault_active(void)
{
    return n_faults > 0;
}

void sr_fault_step(int64_t step)
{
    atomic_store(&started, (long)step);
    for (int k = 0; k < n_faults; k++) {
        const struct fault *f = &faults[k];
        if (f->step != step || (f->action != KILL && f->action != STOP))
            continue;
        fprintf(stderr, "[rank %lld] SR_FAULT: %s at the start of step %lld\n",
                (long long)f->rank, f->action == KILL ? "SIGKILL" : "SIGSTOP", (long long)step);
        fflush(stderr);
        raise(f->action == KILL ? SIGKILL : SIGSTOP);
    }
}

static void sleep_ms(int64_t ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) && errno == EINTR)
        ;
}

void sr_fault_collective(int64_t step)
{
    for (int k = 0; k < n_faults; k++) {
        const struct fault *f = &faults[k];
        if (f->action != DELAY || f->sub[0] || (f->step >= 0 && f->step != step))
            continue;
        sleep_ms(f->ms);
    }
}

/* Wait until this process's training has begun `step` (at most HOLD_MAX_MS). */
static void hold(int64_t step, const char *path)
{
    int64_t waited = 0;
    while (atomic_load(&started) < step && waited < HOLD_MAX_MS) {
        sleep_ms(1);
        waited++;
    }
    if (atomic_load(&started) < step) {
        fprintf(stderr, "SR_FAULT: hold-write of %s gave up after %d ms: training did not reach "
                        "step %lld\n", path, HOLD_MAX_MS, (long long)step);
        fflush(stderr);
    }
}

int sr_fault_write(const char *path)
{
    long nth = atomic_fetch_add(&writes, 1) + 1;
    for (int k = 0; k < n_faults; k++) {
        const struct fault *f = &faults[k];
        if (f->action == KILL && f->sub[0] && strstr(path, f->sub)) {
            fprintf(stderr, "[rank %lld] SR_FAULT: SIGKILL before committing %s\n",
                    (long long)f->rank, path);
            fflush(stderr);
            raise(SIGKILL);
        }
        if (f->action == DELAY && f->sub[0] && strstr(path, f->sub))
            sleep_ms(f->ms);
        if (f->action == HOLD_WRITE && strstr(path, f->sub))
            hold(f->step, path);
        if (f->action == FAIL_WRITE && (f->nth == nth || (f->sub[0] && strstr(path, f->sub))))
            return sr_error_set(SR_ERR_IO, "%s: cannot write (injected by SR_FAULT, write #%ld)",
                                path, nth);
    }
    return SR_OK;
}
