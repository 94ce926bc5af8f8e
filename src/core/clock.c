/* The one monotonic clock (shardrec/clock.h). */
#include <stdio.h>
#include <time.h>

#include "shardrec/clock.h"

int64_t sr_clock_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

double sr_clock_seconds(void)
{
    return (double)sr_clock_ns() * 1e-9;
}

const char *sr_format_duration(char *buf, size_t n, double seconds)
{
    const long s = seconds > 0 ? (long)(seconds + 0.5) : 0;
    snprintf(buf, n, "%ld:%02ld", s / 60, s % 60);
    return buf;
}
