/*
 * The vocabulary of device op declarations. Each op family's header
 * (ops_dense.h, ops_optim.h, ops_embedding.h, ops_embedding_dp.h,
 * ops_sparse_dist.h, ops_cast.h) lists its ops once, as an X-macro:
 *
 *   #define SR_OPS_DENSE(OP)                                                      \
 *       OP(dense, relu_forward, SR_STREAM(s) SR_IN(const float *, x, SR_F32(n))   \
 *          SR_OUT(float *, y, SR_F32(n)) SR_ARG(size_t, n))
 *
 * An entry is OP(family, name, operands): family is the op table's member
 * of struct sr_device (dense, optim, emb, emb_dp, sparse_dist, cast), and the
 * operands are the op's parameters after `struct sr_device *dev`, in order:
 *
 *   SR_STREAM(name)                 the stream it is ordered on (absent: NULL)
 *   SR_ARG(type, name)              a value, or a host pointer kept as it is
 *   SR_IN(type, name, bytes)        device memory the op reads
 *   SR_OUT(type, name, bytes)       device memory it writes (all of it, or
 *                                   leaves alone what it does not write)
 *   SR_INOUT(type, name, bytes)     device memory it reads and writes
 *   SR_IO(type, name, bytes, how)   one of the three, chosen by an expression
 *                                   (SR_OP_IN, SR_OP_OUT or SR_OP_INOUT)
 *   SR_HOST(type, name, count)      a host array of count elements (a struct:
 *                                   1) read when the op is issued: a queued op
 *                                   keeps a copy, as a kernel launch copies its
 *                                   parameters; NULL allowed
 *
 * and, for memory an operand points to rather than is, entries that add no
 * parameter:
 *
 *   SR_HOST_FIELD(name, field, count)   name->field is a host array too
 *   SR_READS(ptr, bytes)                device memory at ptr is read
 *   SR_WRITES(ptr, bytes)               ... written
 *   SR_UPDATES(ptr, bytes)              ... read and written
 *   SR_REGIONS(call)                    a function that declares the regions a
 *                                       loop computes: call(r, ...) with the
 *                                       sink r (struct sr_op_regions *)
 *
 * Sizes are expressions of the parameters, in bytes (SR_F32(n) = 4n); a
 * region of 0 bytes or at NULL is no region. From one entry come: the op
 * table's member (the signature backends implement), the sr_op_<family>_<name>
 * wrapper that layers above device/ call (ops.c), the regions function
 * sr_op_regions_<family>_<name> (ops.c: what the op reads and writes, for the
 * deferred and opaque devices and the backend-ops test), and the deferred
 * device's queued form (cpu/cpu_deferred_ops.c).
 *
 * How: each operand macro expands to a tuple, (opdev, type, name, bytes,
 * access) and so on, so an entry's operands are a sequence of tuples; a mode
 * is a set of macros SR_OP_<mode>_<class> applied to each tuple by
 * SR_OP_EACH(mode, operands) (params: a parameter list; args: the call's
 * arguments; ops.c and cpu_deferred_ops.c add the modes they need).
 */
#ifndef SHARDREC_OP_DECL_H
#define SHARDREC_OP_DECL_H

#include <stddef.h>
#include <stdint.h>

#include "shardrec/device.h"

#define SR_F32(n) ((size_t)(n) * sizeof(float))
#define SR_I32(n) ((size_t)(n) * sizeof(int32_t))
#define SR_I64(n) ((size_t)(n) * sizeof(int64_t))

enum sr_op_access { SR_OP_IN, SR_OP_OUT, SR_OP_INOUT };

/* One operand region of one call. */
struct sr_op_region {
    const char *name; /* the parameter's name, or the SR_READS/... expression */
    const void *p;    /* may be NULL */
    size_t bytes;
    enum sr_op_access access;
};

/* Where a regions function puts the regions: add is called once per region
 * in declaration order, NULL and empty ones included. */
struct sr_op_regions {
    void (*add)(struct sr_op_regions *r, const struct sr_op_region *region);
    void *ctx;
};

static inline void sr_op_region(struct sr_op_regions *r, const char *name, const void *p,
                                size_t bytes, enum sr_op_access access)
{
    const struct sr_op_region region = {name, p, bytes, access};
    r->add(r, &region);
}

#define SR_STREAM(name)                   (opstream, name)
#define SR_ARG(type, name)                (oparg, type, name)
#define SR_IN(type, name, bytes)          (opdev, type, name, bytes, SR_OP_IN)
#define SR_OUT(type, name, bytes)         (opdev, type, name, bytes, SR_OP_OUT)
#define SR_INOUT(type, name, bytes)       (opdev, type, name, bytes, SR_OP_INOUT)
#define SR_IO(type, name, bytes, how)     (opdev, type, name, bytes, how)
#define SR_HOST(type, name, count)        (ophost, type, name, count)
#define SR_HOST_FIELD(name, field, count) (opfield, name, field, count)
#define SR_READS(ptr, bytes)              (opmem, ptr, bytes, SR_OP_IN)
#define SR_WRITES(ptr, bytes)             (opmem, ptr, bytes, SR_OP_OUT)
#define SR_UPDATES(ptr, bytes)            (opmem, ptr, bytes, SR_OP_INOUT)
#define SR_REGIONS(call)                  (opcall, call)

/* SR_OP_EACH(mode, (a)(b)(c)) is SR_OP_<mode>_<class of a>(rest of a) ... for
 * each tuple: the macros SR_OP_EACH_A_<mode> and SR_OP_EACH_B_<mode> take
 * turns at the tuples, and the last one left is pasted with 0 into an empty
 * macro. Each mode defines its pair (and their empty ...0 forms). */
#define SR_OP_EACH(mode, seq)      SR_OP_EACH_END(SR_OP_EACH_A_##mode seq)
#define SR_OP_EACH_END(...)        SR_OP_EACH_END_(__VA_ARGS__)
#define SR_OP_EACH_END_(...)       __VA_ARGS__##0
#define SR_OP_APPLY(mode, cls, ...) SR_OP_##mode##_##cls(__VA_ARGS__)

/* params: the parameter list after `struct sr_device *dev`. */
#define SR_OP_EACH_A_params(...) SR_OP_APPLY(params, __VA_ARGS__) SR_OP_EACH_B_params
#define SR_OP_EACH_B_params(...) SR_OP_APPLY(params, __VA_ARGS__) SR_OP_EACH_A_params
#define SR_OP_EACH_A_params0
#define SR_OP_EACH_B_params0
#define SR_OP_params_opstream(name)            , sr_stream_t name
#define SR_OP_params_oparg(type, name)         , type name
#define SR_OP_params_opdev(type, name, b, how) , type name
#define SR_OP_params_ophost(type, name, count) , type name
#define SR_OP_params_opfield(name, field, count)
#define SR_OP_params_opmem(ptr, bytes, how)
#define SR_OP_params_opcall(call)

/* args: the arguments of a call after `dev`, by the parameters' names. */
#define SR_OP_EACH_A_args(...) SR_OP_APPLY(args, __VA_ARGS__) SR_OP_EACH_B_args
#define SR_OP_EACH_B_args(...) SR_OP_APPLY(args, __VA_ARGS__) SR_OP_EACH_A_args
#define SR_OP_EACH_A_args0
#define SR_OP_EACH_B_args0
#define SR_OP_args_opstream(name)            , name
#define SR_OP_args_oparg(type, name)         , name
#define SR_OP_args_opdev(type, name, b, how) , name
#define SR_OP_args_ophost(type, name, count) , name
#define SR_OP_args_opfield(name, field, count)
#define SR_OP_args_opmem(ptr, bytes, how)
#define SR_OP_args_opcall(call)

#define SR_OP_PARAMS(operands) struct sr_device *dev SR_OP_EACH(params, operands)
#define SR_OP_ARGS(operands)   dev SR_OP_EACH(args, operands)

/* The op table's member, and the prototypes of the wrapper and the regions
 * function. */
#define SR_OP_MEMBER(family, name, operands) void (*name)(SR_OP_PARAMS(operands));
#define SR_OP_PROTO(family, name, operands)                                                        \
    void sr_op_##family##_##name(SR_OP_PARAMS(operands));                                          \
    void sr_op_regions_##family##_##name(struct sr_op_regions *r, SR_OP_PARAMS(operands));

#endif
