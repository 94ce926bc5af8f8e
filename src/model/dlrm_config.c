/*
 * The DLRM's shape: validation of a struct sr_dlrm_config (what a user's
 * --bot-mlp / --top-mlp / --embedding-dim can get wrong) and the FLOP count
 * the planner and the throughput report use.
 *
 * With --interaction dcn, the cross layers' count and rank (at most the
 * width n = (F+1)·D of their input).
 *
 * Widths follow the DLRM reference's flags: bot_mlp lists the input width
 * then each layer's output (13-512-256-64-16: 4 Linear layers); top_mlp lists
 * only layer outputs (512-256-1), its input being the interaction's width.
 */
#include "shardrec/dlrm.h"
#include "shardrec/error.h"

static int check_widths(const int *w, int n, const char *what)
{
    for (int i = 0; i < n; i++)
        if (w[i] < 1)
            return sr_error_set(SR_ERR_INVALID_ARG,
                                "%s width %d (entry %d) must be at least 1; "
                                "HINT: give positive widths such as 512-256-1",
                                what, w[i], i);
    return SR_OK;
}

static int check_counts(const struct sr_dlrm_config *cfg)
{
    if (cfg->n_bot < 2 || cfg->n_bot > SR_MLP_MAX)
        return sr_error_set(SR_ERR_INVALID_ARG,
                            "bottom MLP has %d widths; it needs 2 to %d (the input width, then "
                            "each layer's), e.g. --bot-mlp 13-512-256-64-16",
                            cfg->n_bot, SR_MLP_MAX);
    if (cfg->n_top < 1 || cfg->n_top > SR_MLP_MAX)
        return sr_error_set(SR_ERR_INVALID_ARG,
                            "top MLP has %d layers; it needs 1 to %d, ending in 1, "
                            "e.g. --top-mlp 512-256-1",
                            cfg->n_top, SR_MLP_MAX);
    if (cfg->num_sparse < 1)
        return sr_error_set(SR_ERR_INVALID_ARG,
                            "the model has %d sparse features; it needs at least 1 table/feature",
                            cfg->num_sparse);
    if (cfg->embedding_dim < 1 || cfg->num_dense < 1)
        return sr_error_set(SR_ERR_INVALID_ARG,
                            "embedding dim %d and dense features %d must each be at least 1",
                            cfg->embedding_dim, cfg->num_dense);
    return SR_OK;
}

/* The cross network's shape: L layers of rank R on x_0 of width n. */
static int check_dcn(const struct sr_dlrm_config *cfg)
{
    if (cfg->interaction == SR_INTERACTION_DOT)
        return SR_OK;
    if (cfg->interaction != SR_INTERACTION_DCN)
        return sr_error_set(SR_ERR_INVALID_ARG, "unknown interaction %d; choose dot or dcn",
                            (int)cfg->interaction);
    if (cfg->dcn_layers < 1 || cfg->dcn_layers > SR_DCN_MAX_LAYERS)
        return sr_error_set(SR_ERR_INVALID_ARG, "--dcn-layers %d: give 1 to %d cross layers",
                            cfg->dcn_layers, SR_DCN_MAX_LAYERS);
    int64_t n = ((int64_t)cfg->num_sparse + 1) * cfg->embedding_dim;
    if (cfg->dcn_rank < 1 || cfg->dcn_rank > n)
        return sr_error_set(SR_ERR_INVALID_ARG,
                            "--dcn-rank %d: the rank must be 1 to n = (F+1)·D = (%d+1)·%d = %lld, "
                            "the width of the cross layers' input; HINT: --dcn-rank %lld or less",
                            cfg->dcn_rank, cfg->num_sparse, cfg->embedding_dim, (long long)n,
                            (long long)n);
    return SR_OK;
}

int sr_dlrm_config_check(const struct sr_dlrm_config *cfg)
{
    int rc = check_counts(cfg);
    if (rc == SR_OK)
        rc = check_widths(cfg->bot_mlp, cfg->n_bot, "bottom MLP");
    if (rc == SR_OK)
        rc = check_widths(cfg->top_mlp, cfg->n_top, "top MLP");
    if (rc != SR_OK)
        return rc;
    if (cfg->bot_mlp[0] != cfg->num_dense)
        return sr_error_set(SR_ERR_INVALID_ARG,
                            "bottom MLP starts with width %d but there are %d dense features; "
                            "HINT: make --bot-mlp start with %d",
                            cfg->bot_mlp[0], cfg->num_dense, cfg->num_dense);
    if (cfg->bot_mlp[cfg->n_bot - 1] != cfg->embedding_dim)
        return sr_error_set(SR_ERR_INVALID_ARG,
                            "bottom MLP output %d differs from the embedding dim %d; "
                            "HINT: end --bot-mlp with %d or set --embedding-dim %d",
                            cfg->bot_mlp[cfg->n_bot - 1], cfg->embedding_dim, cfg->embedding_dim,
                            cfg->bot_mlp[cfg->n_bot - 1]);
    if (cfg->top_mlp[cfg->n_top - 1] != 1)
        return sr_error_set(SR_ERR_INVALID_ARG,
                            "top MLP ends with width %d; it must end with 1 (the logit), "
                            "e.g. --top-mlp 512-256-1",
                            cfg->top_mlp[cfg->n_top - 1]);
    return check_dcn(cfg);
}

int64_t sr_dlrm_flops_per_sample(const struct sr_dlrm_config *cfg)
{
    int64_t macs = 0;
    for (int l = 0; l + 1 < cfg->n_bot; l++)
        macs += (int64_t)cfg->bot_mlp[l] * cfg->bot_mlp[l + 1];
    int64_t in = sr_dlrm_interaction_dim(cfg);
    for (int l = 0; l < cfg->n_top; l++) {
        macs += in * cfg->top_mlp[l];
        in = cfg->top_mlp[l];
    }
    int64_t F = cfg->num_sparse;
    if (cfg->interaction == SR_INTERACTION_DCN) /* V and U of every cross layer */
        macs += 2 * (int64_t)cfg->dcn_layers * cfg->dcn_rank * (F + 1) * cfg->embedding_dim;
    else
        macs += F * (F + 1) / 2 * cfg->embedding_dim;
    return 2 * macs;
}
