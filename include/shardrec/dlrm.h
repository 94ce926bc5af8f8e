/*
 * The dense part of a DLRM: bottom MLP, an interaction (dot or DCNv2), top
 * MLP, BCE loss, plus the dense optimizers and learning-rate schedules it
 * trains with (dense_optim.h, lr_schedule.h, included here).
 *
 *   dense (B, num_dense) -- bottom MLP (ReLU after every layer) -- z (B, D) --+
 *   pooled (B, F*D), embeddings in the config's feature order ----------------+
 *     -- dot interaction: concat(z, <X_i, X_j> for i in 1..F, j < i) (B, D + F(F+1)/2)
 *        or DCNv2 (TorchRec's LowRankCrossNet): x_0 = concat(z, e_1..e_F), n = (F+1)D,
 *        L layers x_{l+1} = x_0 ⊙ (U_l (V_l x_l) + b_l) + x_l, output x_L (B, n)
 *     -- top MLP (ReLU after all but the last) -- logits (B)
 *
 * Linear: y = x·Wᵀ + b, W is [out, in] (the DLRM reference's layout). The
 * model keeps its parameters in ONE flat block on its device, its gradients
 * in a second block of the same layout (so they can be all-reduced in
 * contiguous buckets), and named views into both:
 *
 *   params: [bot_mlp.0.weight | bot_mlp.0.bias | bot_mlp.1.weight | ... |
 *            dcn.0.V | dcn.0.U | dcn.0.bias | ... (dcn only) |
 *            top_mlp.0.weight | top_mlp.0.bias | ... ]          (same for grads)
 *
 * Loss: BCE with logits, a mean over the global batch: backward seeds
 * dlogit = (σ(z) - y) * loss_scale with loss_scale = 1/(global batch), so
 * dense gradients are summed (never averaged) over ranks.
 *
 * Memory: activations for max_batch samples are allocated at init, with
 * each top MLP layer's output gradient (max_batch x its width floats, kept
 * from backward's data gradients to its deferred weight gradients); forward
 * and backward allocate nothing. All array arguments of forward/backward are
 * memory of the model's device (host memory for the CPU backend); calls are
 * stream-ordered on the device's default stream and, on the CPU, complete
 * before they return. dense and pooled are borrowed by forward: they must
 * stay valid and unchanged until the matching backward returns (backward
 * reads them). Shape errors in forward/backward (B > max_batch) abort: they
 * are caller bugs; configurations are checked by sr_dlrm_config_check.
 *
 * Shape letters: B batch per rank, F sparse features, D embedding dim; dcn:
 * L cross layers, R their rank, n = (F+1)·D.
 */
#ifndef SHARDREC_DLRM_H
#define SHARDREC_DLRM_H

#include <stddef.h>
#include <stdint.h>

#include "shardrec/dense_optim.h"
#include "shardrec/device.h"
#include "shardrec/lr_schedule.h"

#define SR_MLP_MAX        16
#define SR_DCN_MAX_LAYERS 16

/* --interaction: what combines z and the pooled embeddings. */
enum sr_interaction {
    SR_INTERACTION_DOT = 0, /* pairwise dot products (the DLRM reference) */
    SR_INTERACTION_DCN = 1, /* DCNv2 low-rank cross layers (TorchRec's DLRM_DCN) */
};

struct sr_dlrm_config {
    int num_dense;           /* 13 */
    int bot_mlp[SR_MLP_MAX]; /* widths including the input: 13,512,256,64,16 */
    int n_bot;               /* entries in bot_mlp (5 here) */
    int top_mlp[SR_MLP_MAX]; /* layers after the interaction: 512,256,1 (input width derived) */
    int n_top;
    int num_sparse;    /* F */
    int embedding_dim; /* D */
    enum sr_interaction interaction; /* 0 (dot) when left zero */
    int dcn_layers;                  /* L, dcn only: 1..SR_DCN_MAX_LAYERS */
    int dcn_rank;                    /* R, dcn only: 1..n, n = (F+1)·D */
};

struct sr_dlrm;

/* SR_OK, or SR_ERR_INVALID_ARG with a one-line message saying what is wrong
 * and how to fix it: bot_mlp[0] != num_dense, the last bottom width !=
 * embedding_dim, the last top width != 1, a width, num_sparse or
 * embedding_dim < 1, fewer than 2 bottom widths or 1 top layer, more than
 * SR_MLP_MAX entries; with dcn, dcn_layers outside 1..SR_DCN_MAX_LAYERS
 * (naming --dcn-layers) or dcn_rank outside 1..n (naming --dcn-rank and n). */
int sr_dlrm_config_check(const struct sr_dlrm_config *cfg);

/* Width of the interaction's output, the top MLP's input: D + F(F+1)/2 (dot)
 * or n = (F+1)·D (dcn). */
int sr_dlrm_interaction_dim(const struct sr_dlrm_config *cfg);

/* Checks cfg (returning its error), then allocates on dev the parameter and
 * gradient blocks and activations for up to max_batch samples, and
 * initialises the parameters as the DLRM reference does: Linear weight
 * W [out,in] ~ Normal(0, sqrt(2/(in+out))), bias ~ Normal(0, sqrt(1/out)),
 * element k of tensor "NAME" = sr_rng_normal(seed, sr_rng_stream_of("NAME"), k)
 * times its std, so any world size starts from the same model. DCN layers as
 * TorchRec's LowRankCrossNet: V and U xavier normal (std sqrt(2/(n+R)), the
 * same counter-based draws), bias 0. Gradients start at 0. The caller frees with sr_dlrm_free. */
int sr_dlrm_init(struct sr_dlrm **out, struct sr_device *dev, const struct sr_dlrm_config *cfg,
                 int max_batch, uint64_t seed);
void sr_dlrm_free(struct sr_dlrm *m);

/* dense (B, num_dense), pooled (B, F*D) -> logits (B). Keeps activations for
 * backward. Same as sr_dlrm_forward_bottom then sr_dlrm_forward_top.
 * Forward and backward issue their ops on stream s (stream-ordered: the
 * caller orders s after the producers of dense, pooled and labels, and
 * reads the outputs after s). */
void sr_dlrm_forward(struct sr_dlrm *m, sr_stream_t s, const float *dense, const float *pooled,
                     int B, float *logits);

/* The two halves of forward, so the bottom MLP can run while the pooled
 * embeddings are still being exchanged: bottom MLP of dense (B, num_dense);
 * then interaction and top MLP with pooled (B, F*D) -> logits (B). */
void sr_dlrm_forward_bottom(struct sr_dlrm *m, sr_stream_t s, const float *dense, int B);
void sr_dlrm_forward_top(struct sr_dlrm *m, sr_stream_t s, const float *pooled, int B,
                         float *logits);

/* After forward of the same B samples: given labels (B) (0/1), optional
 * mask (B) of 1/0 (NULL = all 1; masked samples contribute no loss and no
 * gradient) and loss_scale = 1/(global batch), seeds
 * dlogit = (sigmoid(z) - y) * loss_scale, backpropagates, OVERWRITES the flat
 * gradient block and writes dpooled (B, F*D). Returns a DEVICE pointer to
 * the SUM over the B samples of BCE-with-logits (numerically stable, summed
 * in double, rounded to fp32, unscaled): 1 float owned by the model, written
 * in stream order and overwritten by the next backward. Nothing is copied to
 * the host and the host does not wait: read it after a sync (the trainer
 * all-reduces it with the last gradient bucket instead, shardrec's
 * "the loss stays on the device"). Same as sr_dlrm_backward_top, then
 * sr_dlrm_backward_top_weights, then sr_dlrm_backward_bottom. */
const float *sr_dlrm_backward(struct sr_dlrm *m, sr_stream_t s, const float *labels,
                              const float *mask, int B, float loss_scale, float *dpooled);

/* The three parts of backward, called in this order with the same B and
 * stream, so the pooled gradients can leave as early as possible while the
 * top MLP's weight gradients and the bottom MLP's backward run:
 *
 *   sr_dlrm_backward_top          loss, then the top MLP's data gradients
 *                                 only (ReLU/bias pass and dX of each layer,
 *                                 from the logit down: its bias gradients are
 *                                 written, its weight gradients not yet), then
 *                                 the interaction's (dcn: every cross layer's
 *                                 data gradients and bias gradient): writes
 *                                 dpooled, returns the loss sum's device
 *                                 pointer as sr_dlrm_backward
 *   sr_dlrm_backward_top_weights  the top MLP's weight gradients (dW GEMMs)
 *                                 from the last layer down, then (dcn) each
 *                                 cross layer's dU and dV from the last down,
 *                                 each layer then reported ready
 *                                 (sr_dlrm_set_grad_ready)
 *   sr_dlrm_backward_bottom       the bottom MLP: writes its gradients
 *
 * Calling them out of order, or a forward_top between backward_top and
 * backward_top_weights (it would overwrite the activations the weight
 * gradients read), aborts. */
const float *sr_dlrm_backward_top(struct sr_dlrm *m, sr_stream_t s, const float *labels,
                                  const float *mask, int B, float loss_scale, float *dpooled);
void sr_dlrm_backward_top_weights(struct sr_dlrm *m, sr_stream_t s, int B);
void sr_dlrm_backward_bottom(struct sr_dlrm *m, sr_stream_t s, int B);

/* Called by backward each time a layer's gradients (a Linear layer's weight
 * and bias, a cross layer's V, U and bias) are issued, with their range
 * [offset, offset + count) in the flat gradient block and the stream
 * backward runs on (the gradients are final once that stream reaches this
 * point), so a caller can start all-reducing a bucket early. Layers are
 * reported from the last top layer down to bottom layer 0 (from the block's
 * end towards its start; each layer's range is one gradient group, below),
 * the top and cross layers by sr_dlrm_backward_top_weights, the bottom ones
 * by sr_dlrm_backward_bottom; sr_dlrm_backward_top reports none. NULL fn
 * disables. */
typedef void (*sr_dlrm_grad_ready_fn)(void *ctx, size_t offset, size_t count, sr_stream_t s);
void sr_dlrm_set_grad_ready(struct sr_dlrm *m, sr_dlrm_grad_ready_fn fn, void *ctx);

/* The gradient groups, one per layer, in block order (bottom layers, cross
 * layers, top layers): group k covers [offset, offset + count) of the flat
 * blocks, the range sr_dlrm_set_grad_ready's callback reports for it. */
int sr_dlrm_num_grad_groups(const struct sr_dlrm *m);
void sr_dlrm_grad_group(const struct sr_dlrm *m, int k, size_t *offset, size_t *count);

/* The device the model lives on. */
struct sr_device *sr_dlrm_device(const struct sr_dlrm *m);

/* The flat parameter and gradient blocks (device), n floats each. */
float *sr_dlrm_params(struct sr_dlrm *m, size_t *n);
float *sr_dlrm_grads(struct sr_dlrm *m, size_t *n);
const struct sr_dlrm_config *sr_dlrm_get_config(const struct sr_dlrm *m);

/* Tensors by index, 0 <= i < sr_dlrm_num_tensors, in block order, for
 * safetensors: names "bot_mlp.K.weight", "bot_mlp.K.bias", "top_mlp.K.weight",
 * "top_mlp.K.bias" (K counts Linear layers from 0; the reference's bot_l.2K),
 * shape [out, in] (ndim 2) / [out] (ndim 1); with dcn, between the MLPs,
 * "dcn.L.V" [R, n], "dcn.L.U" [n, R], "dcn.L.bias" [n] for each cross layer L
 * (TorchRec's V_kernels, W_kernels, bias); data pointing into the flat
 * parameter block. name stays valid for the model's lifetime. */
int sr_dlrm_num_tensors(const struct sr_dlrm *m);
void sr_dlrm_tensor(const struct sr_dlrm *m, int i, const char **name, int *ndim, int64_t shape[2],
                    float **data);
/* Offset of tensor i in the flat blocks (floats), so its gradient is
 * sr_dlrm_grads(m) + offset. */
size_t sr_dlrm_tensor_offset(const struct sr_dlrm *m, int i);

/* Forward FLOPs per sample: 2 x (multiply-adds of every Linear layer plus the
 * interaction's: F(F+1)/2 dot products of length D, or dcn's 2·n·R per
 * layer). Backward is about twice. */
int64_t sr_dlrm_flops_per_sample(const struct sr_dlrm_config *cfg);

#endif
