// Stand-in for CUDA's header in the CPU emulation (bench/hopper/emu): emu.h defines the types.
#pragma once
#include "emu.h"
