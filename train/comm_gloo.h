// comm_gloo.h: the CPU collective channel between ranks that a launcher (torchrun, srun, mpirun) started,
// possibly on different machines: Gloo's TCP transport, joined through a small key-value store that rank 0
// serves (Gloo's Debian build has only File/Hash/Redis stores). C API over train/comm_gloo.cc.
// Every call returns 0, or nonzero with err set (a peer died, hung past the timeout, or the network failed).
#pragma once
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct GlooComm GlooComm;

// Rank 0 serves the store on store_port (every address); all ranks connect to addr:store_port, then Gloo
// connects every pair. The pairs listen on the interface that routes to addr (GLOO_SOCKET_IFNAME overrides).
// generation names the attempt (a launcher's restart count): a store left from another is not joined.
// timeout_s bounds the rendezvous and every collective.
GlooComm *gloo_comm_init(int rank, int world, const char *addr, int store_port, const char *generation,
                         double timeout_s, char *err, size_t errlen);
int gloo_allreduce_sum(GlooComm *g, float *buf, size_t n, char *err, size_t errlen); // in place, identical on all
int gloo_reduce_sum(GlooComm *g, float *buf, size_t n, int root, char *err, size_t errlen); // root's buf = sum
int gloo_broadcast(GlooComm *g, void *buf, size_t bytes, int root, char *err, size_t errlen);
// out [world * bytes] = every rank's `in` (bytes each), in rank order.
int gloo_allgather(GlooComm *g, const void *in, void *out, size_t bytes, char *err, size_t errlen);
int gloo_barrier(GlooComm *g, char *err, size_t errlen);
// After a failed collective: closes this rank's pairs (so the peers still waiting fail at once too), tells
// the store this rank is alive and waits up to grace_s for the others to say so. missing[r] = 1 for each
// rank that did not (died or hung); returns how many, or -1 when the store itself is gone (rank 0 died).
int gloo_comm_who_failed(GlooComm *g, double grace_s, int *missing);
void gloo_comm_free(GlooComm *g);

#ifdef __cplusplus
}
#endif
