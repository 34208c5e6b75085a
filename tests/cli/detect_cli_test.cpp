// `gantry detect` as a user runs it: JSON on this machine agrees with /proc/cpuinfo, nproc/sysconf
// and /proc/meminfo; exit codes follow the CLI contract.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "gantry/hw/registry_json.h"

namespace {

struct Outcome {
  int exit_code = -1;
  std::string out;
};

Outcome run(const std::string& args) {
  const std::string cmd = std::string(GANTRY_BINARY_DIR) + "/bin/gantry " + args + " 2>/dev/null";
  Outcome r;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  std::array<char, 4096> buf{};
  size_t n = 0;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int status = ::pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string slurp(const char* path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string field(const std::string& text, const std::string& key) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(key, 0) == 0 && line.find(':') != std::string::npos) {
      std::string v = line.substr(line.find(':') + 1);
      v.erase(0, v.find_first_not_of(" \t"));
      return v;
    }
  }
  return "";
}

uint64_t meminfo_bytes(const std::string& key, const char* path = "/proc/meminfo") {
  std::istringstream in(field(slurp(path), key + ":"));
  uint64_t kb = 0;
  in >> kb;
  return kb * 1024;
}

TEST(DetectCli, JsonAgreesWithTheKernel) {
  Outcome r = run("detect --json");
  ASSERT_EQ(r.exit_code, 0);
  auto json = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(json.is_discarded()) << r.out.substr(0, 200);
  ASSERT_TRUE(gantry::hw::registry_from_json(json).ok());

  EXPECT_EQ(json["cpu"]["logical_cores"].get<long>(), ::sysconf(_SC_NPROCESSORS_ONLN));
  FILE* p = ::popen("nproc", "r");
  ASSERT_NE(p, nullptr);
  long usable = 0;
  ASSERT_EQ(std::fscanf(p, "%ld", &usable), 1);
  ::pclose(p);
  EXPECT_GE(json["cpu"]["logical_cores"].get<long>(), usable) << "nproc counts the CPUs this process may use";

  const std::string cpuinfo = slurp("/proc/cpuinfo");
  const std::string model = field(cpuinfo, "model name");
  if (!model.empty()) {
    EXPECT_EQ(json["cpu"]["model"], model);
    EXPECT_EQ(json["devices"][0]["name"], model);
  }
  std::set<std::string> flags;
  std::string flag_line = field(cpuinfo, "flags");
  if (flag_line.empty()) flag_line = field(cpuinfo, "Features");
  std::istringstream fs(flag_line);
  for (std::string f; fs >> f;) flags.insert(f);
  for (const auto& isa : json["cpu"]["isa"]) EXPECT_TRUE(flags.count(isa.get<std::string>())) << isa;
  for (const char* f : {"avx2", "avx512f", "amx_tile", "asimd"}) {
    bool listed = false;
    for (const auto& isa : json["cpu"]["isa"]) listed = listed || isa == f;
    EXPECT_EQ(listed, flags.count(f) == 1) << f;
  }

  EXPECT_EQ(json["host"]["memory_total_bytes"].get<uint64_t>(), meminfo_bytes("MemTotal"));
  // MemAvailable moves with every other process (parallel tests among them): live, only its bounds hold;
  // what detect reads is checked exactly on a snapshot of this machine's /proc/meminfo (below).
  const auto available = json["host"]["memory_available_bytes"].get<uint64_t>();
  EXPECT_GT(available, 0u);
  EXPECT_LE(available, meminfo_bytes("MemTotal"));
  EXPECT_EQ(json["devices"][0]["kind"], "cpu");
  EXPECT_TRUE(json["schema_version"].is_number_integer());
}

TEST(DetectCli, MemoryIsMeminfosOwnFigures) {
  // A snapshot of /proc/meminfo as a sysroot: the figures cannot move between the read and the check.
  char tpl[] = "/tmp/gantry-detect-meminfo-XXXXXX";
  ASSERT_NE(::mkdtemp(tpl), nullptr);
  const std::string root = tpl;
  const std::string snapshot = root + "/proc/meminfo";
  std::filesystem::create_directories(root + "/proc");
  std::ofstream(snapshot) << slurp("/proc/meminfo");
  const Outcome o = run("detect --json --sysroot " + root);
  ASSERT_EQ(o.exit_code, 0) << o.out;
  const auto json = nlohmann::json::parse(o.out);
  EXPECT_EQ(json["host"]["memory_total_bytes"].get<uint64_t>(), meminfo_bytes("MemTotal", snapshot.c_str()));
  EXPECT_EQ(json["host"]["memory_available_bytes"].get<uint64_t>(),
            meminfo_bytes("MemAvailable", snapshot.c_str()));
  std::filesystem::remove_all(root);
}

TEST(DetectCli, TableAndExitCodes) {
  Outcome table = run("detect");
  EXPECT_EQ(table.exit_code, 0);
  EXPECT_NE(table.out.find("cpu:0"), std::string::npos);
  EXPECT_NE(table.out.find("MEM TOTAL"), std::string::npos);
  EXPECT_EQ(run("detect --sysroot /definitely/not/here").exit_code, 2);
  EXPECT_EQ(run("detect --no-such-flag").exit_code, 2);
  Outcome fixture =
      run(std::string("detect --json --sysroot ") + GANTRY_SOURCE_DIR + "/tests/fixtures/hw/amd-mi300x");
  ASSERT_EQ(fixture.exit_code, 0);
  auto reg = gantry::hw::registry_from_json_text(fixture.out);
  ASSERT_TRUE(reg.ok()) << reg.status().to_string();
  EXPECT_EQ(reg->devices.size(), 9u);
  EXPECT_EQ(reg->devices[1].arch, "gfx942");
}

TEST(DetectCli, SystemIoSectionsAndMeasuredBandwidth) {
  Outcome table =
      run(std::string("detect --sysroot ") + GANTRY_SOURCE_DIR + "/tests/fixtures/hw/nvidia-dgx-h100");
  ASSERT_EQ(table.exit_code, 0);
  for (const char* s : {"Bandwidth", "Peers", "NUMA", "Storage", "Network",
                        "RDMA       mlx5_0 (ACTIVE, InfiniBand, 400 Gb/s)"})
    EXPECT_NE(table.out.find(s), std::string::npos) << s << "\n" << table.out;
  Outcome measured = run("detect --json --no-vulkan --measure-bandwidth");
  ASSERT_EQ(measured.exit_code, 0);
  auto reg = gantry::hw::registry_from_json_text(measured.out);
  ASSERT_TRUE(reg.ok()) << reg.status().to_string();
  ASSERT_TRUE(reg->io.memory.measured_bytes_per_s.has_value());
  EXPECT_GT(*reg->io.memory.measured_bytes_per_s, 100'000'000u);  // any machine moves more than 100 MB/s
  EXPECT_LT(*reg->io.memory.measured_bytes_per_s, 10'000'000'000'000u);
  EXPECT_EQ(run(std::string("detect --measure-bandwidth --sysroot ") + GANTRY_SOURCE_DIR +
                "/tests/fixtures/hw/amd-mi300x")
                .exit_code,
            2)
      << "a captured tree cannot be measured";
}

// ai-hwaccel's builder: --only and --skip choose the probes; what a skipped probe would have found is absent,
// everything else is as in a full run.
TEST(DetectCli, OnlyAndSkipChooseTheProbes) {
  const std::string dgx =
      std::string(" --sysroot ") + GANTRY_SOURCE_DIR + "/tests/fixtures/hw/nvidia-dgx-h100";
  auto devices_of = [](const Outcome& o) {
    std::multiset<std::string> families;
    auto reg = gantry::hw::registry_from_json_text(o.out);
    EXPECT_TRUE(reg.ok()) << reg.status().to_string() << o.out;
    if (reg.ok())
      for (const auto& d : reg->devices) families.insert(d.family);
    return std::make_pair(families, reg.ok() ? reg->io.rdma.size() : 0u);
  };
  Outcome all = run("detect --json" + dgx);
  ASSERT_EQ(all.exit_code, 0);
  auto [all_families, all_storage] = devices_of(all);
  ASSERT_EQ(all_families.count("cuda"), 8u);
  ASSERT_GT(all_storage, 0u);

  Outcome only = run("detect --json --only cuda,cpu" + dgx);
  ASSERT_EQ(only.exit_code, 0);
  auto [only_families, only_storage] = devices_of(only);
  EXPECT_EQ(only_families.count("cuda"), 8u);
  EXPECT_EQ(only_families.count("cpu"), 1u);
  EXPECT_EQ(only_families.size(), 9u);
  EXPECT_EQ(only_storage, 0u) << "io (the RDMA list) was not asked for";

  Outcome cpu_only = run("detect --json --only cpu" + dgx);
  ASSERT_EQ(cpu_only.exit_code, 0);
  EXPECT_EQ(devices_of(cpu_only).first, std::multiset<std::string>{"cpu"});

  Outcome skip = run("detect --json --skip nvidia,vulkan" + dgx);
  ASSERT_EQ(skip.exit_code, 0);
  auto [skip_families, skip_storage] = devices_of(skip);
  EXPECT_EQ(skip_families.count("cuda"), 0u);
  EXPECT_EQ(skip_storage, all_storage) << "io still probed";

  EXPECT_EQ(run("detect --only cuda,fpga").exit_code, 2);
  EXPECT_EQ(run("detect --skip ,").exit_code, 2);
}

}  // namespace
