// How fast a remote device (an RPC server's, gantry/hw/rpc.h) runs what generation runs, for `plan --speed`:
// ggml's RPC protocol does not say what a device is, so the device is timed. A matrix of ~64 MiB in the
// model's weight type (q8_0 when ggml does not know that type) times one f32 vector — the product every
// layer's weights go through for each generated token — is allocated on the device, zeroed there (no
// upload), computed three times, and each time read back (one round trip, which is subtracted).
#pragma once

#include <string>

#include "gantry/core/status.h"
#include "gantry/hw/rpc.h"
#include "gantry/plan/speed.h"

namespace gantry::llama {

// `weight_type` as ggml names it ("q8_0", "q4_0", "f16"); `round_trip_s` the link's measured round trip.
// The result's bandwidth and FLOP/s are both the measured product's (efficiency 1: measured on the work
// itself; overlap: both describe the same time). Errors name the server.
Result<plan::DeviceSpeed> measure_remote_speed(const hw::RpcEndpoint& server, int device_index,
                                               const std::string& weight_type, double round_trip_s);

// The same product timed on this machine's CPU with `threads` threads, so that a plan over remote devices
// compares like with like (a plan without them keeps the triad and ISA figures: plan::cpu_speed).
Result<plan::DeviceSpeed> measure_cpu_speed(int threads, const std::string& weight_type);

}  // namespace gantry::llama
