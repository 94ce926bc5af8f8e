/*
 * Counter-based randomness. Every random number is a pure function of
 * (seed, stream, counter): a weight of (seed, tensor id, element index), a
 * synthetic sample of (seed, purpose, global sample index). Nothing carries
 * state from one draw to the next, so any rank can draw any slice and any world
 * size reproduces the same numbers.
 *
 * The mixer is SplitMix64's finaliser applied to a combination of the three
 * inputs; it passes as a statistical source for initialisation and synthetic
 * data (not for cryptography).
 */
#ifndef SHARDREC_RNG_H
#define SHARDREC_RNG_H

#include <stddef.h>
#include <stdint.h>

/* The inline draws compile for the host and, in CUDA files, for the device
 * too, so a GPU initialises tables with the same numbers. */
#ifdef __CUDACC__
#define SR_RNG_HD __host__ __device__
#else
#define SR_RNG_HD
#endif

/* A well-mixed 64-bit value of (seed, stream, counter). */
static inline SR_RNG_HD uint64_t sr_rng_u64(uint64_t seed, uint64_t stream, uint64_t counter)
{
    uint64_t z =
        seed * 0x9E3779B97F4A7C15ull ^ (stream + 0x632BE59BD9B4E019ull) * 0xD1B54A32D192ED03ull;
    z ^= counter * 0xBF58476D1CE4E5B9ull + 0x94D049BB133111EBull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z = z ^ (z >> 31);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Uniform in [0, 1) with 53 bits. */
static inline SR_RNG_HD double sr_rng_uniform(uint64_t seed, uint64_t stream, uint64_t counter)
{
    return (double)(sr_rng_u64(seed, stream, counter) >> 11) * (1.0 / 9007199254740992.0);
}

/* Uniform in (0, 1), never 0 (for logarithms). */
static inline SR_RNG_HD double sr_rng_uniform_open(uint64_t seed, uint64_t stream, uint64_t counter)
{
    return ((double)(sr_rng_u64(seed, stream, counter) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

/* Standard normal by Box-Muller over two draws at counters 2c and 2c+1. */
double sr_rng_normal(uint64_t seed, uint64_t stream, uint64_t counter);

/* A stream id from a name (FNV-1a), so tensors can be keyed by their name. */
uint64_t sr_rng_stream_of(const char *name);

/* FNV-1a over n bytes, continuing from h (start from SR_HASH_INIT): the
 * project's one hash for names, plans and configs. */
#define SR_HASH_INIT 0xcbf29ce484222325ull
uint64_t sr_hash_bytes(uint64_t h, const void *data, size_t n);

#endif
