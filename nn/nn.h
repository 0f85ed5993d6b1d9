/* nn/nn.h — the training library's one public header.
 *
 * Dimension letters used across nn/: B batch rows, C input features, OC output features,
 * N element count.
 *
 * Precision. Every kernel is written once, over the type `real`, in a "generic" source file
 * (nn/norm.c, nn/ops.c, nn/optim.c, nn/mlp.c); the Makefile compiles each generic file twice:
 * as float (the names as written, used for training) and with -DNB_F64 as double (every name
 * with the suffix _f64, used by the finite-difference tests). So the code checked in double
 * is the very code that trains. The generic headers (nn/norm.h, nn/ops.h, nn/optim.h,
 * nn/mlp.h) have no include guard: this header includes each of them twice, once per precision,
 * with NB_REAL and NB_FN(name) defined. Every declaration in them that involves NB_REAL,
 * function or type, is spelled NB_FN(name).
 *
 * Non-generic declarations (enums, configurations, the RNG, the parameter layout) live in
 * nn/types.h and nn/rng.h.
 */
#ifndef NB_NN_H
#define NB_NN_H

#include "util/err.h"
#include "types.h"
#include "util/rng.h"
#include "vtanh.h"

#define NB_REAL float
#define NB_FN(name) name
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
#undef NB_FN

#define NB_REAL double
#define NB_FN(name) name##_f64
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
#undef NB_FN

#include "norms/norms.h"

#endif
