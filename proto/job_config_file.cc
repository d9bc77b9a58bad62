#include "proto/job_config_file.h"

#include <cstdio>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/json_util.h"

namespace sketchfuse {

absl::StatusOr<v1::JobConfig> ReadJobConfig(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read job config file '", path, "'"));
  std::stringstream text;
  text << in.rdbuf();
  v1::JobConfig config;
  if (absl::EndsWith(path, ".json")) {
    auto parsed = google::protobuf::util::JsonStringToMessage(text.str(), &config);
    if (!parsed.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("job config '", path, "' is not valid JSON for JobConfig: ",
                       std::string(parsed.message())));
    }
  } else if (!google::protobuf::TextFormat::ParseFromString(text.str(), &config)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "job config '", path, "' is not valid text-format JobConfig (use .json for JSON)"));
  }
  // A file written before partitions (or by hand) cuts no group.
  if (config.has_run() && !config.run().has_partition_elements()) config.mutable_run()->set_partition_elements(0);
  return config;
}

absl::Status WriteJobConfig(const v1::JobConfig& job, const std::string& path) {
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  auto printed = google::protobuf::util::MessageToJsonString(job, &json, options);
  if (!printed.ok()) return absl::InternalError(std::string(printed.message()));
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    out << json;
    if (!out) return absl::PermissionDeniedError(absl::StrCat("cannot write '", tmp, "'"));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::PermissionDeniedError(absl::StrCat("cannot rename '", tmp, "' to '", path, "'"));
  }
  return absl::OkStatus();
}

}  // namespace sketchfuse
