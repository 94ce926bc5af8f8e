/*
 * Counter-based random helpers that need libm (see rng.h for the scheme).
 */
#include <math.h>
#include <string.h>

#include "shardrec/rng.h"

double sr_rng_normal(uint64_t seed, uint64_t stream, uint64_t counter)
{
    double u1 = sr_rng_uniform_open(seed, stream, 2 * counter);
    double u2 = sr_rng_uniform(seed, stream, 2 * counter + 1);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

uint64_t sr_hash_bytes(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

uint64_t sr_rng_stream_of(const char *name)
{
    return sr_hash_bytes(SR_HASH_INIT, name, strlen(name));
}
