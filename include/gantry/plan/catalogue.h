// A versioned catalogue of accelerators and cloud instance types (data/catalogue.json; users extend or
// replace it with `gantry plan --catalogue FILE`): what `gantry plan --what-if` plans against.
//
// Format (schema_version 1), every field required unless marked optional:
//   { "schema_version": 1, "catalogue_version": "2026-11-24",
//     "accelerators": [ { "id", "name", "memory_gib", "memory_bandwidth_gb_s", "fp16_dense_tflops",
//                         "source", "match": [optional: substrings of the driver's device name] } ],
//     "instances":    [ { "id", "provider", "name", "accelerator" (an accelerator id), "count",
//                         "interconnect", "host_memory_gib", "storage_bandwidth_gb_s",
//                         "price_usd_per_hour", "price_date" (YYYY-MM-DD), "price_source",
//                         "price_note" (optional, e.g. "approximate, check before buying") } ] }
// memory_bandwidth_gb_s is optional for an accelerator whose id the hardware registry's known-device table
// holds (gantry/hw/bandwidth.h): the figure comes from there, and a catalogue that repeats it must agree.
// Parsing is strict: unknown keys, wrong types, non-positive figures, duplicate ids and instances naming an
// unknown accelerator are errors naming the file, the entry and the field.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gantry/core/status.h"

namespace gantry::plan {

inline constexpr int kCatalogueSchemaVersion = 1;

struct Accelerator {
  std::string id;  // "h100-80gb"
  std::string name;
  double memory_gib = 0;
  double memory_bandwidth_gb_s = 0;  // vendor peak, GB/s (1e9 bytes)
  double fp16_dense_tflops = 0;      // vendor peak, dense (no sparsity)
  std::string source;                // where the figures come from
  std::vector<std::string> match;    // substrings of a detected GPU's name that identify this model
};

struct Instance {
  std::string id;  // "aws-p5.48xlarge"
  std::string provider;
  std::string name;
  std::string accelerator;  // Accelerator::id
  int count = 0;
  std::string interconnect;
  double host_memory_gib = 0;
  double storage_bandwidth_gb_s = 0;
  double price_usd_per_hour = 0;
  std::string price_date;
  std::string price_source;
  std::string price_note;
};

struct Catalogue {
  int schema_version = 0;
  std::string version;
  std::string path;  // where it was read from ("" for a parsed string)
  std::vector<Accelerator> accelerators;
  std::vector<Instance> instances;

  const Accelerator* find_accelerator(std::string_view id) const;
  const Instance* find_instance(std::string_view id) const;
  // The accelerator whose `match` substrings (case-insensitive) occur in a detected device name.
  const Accelerator* match_device(std::string_view device_name) const;
};

// `origin` names the source in error messages (a file path).
Result<Catalogue> parse_catalogue(std::string_view json_text, std::string_view origin);
Result<Catalogue> load_catalogue(const std::filesystem::path& path);
// data/catalogue.json of the source tree this binary was built from ($GANTRY_CATALOGUE overrides).
std::filesystem::path default_catalogue_path();

}  // namespace gantry::plan
