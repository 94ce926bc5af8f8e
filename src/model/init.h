/*
 * Initialisation of a Linear layer's and a cross layer's parameters (see init.c).
 */
#ifndef SHARDREC_MODEL_INIT_H
#define SHARDREC_MODEL_INIT_H

#include <stdint.h>

/* Fill weight (out, in) and bias (out), host memory, for the tensors named
 * weight_name and bias_name. */
void sr_init_linear(float *weight, float *bias, int out, int in, uint64_t seed,
                    const char *weight_name, const char *bias_name);

/* Fill w (rows, cols), host memory, for the tensor named name with
 * xavier normal draws: std sqrt(2 / (rows + cols)). */
void sr_init_xavier_normal(float *w, int rows, int cols, uint64_t seed, const char *name);

#endif
