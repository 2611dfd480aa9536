/* SPDX-License-Identifier: MIT */
/* The decoder as its callers see it: configuration, parameter layout and model (pd_model.h), the
 * parameters' blocks (pd_param_mem.h), the recorded forward's graph (pd_graph.h) and the
 * forward, head and loss (pd_forward.h). */
#ifndef PD_DECODER_H
#define PD_DECODER_H
#include "pd_model.h"
#include "pd_param_mem.h"
#include "pd_graph.h"
#include "pd_forward.h"

#endif
