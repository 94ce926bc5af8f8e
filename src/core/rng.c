/*
 * Counter-based random helpers that need libm (see rng.h for the scheme).
 */
#include <math.h>

#include "shardrec/rng.h"

double sr_rng_normal(uint64_t seed, uint64_t stream, uint64_t counter)
{
    double u1 = sr_rng_uniform_open(seed, stream, 2 * counter);
    double u2 = sr_rng_uniform(seed, stream, 2 * counter + 1);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

uint64_t sr_rng_stream_of(const char *name)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *name; name++) {
        h ^= (unsigned char)*name;
        h *= 0x100000001b3ull;
    }
    return h;
}
