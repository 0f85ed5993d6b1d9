/* nn/mem.h — how many bytes the models' buffers take, and how many this process can have.
 *
 * Every model allocator (mlp, cnn, oe, gru, lstm, reader) notes the bytes it allocates here, so
 * that a task can build a model at two small batch sizes, extrapolate what its buffers need at
 * the batch asked for, and refuse a batch that cannot fit before touching any of it
 * (nb_check_batch_memory in tasks/task.h). */
#ifndef NB_NN_MEM_H
#define NB_NN_MEM_H

#include <stddef.h>

/* A model buffer of bytes: 64-byte aligned for the vector loops, zeroed, rounded up to a whole
 * 64 bytes (at least 64) and noted (nb_mem_note); NULL when out of memory. Free with free(). */
void *nb_mem_alloc(size_t bytes);
/* Adds bytes to this thread's count (called by the allocators). */
void nb_mem_note(size_t bytes);
/* This thread's count since the last reset. */
size_t nb_mem_noted(void);
void nb_mem_reset(void);

/* Bytes this process can still use: physical memory less what it holds now (resident), or,
 * when lower, the address-space limit (RLIMIT_AS, ulimit -v) less its mapped size now.
 * *which is set to "physical memory" or "the address-space limit (ulimit -v)". */
double nb_mem_room(const char **which);

#endif
