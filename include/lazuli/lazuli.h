// Lazuli: a lazy tensor runtime. Include this one header.
#pragma once
#include "lazuli/autocast.h"
#include "lazuli/autograd.h"
#include "lazuli/capture.h"
#include "lazuli/debug.h"
#include "lazuli/device.h"
#include "lazuli/dtype.h"
#include "lazuli/error.h"
#include "lazuli/nn.h"
#include "lazuli/ops.h"
#include "lazuli/runtime.h"
#include "lazuli/serialize.h"
#include "lazuli/tensor.h"
