#include <cuda_runtime.h>
#include <barrier>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>
#include <cub/device/device_radix_sort.cuh>

namespace cub { long sim_sort_calls; }
thread_local uint3 threadIdx, blockIdx;
thread_local dim3 blockDim, gridDim;

struct warp_state {
    std::mutex m;
    std::map<unsigned, std::unique_ptr<std::barrier<>>> bars;
    unsigned long long slot[32];
    std::barrier<> &bar(unsigned mask)
    {
        std::lock_guard<std::mutex> g(m);
        auto &b = bars[mask];
        if (!b)
            b = std::make_unique<std::barrier<>>(__builtin_popcount(mask));
        return *b;
    }
};
struct block_state {
    std::vector<char> dyn;
    std::mutex m;
    std::map<int, std::vector<char>> stat;
    std::vector<std::unique_ptr<warp_state>> warps;
};
static thread_local block_state *cur_block;

static int lane_id() { return (int)(threadIdx.x & 31); }
static warp_state &my_warp() { return *cur_block->warps[threadIdx.x / 32]; }

void __syncwarp(unsigned mask)
{
    if (!(mask >> lane_id() & 1)) { fprintf(stderr, "sim: syncwarp mask excludes caller\n"); abort(); }
    my_warp().bar(mask).arrive_and_wait();
}
unsigned __ballot_sync(unsigned mask, int pred)
{
    warp_state &w = my_warp();
    w.slot[lane_id()] = pred ? 1 : 0;
    __syncwarp(mask);
    unsigned r = 0;
    for (int l = 0; l < 32; l++)
        if ((mask >> l & 1) && w.slot[l])
            r |= 1u << l;
    __syncwarp(mask);
    return r;
}
unsigned long long sim_shfl_bits(unsigned mask, unsigned long long v, int src, int width)
{
    warp_state &w = my_warp();
    int lane = lane_id(), s = (lane & ~(width - 1)) + (src % width);
    w.slot[lane] = v;
    __syncwarp(mask);
    if (!(mask >> s & 1)) { fprintf(stderr, "sim: shfl from a lane outside the mask\n"); abort(); }
    unsigned long long r = w.slot[s];
    __syncwarp(mask);
    return r;
}
void *sim_dyn_smem() { return cur_block->dyn.data(); }
void *sim_shared(size_t bytes, int key)
{
    std::lock_guard<std::mutex> g(cur_block->m);
    auto &v = cur_block->stat[key];
    if (v.empty())
        v.assign(bytes, (char)0x5A);
    return v.data();
}
void sim_run(const std::function<void()> &f, dim3 grid, dim3 block, size_t smem, cudaStream_t)
{
    if (block.x % 32 || block.y != 1) { fprintf(stderr, "sim: block shape\n"); abort(); }
    for (unsigned by = 0; by < grid.y; by++)
        for (unsigned bx = 0; bx < grid.x; bx++) {
            block_state bs;
            bs.dyn.assign(smem + 16, (char)0x5A);
            for (unsigned w = 0; w < block.x / 32; w++)
                bs.warps.emplace_back(new warp_state);
            std::vector<std::thread> th;
            for (unsigned t = 0; t < block.x; t++)
                th.emplace_back([&, t] {
                    threadIdx = uint3{t, 0, 0};
                    blockIdx = uint3{bx, by, 0};
                    blockDim = block;
                    gridDim = grid;
                    cur_block = &bs;
                    f();
                });
            for (auto &x : th)
                x.join();
        }
}
