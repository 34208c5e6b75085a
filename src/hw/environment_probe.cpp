// Where Gantry runs: container runtime, orchestrator, cloud vendor (DMI), visible-device variables.
#include "probes.h"

namespace gantry::hw::internal {
namespace {

constexpr const char* kVisibleVars[] = {
    "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES",  "CUDA_DEVICE_ORDER",     "HIP_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL",      "ZE_AFFINITY_MASK",      "ONEAPI_DEVICE_SELECTOR",
    "TPU_VISIBLE_CHIPS",    "NEURON_RT_VISIBLE_CORES", "HABANA_VISIBLE_DEVICES"};

bool contains(std::string_view haystack, std::string_view needle) {
  return haystack.find(needle) != std::string_view::npos;
}

std::optional<std::string> cloud_from_dmi(const EnvironmentInfo& env) {
  const std::string vendor = to_lower(env.sys_vendor.value_or(""));
  const std::string product = to_lower(env.product_name.value_or(""));
  const std::string bios = to_lower(env.bios_vendor.value_or(""));
  auto any = [&](std::string_view s) {
    return contains(vendor, s) || contains(product, s) || contains(bios, s);
  };
  if (any("amazon")) return "aws";
  if (any("google")) return "gcp";
  if (contains(vendor, "microsoft") && contains(product, "virtual machine")) return "azure";
  if (any("oraclecloud")) return "oci";
  if (any("alibaba")) return "alibaba";
  if (any("digitalocean")) return "digitalocean";
  if (any("hetzner")) return "hetzner";
  if (any("scaleway")) return "scaleway";
  if (any("openstack")) return "openstack";
  return std::nullopt;
}

}  // namespace

EnvironmentInfo probe_environment(const Machine& m, std::vector<std::string>& warnings) {
  EnvironmentInfo env;
  env.sysroot = m.root();
  const std::string init_cgroup = read_text(m, "/proc/1/cgroup", warnings).value_or("");
  if (m.exists("/run/.containerenv") || contains(init_cgroup, "libpod"))
    env.container = "podman";
  else if (m.exists("/.dockerenv") || contains(init_cgroup, "/docker"))
    env.container = "docker";
  else if (contains(init_cgroup, "containerd") || contains(init_cgroup, "cri-containerd"))
    env.container = "containerd";
  else if (contains(init_cgroup, "crio"))
    env.container = "cri-o";
  else if (contains(init_cgroup, "/lxc"))
    env.container = "lxc";
  if (m.getenv("KUBERNETES_SERVICE_HOST") || contains(init_cgroup, "kubepods")) {
    env.orchestrator = "kubernetes";
    if (!env.container) env.container = "containerd";  // the default Kubernetes runtime
  }
  env.sys_vendor = read_text(m, "/sys/class/dmi/id/sys_vendor", warnings);
  env.product_name = read_text(m, "/sys/class/dmi/id/product_name", warnings);
  env.bios_vendor = read_text(m, "/sys/class/dmi/id/bios_vendor", warnings);
  env.cloud = cloud_from_dmi(env);
  for (const char* var : kVisibleVars) {
    if (auto v = m.getenv(var)) env.visible_devices[var] = *v;
  }
  return env;
}

}  // namespace gantry::hw::internal
