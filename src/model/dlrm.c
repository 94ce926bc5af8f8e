/*
 * The dense DLRM: its memory, forward and backward (contract in dlrm.h).
 *
 * Memory, all on the model's device, sized at init and never reallocated:
 *
 *   params  [bot.0.W | bot.0.b | ... | top.0.W | top.0.b | ...]  n_params
 *   grads   same layout                                          n_params
 *   acts    loss_sum (1 float) | bot_act[l] (B, out_l) ... | inter (B, I)
 *           | top_act[l] (B, out_l) ... | top_dy[l] (B, out_l) ...
 *           | grad_buf[0], grad_buf[1] (B, widest)
 *
 * Backward runs in three parts. backward_top walks the top MLP from the
 * logit down issuing only the data gradients (each layer's ReLU/bias pass
 * and dX GEMM), then the interaction's: dpooled is ready as early as it can
 * be. backward_top_weights then issues the top MLP's dW GEMMs, which read
 * each layer's masked output gradient, so each top layer keeps its own,
 * top_dy[l] (the loss writes the last one, layer l's dX writes
 * top_dy[l - 1]). Top layer 0's dX (the interaction's gradient) goes to
 * grad_buf[0] and the interaction writes dz into grad_buf[1]. backward_bottom
 * walks the bottom MLP with grad_buf as a ping-pong pair, each layer reading
 * its output gradient from one buffer and writing its input gradient into
 * the other. Forward activations stay for backward; the inputs dense and
 * pooled are borrowed (not copied) between the two.
 *
 * Stage spans (shardrec/trace.h): bottom_mlp, interaction and top_mlp in the
 * forward; backward around each part of the backward (top data gradients
 * with the interaction, top weight gradients, bottom).
 */
#include <stdio.h>
#include <string.h>

#include "shardrec/alloc.h"
#include "shardrec/dlrm.h"
#include "shardrec/error.h"
#include "shardrec/trace.h"
#include "model/init.h"
#include "model/interaction.h"
#include "model/linear.h"
#include "model/loss.h"

#define SR_DLRM_MAX_TENSORS (4 * SR_MLP_MAX)

struct sr_dlrm {
    struct sr_device *dev;
    struct sr_dlrm_config cfg;
    int max_batch;
    int n_bot, n_top; /* Linear layers in each MLP */
    int inter_dim;    /* I = D + F(F+1)/2 */
    struct sr_linear bot[SR_MLP_MAX];
    struct sr_linear top[SR_MLP_MAX];

    float *params; /* (n_params) device */
    float *grads;  /* (n_params) device */
    size_t n_params;
    size_t tensor_offset[SR_DLRM_MAX_TENSORS];
    char tensor_name[SR_DLRM_MAX_TENSORS][32];

    float *acts;                /* the activation block, device */
    float *bot_act[SR_MLP_MAX]; /* (max_batch, bot[l].out) */
    float *inter;               /* (max_batch, I) */
    float *top_act[SR_MLP_MAX]; /* (max_batch, top[l].out); the last holds logits */
    float *top_dy[SR_MLP_MAX];  /* (max_batch, top[l].out): top layer l's output gradient */
    float *grad_buf[2];         /* (max_batch, widest) each */
    float *loss_sum;            /* (1) this rank's loss sum of the last backward */

    const float *dense;          /* (B, num_dense) borrowed from forward */
    const float *pooled;         /* (B, F*D) borrowed from forward */
    int bottom_batch, top_batch; /* B of the last forward halves; -1 when consumed */
    int weights_batch;           /* B of the backward_top whose dW are pending; -1: none */

    sr_dlrm_grad_ready_fn grad_ready;
    void *grad_ready_ctx;
};

/* Lay out the layers' shapes; parameter views are set by place_params. */
static void set_shapes(struct sr_dlrm *m)
{
    const struct sr_dlrm_config *c = &m->cfg;
    m->n_bot = c->n_bot - 1;
    m->n_top = c->n_top;
    m->inter_dim = sr_dlrm_interaction_dim(c);
    for (int l = 0; l < m->n_bot; l++)
        m->bot[l] = (struct sr_linear){.in = c->bot_mlp[l], .out = c->bot_mlp[l + 1], .relu = 1};
    for (int l = 0; l < m->n_top; l++)
        m->top[l] = (struct sr_linear){.in = l == 0 ? m->inter_dim : c->top_mlp[l - 1],
                                       .out = c->top_mlp[l],
                                       .relu = l < m->n_top - 1};
}

static int num_layers(const struct sr_dlrm *m)
{
    return m->n_bot + m->n_top;
}

/* Linear layer k of the model: the bottom MLP's first, then the top MLP's. */
static struct sr_linear *layer(struct sr_dlrm *m, int k)
{
    return k < m->n_bot ? &m->bot[k] : &m->top[k - m->n_bot];
}

/* Name the tensors, give each its offset, and count the parameters. */
static void place_params(struct sr_dlrm *m)
{
    size_t off = 0;
    for (int k = 0; k < num_layers(m); k++) {
        struct sr_linear *l = layer(m, k);
        const char *mlp = k < m->n_bot ? "bot_mlp" : "top_mlp";
        int idx = k < m->n_bot ? k : k - m->n_bot;
        snprintf(m->tensor_name[2 * k], sizeof(m->tensor_name[0]), "%s.%d.weight", mlp, idx);
        snprintf(m->tensor_name[2 * k + 1], sizeof(m->tensor_name[0]), "%s.%d.bias", mlp, idx);
        m->tensor_offset[2 * k] = off;
        off += (size_t)l->out * l->in;
        m->tensor_offset[2 * k + 1] = off;
        off += (size_t)l->out;
    }
    m->n_params = off;
}

static void bind_views(struct sr_dlrm *m)
{
    for (int k = 0; k < num_layers(m); k++) {
        struct sr_linear *l = layer(m, k);
        l->weight = m->params + m->tensor_offset[2 * k];
        l->bias = m->params + m->tensor_offset[2 * k + 1];
        l->dweight = m->grads + m->tensor_offset[2 * k];
        l->dbias = m->grads + m->tensor_offset[2 * k + 1];
    }
}

/* Carve n floats from *p, keeping every buffer 64-byte aligned. */
static float *carve(float **p, size_t n)
{
    float *q = *p;
    *p += (n + 15) / 16 * 16;
    return q;
}

static void alloc_activations(struct sr_dlrm *m)
{
    size_t B = (size_t)m->max_batch, widest = (size_t)m->inter_dim, total = 16;
    for (int k = 0; k < num_layers(m); k++) {
        struct sr_linear *l = layer(m, k);
        widest = (size_t)l->out > widest ? (size_t)l->out : widest;
        widest = (size_t)l->in > widest ? (size_t)l->in : widest;
        total += (B * l->out + 15) / 16 * 16;
    }
    for (int l = 0; l < m->n_top; l++) /* top_dy */
        total += (B * m->top[l].out + 15) / 16 * 16;
    total += (B * m->inter_dim + 15) / 16 * 16 + 2 * ((B * widest + 15) / 16 * 16);
    m->acts = sr_dev_alloc_zero_named(m->dev, total * sizeof(float),
                                      "the MLP activations (grow with the batch size)");
    float *p = m->acts;
    m->loss_sum = carve(&p, 1);
    for (int l = 0; l < m->n_bot; l++)
        m->bot_act[l] = carve(&p, B * m->bot[l].out);
    m->inter = carve(&p, B * m->inter_dim);
    for (int l = 0; l < m->n_top; l++)
        m->top_act[l] = carve(&p, B * m->top[l].out);
    for (int l = 0; l < m->n_top; l++)
        m->top_dy[l] = carve(&p, B * m->top[l].out);
    m->grad_buf[0] = carve(&p, B * widest);
    m->grad_buf[1] = carve(&p, B * widest);
    SR_ASSERT((size_t)(p - m->acts) == total);
}

/* Draw every layer's parameters on the host, then copy them to the device. */
static void init_params(struct sr_dlrm *m, uint64_t seed)
{
    float *host = sr_malloc(m->n_params * sizeof(float));
    for (int k = 0; k < num_layers(m); k++) {
        struct sr_linear *l = layer(m, k);
        sr_init_linear(host + m->tensor_offset[2 * k], host + m->tensor_offset[2 * k + 1], l->out,
                       l->in, seed, m->tensor_name[2 * k], m->tensor_name[2 * k + 1]);
    }
    sr_dev_copy(m->dev, m->params, host, m->n_params * sizeof(float), NULL);
    sr_dev_sync(m->dev, NULL);
    sr_free(host);
}

int sr_dlrm_init(struct sr_dlrm **out, struct sr_device *dev, const struct sr_dlrm_config *cfg,
                 int max_batch, uint64_t seed)
{
    *out = NULL;
    int rc = sr_dlrm_config_check(cfg);
    if (rc != SR_OK)
        return rc;
    if (max_batch < 1)
        return sr_error_set(SR_ERR_INVALID_ARG, "batch size %d must be at least 1", max_batch);
    struct sr_dlrm *m = sr_calloc(1, sizeof(*m));
    m->dev = dev;
    m->cfg = *cfg;
    m->max_batch = max_batch;
    m->bottom_batch = m->top_batch = m->weights_batch = -1;
    set_shapes(m);
    place_params(m);
    m->params = sr_dev_alloc_named(dev, m->n_params * sizeof(float), "the MLP parameters");
    m->grads = sr_dev_alloc_zero_named(dev, m->n_params * sizeof(float), "the MLP gradients");
    bind_views(m);
    alloc_activations(m);
    init_params(m, seed);
    *out = m;
    return SR_OK;
}

void sr_dlrm_free(struct sr_dlrm *m)
{
    if (!m)
        return;
    sr_dev_free(m->dev, m->acts);
    sr_dev_free(m->dev, m->grads);
    sr_dev_free(m->dev, m->params);
    sr_free(m);
}

void sr_dlrm_forward_bottom(struct sr_dlrm *m, sr_stream_t s, const float *dense, int B)
{
    SR_ASSERT(B >= 1 && B <= m->max_batch);
    const float *x = dense;
    sr_trace_begin(SR_SPAN_BOTTOM_MLP, -1);
    for (int l = 0; l < m->n_bot; l++) {
        sr_linear_forward(m->dev, s, &m->bot[l], x, B, m->bot_act[l]);
        x = m->bot_act[l];
    }
    sr_trace_end();
    m->dense = dense;
    m->bottom_batch = B;
}

void sr_dlrm_forward_top(struct sr_dlrm *m, sr_stream_t s, const float *pooled, int B,
                         float *logits)
{
    SR_ASSERT(B == m->bottom_batch && m->weights_batch == -1); /* pending dW read top_act */
    sr_trace_begin(SR_SPAN_INTERACTION, -1);
    sr_interaction_forward(m->dev, s, m->bot_act[m->n_bot - 1], pooled, B, m->cfg.num_sparse,
                           m->cfg.embedding_dim, m->inter);
    sr_trace_end();
    const float *x = m->inter;
    sr_trace_begin(SR_SPAN_TOP_MLP, -1);
    for (int l = 0; l < m->n_top; l++) {
        sr_linear_forward(m->dev, s, &m->top[l], x, B, m->top_act[l]);
        x = m->top_act[l];
    }
    sr_dev_copy(m->dev, logits, x, (size_t)B * sizeof(float), s);
    sr_trace_end();
    m->pooled = pooled;
    m->top_batch = B;
}

void sr_dlrm_forward(struct sr_dlrm *m, sr_stream_t s, const float *dense, const float *pooled,
                     int B, float *logits)
{
    sr_dlrm_forward_bottom(m, s, dense, B);
    sr_dlrm_forward_top(m, s, pooled, B, logits);
}

static void notify_layer_ready(struct sr_dlrm *m, sr_stream_t s, int k)
{
    if (!m->grad_ready)
        return;
    struct sr_linear *l = layer(m, k);
    m->grad_ready(m->grad_ready_ctx, m->tensor_offset[2 * k], (size_t)l->out * (l->in + 1), s);
}

const float *sr_dlrm_backward_top(struct sr_dlrm *m, sr_stream_t s, const float *labels,
                                  const float *mask, int B, float loss_scale, float *dpooled)
{
    SR_ASSERT(B == m->top_batch && B == m->bottom_batch && m->weights_batch == -1);
    sr_trace_begin(SR_SPAN_BACKWARD, -1);
    sr_bce_loss(m->dev, s, m->top_act[m->n_top - 1], labels, mask, B, loss_scale,
                m->top_dy[m->n_top - 1], m->loss_sum);
    for (int l = m->n_top - 1; l >= 0; l--) {
        float *dx = l > 0 ? m->top_dy[l - 1] : m->grad_buf[0]; /* layer 0: the interaction's */
        sr_linear_backward_data(m->dev, s, &m->top[l], m->top_act[l], m->top_dy[l], B, dx);
    }
    sr_interaction_backward(m->dev, s, m->bot_act[m->n_bot - 1], m->pooled, m->grad_buf[0], B,
                            m->cfg.num_sparse, m->cfg.embedding_dim, m->grad_buf[1], dpooled);
    m->top_batch = -1;
    m->weights_batch = B;
    sr_trace_end();
    return m->loss_sum;
}

void sr_dlrm_backward_top_weights(struct sr_dlrm *m, sr_stream_t s, int B)
{
    SR_ASSERT(B == m->weights_batch);
    sr_trace_begin(SR_SPAN_BACKWARD, -1);
    for (int l = m->n_top - 1; l >= 0; l--) {
        const float *x = l > 0 ? m->top_act[l - 1] : m->inter;
        sr_linear_backward_weights(m->dev, s, &m->top[l], x, m->top_dy[l], B);
        notify_layer_ready(m, s, m->n_bot + l);
    }
    m->weights_batch = -1;
    sr_trace_end();
}

void sr_dlrm_backward_bottom(struct sr_dlrm *m, sr_stream_t s, int B)
{
    SR_ASSERT(B == m->bottom_batch && m->top_batch == -1 && m->weights_batch == -1);
    sr_trace_begin(SR_SPAN_BACKWARD, -1);
    int cur = 1; /* grad_buf[cur] holds the current layer's output gradient: dz first */
    for (int l = m->n_bot - 1; l >= 0; l--) {
        const float *x = l > 0 ? m->bot_act[l - 1] : m->dense;
        float *dx = l > 0 ? m->grad_buf[1 - cur] : NULL; /* no gradient for the input */
        sr_linear_backward(m->dev, s, &m->bot[l], x, m->bot_act[l], m->grad_buf[cur], B, dx);
        cur = 1 - cur;
        notify_layer_ready(m, s, l);
    }
    m->bottom_batch = -1;
    sr_trace_end();
}

const float *sr_dlrm_backward(struct sr_dlrm *m, sr_stream_t s, const float *labels,
                              const float *mask, int B, float loss_scale, float *dpooled)
{
    const float *loss_sum = sr_dlrm_backward_top(m, s, labels, mask, B, loss_scale, dpooled);
    sr_dlrm_backward_top_weights(m, s, B);
    sr_dlrm_backward_bottom(m, s, B);
    return loss_sum;
}

void sr_dlrm_set_grad_ready(struct sr_dlrm *m, sr_dlrm_grad_ready_fn fn,
                            void *ctx)
{
    m->grad_ready = fn;
    m->grad_ready_ctx = ctx;
}

struct sr_device *sr_dlrm_device(const struct sr_dlrm *m)
{
    return m->dev;
}

float *sr_dlrm_params(struct sr_dlrm *m, size_t *n)
{
    if (n)
        *n = m->n_params;
    return m->params;
}

float *sr_dlrm_grads(struct sr_dlrm *m, size_t *n)
{
    if (n)
        *n = m->n_params;
    return m->grads;
}

const struct sr_dlrm_config *sr_dlrm_get_config(const struct sr_dlrm *m)
{
    return &m->cfg;
}

int sr_dlrm_num_tensors(const struct sr_dlrm *m)
{
    return 2 * (m->n_bot + m->n_top);
}

size_t sr_dlrm_tensor_offset(const struct sr_dlrm *m, int i)
{
    SR_ASSERT(i >= 0 && i < sr_dlrm_num_tensors(m));
    return m->tensor_offset[i];
}

void sr_dlrm_tensor(const struct sr_dlrm *m, int i, const char **name, int *ndim, int64_t shape[2],
                    float **data)
{
    SR_ASSERT(i >= 0 && i < sr_dlrm_num_tensors(m));
    const struct sr_linear *l = i / 2 < m->n_bot ? &m->bot[i / 2] : &m->top[i / 2 - m->n_bot];
    int is_bias = i % 2;
    *name = m->tensor_name[i];
    *ndim = is_bias ? 1 : 2;
    shape[0] = l->out;
    shape[1] = is_bias ? 0 : l->in;
    *data = m->params + m->tensor_offset[i];
}
