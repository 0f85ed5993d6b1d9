/* nn/nn.h — the training library's one public header.
 *
 * Dimension letters used across nn/: B batch rows, C input features, OC output features,
 * N element count.
 *
 * Precision. Every kernel is written once, over the type `real`, in a "generic" source file
 * (one that includes nn/real.h first: nn/norm.c, nn/ops.c, nn/optim.c, the models); the Makefile
 * compiles each generic file twice: as float (the names as written, used for training) and with
 * -DNB_F64 as double (every name with the suffix _f64, used by the finite-difference tests),
 * the names renamed by nn/f64names.h. So the code checked in double is the very code that
 * trains. The generic headers (nn/norm.h, nn/ops.h, nn/optim.h, nn/mlp.h, ...) declare the float
 * names plainly, over NB_REAL, and have no include guard: this header includes each of them
 * twice, once with NB_REAL float, then with NB_REAL double under nn/f64names.h's renames, which
 * it removes again afterwards. A generic function, type or table is written under its own name
 * in both (`void nb_layernorm_forward(NB_REAL *out, ...)`) and gets a line in nn/f64names.h.
 *
 * Non-generic declarations (enums, configurations, the RNG, the parameter layout) live in
 * nn/types.h and nn/rng.h.
 */
#ifndef NB_NN_H
#define NB_NN_H

#include "util/err.h"
#include "types.h"
#include "gemm_bf16.h"
#include "util/rng.h"
#include "vtanh.h"

#define NB_REAL float
#include "norm.h"
#include "norms/dyt.h"
#include "norms/ops.h"
#include "ops.h"
#include "optim.h"
#include "mlp.h"
#include "conv.h"
#include "cnn.h"
#include "gru.h"
#include "oe.h"
#include "lstm.h"
#include "reader.h"
#include "rnnsearch.h"
#include "transformer.h"
#include "gpt.h"
#include "draw.h"
#undef NB_REAL

#define NB_REAL double
#include "f64names.h"
#include "norm.h"
#include "norms/dyt.h"
#include "norms/ops.h"
#include "ops.h"
#include "optim.h"
#include "mlp.h"
#include "conv.h"
#include "cnn.h"
#include "gru.h"
#include "oe.h"
#include "lstm.h"
#include "reader.h"
#include "rnnsearch.h"
#include "transformer.h"
#include "gpt.h"
#include "draw.h"
#define NB_F64_NAMES_UNDO
#include "f64names.h"
#undef NB_F64_NAMES_UNDO
#undef NB_REAL

#include "norms/norms.h"

#endif
