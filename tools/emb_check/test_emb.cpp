/*
 * The CUDA embedding and DP-table ops against the CPU reference, bit for bit:
 * init_uniform, fill, forward (kept and eval), backward with every optimizer
 * (host and device lr/step), DP accumulate and apply, over dims 1..256,
 * scalar and float4 paths, mean/sum, weights, empty bags, duplicate and hot
 * rows, >64 features, >32 tables, a table of > 2^31 elements and > 2^32
 * rows. Two builds (run.sh): EMB_CHECK_SIM, the kernels run on the host
 * simulator in sim/ (no GPU needed); otherwise on GPU 0, the CUDA model's
 * memory managed so both sides can read it. Exit status 0 when all pass.
 */
#include <cuda_runtime.h>
#include <sys/mman.h>
#include <algorithm>
#include <vector>
#include <random>
#include <cassert>
#include <cstdio>
#include <cstring>
#include "device/cuda/cuda_internal.h"
extern "C" {
#include "device/ops_embedding.h"
#include "device/ops_embedding_dp.h"
#include "device/cpu/cpu_device.h"
}

static int failures = 0, checks = 0;
#define CHECK(c, ...) do { checks++; if (!(c)) { failures++; printf("FAIL %s:%d: ", __FILE__, __LINE__); printf(__VA_ARGS__); printf("\n"); } } while (0)

/* Host memory that is only paid for where touched (tables of > 2^31 elements). */
static void *host_alloc(size_t bytes)
{
    bytes = (bytes + 4095) & ~(size_t)4095;
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    assert(p != MAP_FAILED);
    return p;
}

#ifdef EMB_CHECK_SIM
static void *gpu_alloc(size_t bytes) { return host_alloc(bytes); }
static void gpu_sync() {}
#else
static void *gpu_alloc(size_t bytes)
{
    void *p = NULL;
    if (cudaMallocManaged(&p, bytes ? bytes : 1) != cudaSuccess) {
        fprintf(stderr, "cudaMallocManaged(%zu) failed\n", bytes);
        exit(2);
    }
    return p;
}
static void gpu_sync()
{
    cudaError_t rc = cudaDeviceSynchronize();
    if (rc != cudaSuccess) {
        fprintf(stderr, "CUDA error: %s\n", cudaGetErrorString(rc));
        exit(2);
    }
}
#endif

/* The memory a side's ops read: host for the CPU, managed for the GPU. */
static void *side_alloc(bool gpu, size_t bytes) { return gpu ? gpu_alloc(bytes) : host_alloc(bytes); }

template <class T> static T *side_copy(bool gpu, const std::vector<T> &v)
{
    T *p = (T *)side_alloc(gpu, sizeof(T) * (v.size() + 1));
    std::copy(v.begin(), v.end(), p);
    return p;
}

struct model {
    std::vector<sr_emb_table> tables;
    std::vector<sr_emb_feature> features;
    sr_emb_layout layout;
    void *ws;
};

struct spec {
    const char *name;
    std::vector<int64_t> rows;
    std::vector<int> dims;
    std::vector<int> feat_table;
    std::vector<int> feat_mean;
    int B;
    int max_ids; /* ids per bag: 0..max_ids (min_ids at least) */
    int min_ids;
    int weighted;
    int hot;        /* ids drawn from the first `hot` rows (duplicates) unless 0 */
    int last_rows;  /* ids drawn from the last rows (big tables) */
    int col_pad;    /* extra column before every feature (misaligned cols) */
};

static size_t state_floats(sr_optim_kind k, int64_t rows, int dim)
{
    switch (k) {
    case SR_OPTIM_SGD: return 0;
    case SR_OPTIM_ADAGRAD: return (size_t)rows * dim;
    case SR_OPTIM_ROWWISE_ADAGRAD: return (size_t)rows;
    case SR_OPTIM_ADAM: return 2 * (size_t)rows * dim;
    }
    return 0;
}

static void build(model &m, const spec &s, sr_optim_kind k, const sr_embedding_ops *ops, sr_device *dev, int64_t max_values)
{
    const bool gpu = dev->kind == SR_DEVICE_CUDA;
    int T = (int)s.rows.size(), F = (int)s.feat_table.size(), max_dim = 0, col = 0;
    for (int t = 0; t < T; t++) {
        sr_emb_table tb;
        tb.rows = s.rows[t];
        tb.dim = s.dims[t];
        size_t wf = ((size_t)tb.rows * tb.dim + 15) & ~(size_t)15;
        size_t sf = state_floats(k, tb.rows, tb.dim);
        tb.weight = (float *)side_alloc(gpu, sizeof(float) * (wf + sf));
        tb.state = sf ? tb.weight + wf : NULL;
        m.tables.push_back(tb);
        max_dim = std::max(max_dim, tb.dim);
    }
    for (int f = 0; f < F; f++) {
        col += s.col_pad;
        m.features.push_back(sr_emb_feature{s.feat_table[f], col, s.feat_mean[f]});
        col += s.dims[s.feat_table[f]];
    }
    m.layout = sr_emb_layout{T, m.tables.data(), F, m.features.data(), col, max_dim, s.B, max_values, k};
    size_t wsb = ops->workspace_bytes(dev, &m.layout);
    m.ws = side_alloc(gpu, wsb);
    ops->workspace_init(dev, &m.layout, m.ws);
}

/* init: the touched rows (here: whole table when small, the last rows when big) */
static void init_tables(model &m, const spec &s, const sr_embedding_ops *ops, sr_device *dev, int small)
{
    for (size_t t = 0; t < m.tables.size(); t++) {
        sr_emb_table &tb = m.tables[t];
        int64_t r0 = small ? 0 : tb.rows - s.last_rows;
        int64_t n = small ? tb.rows : s.last_rows;
        ops->init_uniform(dev, tb.weight + r0 * tb.dim, n, tb.dim, r0, 42, 1000 + t, -0.5, 0.75, NULL);
        if (!small) /* and row 0 */
            ops->init_uniform(dev, tb.weight, 1, tb.dim, 0, 42, 1000 + t, -0.5, 0.75, NULL);
        size_t sf = state_floats(m.layout.optim, tb.rows, tb.dim);
        if (sf && small)
            ops->fill(dev, tb.state, (int64_t)sf, m.layout.optim == SR_OPTIM_ADAM ? 0.0f : 0.01f, NULL);
        if (sf && !small) {
            int per_row = m.layout.optim == SR_OPTIM_ROWWISE_ADAGRAD ? 1 : tb.dim;
            ops->fill(dev, tb.state + r0 * per_row, n * per_row, 0.01f, NULL);
            ops->fill(dev, tb.state, per_row, 0.01f, NULL);
            if (m.layout.optim == SR_OPTIM_ADAM) {
                ops->fill(dev, tb.state + (tb.rows + r0) * per_row, n * per_row, 0.0f, NULL);
                ops->fill(dev, tb.state + tb.rows * per_row, per_row, 0.0f, NULL);
            }
        }
    }
}

struct kjt {
    std::vector<int64_t> offsets, values;
    std::vector<float> weights;
    std::vector<int64_t> feature_pos, table_pos;
};

static kjt make_kjt(const model &m, const spec &s, std::mt19937_64 &rng)
{
    kjt j;
    int F = m.layout.num_features, T = m.layout.num_tables, B = s.B;
    j.offsets.push_back(0);
    for (int f = 0; f < F; f++) {
        int64_t rows = s.rows[s.feat_table[f]];
        for (int b = 0; b < B; b++) {
            int n = s.min_ids + (int)(rng() % (uint64_t)(s.max_ids - s.min_ids + 1));
            for (int i = 0; i < n; i++) {
                int64_t r;
                if (s.last_rows)
                    r = rng() % 3 == 0 ? 0 : rows - 1 - (int64_t)(rng() % (uint64_t)s.last_rows);
                else if (s.hot)
                    r = (int64_t)(rng() % (uint64_t)std::min<int64_t>(s.hot, rows));
                else
                    r = (int64_t)(rng() % (uint64_t)rows);
                j.values.push_back(r);
                j.weights.push_back((float)((int)(rng() % 2001) - 1000) / 997.0f);
            }
            j.offsets.push_back((int64_t)j.values.size());
        }
    }
    j.table_pos.assign(T + 1, 0);
    j.feature_pos.assign(F, 0);
    for (int f = 0; f < F; f++)
        j.table_pos[s.feat_table[f] + 1] += j.offsets[(f + 1) * B] - j.offsets[f * B];
    for (int t = 0; t < T; t++)
        j.table_pos[t + 1] += j.table_pos[t];
    std::vector<int64_t> cur(j.table_pos.begin(), j.table_pos.end() - 1);
    for (int f = 0; f < F; f++) {
        j.feature_pos[f] = cur[s.feat_table[f]];
        cur[s.feat_table[f]] += j.offsets[(f + 1) * B] - j.offsets[f * B];
    }
    return j;
}

static bool same_bits(const float *a, const float *b, size_t n, size_t *where)
{
    for (size_t i = 0; i < n; i++)
        if (memcmp(a + i, b + i, 4)) { *where = i; return false; }
    return true;
}

static void compare_tables(const model &a, const model &b, const spec &s, const char *what)
{
    for (size_t t = 0; t < a.tables.size(); t++) {
        const sr_emb_table &x = a.tables[t], &y = b.tables[t];
        size_t where = 0;
        if (!s.last_rows) {
            size_t n = (size_t)x.rows * x.dim;
            CHECK(same_bits(x.weight, y.weight, n, &where), "%s %s: table %zu weight differs at %zu: %.9g vs %.9g", s.name, what, t, where, x.weight[where], y.weight[where]);
            size_t sf = state_floats(a.layout.optim, x.rows, x.dim);
            if (sf)
                CHECK(same_bits(x.state, y.state, sf, &where), "%s %s: table %zu state differs at %zu: %.9g vs %.9g", s.name, what, t, where, x.state[where], y.state[where]);
        } else {
            int64_t r0 = x.rows - s.last_rows;
            CHECK(same_bits(x.weight + r0 * x.dim, y.weight + r0 * y.dim, (size_t)s.last_rows * x.dim, &where), "%s %s: big table %zu last rows differ at %zu", s.name, what, t, where);
            CHECK(same_bits(x.weight, y.weight, (size_t)x.dim, &where), "%s %s: big table %zu row 0 differs", s.name, what, t);
        }
    }
}

/* A device with just what the embedding ops use: the backend context's stream. */
static sr_device make_sim_dev(sr_cuda_ctx *ctx)
{
    sr_device d;
    memset(&d, 0, sizeof d);
    d.kind = SR_DEVICE_CUDA;
    d.name = "cuda-check";
#ifndef EMB_CHECK_SIM
    if (cudaStreamCreateWithFlags(&ctx->main, cudaStreamNonBlocking) != cudaSuccess) {
        fprintf(stderr, "no usable GPU\n");
        exit(2);
    }
#endif
    d.ctx = ctx;
    return d;
}

/* A batch as one side sees it: its arrays in that side's memory. */
static sr_emb_batch side_batch(bool gpu, const spec &s, const kjt &j)
{
    sr_emb_batch b = {s.B, (int64_t)j.values.size(), side_copy(gpu, j.offsets), side_copy(gpu, j.values),
                      s.weighted ? side_copy(gpu, j.weights) : NULL, j.feature_pos.data(), j.table_pos.data()};
    return b;
}

static std::vector<float> random_grad(std::mt19937_64 &rng, size_t n)
{
    std::vector<float> dp(n);
    for (auto &x : dp)
        x = (float)((int)(rng() % 20001) - 10000) / 3331.0f;
    return dp;
}

static void run_case(const spec &s, sr_optim_kind k, int steps, int use_dev_scalars, uint64_t seed)
{
    sr_cuda_ctx ctx = {};
    sr_device gdev = make_sim_dev(&ctx);
    sr_device *cdev = sr_device_cpu();
    std::mt19937_64 rng(seed);
    model cm, gm;
    int64_t max_values = (int64_t)s.B * s.feat_table.size() * s.max_ids + 1;
    build(cm, s, k, &sr_cpu_embedding_ops, cdev, max_values);
    build(gm, s, k, &sr_cuda_embedding_ops, &gdev, max_values);
    int small = s.last_rows == 0;
    init_tables(cm, s, &sr_cpu_embedding_ops, cdev, small);
    init_tables(gm, s, &sr_cuda_embedding_ops, &gdev, small);
    gpu_sync();
    compare_tables(cm, gm, s, "init");
    const int out_dim = cm.layout.out_dim;
    const size_t np = (size_t)s.B * out_dim + 4;
    std::vector<float> pc(np, 7.0f);
    float *pg = (float *)gpu_alloc(sizeof(float) * np), *pe = (float *)gpu_alloc(sizeof(float) * np);
    float *dpg = (float *)gpu_alloc(sizeof(float) * np);
    float lr = 0.05f, *lr_dev = (float *)gpu_alloc(64);
    int64_t *step_dev = (int64_t *)gpu_alloc(64);
    for (int step = 1; step <= steps; step++) {
        kjt j = make_kjt(cm, s, rng);
        sr_emb_batch bc = side_batch(false, s, j), bg = side_batch(true, s, j);
        std::fill(pg, pg + np, 7.0f);
        std::fill(pe, pe + np, 7.0f);
        sr_cpu_embedding_ops.forward(cdev, &cm.layout, &bc, 1, pc.data(), cm.ws, NULL);
        sr_cuda_embedding_ops.forward(&gdev, &gm.layout, &bg, 0, pe, gm.ws, NULL); /* eval */
        sr_cuda_embedding_ops.forward(&gdev, &gm.layout, &bg, 1, pg, gm.ws, NULL);
        gpu_sync();
        size_t where = 0;
        CHECK(same_bits(pc.data(), pg, np, &where), "%s step %d: pooled differs at %zu: %.9g vs %.9g", s.name, step, where, pc[where], pg[where]);
        CHECK(same_bits(pe, pg, np, &where), "%s: eval pooled differs from the kept forward's", s.name);
        std::vector<float> dp = random_grad(rng, np);
        std::copy(dp.begin(), dp.end(), dpg);
        sr_emb_update u = {};
        u.optim = sr_optim_config_default(k);
        u.lr = lr;
        u.step = step;
        if (use_dev_scalars) {
            *lr_dev = lr * 1.5f;
            *step_dev = step + 3;
            u.lr = -1.0f;
            u.step = -5;
            u.lr_dev = lr_dev;
            u.step_dev = step_dev;
        }
        sr_emb_batch bb = {s.B, bc.num_values, NULL, NULL, NULL, j.feature_pos.data(), j.table_pos.data()};
        sr_cpu_embedding_ops.backward(cdev, &cm.layout, &bb, dp.data(), &u, cm.ws, NULL);
        sr_cuda_embedding_ops.backward(&gdev, &gm.layout, &bb, dpg, &u, gm.ws, NULL);
        gpu_sync();
        char what[64];
        snprintf(what, sizeof what, "step %d (%s)", step, sr_optim_kind_name(k));
        compare_tables(cm, gm, s, what);
    }
    printf("  %-28s %-16s %s ok so far: %d/%d\n", s.name, sr_optim_kind_name(k), use_dev_scalars ? "dev" : "host", checks - failures, checks);
}

/* DP ops: accumulate (twice, the second onto the first's sums) and apply. */
static void run_dp(const spec &s, sr_optim_kind k, uint64_t seed)
{
    sr_cuda_ctx ctx = {};
    sr_device gdev = make_sim_dev(&ctx);
    sr_device *cdev = sr_device_cpu();
    std::mt19937_64 rng(seed);
    model cm, gm;
    int64_t max_values = (int64_t)s.B * s.feat_table.size() * s.max_ids + 1;
    build(cm, s, k, &sr_cpu_embedding_ops, cdev, max_values);
    build(gm, s, k, &sr_cuda_embedding_ops, &gdev, max_values);
    init_tables(cm, s, &sr_cpu_embedding_ops, cdev, 1);
    init_tables(gm, s, &sr_cuda_embedding_ops, &gdev, 1);
    const int T = cm.layout.num_tables, out_dim = cm.layout.out_dim;
    const size_t np = (size_t)s.B * out_dim + 4;
    float *dpg = (float *)gpu_alloc(sizeof(float) * np);
    std::vector<float *> gc(T), gg(T), cc(T), cg(T);
    for (int t = 0; t < T; t++) {
        size_t n = (size_t)s.rows[t] * s.dims[t] + 4;
        gc[t] = (float *)host_alloc(4 * n), gg[t] = (float *)gpu_alloc(4 * n);
        cc[t] = (float *)host_alloc(4 * (s.rows[t] + 1)), cg[t] = (float *)gpu_alloc(4 * (s.rows[t] + 1));
        memset(gg[t], 0, 4 * n), memset(cg[t], 0, 4 * (s.rows[t] + 1));
    }
    gpu_sync();
    for (int step = 1; step <= 2; step++) {
        kjt j = make_kjt(cm, s, rng);
        sr_emb_batch bc = side_batch(false, s, j), bg = side_batch(true, s, j);
        std::vector<float> dp = random_grad(rng, np);
        std::copy(dp.begin(), dp.end(), dpg);
        sr_cpu_emb_dp_ops.accumulate(cdev, &cm.layout, &bc, dp.data(), gc.data(), cc.data(), NULL);
        sr_cuda_emb_dp_ops.accumulate(&gdev, &gm.layout, &bg, dpg, gg.data(), cg.data(), NULL);
        gpu_sync();
        for (int t = 0; t < T; t++) {
            size_t where = 0, n = (size_t)s.rows[t] * s.dims[t];
            CHECK(same_bits(gc[t], gg[t], n, &where), "%s dp step %d: grad %d differs at %zu: %.9g vs %.9g", s.name, step, t, where, gc[t][where], gg[t][where]);
            CHECK(same_bits(cc[t], cg[t], s.rows[t], &where), "%s dp: counts %d differ at %zu: %g vs %g", s.name, t, where, cc[t][where], cg[t][where]);
        }
        sr_emb_update u = {};
        u.optim = sr_optim_config_default(k);
        u.lr = 0.03f;
        u.step = step;
        for (int t = 0; t < T; t++) {
            sr_cpu_emb_dp_ops.apply(cdev, &cm.tables[t], gc[t], cc[t], &u, NULL);
            sr_cuda_emb_dp_ops.apply(&gdev, &gm.tables[t], gg[t], cg[t], &u, NULL);
        }
        gpu_sync();
        compare_tables(cm, gm, s, "dp apply");
    }
    printf("  dp %-25s %-16s ok so far: %d/%d\n", s.name, sr_optim_kind_name(k), checks - failures, checks);
}

int main(int argc, char **argv)
{
    std::vector<spec> specs = {
        /* name rows dims feat_table feat_mean B max min weighted hot last pad */
        {"d16 w4 one id", {50, 70}, {16, 16}, {0, 1, 0}, {0, 0, 1}, 24, 1, 1, 0, 0, 0, 0},
        {"d128 20 ids", {40, 300}, {128, 128}, {0, 1}, {0, 1}, 8, 20, 0, 1, 0, 0, 0},
        {"mixed 4/16 hot", {30, 9}, {4, 16}, {1, 0, 1}, {1, 0, 0}, 16, 6, 0, 1, 3, 0, 0},
        {"d1 scalar", {20, 5}, {1, 1}, {0, 1}, {0, 1}, 20, 4, 0, 1, 0, 0, 0},
        {"d130 scalar", {33, 10}, {130, 4}, {0, 1, 0}, {0, 1, 1}, 6, 5, 0, 1, 4, 0, 0},
        {"d256 w4 rows>32 lanes", {25}, {256}, {0, 0}, {0, 1}, 6, 5, 0, 0, 6, 0, 0},
        {"d16 misaligned cols", {25, 40}, {16, 16}, {0, 1}, {0, 0}, 12, 3, 0, 1, 0, 0, 1},
        {"d48 hot long runs", {4}, {48}, {0, 0}, {0, 1}, 20, 9, 0, 1, 0, 0, 0},
        {"single row, no sort", {1}, {4}, {0, 0}, {0, 1}, 6, 3, 0, 1, 0, 0, 0},
        {"empty bags only", {9}, {8}, {0}, {1}, 5, 0, 0, 1, 0, 0, 0},
        {"one row table", {1, 7}, {8, 8}, {0, 1}, {1, 0}, 10, 3, 0, 1, 0, 0, 0},
    };
    sr_optim_kind kinds[] = {SR_OPTIM_SGD, SR_OPTIM_ADAGRAD, SR_OPTIM_ROWWISE_ADAGRAD, SR_OPTIM_ADAM};
    int quick = argc > 1;
    if (argc > 1 && !strcmp(argv[1], "many")) {
        spec many = {"many tables and features", {}, {}, {}, {}, 2, 2, 1, 1, 0, 0, 0};
        for (int t = 0; t < 35; t++) {
            many.rows.push_back(3 + t % 4);
            many.dims.push_back(4);
        }
        for (int f = 0; f < 165; f++) {
            many.feat_table.push_back(f < 130 ? 0 : f - 130);
            many.feat_mean.push_back(f % 3 == 0);
        }
        run_case(many, SR_OPTIM_ROWWISE_ADAGRAD, 2, 0, 21);
        run_dp(many, SR_OPTIM_SGD, 22);
        printf("%d passed, %d failed\n", checks - failures, failures);
        return failures != 0;
    }
    for (auto &s : specs)
        for (auto k : kinds) {
            run_case(s, k, 2, 0, 7);
            if (!quick && (k == SR_OPTIM_ADAM || k == SR_OPTIM_ROWWISE_ADAGRAD))
                run_case(s, k, 2, 1, 9);
        }
    /* big tables: > 2^31 elements (ids at the last rows), and > 2^32 rows (64-bit keys) */
    spec big = {"big 2^31 elems d16", {((int64_t)1 << 31) / 16 + 5, 11}, {16, 16}, {0, 1, 0}, {0, 0, 1}, 8, 3, 1, 1, 0, 4, 0};
    run_case(big, SR_OPTIM_SGD, 2, 0, 3);
    run_case(big, SR_OPTIM_ADAM, 2, 0, 3);
    spec huge = {"rows > 2^32 d1", {((int64_t)1 << 32) + 7, 3}, {1, 1}, {0, 1}, {0, 0}, 8, 3, 1, 1, 0, 3, 0};
    run_case(huge, SR_OPTIM_ROWWISE_ADAGRAD, 2, 0, 4);
    run_case(huge, SR_OPTIM_ADAGRAD, 2, 0, 4);
    for (auto &s : specs)
        for (auto k : kinds)
            run_dp(s, k, 11);
    spec dpwide = {"dp many rows", {1000, 700}, {16, 12}, {0, 1, 0, 1}, {0, 0, 0, 0}, 40, 3, 0, 1, 0, 0, 0};
    run_dp(dpwide, SR_OPTIM_SGD, 5);
    printf("%d passed, %d failed\n", checks - failures, failures);
    return failures != 0;
}
