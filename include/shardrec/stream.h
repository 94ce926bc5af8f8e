/*
 * Streams and events: opaque handles that order work on a device and that the
 * layers above pass through without knowing the backend (core owns the types,
 * device/ implements them, comm/ takes them). A stream runs its work in the
 * order it was issued; an event marks a point in a stream that the host or
 * another stream can wait for. NULL is a device's default stream.
 */
#ifndef SHARDREC_STREAM_H
#define SHARDREC_STREAM_H

typedef struct sr_stream *sr_stream_t;
typedef struct sr_event *sr_event_t;
/* A recorded sequence of a stream's work, replayed with one call (CUDA
 * graphs; device.h's capture_begin). */
typedef struct sr_graph *sr_graph_t;

/* A host function run in stream order (sr_mem_ops.launch_host_fn). It must
 * not issue work on any stream. */
typedef void (*sr_host_fn)(void *arg);

#endif
