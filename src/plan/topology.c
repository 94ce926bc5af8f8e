/*
 * Topologies (shardrec/topology.h): the built-in presets, the JSON reader
 * that merges bench files and hand-written ones, and the rates the cost
 * model asks for.
 *
 * Presets carry data-sheet figures only (capacity, memory bandwidth, peak
 * GEMM rates, link speeds); nothing in them is fitted to a run. Their
 * gather and update rates are derived (sr_topology_complete):
 *
 *   row bytes    r(D) = max(32, 4 D)      (a random row costs at least a sector)
 *   gather       memory_gb_s / r(D)       rows/s
 *   update       memory_gb_s / (3 r(D))   rows/s (read the row, its gradient;
 *                                          write the row)
 *
 * so a measured topology (`bench device`) is what makes them true.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shardrec/alloc.h"
#include "shardrec/error.h"
#include "shardrec/files.h"
#include "shardrec/topology.h"
#include "core/json_kind.h"

#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))
#define GB       1e9

const int sr_topology_dims[SR_TOPO_DIMS] = {16, 64, 128};

/* ---- presets --------------------------------------------------------------------- */

struct preset {
    const char *name, *about;
    int W, L, nic_ranks;
    double mem_gb, mem_gb_s, tflops[SR_TOPO_MATHS];
    struct sr_topo_link intra, inter;
};

/* Data sheets: H200 SXM 141 GB HBM3e at 4.8 TB/s, NVLink 900 GB/s both ways
 * (450 one way), 67 / 495 / 989 TFLOP/s fp32 / tf32 / bf16 (dense); A100
 * SXM 80 GB at 2.04 TB/s, NVLink 600 GB/s (300 one way), 19.5 / 156 / 312;
 * 100 Gb/s = 12.5 GB/s, 400 Gb/s = 50 GB/s. The 2-core host: 12 GB a rank
 * (half of 24 GiB), nominal DDR and AVX2 figures, shared-memory MPI. */
static const struct preset presets[] = {
    {"cpu-2core",
     "this host: 2 ranks on 2 cores, shared-memory MPI (nominal; measure it)",
     2,
     2,
     1,
     12,
     20,
     {0.08, 0.08, 0.08},
     {5, 5},
     {0, 0}},
    {"h200",
     "one H200 (141 GB HBM3e, 4.8 TB/s)",
     1,
     1,
     1,
     141,
     4800,
     {67, 495, 989},
     {450, 10},
     {0, 0}},
    {"h200x8",
     "one node of 8 H200 over NVLink (450 GB/s a GPU one way)",
     8,
     8,
     1,
     141,
     4800,
     {67, 495, 989},
     {450, 10},
     {0, 0}},
    {"a100x8-2node-100g",
     "workload T: 2 nodes x 8 A100-80GB, NVLink inside, one 100 Gb/s NIC a node",
     16,
     8,
     8,
     80,
     2039,
     {19.5, 156, 312},
     {300, 10},
     {12.5, 20}},
    {"h200x8-400g",
     "2 nodes x 8 H200, NVLink inside, one 400 Gb/s NIC per GPU",
     16,
     8,
     1,
     141,
     4800,
     {67, 495, 989},
     {450, 10},
     {50, 15}},
};

int sr_topology_preset(struct sr_topology *out, const char *name)
{
    for (int i = 0; i < COUNT(presets); i++) {
        const struct preset *p = &presets[i];
        if (strcmp(name, p->name))
            continue;
        memset(out, 0, sizeof *out);
        snprintf(out->name, sizeof out->name, "%s", p->name);
        out->world_size = p->W;
        out->ranks_per_node = p->L;
        out->nic_ranks = p->nic_ranks;
        out->memory_bytes = p->mem_gb * GB;
        out->memory_gb_s = p->mem_gb_s;
        for (int m = 0; m < SR_TOPO_MATHS; m++)
            out->gemm_flop_s[m] = p->tflops[m] * 1e12;
        out->intra = p->intra;
        out->inter = p->inter;
        return SR_OK;
    }
    return sr_error_set(SR_ERR_INVALID_ARG, "no topology preset '%s'; HINT: one of:\n%s", name,
                        sr_topology_preset_help());
}

const char *sr_topology_preset_help(void)
{
    static char buf[1024];
    if (!buf[0]) {
        size_t at = 0;
        for (int i = 0; i < COUNT(presets) && at < sizeof buf; i++)
            at += (size_t)snprintf(buf + at, sizeof buf - at, "  %-20s %s\n", presets[i].name,
                                   presets[i].about);
    }
    return buf;
}

/* ---- the JSON reader --------------------------------------------------------------- */

struct reader {
    const char *source;
    struct sr_topology *t;
};

static int check_keys(const struct reader *r, const cJSON *o, const char *where,
                      const char *const *names, int n)
{
    return sr_json_check_keys(o, names, n, "topology", r->source, where);
}

static int expect_object(const struct reader *r, const cJSON *it, const char *key)
{
    if (cJSON_IsObject(it))
        return SR_OK;
    return sr_error_set(SR_ERR_INVALID_ARG, "topology '%s': \"%s\" is %s, not an object", r->source,
                        key, sr_json_kind(it));
}

/* A finite number >= 0 (scaled) into *out when the key is present. */
static int get_number(const struct reader *r, const cJSON *o, const char *key, double scale,
                      double *out)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!it)
        return SR_OK;
    if (!cJSON_IsNumber(it))
        return sr_error_set(SR_ERR_INVALID_ARG, "topology '%s': \"%s\" is %s, not a number",
                            r->source, key, sr_json_kind(it));
    double v = it->valuedouble;
    if (!isfinite(v) || v < 0)
        return sr_error_set(SR_ERR_INVALID_ARG,
                            "topology '%s': \"%s\" is %g; it must be a number >= 0", r->source, key,
                            v);
    *out = v * scale;
    return SR_OK;
}

static int get_count(const struct reader *r, const cJSON *o, const char *key, int *out)
{
    double v = -1;
    int rc = get_number(r, o, key, 1, &v);
    if (rc || v < 0)
        return rc;
    if (v < 1 || v > 1 << 20 || v != floor(v))
        return sr_error_set(SR_ERR_INVALID_ARG,
                            "topology '%s': \"%s\" is %g; it must be a whole number from 1",
                            r->source, key, v);
    *out = (int)v;
    return SR_OK;
}

/* "uniform": [r16, r64, r128], "zipf": [...] */
static int get_rates(const struct reader *r, const cJSON *o, const char *key,
                     double rates[SR_TOPO_SKEWS][SR_TOPO_DIMS])
{
    static const char *const skews[SR_TOPO_SKEWS] = {"uniform", "zipf"};
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
    char where[64];
    snprintf(where, sizeof where, "%s: ", key);
    int rc;
    if (!it)
        return SR_OK;
    if ((rc = expect_object(r, it, key)) || (rc = check_keys(r, it, where, skews, SR_TOPO_SKEWS)))
        return rc;
    for (int s = 0; s < SR_TOPO_SKEWS; s++) {
        const cJSON *a = cJSON_GetObjectItemCaseSensitive(it, skews[s]);
        if (!a)
            continue;
        if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) != SR_TOPO_DIMS)
            return sr_error_set(SR_ERR_INVALID_ARG,
                                "topology '%s': \"%s.%s\" must be an array of %d rates (rows/s "
                                "at dims 16, 64, 128)",
                                r->source, key, skews[s], SR_TOPO_DIMS);
        for (int d = 0; d < SR_TOPO_DIMS; d++) {
            const cJSON *v = cJSON_GetArrayItem(a, d);
            if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble <= 0)
                return sr_error_set(SR_ERR_INVALID_ARG,
                                    "topology '%s': \"%s.%s\"[%d] must be a number > 0", r->source,
                                    key, skews[s], d);
            rates[s][d] = v->valuedouble;
        }
    }
    return SR_OK;
}

static int get_gemm(const struct reader *r, const cJSON *o)
{
    static const char *const maths[SR_TOPO_MATHS] = {"fp32", "tf32", "bf16"};
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, "gemm_tflop_s");
    int rc;
    if (!it)
        return SR_OK;
    if ((rc = expect_object(r, it, "gemm_tflop_s")) ||
        (rc = check_keys(r, it, "gemm_tflop_s: ", maths, SR_TOPO_MATHS)))
        return rc;
    for (int m = 0; m < SR_TOPO_MATHS && !rc; m++)
        rc = get_number(r, it, maths[m], 1e12, &r->t->gemm_flop_s[m]);
    return rc;
}

static int get_link(const struct reader *r, const cJSON *links, const char *key,
                    struct sr_topo_link *link, int inter)
{
    static const char *const keys[] = {"bandwidth_gb_s", "latency_us", "nic_ranks"};
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(links, key);
    char where[64];
    snprintf(where, sizeof where, "links.%s: ", key);
    int rc;
    if (!it)
        return SR_OK;
    if ((rc = expect_object(r, it, key)) || (rc = check_keys(r, it, where, keys, inter ? 3 : 2)) ||
        (rc = get_number(r, it, "bandwidth_gb_s", 1, &link->gb_s)) ||
        (rc = get_number(r, it, "latency_us", 1, &link->latency_us)))
        return rc;
    return inter ? get_count(r, it, "nic_ranks", &r->t->nic_ranks) : SR_OK;
}

/* "links.host": the latency of a small exchange of host memory. */
static int get_host_link(const struct reader *r, const cJSON *links)
{
    static const char *const keys[] = {"latency_us"};
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(links, "host");
    int rc;
    if (!it)
        return SR_OK;
    if ((rc = expect_object(r, it, "host")) || (rc = check_keys(r, it, "links.host: ", keys, 1)))
        return rc;
    return get_number(r, it, "latency_us", 1, &r->t->host_latency_us);
}

/* bench comm's "links": "intra_node", "inter_node", or "mixed" (a run that
 * crossed both: its figures are the slower link's, taken as inter-node), and
 * "host" (a device-memory transport's counts exchange). */
static int get_links(const struct reader *r, const cJSON *o)
{
    static const char *const kinds[] = {"intra_node", "inter_node", "mixed", "host"};
    const cJSON *links = cJSON_GetObjectItemCaseSensitive(o, "links");
    int rc;
    if (!links)
        return SR_OK;
    if ((rc = expect_object(r, links, "links")) ||
        (rc = check_keys(r, links, "links: ", kinds, COUNT(kinds))) ||
        (rc = get_link(r, links, "intra_node", &r->t->intra, 0)) ||
        (rc = get_link(r, links, "inter_node", &r->t->inter, 1)) || (rc = get_host_link(r, links)))
        return rc;
    return get_link(r, links, "mixed", &r->t->inter, 1);
}

static const char *const top_keys[] = {
    "name",         "source",         "backend",       "device",
    "world_size",   "ranks_per_node", "memory_bytes",  "memory_base_bytes",
    "memory_gb_s",  "gather_rows_s",  "update_rows_s", "zipf_hot_share",
    "gemm_tflop_s", "links",          "measurements",  "launch_us",
};

static int read_root(const struct reader *r, const cJSON *root)
{
    struct sr_topology *t = r->t;
    int rc;
    if (!cJSON_IsObject(root))
        return sr_error_set(SR_ERR_INVALID_ARG, "topology '%s': the top level is %s, not an object",
                            r->source, sr_json_kind(root));
    if ((rc = check_keys(r, root, "", top_keys, COUNT(top_keys))))
        return rc;
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(root, "name");
    if (name && !cJSON_IsString(name))
        return sr_error_set(SR_ERR_INVALID_ARG, "topology '%s': \"name\" is %s, not a string",
                            r->source, sr_json_kind(name));
    if (name)
        snprintf(t->name, sizeof t->name, "%s", name->valuestring);
    if ((rc = get_count(r, root, "world_size", &t->world_size)) ||
        (rc = get_count(r, root, "ranks_per_node", &t->ranks_per_node)) ||
        (rc = get_number(r, root, "memory_bytes", 1, &t->memory_bytes)) ||
        (rc = get_number(r, root, "memory_base_bytes", 1, &t->memory_base_bytes)) ||
        (rc = get_number(r, root, "memory_gb_s", 1, &t->memory_gb_s)) ||
        (rc = get_rates(r, root, "gather_rows_s", t->gather_rows_s)) ||
        (rc = get_rates(r, root, "update_rows_s", t->update_rows_s)) ||
        (rc = get_number(r, root, "zipf_hot_share", 1, &t->zipf_hot_share)) ||
        (rc = get_number(r, root, "launch_us", 1, &t->launch_us)) || (rc = get_gemm(r, root)))
        return rc;
    const cJSON *src = cJSON_GetObjectItemCaseSensitive(root, "source");
    const cJSON *dev = cJSON_GetObjectItemCaseSensitive(root, "device");
    if (cJSON_IsString(src) && !strcmp(src->valuestring, "shardrec bench device"))
        t->host_wide = cJSON_IsString(dev) && !strcmp(dev->valuestring, "cpu");
    if (t->zipf_hot_share > 1)
        return sr_error_set(SR_ERR_INVALID_ARG,
                            "topology '%s': \"zipf_hot_share\" is %g; it is "
                            "a share, at most 1",
                            r->source, t->zipf_hot_share);
    return get_links(r, root);
}

int sr_topology_merge_json(struct sr_topology *t, const char *text, const char *source)
{
    char where[SR_TOPO_NAME + 4096];
    snprintf(where, sizeof where, "topology '%s'", source);
    int rc = sr_json_check_nul(text, strlen(text), where);
    if (rc)
        return rc;
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithOpts(text, &end, 0);
    if (!root)
        return sr_error_set(SR_ERR_INVALID_ARG, "topology '%s': not valid JSON near '%.20s'",
                            source, cJSON_GetErrorPtr() ? cJSON_GetErrorPtr() : "?");
    end += strspn(end, " \t\r\n");
    if (*end) {
        cJSON_Delete(root);
        return sr_error_set(SR_ERR_INVALID_ARG,
                            "topology '%s': text after the JSON object at offset %zu", source,
                            (size_t)(end - text));
    }
    struct reader r = {.source = source, .t = t};
    rc = read_root(&r, root);
    cJSON_Delete(root);
    return rc;
}

int sr_topology_merge_file(struct sr_topology *t, const char *path)
{
    char *text;
    size_t len;
    int rc = sr_file_read_small(path, "the topology", SR_TOPO_MAX_BYTES, &text, &len);
    if (rc)
        return rc;
    if (strlen(text) != len) {
        char where[4200];
        snprintf(where, sizeof where, "topology '%s'", path);
        rc = sr_json_check_nul(text, len, where);
    } else {
        rc = sr_topology_merge_json(t, text, path);
    }
    if (!rc && !t->name[0]) { /* a file without "name": its own name */
        const char *base = strrchr(path, '/');
        snprintf(t->name, sizeof t->name, "%s", base ? base + 1 : path);
    }
    sr_free(text);
    return rc;
}

int sr_topology_load(struct sr_topology *t, const char *name_or_path)
{
    for (int i = 0; i < COUNT(presets); i++)
        if (strcmp(name_or_path, presets[i].name) == 0)
            return sr_topology_preset(t, name_or_path);
    if (access(name_or_path, F_OK) != 0)
        return sr_error_set(SR_ERR_INVALID_ARG,
                            "--topology '%s' is neither a preset nor a file; HINT: a file "
                            "from `shardrec bench comm|device --out`, or one of:\n%s",
                            name_or_path, sr_topology_preset_help());
    return sr_topology_merge_file(t, name_or_path);
}

void sr_topology_split_host(struct sr_topology *t)
{
    double L = t->ranks_per_node > 1 ? t->ranks_per_node : 1;
    if (!t->host_wide)
        return;
    t->memory_bytes /= L;
    t->memory_gb_s /= L;
    for (int s = 0; s < SR_TOPO_SKEWS; s++)
        for (int d = 0; d < SR_TOPO_DIMS; d++) {
            t->gather_rows_s[s][d] /= L;
            t->update_rows_s[s][d] /= L;
        }
    for (int m = 0; m < SR_TOPO_MATHS; m++)
        t->gemm_flop_s[m] /= L;
    t->host_wide = 0;
}

/* ---- completion and the rates ------------------------------------------------------ */

static double row_bytes(int dim)
{
    return fmax(32.0, 4.0 * dim);
}

int sr_topology_complete(struct sr_topology *t)
{
    const char *missing = !t->world_size             ? "world_size"
                          : !t->ranks_per_node       ? "ranks_per_node"
                          : !(t->memory_bytes > 0)   ? "memory_bytes"
                          : !(t->memory_gb_s > 0)    ? "memory_gb_s"
                          : !(t->gemm_flop_s[0] > 0) ? "gemm_tflop_s.fp32"
                                                     : NULL;
    if (missing)
        return sr_error_set(SR_ERR_INVALID_ARG,
                            "topology '%s' does not give %s; HINT: merge a preset or a "
                            "`shardrec bench device --out` file",
                            t->name[0] ? t->name : "(unnamed)", missing);
    if (t->world_size % t->ranks_per_node)
        return sr_error_set(SR_ERR_INVALID_ARG,
                            "topology '%s': world size %d is not a multiple of %d ranks per node",
                            t->name, t->world_size, t->ranks_per_node);
    int nodes = t->world_size / t->ranks_per_node;
    if (t->ranks_per_node > 1 && !(t->intra.gb_s > 0))
        return sr_error_set(SR_ERR_INVALID_ARG,
                            "topology '%s' has %d ranks a node but no intra-node link; HINT: "
                            "merge a `shardrec bench comm --out` file",
                            t->name, t->ranks_per_node);
    if (nodes > 1 && !(t->inter.gb_s > 0))
        return sr_error_set(SR_ERR_INVALID_ARG,
                            "topology '%s' has %d nodes but no inter-node link; HINT: merge a "
                            "`shardrec bench comm --out` file run across nodes",
                            t->name, nodes);
    if (!t->nic_ranks)
        t->nic_ranks = 1;
    for (int m = 1; m < SR_TOPO_MATHS; m++)
        if (!(t->gemm_flop_s[m] > 0))
            t->gemm_flop_s[m] = t->gemm_flop_s[0]; /* a mode not measured runs as fp32 */
    if (!(t->zipf_hot_share > 0))
        t->zipf_hot_share = 0.75; /* Zipf(1.05) over 10^6 rows: H(10^4) / H(10^6) */
    for (int s = 0; s < SR_TOPO_SKEWS; s++)
        for (int d = 0; d < SR_TOPO_DIMS; d++) {
            double bytes = row_bytes(sr_topology_dims[d]);
            if (!(t->gather_rows_s[s][d] > 0))
                t->gather_rows_s[s][d] = t->memory_gb_s * 1e9 / bytes;
            if (!(t->update_rows_s[s][d] > 0))
                t->update_rows_s[s][d] = t->memory_gb_s * 1e9 / (3 * bytes);
        }
    return SR_OK;
}

/* Seconds a row at `dim` on skew s: piecewise linear in dim between the
 * measured dims, proportional to dim beyond the last, flat below the first. */
static double row_seconds(const double rates[SR_TOPO_DIMS], int dim)
{
    const int *d = sr_topology_dims;
    if (dim <= d[0])
        return 1 / rates[0];
    for (int i = 1; i < SR_TOPO_DIMS; i++)
        if (dim <= d[i]) {
            double w = (double)(dim - d[i - 1]) / (d[i] - d[i - 1]);
            return (1 - w) / rates[i - 1] + w / rates[i];
        }
    return (double)dim / d[SR_TOPO_DIMS - 1] / rates[SR_TOPO_DIMS - 1];
}

static double blended_rate(const struct sr_topology *t, const double r[SR_TOPO_SKEWS][SR_TOPO_DIMS],
                           int dim, double hot_share)
{
    double w = (hot_share - 0.01) / fmax(t->zipf_hot_share - 0.01, 1e-6);
    w = fmin(1, fmax(0, w));
    return 1 / ((1 - w) * row_seconds(r[0], dim) + w * row_seconds(r[1], dim));
}

double sr_topology_gather_rows_s(const struct sr_topology *t, int dim, double hot_share)
{
    return blended_rate(t, t->gather_rows_s, dim, hot_share);
}

double sr_topology_update_rows_s(const struct sr_topology *t, int dim, double hot_share)
{
    return blended_rate(t, t->update_rows_s, dim, hot_share);
}

/* ---- writing ------------------------------------------------------------------------ */

static cJSON *rates_json(const double r[SR_TOPO_SKEWS][SR_TOPO_DIMS])
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddItemToObject(o, "uniform", cJSON_CreateDoubleArray(r[0], SR_TOPO_DIMS));
    cJSON_AddItemToObject(o, "zipf", cJSON_CreateDoubleArray(r[1], SR_TOPO_DIMS));
    return o;
}

static void add_link(cJSON *links, const char *key, const struct sr_topo_link *l, int nic_ranks)
{
    if (!(l->gb_s > 0))
        return;
    cJSON *o = cJSON_AddObjectToObject(links, key);
    cJSON_AddNumberToObject(o, "bandwidth_gb_s", l->gb_s);
    cJSON_AddNumberToObject(o, "latency_us", l->latency_us);
    if (nic_ranks)
        cJSON_AddNumberToObject(o, "nic_ranks", nic_ranks);
}

char *sr_topology_to_json(const struct sr_topology *t)
{
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "name", t->name);
    cJSON_AddNumberToObject(root, "world_size", t->world_size);
    cJSON_AddNumberToObject(root, "ranks_per_node", t->ranks_per_node);
    cJSON_AddNumberToObject(root, "memory_bytes", t->memory_bytes);
    cJSON_AddNumberToObject(root, "memory_base_bytes", t->memory_base_bytes);
    cJSON_AddNumberToObject(root, "memory_gb_s", t->memory_gb_s);
    cJSON_AddItemToObject(root, "gather_rows_s", rates_json(t->gather_rows_s));
    cJSON_AddItemToObject(root, "update_rows_s", rates_json(t->update_rows_s));
    cJSON_AddNumberToObject(root, "zipf_hot_share", t->zipf_hot_share);
    cJSON_AddNumberToObject(root, "launch_us", t->launch_us);
    cJSON *g = cJSON_AddObjectToObject(root, "gemm_tflop_s");
    cJSON_AddNumberToObject(g, "fp32", t->gemm_flop_s[0] / 1e12);
    cJSON_AddNumberToObject(g, "tf32", t->gemm_flop_s[1] / 1e12);
    cJSON_AddNumberToObject(g, "bf16", t->gemm_flop_s[2] / 1e12);
    cJSON *links = cJSON_AddObjectToObject(root, "links");
    add_link(links, "intra_node", &t->intra, 0);
    add_link(links, "inter_node", &t->inter, t->nic_ranks);
    if (t->host_latency_us > 0)
        cJSON_AddNumberToObject(cJSON_AddObjectToObject(links, "host"), "latency_us",
                                t->host_latency_us);
    char *cj = cJSON_Print(root);
    cJSON_Delete(root);
    size_t n = strlen(cj) + 1;
    char *text = sr_malloc(n);
    memcpy(text, cj, n);
    cJSON_free(cj);
    return text;
}
