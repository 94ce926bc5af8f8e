/*
 * The dense DLRM: its memory, forward and backward (contract in dlrm.h).
 *
 * Memory, all on the model's device, sized at init and never reallocated:
 *
 *   params  [bot.0.W | bot.0.b | ... | dcn.0.V | dcn.0.U | dcn.0.bias | ...
 *            | top.0.W | top.0.b | ...]                          n_params
 *   grads   same layout                                          n_params
 *   acts    loss_sum (1 float) | bot_act[l] (B, out_l) ... | inter (B, I)
 *           | top_act[l] (B, out_l) ... | top_dy[l] (B, out_l) ...
 *           | grad_buf[0], grad_buf[1] (B, widest)
 *           | dcn only, per cross layer: x, u, du (B, n), h, dh (B, R)
 *
 * With --interaction dcn the cross network (dcn.c) takes the interaction's
 * place: its output x_L is the top MLP's input (inter is then unused), top
 * layer 0's dX (x_L's gradient, in grad_buf[0]) runs down the cross layers
 * in place, and dz lands in grad_buf[1] as the dot interaction's does. The
 * cross layers' dU/dV GEMMs run in backward_top_weights after the top MLP's,
 * from the du and dh each layer keeps, so dpooled leaves before them.
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
#include "model/dcn.h"
#include "model/init.h"
#include "model/interaction.h"
#include "model/linear.h"
#include "model/loss.h"

#define SR_DLRM_MAX_TENSORS (4 * SR_MLP_MAX + 3 * SR_DCN_MAX_LAYERS)
#define SR_DLRM_MAX_GROUPS  (2 * SR_MLP_MAX + SR_DCN_MAX_LAYERS)

struct sr_dlrm {
    struct sr_device *dev;
    struct sr_dlrm_config cfg;
    int max_batch;
    int n_bot, n_top; /* Linear layers in each MLP */
    int inter_dim;    /* I = D + F(F+1)/2 (dot) or n = (F+1)·D (dcn) */
    int n_dcn;        /* cross layers: 0 (dot) or L */
    struct sr_linear bot[SR_MLP_MAX];
    struct sr_linear top[SR_MLP_MAX];
    struct sr_dcn dcn; /* the cross network (n_dcn > 0) */

    float *params; /* (n_params) device */
    float *grads;  /* (n_params) device */
    size_t n_params;
    int n_tensors, n_groups;
    size_t tensor_offset[SR_DLRM_MAX_TENSORS];
    char tensor_name[SR_DLRM_MAX_TENSORS][32];
    int tensor_ndim[SR_DLRM_MAX_TENSORS];
    int64_t tensor_shape[SR_DLRM_MAX_TENSORS][2];
    size_t group_offset[SR_DLRM_MAX_GROUPS], group_count[SR_DLRM_MAX_GROUPS]; /* block order */

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
    m->n_dcn = c->interaction == SR_INTERACTION_DCN ? c->dcn_layers : 0;
    m->dcn = (struct sr_dcn){.L = m->n_dcn,
                             .R = c->dcn_rank,
                             .F = c->num_sparse,
                             .D = c->embedding_dim,
                             .n = (c->num_sparse + 1) * c->embedding_dim};
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

/* Tensor i: name, shape, offset; advances *off past it. */
static void add_tensor(struct sr_dlrm *m, size_t *off, int64_t rows, int64_t cols,
                       const char *fmt, const char *a, int k)
{
    int i = m->n_tensors++;
    SR_ASSERT(i < SR_DLRM_MAX_TENSORS);
    if (a)
        snprintf(m->tensor_name[i], sizeof(m->tensor_name[0]), fmt, a, k);
    else
        snprintf(m->tensor_name[i], sizeof(m->tensor_name[0]), fmt, k);
    m->tensor_ndim[i] = cols ? 2 : 1;
    m->tensor_shape[i][0] = rows;
    m->tensor_shape[i][1] = cols;
    m->tensor_offset[i] = *off;
    *off += (size_t)rows * (size_t)(cols ? cols : 1);
}

static void add_linear(struct sr_dlrm *m, size_t *off, const struct sr_linear *l, const char *mlp,
                       int k)
{
    add_tensor(m, off, l->out, l->in, "%s.%d.weight", mlp, k);
    add_tensor(m, off, l->out, 0, "%s.%d.bias", mlp, k);
}

/* The next gradient group: the floats [start, off) of one layer. */
static void end_group(struct sr_dlrm *m, size_t start, size_t off)
{
    m->group_offset[m->n_groups] = start;
    m->group_count[m->n_groups++] = off - start;
}

/* Name the tensors, give each its offset, group them by layer, and count the
 * parameters: bottom layers, cross layers, top layers. */
static void place_params(struct sr_dlrm *m)
{
    size_t off = 0, start;
    const int64_t n = m->dcn.n, R = m->dcn.R;
    for (int k = 0; k < m->n_bot; k++) {
        start = off;
        add_linear(m, &off, &m->bot[k], "bot_mlp", k);
        end_group(m, start, off);
    }
    for (int l = 0; l < m->n_dcn; l++) {
        start = off;
        add_tensor(m, &off, R, n, "dcn.%d.V", NULL, l);
        add_tensor(m, &off, n, R, "dcn.%d.U", NULL, l);
        add_tensor(m, &off, n, 0, "dcn.%d.bias", NULL, l);
        end_group(m, start, off);
    }
    for (int k = 0; k < m->n_top; k++) {
        start = off;
        add_linear(m, &off, &m->top[k], "top_mlp", k);
        end_group(m, start, off);
    }
    m->n_params = off;
}

/* First tensor of bottom Linear k (2 tensors each), cross layer l (3 each)
 * and top Linear k, as place_params lays them out; the group of each. */
static int bot_tensor(const struct sr_dlrm *m, int k)
{
    return 2 * k;
}

static int dcn_tensor(const struct sr_dlrm *m, int l)
{
    return 2 * m->n_bot + 3 * l;
}

static int top_tensor(const struct sr_dlrm *m, int k)
{
    return 2 * m->n_bot + 3 * m->n_dcn + 2 * k;
}

static void bind_linear(struct sr_dlrm *m, struct sr_linear *l, int t)
{
    l->weight = m->params + m->tensor_offset[t];
    l->bias = m->params + m->tensor_offset[t + 1];
    l->dweight = m->grads + m->tensor_offset[t];
    l->dbias = m->grads + m->tensor_offset[t + 1];
}

static void bind_views(struct sr_dlrm *m)
{
    for (int k = 0; k < m->n_bot; k++)
        bind_linear(m, &m->bot[k], bot_tensor(m, k));
    for (int k = 0; k < m->n_top; k++)
        bind_linear(m, &m->top[k], top_tensor(m, k));
    for (int l = 0; l < m->n_dcn; l++) {
        const size_t *o = &m->tensor_offset[dcn_tensor(m, l)];
        m->dcn.V[l] = m->params + o[0], m->dcn.dV[l] = m->grads + o[0];
        m->dcn.U[l] = m->params + o[1], m->dcn.dU[l] = m->grads + o[1];
        m->dcn.bias[l] = m->params + o[2], m->dcn.dbias[l] = m->grads + o[2];
    }
}

/* Carve n floats from *p, keeping every buffer 64-byte aligned. */
static float *carve(float **p, size_t n)
{
    float *q = *p;
    *p += (n + 15) / 16 * 16;
    return q;
}

static size_t padded(size_t n)
{
    return (n + 15) / 16 * 16;
}

static void alloc_activations(struct sr_dlrm *m)
{
    size_t B = (size_t)m->max_batch, widest = (size_t)m->inter_dim, total = 16;
    size_t inter = m->n_dcn ? 0 : B * m->inter_dim; /* dcn: x_L is the top MLP's input */
    size_t n = (size_t)m->dcn.n, R = (size_t)m->dcn.R;
    for (int k = 0; k < num_layers(m); k++) {
        struct sr_linear *l = layer(m, k);
        widest = (size_t)l->out > widest ? (size_t)l->out : widest;
        widest = (size_t)l->in > widest ? (size_t)l->in : widest;
        total += padded(B * l->out);
    }
    for (int l = 0; l < m->n_top; l++) /* top_dy */
        total += padded(B * m->top[l].out);
    total += padded(inter) + 2 * padded(B * widest);
    total += (size_t)m->n_dcn * (3 * padded(B * n) + 2 * padded(B * R));
    m->acts = sr_dev_alloc_zero_named(m->dev, total * sizeof(float),
                                      "the MLP activations (grow with the batch size)");
    float *p = m->acts;
    m->loss_sum = carve(&p, 1);
    for (int l = 0; l < m->n_bot; l++)
        m->bot_act[l] = carve(&p, B * m->bot[l].out);
    m->inter = carve(&p, inter);
    for (int l = 0; l < m->n_top; l++)
        m->top_act[l] = carve(&p, B * m->top[l].out);
    for (int l = 0; l < m->n_top; l++)
        m->top_dy[l] = carve(&p, B * m->top[l].out);
    m->grad_buf[0] = carve(&p, B * widest);
    m->grad_buf[1] = carve(&p, B * widest);
    for (int l = 0; l < m->n_dcn; l++) {
        m->dcn.x[l] = carve(&p, B * n);
        m->dcn.u[l] = carve(&p, B * n);
        m->dcn.du[l] = carve(&p, B * n);
        m->dcn.h[l] = carve(&p, B * R);
        m->dcn.dh[l] = carve(&p, B * R);
    }
    if (m->n_dcn)
        m->inter = m->dcn.x[m->n_dcn - 1];
    SR_ASSERT((size_t)(p - m->acts) == total);
}

/* Draw every layer's parameters on the host, then copy them to the device. */
static void init_params(struct sr_dlrm *m, uint64_t seed)
{
    float *host = sr_calloc(m->n_params, sizeof(float)); /* cross layers' biases stay 0 */
    for (int k = 0; k < num_layers(m); k++) {
        struct sr_linear *l = layer(m, k);
        int t = k < m->n_bot ? bot_tensor(m, k) : top_tensor(m, k - m->n_bot);
        sr_init_linear(host + m->tensor_offset[t], host + m->tensor_offset[t + 1], l->out, l->in,
                       seed, m->tensor_name[t], m->tensor_name[t + 1]);
    }
    for (int l = 0; l < m->n_dcn; l++) {
        int t = dcn_tensor(m, l);
        for (int i = 0; i < 2; i++) /* V [R, n], U [n, R] */
            sr_init_xavier_normal(host + m->tensor_offset[t + i], (int)m->tensor_shape[t + i][0],
                                  (int)m->tensor_shape[t + i][1], seed, m->tensor_name[t + i]);
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
    if (m->n_dcn) /* x_L, the top MLP's input, is m->inter */
        sr_dcn_forward(m->dev, s, &m->dcn, m->bot_act[m->n_bot - 1], pooled, B);
    else
        sr_interaction_forward(m->dev, s, m->bot_act[m->n_bot - 1], pooled, B,
                               m->cfg.num_sparse, m->cfg.embedding_dim, m->inter);
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

/* Gradient group k (block order: bottom layers, cross layers, top layers) is issued. */
static void notify_ready(struct sr_dlrm *m, sr_stream_t s, int k)
{
    if (m->grad_ready)
        m->grad_ready(m->grad_ready_ctx, m->group_offset[k], m->group_count[k], s);
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
    if (m->n_dcn) /* x_L's gradient runs down the cross layers in grad_buf[0] */
        sr_dcn_backward_data(m->dev, s, &m->dcn, m->bot_act[m->n_bot - 1], m->pooled,
                             m->grad_buf[0], B, m->grad_buf[1], dpooled);
    else
        sr_interaction_backward(m->dev, s, m->bot_act[m->n_bot - 1], m->pooled, m->grad_buf[0],
                                B, m->cfg.num_sparse, m->cfg.embedding_dim, m->grad_buf[1],
                                dpooled);
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
        notify_ready(m, s, m->n_bot + m->n_dcn + l);
    }
    for (int l = m->n_dcn - 1; l >= 0; l--) {
        sr_dcn_backward_weights(m->dev, s, &m->dcn, l, m->bot_act[m->n_bot - 1], m->pooled, B);
        notify_ready(m, s, m->n_bot + l);
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
        notify_ready(m, s, l);
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
    return m->n_tensors;
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
    *name = m->tensor_name[i];
    *ndim = m->tensor_ndim[i];
    shape[0] = m->tensor_shape[i][0];
    shape[1] = m->tensor_shape[i][1];
    *data = m->params + m->tensor_offset[i];
}

int sr_dlrm_num_grad_groups(const struct sr_dlrm *m)
{
    return m->n_groups;
}

void sr_dlrm_grad_group(const struct sr_dlrm *m, int k, size_t *offset, size_t *count)
{
    SR_ASSERT(k >= 0 && k < m->n_groups);
    *offset = m->group_offset[k];
    *count = m->group_count[k];
}
