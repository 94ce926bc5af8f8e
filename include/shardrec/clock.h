/*
 * The one monotonic clock of shardrec: every duration, timestamp and trace
 * span is taken from it, so times from different layers can be compared.
 */
#ifndef SHARDREC_CLOCK_H
#define SHARDREC_CLOCK_H

#include <stddef.h>
#include <stdint.h>

/* Nanoseconds of CLOCK_MONOTONIC (an arbitrary origin, per host). */
int64_t sr_clock_ns(void);
/* The same in seconds, as a double. */
double sr_clock_seconds(void);

/* A duration as "M:SS" (minutes unbounded; rounded to the second; negative
 * or NaN reads 0:00) into buf; returns buf. Progress lines' ETA. */
const char *sr_format_duration(char *buf, size_t n, double seconds);

#endif
