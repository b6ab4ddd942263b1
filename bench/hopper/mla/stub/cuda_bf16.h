// Stand-in for CUDA's header in the CPU emulation of the MLA decode kernel (mla_emu.h defines
// the types).
#pragma once
#include "../mla_emu.h"
