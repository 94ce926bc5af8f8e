/*
 * The cost model (docs/planner.md). Per step, with b = B / W samples a rank,
 * for a table of E rows, D columns, p ids a sample over its f features and
 * hot share h:
 *
 *   work      a shard of c columns holding a share s of the rows looks up
 *             N = B p s ids (tw, cw: every sample's; rw, twrw: its rows'
 *             share; dp: b p on every rank) at the topology's gather rate
 *             at dim c and skew h, and updates them at its update rate; a dp
 *             table updates all E rows densely (E D 4 bytes, 3 passes)
 *   input     each rank sends an owner b p s ids (4 bytes each) and b f
 *             lengths (4 bytes) for each slot it owns
 *   output    tw, cw: the owner sends each other rank b f c pooled values;
 *             rw: every rank sends each other rank b f D partial sums
 *             (reduce-scatter); twrw on node n: inside n a reduce-scatter
 *             (to each node peer N_nodes b f D), then each rank of n sends
 *             b f D to its peer of the same local rank on every other node
 *   hybrid    its H hot rows (hot share h: the statistics' share at H) a
 *             dp table of H rows (lookup of b p h ids a rank, dense update
 *             and all-reduce of H x D), the rest rw with (1 - h) of the ids; every rank
 *             first splits its b p ids (24 bytes of memory traffic an id,
 *             and 3 launches a step for all hybrid tables) and accumulates
 *             its b p h hot ids' gradients at its update rate; the output
 *             sends an owner's row of a bag only when the bag holds cold ids
 *             in its block (1 - (1 - (1 - h)/W)^q of the bags, q ids a bag),
 *             one all-to-all-v for all hybrid tables, after a second small
 *             counts exchange (its latency in the input dist). The search
 *             weighs the statistics' hot-set sizes (E/1000 .. E/10); a plan's
 *             other H takes a share interpolated linearly between theirs (a
 *             lower bound: the share grows concavely with H)
 *   gradient  the output's bytes, mirrored
 *   all-reduce  dense parameters and dp tables' gradients, ring:
 *             2 (W - 1) / W bytes over the slowest link it crosses
 *   memory    rows x c x 4 bytes + optimizer state (dp: also its gradient,
 *             touch counts and their staging), the dense block x
 *             (2 + its state) x 4 bytes, the caller's buffers, and on
 *             several ranks B x slot_bytes for each shard a rank holds
 *             (what it receives of every rank's samples)
 *
 *   launches  every op a step issues costs at least the device's launch
 *             time (topology launch_us): per MLP layer 7 (forward GEMM, bias
 *             and ReLU; backward ReLU and bias gradients, data and weight
 *             GEMMs), the dot interaction 2 or per cross layer 10, 10 more
 *             (batch copies, loss, dense optimizer); per embedding group (one
 *             per sharding type placed) 3 in the lookup and 8 in the update
 *             (its sort's passes, run lists, the update's kernels)
 *
 * A collective takes its latency plus its slowest rank's bytes over the
 * link: in-node bytes over intra GB/s; bytes across nodes summed over the
 * ranks that share a NIC, over inter GB/s; sending and receiving overlap,
 * and so do the two links. The counts exchange takes the host latency where
 * the topology gives one (NCCL runs it over MPI), else the link's. The step
 * is the slowest rank's lookup and update, the dense compute, and the
 * communication the overlap windows do not hide (pl_acc_step); the gradient
 * dist and the last all-reduce bucket run at once on their communicators.
 */
#include <math.h>
#include <string.h>

#include "shardrec/alloc.h"
#include "shardrec/error.h"
#include "plan/planner_internal.h"

#define ID_BYTES  4.0 /* an id on the wire: one word (shard-local row) */
#define LEN_BYTES 4.0 /* a bag's length */

static const char *const stage_names[SR_PS_COUNT] = {
    "lookup",    "update",    "dense",   "input_dist", "output_dist",
    "grad_dist", "allreduce", "exposed", "step",
};

const char *sr_planner_stage_name(enum sr_planner_stage s)
{
    return s >= 0 && s < SR_PS_COUNT ? stage_names[s] : "?";
}

/* H_s(n) = sum_{k=1..n} k^-s: exact to 10^6 terms, then the integral tail. */
static double harmonic(int64_t n, double s)
{
    double h = 0;
    int64_t exact = n < 1000000 ? n : 1000000;
    for (int64_t k = exact; k >= 1; k--)
        h += pow((double)k, -s);
    if (n > exact) /* integral of x^-s over [exact + 1/2, n + 1/2] */
        h += (pow(exact + 0.5, 1 - s) - pow(n + 0.5, 1 - s)) / (s - 1);
    return h;
}

void sr_planner_hot_shares_of(int64_t rows, const int64_t *hot, int n, double zipf_s,
                              double *shares)
{
    double all = 0; /* H_s(rows), summed on first need */
    if (fabs(zipf_s - 1) < 1e-9)
        zipf_s = 1 + 1e-9;
    for (int i = 0; i < n; i++) {
        const int64_t h = hot[i];
        if (rows <= 0 || h <= 0 || h >= rows || zipf_s <= 0) {
            shares[i] = rows <= 0 || h <= 0 ? 0 : h >= rows ? 1 : (double)h / (double)rows;
            continue;
        }
        if (!(all > 0))
            all = harmonic(rows, zipf_s);
        shares[i] = harmonic(h, zipf_s) / all;
    }
}

double sr_planner_hot_share_of(int64_t rows, int64_t hot, double zipf_s)
{
    double share;
    sr_planner_hot_shares_of(rows, &hot, 1, zipf_s, &share);
    return share;
}

double sr_planner_hot_share(int64_t rows, double zipf_s)
{
    return sr_planner_hot_share_of(rows, (rows + 99) / 100, zipf_s);
}

int sr_planner_hot_sizes(int64_t rows, int64_t known, int64_t *sizes)
{
    static const int64_t divisors[SR_PLANNER_HOT_SIZES] = {1000, 300, 100, 30, 10};
    const int64_t cap = rows < SR_PLANNER_HOT_ROWS_MAX ? rows : SR_PLANNER_HOT_ROWS_MAX;
    int n = 0;
    for (int i = 0; i < SR_PLANNER_HOT_SIZES && cap >= 1; i++) {
        int64_t h = (rows + divisors[i] - 1) / divisors[i];
        h = h < 1 ? 1 : h > cap ? cap : h;
        if (known < rows && h >= known) /* a set of every row known: not backed */
            break;
        if (n == 0 || h > sizes[n - 1])
            sizes[n++] = h;
    }
    return n;
}

/* ---- the accumulator ----------------------------------------------------------------- */

#define PER_RANK_ARRAYS (3 + 4 * PL_GROUPS)

void pl_acc_init(struct pl_acc *a, const struct sr_planner_model *m, const struct sr_topology *topo)
{
    memset(a, 0, sizeof *a);
    a->m = m;
    a->topo = topo;
    a->W = topo->world_size;
    a->L = topo->ranks_per_node;
    a->storage = sr_calloc((size_t)PER_RANK_ARRAYS * a->W, sizeof(double));
    double *p = a->storage;
    a->mem = p, p += a->W;
    a->lookup = p, p += a->W;
    a->update = p, p += a->W;
    for (int g = 0; g < PL_GROUPS; g++)
        for (int l = 0; l < 2; l++) {
            a->send[g][l] = p, p += a->W;
            a->recv[g][l] = p, p += a->W;
        }
}

void pl_acc_copy(struct pl_acc *dst, const struct pl_acc *src)
{
    SR_ASSERT(dst->W == src->W);
    memcpy(dst->storage, src->storage, sizeof(double) * PER_RANK_ARRAYS * src->W);
    memcpy(dst->active, src->active, sizeof dst->active);
    dst->kinds = src->kinds;
    dst->dp_bytes = src->dp_bytes;
}

void pl_acc_clear(struct pl_acc *a)
{
    memset(a->storage, 0, sizeof(double) * PER_RANK_ARRAYS * a->W);
    memset(a->active, 0, sizeof a->active);
    a->kinds = 0;
    a->dp_bytes = 0;
}

void pl_acc_free(struct pl_acc *a)
{
    sr_free(a->storage);
    a->storage = NULL;
}

static int node_of(const struct pl_acc *a, int rank)
{
    return rank / a->L;
}

/* bytes from rank `from` to rank `to` in group g (nothing to itself). */
static void send(struct pl_acc *a, enum pl_group g, int from, int to, double bytes,
                 struct sr_planner_table_cost *cost)
{
    if (from == to || bytes <= 0)
        return;
    int link = node_of(a, from) != node_of(a, to);
    a->send[g][link][from] += bytes;
    a->recv[g][link][to] += bytes;
    a->active[g] = 1;
    double times = g == PL_INPUT ? 1 : 2; /* output groups run again for the gradients */
    if (cost) {
        cost->comm_bytes += times * bytes;
        cost->inter_bytes += link ? times * bytes : 0;
    }
}

static double state_floats(const struct pl_acc *a, double rows, double cols)
{
    switch (a->m->emb_state) {
    case SR_PLANNER_STATE_ROW:
        return rows;
    case SR_PLANNER_STATE_ELEMENT:
        return rows * cols;
    default:
        return 0;
    }
}

/* Bytes of one stored weight of a sharded table (--emb-dtype); dp tables are fp32. */
static int elem_bytes(const struct pl_acc *a)
{
    return a->m->emb_elem_bytes > 0 ? a->m->emb_elem_bytes : 4;
}

/* The columns of an fp32 row as many bytes as a stored row of `cols`: the
 * rates are measured on fp32 rows, and moving a row is its bytes. */
static int rate_cols(const struct pl_acc *a, int cols)
{
    int c = (cols * elem_bytes(a) + 3) / 4;
    return c > 0 ? c : 1;
}

/* Ids a bag of table t: the rates are measured on bags of one id, where
 * each id also writes its pooled row (gather: a row read, a row written) or
 * reads its gradient row (update: gradient read, row read, row written). In
 * a bag of q ids those writes and reads are shared: an id costs (1 + 1/q)/2
 * of a measured gather and (2 + 1/q)/3 of a measured update. */
static double bag_ids(const struct pl_acc *a, int t)
{
    const struct sr_planner_table *st = &a->m->stats[t];
    double q = st->features > 0 ? st->ids_per_sample / st->features : 1;
    return q > 1 ? q : 1;
}

/* A shard's lookups and updates of n ids at `cols` columns, on `rank`. */
static void work(struct pl_acc *a, int t, int rank, double n, int cols,
                 struct sr_planner_table_cost *cost)
{
    double h = a->m->stats[t].hot_share, q = bag_ids(a, t);
    cols = rate_cols(a, cols);
    double lookup = n * (1 + 1 / q) / 2 / sr_topology_gather_rows_s(a->topo, cols, h);
    double update = n * (2 + 1 / q) / 3 / sr_topology_update_rows_s(a->topo, cols, h);
    if (a->m->emb_state == SR_PLANNER_STATE_ELEMENT)
        update *= 2; /* the state is read and written as the rows are */
    a->lookup[rank] += lookup;
    a->update[rank] += update;
    if (cost)
        cost->compute_s += lookup + update;
}

/* The batch buffers a shard of table t holds on `rank`: every rank's samples
 * of its features are received there. */
static void shard_buffers(struct pl_acc *a, int t, int rank)
{
    if (a->W > 1) /* one rank exchanges nothing: its tables are looked up in place */
        a->mem[rank] += (double)a->m->global_batch * a->m->stats[t].slot_bytes;
}

static void memory(struct pl_acc *a, int rank, double rows, double cols, int elem,
                   struct sr_planner_table_cost *cost)
{
    double bytes = elem * rows * cols + 4 * state_floats(a, rows, cols);
    a->mem[rank] += bytes;
    if (cost)
        cost->memory_bytes += bytes;
}

/* Every rank sends `owner` the ids of its samples that the shard takes
 * (share of the table's ids) and the lengths of the shard's bags. */
static void ids_to(struct pl_acc *a, int t, int owner, double share,
                   struct sr_planner_table_cost *cost)
{
    const struct sr_planner_table *st = &a->m->stats[t];
    double b = (double)a->m->global_batch / a->W;
    for (int r = 0; r < a->W; r++)
        send(a, PL_INPUT, r, owner,
             b * st->ids_per_sample * share * ID_BYTES + b * st->features * LEN_BYTES, cost);
}

/* A dp table's bytes beside its weights (train_memory.c's
 * sr_train_config_dp_extra_bytes): its gradient and touch counts, E (D + 1)
 * floats riding the last bucket, staged once more in fp32; compressed, kept
 * exact twice and sent as two 16-bit halves a word to each rank. */
static double dp_extra_bytes(const struct pl_acc *a, double E, double D)
{
    double t = E * (D + 1);
    if (a->W > 1 && a->m->dense_wire_bytes < 4)
        return 4 * t + 8 * t + 8.0 * a->W * t;
    return 8 * t;
}

/* A table replicated on every rank: E rows (dp: all of them; hybrid: its hot
 * rows), looked up by `share` of its ids. */
static void add_replica(struct pl_acc *a, int t, double E, double share,
                        struct sr_planner_table_cost *cost)
{
    const struct sr_table_config *tc = &a->m->ebc->tables[t];
    double D = tc->embedding_dim;
    double b = (double)a->m->global_batch / a->W;
    for (int r = 0; r < a->W; r++) {
        double q = bag_ids(a, t);
        double lookup = b * a->m->stats[t].ids_per_sample * share * (1 + 1 / q) / 2 /
                        sr_topology_gather_rows_s(a->topo, (int)D, a->m->stats[t].hot_share);
        double update = E * D * 4 * 3 / (a->topo->memory_gb_s * 1e9);
        a->lookup[r] += lookup;
        a->update[r] += update;
        memory(a, r, E, D, 4, cost);
        a->mem[r] += dp_extra_bytes(a, E, D);
        if (cost) {
            cost->compute_s += lookup + update;
            cost->memory_bytes += dp_extra_bytes(a, E, D);
        }
    }
    a->dp_bytes += E * D * a->m->dense_wire_bytes;
    if (cost && a->W > 1)
        cost->comm_bytes += 2.0 * (a->W - 1) * E * D * a->m->dense_wire_bytes;
}

static void add_dp(struct pl_acc *a, int t, struct sr_planner_table_cost *cost)
{
    add_replica(a, t, (double)a->m->ebc->tables[t].num_embeddings, 1.0, cost);
}

/* A shard owned whole by its rank's samples of every rank (tw, cw piece). */
static void add_owned(struct pl_acc *a, int t, const struct sr_shard *sh,
                      struct sr_planner_table_cost *cost)
{
    const struct sr_planner_table *st = &a->m->stats[t];
    double B = (double)a->m->global_batch, b = B / a->W;
    work(a, t, sh->rank, B * st->ids_per_sample, sh->cols, cost);
    memory(a, sh->rank, (double)sh->rows, sh->cols, elem_bytes(a), cost);
    shard_buffers(a, t, sh->rank);
    ids_to(a, t, sh->rank, 1.0, cost);
    for (int r = 0; r < a->W; r++)
        send(a, PL_A2A, sh->rank, r, b * st->features * sh->cols * a->m->wire_bytes, cost);
}

/* A block of rows (rw, twrw): its share of the ids, looked up where it lives
 * (hybrid: of the `cold` share of them that are not hot). */
static void add_block(struct pl_acc *a, int t, const struct sr_shard *sh, double cold,
                      struct sr_planner_table_cost *cost)
{
    const struct sr_planner_table *st = &a->m->stats[t];
    double E = (double)a->m->ebc->tables[t].num_embeddings;
    double share = E > 0 ? cold * (double)sh->rows / E : 0;
    work(a, t, sh->rank, (double)a->m->global_batch * st->ids_per_sample * share, sh->cols, cost);
    memory(a, sh->rank, (double)sh->rows, sh->cols, elem_bytes(a), cost);
    shard_buffers(a, t, sh->rank);
    ids_to(a, t, sh->rank, share, cost);
}

static void add_rw_output(struct pl_acc *a, int t, struct sr_planner_table_cost *cost)
{
    const struct sr_planner_table *st = &a->m->stats[t];
    double b = (double)a->m->global_batch / a->W;
    double bytes = b * st->features * a->m->ebc->tables[t].embedding_dim * a->m->wire_bytes;
    for (int r = 0; r < a->W; r++)
        for (int q = 0; q < a->W; q++)
            send(a, PL_RW, r, q, bytes, cost);
}

static void add_twrw_output(struct pl_acc *a, int t, int node, struct sr_planner_table_cost *cost)
{
    const struct sr_planner_table *st = &a->m->stats[t];
    int nodes = a->W / a->L;
    double b = (double)a->m->global_batch / a->W;
    double bytes = b * st->features * a->m->ebc->tables[t].embedding_dim * a->m->wire_bytes;
    for (int i = 0; i < a->L; i++) {
        int r = node * a->L + i;
        for (int j = 0; j < a->L; j++) /* reduce-scatter: peer j's samples of every node */
            send(a, PL_TWRW_NODE, r, node * a->L + j, nodes * bytes, cost);
        for (int m = 0; m < nodes; m++) /* then to the same local rank of each node */
            send(a, PL_TWRW_CROSS, r, m * a->L + i, bytes, cost);
    }
}

/* The share of t's lookups that H hot rows take: at a hot-set size the
 * statistics know, its share; between them (and the ends: 0 at 0 rows, 1
 * at E) linear. Statistics without sizes know the hot share at ceil(E/100). */
double pl_hot_share_of(const struct sr_planner_model *m, int t, int64_t H)
{
    const struct sr_planner_table *st = &m->stats[t];
    const int64_t E = m->ebc->tables[t].num_embeddings;
    int64_t x[SR_PLANNER_HOT_SIZES + 2] = {0};
    double y[SR_PLANNER_HOT_SIZES + 2] = {0};
    int n = 1;
    if (H <= 0 || E <= 0)
        return 0;
    if (H >= E)
        return 1;
    for (int i = 0; i < st->num_sizes; i++)
        x[n] = st->hot_size[i], y[n++] = st->hot_size_share[i];
    if (st->num_sizes == 0)
        x[n] = (E + 99) / 100, y[n++] = st->hot_share;
    x[n] = E, y[n++] = 1;
    for (int i = 1; i < n; i++) {
        if (H > x[i] || x[i] <= x[i - 1])
            continue;
        const double along = (double)(H - x[i - 1]) / (double)(x[i] - x[i - 1]);
        return y[i - 1] + (y[i] - y[i - 1]) * along;
    }
    return 1;
}

/* A hybrid table's cold rows travel compact: a bag's row goes from an
 * owner to the bag's rank only when the bag holds a cold id in the owner's
 * block: for a bag of q ids, each cold with chance 1 - h and in a given
 * block with chance 1/W (the ids spread over the blocks), with chance
 * 1 - (1 - (1 - h)/W)^q. */
static void add_compact_output(struct pl_acc *a, int t, double h,
                               struct sr_planner_table_cost *cost)
{
    const struct sr_planner_table *st = &a->m->stats[t];
    const double b = (double)a->m->global_batch / a->W, q = bag_ids(a, t);
    const double sent = 1 - pow(1 - (1 - h) / a->W, q);
    const double bytes =
        b * st->features * sent * a->m->ebc->tables[t].embedding_dim * a->m->wire_bytes;
    for (int r = 0; r < a->W; r++)
        for (int s = 0; s < a->W; s++)
            send(a, PL_HYB, r, s, bytes, cost);
}

/* An id of a hybrid table through hybrid_split, in memory bytes: read and
 * written (8 + 8), its bag's lengths and offsets (8). */
#define SPLIT_BYTES 24.0

/* Hot rows replicated (a dp table of H rows), the rest rw; every rank
 * splits its samples' ids first. */
static void add_hybrid(struct pl_acc *a, int t, const struct sr_table_plan *tp,
                       struct sr_planner_table_cost *cost)
{
    const double h = pl_hot_share_of(a->m, t, tp->num_hot);
    const double b = (double)a->m->global_batch / a->W;
    const double split =
        b * a->m->stats[t].ids_per_sample * SPLIT_BYTES / (a->topo->memory_gb_s * 1e9);
    /* the hot ids' gradients, accumulated into the replica's dense gradient
     * row by row on every rank (as an update's rows cost) */
    const double q = bag_ids(a, t),
                 acc = b * a->m->stats[t].ids_per_sample * h * (2 + 1 / q) / 3 /
                       sr_topology_update_rows_s(
                           a->topo, rate_cols(a, (int)a->m->ebc->tables[t].embedding_dim),
                           a->m->stats[t].hot_share);
    for (int r = 0; r < a->W; r++) {
        a->lookup[r] += split;
        a->update[r] += acc;
    }
    if (cost) {
        cost->compute_s += a->W * (split + acc);
        cost->hot_share = h;
    }
    if (tp->num_hot > 0)
        add_replica(a, t, (double)tp->num_hot, h, cost);
    for (int i = 0; i < tp->num_shards; i++)
        add_block(a, t, &tp->shards[i], 1 - h, cost);
    add_compact_output(a, t, h, cost);
}

void pl_acc_add_table(struct pl_acc *a, int t, const struct sr_table_plan *tp,
                      struct sr_planner_table_cost *cost)
{
    if (cost)
        memset(cost, 0, sizeof *cost);
    if (tp->type == SR_SHARDING_TYPE_HYBRID) /* its groups: the replica's (dp) and its own */
        a->kinds |= (1u << SR_SHARDING_TYPE_DATA_PARALLEL) | (1u << SR_SHARDING_TYPE_HYBRID);
    else if (tp->type >= 0 && tp->type < 32)
        a->kinds |= 1u << tp->type;
    switch (tp->type) {
    case SR_SHARDING_TYPE_DATA_PARALLEL:
        add_dp(a, t, cost);
        return;
    case SR_SHARDING_TYPE_TABLE_WISE:
    case SR_SHARDING_TYPE_COLUMN_WISE:
        for (int i = 0; i < tp->num_shards; i++)
            add_owned(a, t, &tp->shards[i], cost);
        return;
    case SR_SHARDING_TYPE_ROW_WISE:
        for (int i = 0; i < tp->num_shards; i++)
            add_block(a, t, &tp->shards[i], 1.0, cost);
        add_rw_output(a, t, cost);
        return;
    case SR_SHARDING_TYPE_TABLE_ROW_WISE:
        for (int i = 0; i < tp->num_shards; i++)
            add_block(a, t, &tp->shards[i], 1.0, cost);
        if (tp->num_shards)
            add_twrw_output(a, t, node_of(a, tp->shards[0].rank), cost);
        return;
    case SR_SHARDING_TYPE_HYBRID:
        add_hybrid(a, t, tp, cost);
        return;
    default:
        SR_ASSERT(0);
    }
}

/* ---- the step ------------------------------------------------------------------------- */

/* One collective of group g: latency plus the slowest rank's (or NIC's) bytes. */
static double group_seconds(const struct pl_acc *a, enum pl_group g)
{
    const struct sr_topology *tp = a->topo;
    if (!a->active[g])
        return 0;
    double intra = 0, inter = 0, nic_send = 0, nic_recv = 0;
    int crosses = 0;
    for (int r = 0; r < a->W; r++) {
        intra = fmax(intra, fmax(a->send[g][0][r], a->recv[g][0][r]));
        crosses |= a->send[g][1][r] > 0;
        nic_send += a->send[g][1][r];
        nic_recv += a->recv[g][1][r];
        int last_of_nic = (r + 1) % tp->nic_ranks == 0 || (r + 1) % a->L == 0;
        if (last_of_nic) {
            inter = fmax(inter, fmax(nic_send, nic_recv));
            nic_send = nic_recv = 0;
        }
    }
    double t_intra = intra > 0 ? intra / (tp->intra.gb_s * 1e9) : 0;
    double t_inter = inter > 0 ? inter / (tp->inter.gb_s * 1e9) : 0;
    double lat = (crosses ? tp->inter.latency_us : tp->intra.latency_us) * 1e-6;
    return lat + fmax(t_intra, t_inter);
}

/* The interaction's shape: F + 1 vectors of D (n = (F + 1) D values), and
 * the top MLP's input width (dot: z and every pair's dot product; dcn: n). */
struct interaction {
    int F1, D;
    double n, out;
};

static struct interaction interaction_of(const struct sr_planner_model *m)
{
    struct interaction x = {.F1 = m->ebc->num_features + 1, .D = m->bot[m->n_bot - 1]};
    x.n = (double)x.F1 * x.D;
    x.out = m->dcn_layers ? x.n : x.D + x.F1 * (x.F1 - 1) / 2.0;
    return x;
}

double pl_dense_params(const struct sr_planner_model *m)
{
    struct interaction x = interaction_of(m);
    double p = 0, in = x.out;
    for (int l = 0; l + 1 < m->n_bot; l++)
        p += (m->bot[l] + 1.0) * m->bot[l + 1];
    for (int l = 0; l < m->n_top; l++) {
        p += (in + 1) * m->top[l];
        in = m->top[l];
    }
    return p + m->dcn_layers * (2.0 * m->dcn_rank + 1) * x.n;
}

/* Activation values a sample: every MLP layer's input and output widths,
 * the interaction's input (F + 1 vectors of D) and output. */
static double activations(const struct sr_planner_model *m)
{
    struct interaction x = interaction_of(m);
    double w = x.n + x.out;
    for (int l = 0; l < m->n_bot; l++)
        w += m->bot[l];
    for (int l = 0; l < m->n_top; l++)
        w += m->top[l];
    return w + (m->dcn_layers ? 3.0 * m->dcn_layers * x.n : 0); /* x, u, du a cross layer */
}

/* Forward FLOPs a sample: the MLPs, the interaction (dot: every pair of the
 * F + 1 vectors; dcn: V then U per layer). */
static void dense_flops(const struct sr_planner_model *m, double *bottom, double *all)
{
    struct interaction x = interaction_of(m);
    double in = x.out, top = 0;
    *bottom = 0;
    for (int l = 0; l + 1 < m->n_bot; l++)
        *bottom += 2.0 * m->bot[l] * m->bot[l + 1];
    for (int l = 0; l < m->n_top; l++) {
        top += 2.0 * in * m->top[l];
        in = m->top[l];
    }
    double inter =
        m->dcn_layers ? m->dcn_layers * 4.0 * x.n * m->dcn_rank : (double)x.F1 * x.F1 * x.D;
    *all = *bottom + top + inter;
}

/* Ops a step issues outside the embedding groups (the header's counts). */
#define OPS_PER_LAYER    7
#define OPS_DOT          2
#define OPS_PER_CROSS    10
#define OPS_FIXED        10
#define OPS_GROUP_LOOKUP 3
#define OPS_GROUP_UPDATE 8
#define OPS_SPLIT        3 /* hybrid_split's kernels, one op for every hybrid table */

static double dense_ops(const struct sr_planner_model *m)
{
    double layers = (m->n_bot > 1 ? m->n_bot - 1 : 0) + m->n_top;
    return OPS_PER_LAYER * layers + (m->dcn_layers ? OPS_PER_CROSS * m->dcn_layers : OPS_DOT) +
           OPS_FIXED;
}

static int groups_of(unsigned kinds)
{
    int n = 0;
    for (; kinds; kinds &= kinds - 1)
        n++;
    return n;
}

static double all_reduce_seconds(const struct pl_acc *a, double bytes, int buckets)
{
    const struct sr_topology *tp = a->topo;
    int nodes = a->W / a->L;
    if (a->W == 1 || bytes <= 0)
        return 0;
    double gb_s = a->L > 1 ? tp->intra.gb_s : 1e30, lat = tp->intra.latency_us;
    if (nodes > 1) { /* a ring crosses each node's NICs once each way */
        gb_s = fmin(gb_s, tp->inter.gb_s * a->L / tp->nic_ranks);
        lat = tp->inter.latency_us;
    }
    return buckets * lat * 1e-6 + 2.0 * (a->W - 1) / a->W * bytes / (gb_s * 1e9);
}

/* The counts exchange: one small all-to-all of host memory (the topology's
 * host latency where a device-memory transport runs it over MPI). */
static double counts_seconds(const struct pl_acc *a)
{
    const struct sr_topology *tp = a->topo;
    if (tp->host_latency_us > 0)
        return tp->host_latency_us * 1e-6;
    return (a->L < a->W ? tp->inter.latency_us : tp->intra.latency_us) * 1e-6;
}

static double max_of(const double *v, int n)
{
    double x = 0;
    for (int i = 0; i < n; i++)
        x = fmax(x, v[i]);
    return x;
}

void pl_acc_step(const struct pl_acc *a, double s[SR_PS_COUNT], int *collectives)
{
    const struct sr_planner_model *m = a->m;
    double b = (double)m->global_batch / a->W, bottom, all;
    double rate = a->topo->gemm_flop_s[m->math >= 0 && m->math < SR_TOPO_MATHS ? m->math : 0];
    double params = pl_dense_params(m);
    memset(s, 0, sizeof(double) * SR_PS_COUNT);
    dense_flops(m, &bottom, &all);
    double bot_fwd = b * bottom / rate, bot_bwd = 2 * bot_fwd;
    double optimizer =
        params * 4 * (3 + 2.0 * m->dense_state_floats) / (a->topo->memory_gb_s * 1e9);
    /* memory passes over the activations, outside the GEMMs: the forward
     * writes each value and its ReLU reads and writes it (3); the backward
     * reads the value and its incoming gradient and writes the outgoing one
     * (3), and the ReLU mask reads the value again (1), the bias gradient the
     * gradient (1): 8 passes of 4 bytes */
    double elementwise = 8.0 * 4 * b * activations(m) / (a->topo->memory_gb_s * 1e9);
    const unsigned split = 1u << SR_SHARDING_TYPE_HYBRID; /* hybrid: also the split op */
    const double launch = a->topo->launch_us * 1e-6, groups = groups_of(a->kinds);
    s[SR_PS_DENSE] = 3 * b * all / rate + elementwise + optimizer + dense_ops(m) * launch;
    s[SR_PS_LOOKUP] = max_of(a->lookup, a->W) + groups * OPS_GROUP_LOOKUP * launch +
                      (a->kinds & split ? OPS_SPLIT * launch : 0);
    s[SR_PS_UPDATE] = max_of(a->update, a->W) + groups * OPS_GROUP_UPDATE * launch;
    *collectives = 0;
    if (a->W > 1) {
        double dense_bytes = params * m->dense_wire_bytes + a->dp_bytes;
        int buckets = (int)ceil(params * m->dense_wire_bytes / fmax(m->bucket_bytes, 1));
        buckets = buckets < 1 ? 1 : buckets;
        /* the counts exchange; hybrid tables' second one beside it */
        s[SR_PS_INPUT_DIST] =
            group_seconds(a, PL_INPUT) + counts_seconds(a) * (a->kinds & split ? 2 : 1);
        *collectives += a->kinds & split ? 1 : 0;
        for (int g = PL_A2A; g < PL_GROUPS; g++) {
            s[SR_PS_OUTPUT_DIST] += group_seconds(a, (enum pl_group)g);
            *collectives += 2 * a->active[g];
        }
        s[SR_PS_GRAD_DIST] = s[SR_PS_OUTPUT_DIST];
        s[SR_PS_ALLREDUCE] = all_reduce_seconds(a, dense_bytes, buckets);
        *collectives += 2 + buckets;
        double compute = s[SR_PS_LOOKUP] + s[SR_PS_UPDATE] + s[SR_PS_DENSE];
        double dense_bwd = 2.0 / 3.0 * (s[SR_PS_DENSE] - optimizer);
        double in = m->pipeline ? fmax(0, s[SR_PS_INPUT_DIST] - compute) : s[SR_PS_INPUT_DIST];
        double last = s[SR_PS_ALLREDUCE] / buckets, rest = s[SR_PS_ALLREDUCE] - last;
        /* the gradient dist (sparse communicator) runs from the bottom MLP's
         * backward on, the last bucket (dense communicator) after it: at once */
        s[SR_PS_EXPOSED] = in + fmax(0, s[SR_PS_OUTPUT_DIST] - bot_fwd) +
                           fmax(fmax(0, s[SR_PS_GRAD_DIST] - bot_bwd), last) +
                           fmax(0, rest - (dense_bwd - bot_bwd));
    }
    s[SR_PS_STEP] = s[SR_PS_LOOKUP] + s[SR_PS_UPDATE] + s[SR_PS_DENSE] + s[SR_PS_EXPOSED];
}

double pl_acc_rank_memory(const struct pl_acc *a, int rank)
{
    double dense = pl_dense_params(a->m) * 4 * (2.0 + a->m->dense_state_floats);
    return a->mem[rank] + dense + a->m->buffer_bytes + a->topo->memory_base_bytes;
}

double pl_acc_memory_ratio(const struct pl_acc *a, int *rank)
{
    double worst = -1;
    for (int r = 0; r < a->W; r++) {
        double ratio = pl_acc_rank_memory(a, r) / a->topo->memory_bytes;
        if (ratio > worst) {
            worst = ratio;
            *rank = r;
        }
    }
    return worst;
}
