/*
 * The one monotonic clock of shardrec: every duration, timestamp and trace
 * span is taken from it, so times from different layers can be compared.
 */
#ifndef SHARDREC_CLOCK_H
#define SHARDREC_CLOCK_H

#include <stdint.h>

/* Nanoseconds of CLOCK_MONOTONIC (an arbitrary origin, per host). */
int64_t sr_clock_ns(void);
/* The same in seconds, as a double. */
double sr_clock_seconds(void);

#endif
