// Stand-in for CUDA's header in the CPU emulation of the paged_attention_decode split kernel.
#pragma once
#include "pad_emu_defs.h"
