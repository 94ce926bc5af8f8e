/*
 * Learning-rate schedules (values and spec grammar in lr_schedule.h).
 * Parsing reads "warmup_poly:WARMUP:DECAY_START:DECAY_STEPS[:POWER]" field by
 * field with strtoll/strtod, rejecting empty fields, signs, overflow and
 * trailing characters, and names the field at fault.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "shardrec/error.h"
#include "shardrec/lr_schedule.h"

static const char *const field_names[] = {"WARMUP", "DECAY_START", "DECAY_STEPS", "POWER"};

#define SPEC_HINT "expected 'constant' or 'warmup_poly:WARMUP:DECAY_START:DECAY_STEPS[:POWER]'"

/* Parse a non-negative integer occupying exactly [s, end). */
static int parse_count(const char *s, const char *end, int64_t *out)
{
    if (s == end || *s < '0' || *s > '9')
        return -1;
    char *stop;
    errno = 0;
    long long v = strtoll(s, &stop, 10);
    if (errno == ERANGE || stop != end)
        return -1;
    *out = v;
    return 0;
}

static int parse_power(const char *s, const char *end, float *out)
{
    if (s == end)
        return -1;
    char *stop;
    errno = 0;
    double v = strtod(s, &stop);
    if (errno == ERANGE || stop != end || !isfinite(v) || v <= 0.0 || v > 1e6)
        return -1;
    *out = (float)v;
    return 0;
}

/* Split the fields after "warmup_poly:" at ':' into start/end pointers;
 * returns how many there are. */
static int split_fields(const char *s, const char *start[5], const char *end[5])
{
    int n = 0;
    for (;;) {
        const char *e = s + strcspn(s, ":");
        if (n < 5) {
            start[n] = s;
            end[n] = e;
        }
        n++;
        if (!*e)
            return n;
        s = e + 1;
    }
}

static int parse_fields(const char *spec, const char *fields, struct sr_lr_schedule *out)
{
    const char *start[5], *end[5];
    int n = split_fields(fields, start, end);
    if (n > 4)
        return sr_error_set(SR_ERR_INVALID_ARG, "lr schedule '%s': unexpected '%s' after POWER; %s",
                            spec, start[4], SPEC_HINT);
    int64_t ints[3];
    for (int i = 0; i < n; i++) {
        int bad = i < 3 ? parse_count(start[i], end[i], &ints[i])
                        : parse_power(start[i], end[i], &out->power);
        if (bad)
            return sr_error_set(SR_ERR_INVALID_ARG, "lr schedule '%s': %s '%.*s' is not %s; %s",
                                spec, field_names[i], (int)(end[i] - start[i]), start[i],
                                i < 3 ? "a non-negative integer" : "a positive number", SPEC_HINT);
    }
    if (n < 3)
        return sr_error_set(SR_ERR_INVALID_ARG, "lr schedule '%s': %s is missing; %s", spec,
                            field_names[n], SPEC_HINT);
    out->warmup_steps = ints[0];
    out->decay_start = ints[1];
    out->decay_steps = ints[2];
    return SR_OK;
}

int sr_lr_schedule_parse(const char *spec, float base_lr, struct sr_lr_schedule *out)
{
    static const char prefix[] = "warmup_poly:";
    *out = (struct sr_lr_schedule){.kind = SR_LR_CONSTANT, .base_lr = base_lr, .power = 2.0f};
    if (!isfinite(base_lr) || base_lr < 0.0f)
        return sr_error_set(SR_ERR_INVALID_ARG, "learning rate %g must be a finite number >= 0",
                            base_lr);
    if (strcmp(spec, "constant") == 0)
        return SR_OK;
    if (strncmp(spec, prefix, sizeof(prefix) - 1) != 0)
        return sr_error_set(SR_ERR_INVALID_ARG, "unknown lr schedule '%s'; %s", spec, SPEC_HINT);
    out->kind = SR_LR_WARMUP_POLY;
    int rc = parse_fields(spec, spec + sizeof(prefix) - 1, out);
    if (rc != SR_OK)
        return rc;
    if (out->decay_start < out->warmup_steps)
        return sr_error_set(SR_ERR_INVALID_ARG,
                            "lr schedule '%s': DECAY_START %lld comes before the warm-up ends "
                            "(WARMUP %lld); HINT: set DECAY_START >= WARMUP",
                            spec, (long long)out->decay_start, (long long)out->warmup_steps);
    return SR_OK;
}

float sr_lr_at(const struct sr_lr_schedule *s, int64_t step)
{
    if (s->kind == SR_LR_CONSTANT)
        return s->base_lr;
    if (step < s->warmup_steps)
        return (float)((double)s->base_lr * (double)step / (double)s->warmup_steps);
    if (s->decay_steps <= 0 || step < s->decay_start)
        return s->base_lr;
    int64_t done = step - s->decay_start;
    if (done >= s->decay_steps)
        return s->end_lr;
    double left = (double)(s->decay_steps - done) / (double)s->decay_steps;
    return (float)(s->end_lr + (s->base_lr - s->end_lr) * pow(left, s->power));
}
